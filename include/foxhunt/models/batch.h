#pragma once
/// \file batch.h
/// What goes into a model and what comes out besides its outputs: the inputs of one forward
/// pass (`Batch`) and what a model's interpretable parts say about a forecast (`Explanation`).

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace foxhunt::models {

/// The inputs of one forward pass plus an optional training target.
/// The meaning of each input tensor is model-specific and documented by `Model::input_names()`.
struct Batch {
  std::vector<torch::Tensor> inputs;  ///< e.g. {state} for dqn, {past, future, static_id} for tft
  torch::Tensor target;               ///< training target (undefined when only inferring)
  /// Batch size (first dimension of the first input).
  int64_t size() const { return inputs.empty() ? 0 : inputs.front().size(0); }
};

/// What a model's interpretable parts say about one forecast (the TFT's variable selection and
/// attention; pytorch-forecasting's interpret_output reports the same quantities).
struct Explanation {
  std::vector<double> past_weights;    ///< per past-observed variable: selection weight, mean
                                       ///< over the window (sums to 1)
  std::vector<double> future_weights;  ///< per known-future variable: mean over the horizon
  std::vector<double> attention;       ///< the first forecast step's attention over the window
                                       ///< bars, oldest first (head-averaged)
};

}  // namespace foxhunt::models
