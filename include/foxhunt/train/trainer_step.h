#pragma once
/// \file trainer_step.h
/// The training step each trainer really runs, exposed so that the memory planner measures and
/// verifies it instead of a stand-in: the real optimizer, DQN's online and target networks with
/// the double forward of its TD targets and its replay buffer, PPO's minibatch over a rollout on
/// the device, the forecast trainer's batch with its gradient clip. Torch-free.
///
/// A step is split where the planner tags memory: prepare() (batch, forward, backward, clip;
/// the gradients exist afterwards) and apply() (optimizer.step(), which creates the optimizer
/// state on the first call, then releases the batch). The trainers' own loops call the same two
/// halves (DqnTrainer::prepare_update / apply_update, PpoTrainer::prepare_minibatch /
/// apply_minibatch, ForecastTrainer::prepare_step / apply_step).

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "foxhunt/core/device.h"
#include "foxhunt/train/env.h"

namespace foxhunt::models {
class Model;
}  // namespace foxhunt::models

namespace foxhunt::train {

/// One trainer's real step, repeatable at any batch size.
class TrainerStep {
 public:
  virtual ~TrainerStep() = default;
  /// The network being trained (owned by the step).
  virtual models::Model& model() = 0;
  /// First half at `batch` samples (>= 1): batch, forward, loss, zero_grad, backward, clip.
  virtual void prepare(std::int64_t batch) = 0;
  /// Second half: optimizer.step(); releases what prepare() kept.
  virtual void apply() = 0;
  /// Host bytes the trainer declared to the ledger as external (replay buffer, environments).
  virtual std::uint64_t external_bytes() const = 0;
  /// Closed form of the device bytes the trainer holds besides the model and the optimizer
  /// (DQN: its target network, one copy of the parameters; others 0).
  virtual std::uint64_t expected_state_bytes() const = 0;
  /// One line naming the step, e.g. "DqnTrainer update: double DQN, replay 100000 x 256".
  virtual std::string describe() const = 0;
};

/// What to build a TrainerStep from.
struct TrainerStepSpec {
  /// Registry name: "dqn", "ppo", "mamba2" or "tft".
  std::string model = "dqn";
  /// Model options (as for models::make_model). For dqn/ppo state_dim, hidden and actions set
  /// the trainer's network.
  nlohmann::json model_options = nlohmann::json::object();
  /// The trainer's options as JSON (DqnTrainerOptions, PpoTrainerOptions or
  /// ForecastTrainerOptions); missing keys keep the trainer's defaults. batch_size is ignored:
  /// the batch is prepare()'s argument.
  nlohmann::json trainer_options = nlohmann::json::object();
  /// RL environments (null: SyntheticEnv of the model's state_dim and actions). Its
  /// observation size and action count must match the model options.
  EnvFactory env;
  /// Window of the forecasting models (0 = the model's default).
  std::int64_t seq_len = 0;
  /// Seed of the initialisation, the environment and the synthetic data.
  std::uint64_t seed = 42;
  /// Device ("cpu", "cuda", "cuda:1").
  Device device;
};

/// Builds the trainer of `spec.model` with its options, its environment or a synthetic batch
/// source, and readies its step: the DQN collects a few random transitions first (no update), PPO
/// and the forecast trainer need nothing. Throws InputError for a bad name or options.
std::unique_ptr<TrainerStep> make_trainer_step(const TrainerStepSpec& spec);

}  // namespace foxhunt::train
