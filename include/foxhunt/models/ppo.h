#pragma once
/// \file ppo.h
/// PPO actor-critic: separate policy and value MLPs (tanh), categorical policy over the actions.
/// Its output (PolicyOutput) and loss (ppo_loss) are the actor-critic hooks' (policy.h).

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "foxhunt/models/mlp.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/policy.h"

namespace foxhunt::models {

/// Options of the PPO actor-critic.
/// Example: `PpoOptions().state_dim(4).hidden({64, 64}).actions(2)` for CartPole.
struct PpoOptions {
  /// Input state width.
  TORCH_ARG(int64_t, state_dim) = 256;
  /// Hidden widths of both the policy and the value MLP (tanh).
  TORCH_ARG(std::vector<int64_t>, hidden) = std::vector<int64_t>{128, 64};
  /// Number of discrete actions.
  TORCH_ARG(int64_t, actions) = 3;
  /// Orthogonal init (gain sqrt(2) hidden, 0.01 policy head, 1.0 value head), biases 0.
  TORCH_ARG(bool, orthogonal_init) = true;
};

nlohmann::json to_json(const PpoOptions& o);
PpoOptions ppo_options_from_json(const nlohmann::json& j);
/// The I/O contract of a model built with `o` (inputs, outputs, window, horizon); a pure
/// function of the options, like the closed-form sizes.
IoSpec io_spec(const PpoOptions& o);
/// Closed-form parameter count (82,564 for the defaults).
int64_t parameter_count(const PpoOptions& o);

/// The actor-critic network.
class ActorCriticImpl : public torch::nn::Cloneable<ActorCriticImpl> {
 public:
  explicit ActorCriticImpl(PpoOptions options = {});
  void reset() override;
  /// Validates `state` ([batch, state_dim]) and returns logits and value. Without gradients on a
  /// CPU float32 input it runs the lean kernel (lean.h).
  PolicyOutput forward(const torch::Tensor& state);

  PpoOptions options;
  Mlp policy{nullptr};
  Mlp value{nullptr};
};
TORCH_MODULE(ActorCritic);

/// Registry adapter for the PPO actor-critic.
std::unique_ptr<Model> make_ppo_model(const nlohmann::json& options);

}  // namespace foxhunt::models
