#pragma once
/// \file ppo_trainer.h
/// PPO (Schulman et al. 2017) on N copies of a discrete-action Env: synchronous rollouts, GAE,
/// clipped surrogate, value loss, entropy bonus, minibatch epochs with per-minibatch advantage
/// normalisation, orthogonal init (the model's), gradient clipping, Adam (eps 1e-5)
/// with a linearly decaying learning rate. Deterministic given the seed; exact resume.

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

/// Options of the PPO trainer. The defaults are RL Zoo's tuned CartPole-v1 values (8 envs,
/// n_steps 32, batch 256, 20 epochs, gamma 0.98, lambda 0.8, lr 1e-3 and clip 0.2 both linearly
/// decayed, 1e5 steps) with SB3's ent_coef 0, vf_coef 0.5, max_grad_norm 0.5, nets [64, 64].
/// Example: `PpoTrainerOptions().total_steps(200000).n_envs(16)`.
struct PpoTrainerOptions {
  /// Environment steps to train for, summed over the environments.
  TORCH_ARG(int64_t, total_steps) = 100000;
  /// Parallel environments per rollout.
  TORCH_ARG(int64_t, n_envs) = 8;
  /// Steps per environment per rollout (rollout size = n_envs * n_steps).
  TORCH_ARG(int64_t, n_steps) = 32;
  /// Minibatch size.
  TORCH_ARG(int64_t, batch_size) = 256;
  /// Passes over each rollout.
  TORCH_ARG(int64_t, n_epochs) = 20;
  /// Initial Adam learning rate.
  TORCH_ARG(double, learning_rate) = 1e-3;
  /// Decay the learning rate linearly to 0 over training.
  TORCH_ARG(bool, linear_lr) = true;
  /// Discount factor.
  TORCH_ARG(double, gamma) = 0.98;
  /// GAE lambda.
  TORCH_ARG(double, gae_lambda) = 0.8;
  /// Initial clip range of the probability ratio.
  TORCH_ARG(double, clip_range) = 0.2;
  /// Decay the clip range linearly to 0 over training (RL Zoo's lin_0.2).
  TORCH_ARG(bool, linear_clip) = true;
  /// Entropy bonus coefficient.
  TORCH_ARG(double, ent_coef) = 0.0;
  /// Value loss coefficient.
  TORCH_ARG(double, vf_coef) = 0.5;
  /// Gradient-norm clip (<= 0 disables).
  TORCH_ARG(double, max_grad_norm) = 0.5;
  /// Normalise advantages per minibatch.
  TORCH_ARG(bool, normalize_advantage) = true;
  /// Adam epsilon.
  TORCH_ARG(double, adam_eps) = 1e-5;
  /// Hidden widths of both the policy and the value MLP (tanh).
  TORCH_ARG(std::vector<int64_t>, hidden) = std::vector<int64_t>{64, 64};
  /// Environment steps between greedy evaluations on the evaluation env (0 = none; checked at
  /// rollout boundaries).
  TORCH_ARG(int64_t, eval_interval) = 0;
  /// Episodes per evaluation (always the same starts: the first reset is seeded with
  /// derive_seed(seed, 7)).
  TORCH_ARG(int64_t, eval_episodes) = 10;
  /// At the end, load the weights of the best evaluation (when evaluations ran).
  TORCH_ARG(bool, keep_best) = true;
  /// Seed of the network initialisation, the environments and every random choice.
  TORCH_ARG(uint64_t, seed) = 0;
  /// Device of the network (environments run on the CPU).
  TORCH_ARG(torch::Device, device) = torch::Device(torch::kCPU);
};

/// JSON form of the options.
nlohmann::json to_json(const PpoTrainerOptions& o);
/// Options from JSON; missing keys keep defaults, unknown keys are an InputError.
PpoTrainerOptions ppo_trainer_options_from_json(const nlohmann::json& j);

/// Advantages and returns of a rollout.
struct GaeResult {
  torch::Tensor advantages;  ///< [T, N]
  torch::Tensor returns;     ///< [T, N] = advantages + values
};

/// Generalised advantage estimation, backwards over T steps of N environments:
///   delta_t = r_t + gamma (1 - ended_t) V_{t+1} - V_t,
///   A_t = delta_t + gamma lambda (1 - ended_t) A_{t+1},
/// where ended_t = 1 when the episode ended with step t (so V_{t+1}, the value of a reset
/// observation, must not be used), V_T = `last_values`. A truncated step counts as ended; its
/// bootstrap value belongs in r_t (the trainer adds gamma V(final obs) there).
/// rewards, values, ended: [T, N] float (CPU); last_values: [N].
GaeResult compute_gae(const torch::Tensor& rewards, const torch::Tensor& values,
                      const torch::Tensor& ended, const torch::Tensor& last_values, double gamma,
                      double lambda);

