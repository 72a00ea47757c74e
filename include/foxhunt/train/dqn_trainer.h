#pragma once
/// \file dqn_trainer.h
/// Double DQN (van Hasselt et al. 2016) on a discrete-action Env: replay buffer, target network
/// (hard copy at an interval or soft tau), linear epsilon-greedy schedule, Huber loss, gradient
/// norm clipping, Adam. Deterministic given the seed (all randomness comes from one Rng plus the
/// network initialisation); checkpoints carry everything needed for an exact resume.

#include <torch/torch.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/container.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/policy.h"
#include "foxhunt/train/best_policy.h"
#include "foxhunt/train/env.h"
#include "foxhunt/train/infra.h"
#include "foxhunt/train/rl_trainer.h"

namespace foxhunt::train {

/// Options of the DQN trainer. The defaults are RL Zoo's tuned CartPole-v1 values (5e4 steps,
/// batch 64, buffer 1e5, learning_starts 1000, target interval 10, train_freq 256,
/// gradient_steps 128, exploration 0.16 -> 0.04, net [256, 256]) with SB3's gamma 0.99,
/// Huber loss and grad-norm clip 10, except the learning rate: RL Zoo's 2.3e-3 made Double DQN
/// collapse mid-run here (3 of 3 seeds; greedy returns 204-318 at 5e4 steps), 1e-3 learns
/// steadily (training return rising monotonically to ~300 with exploration, greedy 422-500).
/// Example: `DqnTrainerOptions().total_steps(20000).seed(7)`.
struct DqnTrainerOptions {
  /// Environment steps to train for.
  TORCH_ARG(int64_t, total_steps) = 50000;
  /// Adam learning rate (constant).
  TORCH_ARG(double, learning_rate) = 1e-3;
  /// Transitions per gradient step.
  TORCH_ARG(int64_t, batch_size) = 64;
  /// Replay buffer capacity (oldest transitions are overwritten).
  TORCH_ARG(int64_t, buffer_size) = 100000;
  /// Uniformly random actions and no learning before this many steps.
  TORCH_ARG(int64_t, learning_starts) = 1000;
  /// Discount factor.
  TORCH_ARG(double, gamma) = 0.99;
  /// Environment steps between target-network updates.
  TORCH_ARG(int64_t, target_update_interval) = 10;
  /// Target update weight: 1 = hard copy, < 1 = soft (Polyak) update.
  TORCH_ARG(double, tau) = 1.0;
  /// Environment steps between training phases.
  TORCH_ARG(int64_t, train_freq) = 256;
  /// Gradient steps per training phase.
  TORCH_ARG(int64_t, gradient_steps) = 128;
  /// Fraction of total_steps over which epsilon decays linearly.
  TORCH_ARG(double, exploration_fraction) = 0.16;
  /// Epsilon at step 0.
  TORCH_ARG(double, exploration_initial_eps) = 1.0;
  /// Epsilon after the decay.
  TORCH_ARG(double, exploration_final_eps) = 0.04;
  /// Gradient-norm clip (<= 0 disables).
  TORCH_ARG(double, max_grad_norm) = 10.0;
  /// Huber loss threshold (SB3's smooth L1 with beta 1).
  TORCH_ARG(double, huber_delta) = 1.0;
  /// Hidden widths of the Q-network (ReLU).
  TORCH_ARG(std::vector<int64_t>, hidden) = std::vector<int64_t>{256, 256};
  /// Double DQN target (online argmax, target evaluation); false = vanilla max over target.
  TORCH_ARG(bool, double_dqn) = true;
  /// Environment steps between greedy evaluations on the evaluation env (0 = none).
  TORCH_ARG(int64_t, eval_interval) = 0;
  /// Episodes per evaluation (always the same starts: the first reset is seeded with
  /// derive_seed(seed, 7)).
  TORCH_ARG(int64_t, eval_episodes) = 10;
  /// At the end, load the weights of the best evaluation (when evaluations ran).
  TORCH_ARG(bool, keep_best) = true;
  /// Seed of the network initialisation, the environment and every random choice.
  TORCH_ARG(uint64_t, seed) = 0;
  /// Device of the networks (the environment runs on the CPU).
  TORCH_ARG(torch::Device, device) = torch::Device(torch::kCPU);
};

/// JSON form of the options (device as a string).
nlohmann::json to_json(const DqnTrainerOptions& o);
/// Options from JSON; missing keys keep their defaults, unknown keys are an InputError.
DqnTrainerOptions dqn_trainer_options_from_json(const nlohmann::json& j);

/// Epsilon of a linear schedule: `start` at step 0, `end` from step fraction * total on.
double linear_epsilon(int64_t step, int64_t total, double fraction, double start, double end);

/// TD targets y = r + gamma (1 - terminated) Q_target(s', a*) with a* = argmax_a Q_online(s', a)
/// (Double DQN) or a* = argmax_a Q_target(s', a) (vanilla, `q_next_online` may be undefined).
/// Shapes: rewards, terminated [batch]; q_next_* [batch, actions]. Returns [batch].
torch::Tensor dqn_targets(const torch::Tensor& rewards, const torch::Tensor& terminated,
                          const torch::Tensor& q_next_online, const torch::Tensor& q_next_target,
                          double gamma, bool double_dqn = true);

/// Fixed-capacity ring buffer of transitions (s, a, r, s', terminated), stored on the CPU.
class ReplayBuffer {
 public:
  /// A sampled minibatch, on the requested device.
  struct Sample {
    torch::Tensor obs;         ///< [batch, obs] float
    torch::Tensor actions;     ///< [batch] int64
    torch::Tensor rewards;     ///< [batch] float
    torch::Tensor next_obs;    ///< [batch, obs] float
    torch::Tensor terminated;  ///< [batch] float (1 = no bootstrap)
  };

