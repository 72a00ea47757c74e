#pragma once
/// \file policy.h
/// The hooks the RL trainers (train/dqn_trainer.h, train/ppo_trainer.h) train a policy model
/// through. A model exposes them by overriding Model::as_value_policy() or
/// Model::as_actor_critic() (model.h); the trainers never name a model nor cast to its type.

#include <torch/torch.h>

#include <memory>

namespace foxhunt::models {

class Model;

/// Output of an actor-critic.
struct PolicyOutput {
  torch::Tensor logits;  ///< [batch, actions]
  torch::Tensor value;   ///< [batch]
};

/// PPO clipped surrogate loss (to minimise): -mean(min(r A, clip(r, 1-eps, 1+eps) A))
/// + vf_coef * MSE(value, returns) - ent_coef * entropy. Returns the total.
torch::Tensor ppo_loss(const PolicyOutput& out, const torch::Tensor& actions,
                       const torch::Tensor& old_log_prob, const torch::Tensor& advantages,
                       const torch::Tensor& returns, double clip = 0.2, double vf_coef = 0.5,
                       double ent_coef = 0.0);

/// A value-based policy: the action values Q(s, a) of every discrete action, as a value-based
/// trainer (Double DQN) trains them.
class ValuePolicy {
 public:
  virtual ~ValuePolicy() = default;
  /// Q-values [batch, actions] of `states` [batch, state_dim] (validated as forward() validates
  /// its input); differentiable when grad mode is on.
  virtual torch::Tensor action_values(const torch::Tensor& states) = 0;
  /// A deep copy of the model (a trainer's target network): the same parameters and buffers in
  /// storage of its own, on `device`, exposing this hook too. Made by torch's
  /// `Cloneable::clone(device)`, which re-runs the module's reset() before copying the values in:
  /// it draws from LibTorch's generator exactly as that clone does (seeded runs depend on it).
  virtual std::unique_ptr<Model> clone_model(const torch::Device& device) = 0;
};

/// An actor-critic policy: logits over the discrete actions and the state's value.
class ActorCriticPolicy {
 public:
  virtual ~ActorCriticPolicy() = default;
  /// Logits [batch, actions] and value [batch] of `states` [batch, state_dim] (validated as
  /// forward() validates its input); differentiable when grad mode is on.
  virtual PolicyOutput policy_and_value(const torch::Tensor& states) = 0;
};

}  // namespace foxhunt::models
