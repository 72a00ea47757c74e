#pragma once
/// \file mlp.h
/// A plain multilayer perceptron: the building block of the DQN Q-network and PPO's two heads.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "foxhunt/models/derived_cache.h"

namespace foxhunt::models {

/// Hidden-layer activation of an MLP.
enum class Activation { kReLU, kTanh };

/// Options of an MLP: in -> hidden... -> out, activation between layers, none after the last.
struct MlpOptions {
  MlpOptions(int64_t in, std::vector<int64_t> hidden, int64_t out)
      : in_(in), hidden_(std::move(hidden)), out_(out) {}
  /// Input features.
  TORCH_ARG(int64_t, in);
  /// Hidden layer widths.
  TORCH_ARG(std::vector<int64_t>, hidden);
  /// Output features.
  TORCH_ARG(int64_t, out);
  /// Activation after each hidden layer.
  TORCH_ARG(Activation, activation) = Activation::kReLU;
};

/// Closed-form parameter count of an MLP (weights + biases).
int64_t mlp_parameter_count(const MlpOptions& o);

/// Multilayer perceptron with Linear layers named "fc0", "fc1", ...
class MlpImpl : public torch::nn::Cloneable<MlpImpl> {
 public:
  explicit MlpImpl(MlpOptions options);
  void reset() override;
  /// [batch, in] -> [batch, out].
  torch::Tensor forward(torch::Tensor x);
  /// Re-initialises weights orthogonally with `hidden_gain` on hidden layers and `out_gain` on the
  /// last one, biases 0 (PPO's initialisation).
  void orthogonal_init(double hidden_gain, double out_gain);

  MlpOptions options;
  std::vector<torch::nn::Linear> layers;
  /// Each layer's weight transposed and zero-padded to whole vector lanes for the lean kernels'
  /// output-lane form (lean.h), made by the first forward of 8 rows or more under
  /// c10::InferenceMode (serving) and kept until a weight or its gradient changes.
  mutable DerivedCache<std::vector<torch::Tensor>> lane_weights;
};
TORCH_MODULE(Mlp);

}  // namespace foxhunt::models
