#pragma once
/// \file dqn.h
/// DQN Q-network over {sell, hold, buy}: an MLP state -> Q-values.

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "foxhunt/models/mlp.h"
#include "foxhunt/models/model.h"

namespace foxhunt::models {

/// Options of the DQN Q-network.
/// Example: `DqnOptions().state_dim(4).hidden({256, 256}).actions(2)` for CartPole.
struct DqnOptions {
  /// Input state width (the 256-d trading state by default).
  TORCH_ARG(int64_t, state_dim) = 256;
  /// Hidden layer widths (ReLU).
  TORCH_ARG(std::vector<int64_t>, hidden) = std::vector<int64_t>{128, 64};
  /// Number of discrete actions (sell, hold, buy).
  TORCH_ARG(int64_t, actions) = 3;
};

nlohmann::json to_json(const DqnOptions& o);
DqnOptions dqn_options_from_json(const nlohmann::json& j);
/// The I/O contract of a model built with `o` (inputs, outputs, window, horizon); a pure
/// function of the options, like the closed-form sizes.
IoSpec io_spec(const DqnOptions& o);
/// Closed-form parameter count (41,347 for the defaults).
int64_t parameter_count(const DqnOptions& o);

/// The Q-network: [batch, state_dim] -> Q-values [batch, actions].
class DqnNetImpl : public torch::nn::Cloneable<DqnNetImpl> {
 public:
  explicit DqnNetImpl(DqnOptions options = {});
  void reset() override;
  /// Validates `state` ([batch, state_dim], float, finite, on the module's device) and returns Q.
  /// Without gradients on a CPU float32 input it runs the lean kernel (lean.h).
  torch::Tensor forward(const torch::Tensor& state);

  DqnOptions options;
  Mlp q{nullptr};
};
TORCH_MODULE(DqnNet);

/// Registry adapter for the DQN network.
std::unique_ptr<Model> make_dqn_model(const nlohmann::json& options);

}  // namespace foxhunt::models