  /// Buffer for `capacity` transitions of `obs_size`-wide observations. Its storage (a host
  /// buffer LibTorch never sees, storage_bytes()) is declared to the ledger under
  /// "dqn/replay_buffer" before it is allocated: over a cap it is refused with
  /// OutOfMemoryError.
  ReplayBuffer(int64_t capacity, int64_t obs_size);
  /// Bytes of the storage: capacity x (2 x obs x 4 + 4 + 4 + 8).
  static std::uint64_t storage_bytes(int64_t capacity, int64_t obs_size);
  /// Appends one transition, overwriting the oldest when full.
  void add(const std::vector<float>& obs, int64_t action, double reward,
           const std::vector<float>& next_obs, bool terminated);
  /// Transitions stored.
  int64_t size() const { return size_; }
  /// Capacity.
  int64_t capacity() const { return capacity_; }
  /// `batch` transitions drawn uniformly with replacement.
  Sample sample(int64_t batch, Rng& rng, const torch::Device& device) const;
  /// Write position: the slot the next add() fills (== size() until the buffer wraps).
  int64_t position() const { return pos_; }
  /// Serialised contents (for checkpoints): a header of four int64 (capacity, obs size, size,
  /// write position) and the filled slots only, in slot order: 32 + storage_bytes(size(), obs)
  /// bytes, so a checkpoint grows with the transitions seen, not with the capacity.
  std::string to_bytes() const;
  /// Restores contents from to_bytes() into this buffer's (full-capacity) storage; also reads the
  /// earlier layout that held every slot (32 + storage_bytes(capacity(), obs) bytes). Throws
  /// InputError naming `source` on another capacity or observation size, a wrong length or
  /// inconsistent counters.
  void from_bytes(const std::string& bytes, const std::string& source);

 private:
  memory::ExternalReservation reservation_;  // first: declared before the storage exists
  int64_t capacity_, obs_size_;
  int64_t size_ = 0, pos_ = 0;
  std::vector<float> obs_, next_obs_, rewards_, terminated_;
  std::vector<int64_t> actions_;
};

/// The DQN trainer.
class DqnTrainer final : public RlTrainerBase {
 public:
  /// Builds the Q-network (seeded), its target copy, Adam and the environment (index 0). The
  /// network is the catalog's model `model` ("" = models::trainer_model(TrainerKind::kDqn)),
  /// sized by its CatalogEntry::policy_options hook and trained through its
  /// Model::as_value_policy() hooks; InputError naming it for a model without them.
  DqnTrainer(DqnTrainerOptions options, EnvFactory make_env, const std::string& model = "");
  ~DqnTrainer();

  // RlTrainerBase: the stop request is checked after every environment step.
  TrainResult train(const RunConfig& run = {}) override;
  void save_checkpoint(const std::string& path) override;
  using RlTrainerBase::load_checkpoint;
  void load_checkpoint(const Container& c, const std::string& source) override;
  void set_data_parallel(std::shared_ptr<dist::Communicator> comm) override;
  int64_t greedy_action(const std::vector<float>& obs) override;  ///< argmax Q

  /// The first half of one gradient step, as train() runs it: samples `batch` transitions from
  /// the replay buffer, evaluates the TD targets with the target network (and the online one
  /// for Double DQN), the Huber loss on the online network, zero_grad, backward and the
  /// gradient clip. The planner measures this half and apply_update() apart
  /// (train/trainer_step.h). The buffer must hold at least one transition.
  void prepare_update(int64_t batch);
  /// The second half: optimizer.step() (and the data-parallel bookkeeping); releases the batch
  /// and returns its loss.
  double apply_update();
  /// Transitions in the replay buffer.
  int64_t replay_size() const { return buffer_.size(); }
  /// Host bytes of the environments (training and evaluation) declared under "dqn/envs".
  std::uint64_t env_host_bytes() const { return envs_reservation_.bytes(); }

  /// Epsilon at the current step.
  double epsilon() const;
  /// The online Q-network's module (the trained model's, model()).
  std::shared_ptr<torch::nn::Module> q_network() const { return model_->module_ptr(); }
  /// Options in use.
  const DqnTrainerOptions& options() const { return o_; }

 private:
  /// Calls f(key, field) for every resumable field (train/state_io.h).
  template <typename F>
  void visit_state(F&& f);
  double train_step();
  void update_target(double tau);
  nlohmann::json metrics_line(double elapsed, double rate) const;

  DqnTrainerOptions o_;
  EnvFactory make_env_;
  std::unique_ptr<Env> env_, eval_env_;
  memory::ExternalReservation envs_reservation_;
  models::ValuePolicy* online_ = nullptr;  // model_'s hooks
  std::unique_ptr<models::Model> target_model_;
  models::ValuePolicy* target_ = nullptr;  // target_model_'s hooks
  std::unique_ptr<torch::optim::Adam> optimizer_;
  ReplayBuffer buffer_;
  Rng rng_;
  bool started_ = false;
  std::vector<float> obs_;
  double episode_return_ = 0.0;
  int64_t episode_length_ = 0;
  RollingMean returns_{100}, lengths_{100};
  double loss_sum_ = 0.0;
  int64_t loss_count_ = 0;
  double last_loss_ = NAN;
  torch::Tensor pending_loss_;  // between prepare_update and apply_update
};

}  // namespace foxhunt::train