/// The PPO trainer.
class PpoTrainer final : public RlTrainerBase {
 public:
  /// Builds the actor-critic (seeded), Adam, and n_envs environments (indices 0..n-1). The
  /// network is the catalog's model `model` ("" = models::trainer_model(TrainerKind::kPpo)),
  /// sized by its CatalogEntry::policy_options hook and trained through its
  /// Model::as_actor_critic() hooks; InputError naming it for a model without them.
  PpoTrainer(PpoTrainerOptions options, EnvFactory make_env, const std::string& model = "");
  ~PpoTrainer();

  // RlTrainerBase. The stop request is checked between rollouts; log_interval and
  // checkpoint_interval are in environment steps and take effect at the next rollout boundary.
  int64_t greedy_action(const std::vector<float>& obs) override;  ///< most probable action
  TrainResult train(const RunConfig& run = {}) override;
  void save_checkpoint(const std::string& path) override;
  using RlTrainerBase::load_checkpoint;
  void load_checkpoint(const Container& c, const std::string& source) override;
  void set_data_parallel(std::shared_ptr<dist::Communicator> comm) override;

  /// The actor-critic's module (the trained model's, model()).
  std::shared_ptr<torch::nn::Module> network() const { return model_->module_ptr(); }
  /// Options in use.
  const PpoTrainerOptions& options() const { return o_; }
  /// Learning rate used by the next update.
  double current_lr() const;

  /// One rollout flattened for the update, on the trainer's device: R = n_envs x n_steps rows.
  struct Rollout {
    torch::Tensor obs;         ///< [R, obs] float
    torch::Tensor actions;     ///< [R] int64
    torch::Tensor log_probs;   ///< [R] float: log pi_old(a | s)
    torch::Tensor advantages;  ///< [R] float (GAE)
    torch::Tensor returns;     ///< [R] float (advantages + values)
    /// Rows.
    int64_t size() const { return obs.defined() ? obs.size(0) : 0; }
  };
  /// A rollout of `rows` rows with random observations, actions, log-probabilities,
  /// advantages and returns (seeded), allocated as train() allocates its rollout (host buffers,
  /// then their device copies): what the planner updates on to measure the real minibatch step.
  Rollout synthetic_rollout(int64_t rows, uint64_t seed) const;
  /// The first half of one minibatch step, as train() runs it: selects rows `indices` (int64
  /// on the CPU) of `rollout`, normalises their advantages, runs the network, the clipped PPO
  /// loss, zero_grad, backward and the gradient clip.
  void prepare_minibatch(const Rollout& rollout, const torch::Tensor& indices, double clip);
  /// The second half: optimizer.step() and the minibatch's diagnostics; releases the minibatch.
  void apply_minibatch();
  /// Host bytes of the environments declared under "ppo/envs".
  std::uint64_t env_host_bytes() const { return envs_reservation_.bytes(); }

 private:
  /// Calls f(key, field) for every resumable field (train/state_io.h).
  template <typename F>
  void visit_state(F&& f);
  struct UpdateStats;
  UpdateStats update(const Rollout& rollout, double clip);
  torch::Tensor obs_batch() const;
  nlohmann::json metrics_line(double elapsed, double rate) const;

  PpoTrainerOptions o_;
  std::vector<std::unique_ptr<Env>> envs_;
  std::unique_ptr<Env> eval_env_;
  models::ActorCriticPolicy* net_ = nullptr;  // model_'s hooks
  std::unique_ptr<torch::optim::Adam> optimizer_;
  Rng rng_;
  bool started_ = false;
  int64_t minibatch_steps_ = 0;  // optimizer steps of this run (the checksum cadence)
  std::vector<std::vector<float>> obs_;
  std::vector<double> episode_return_;
  std::vector<int64_t> episode_length_;
  RollingMean returns_{100}, lengths_{100};
  nlohmann::json last_stats_ = nlohmann::json::object();
  memory::ExternalReservation envs_reservation_;
  // Between prepare_minibatch and apply_minibatch.
  struct Pending;
  std::unique_ptr<Pending> pending_;
  std::unique_ptr<UpdateStats> stats_;  // the update in progress
};

}  // namespace foxhunt::train
