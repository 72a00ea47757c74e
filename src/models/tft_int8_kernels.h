#pragma once
// The CPU kernels of the INT8 TFT's layers and of its LSTM recurrence (private to models/): what
// Int8Tft's forward runs for each int8 layer (tft_int8.h).
#include <torch/torch.h>

#include <cstdint>
#include <tuple>

#include "foxhunt/models/tft_int8.h"

namespace foxhunt::models::detail {

/// A buffer reused by the batched layers of one forward pass (once per block of positions): the
/// input codes are dead once the layer's output exists, so one allocation serves every block.
struct Int8Scratch {
  torch::Tensor f32;  ///< the batched layers' input codes (as floats)
  /// The first `n` elements of `buf`, (re)allocated as `t` when it is undefined or too small.
  static torch::Tensor take(torch::Tensor& buf, int64_t n, torch::ScalarType t) {
    if (!buf.defined() || buf.numel() < n) buf = torch::empty({n}, t);
    return buf.narrow(0, 0, n);
  }
};

/// Runs one int8 layer on `x` (int8_layer_forward); the batched layers take their input buffer
/// from `scratch` when it is not null. A batched layer's `codes` may hold its weights already
/// dequantized to fp32 (once per forward, by the caller).
torch::Tensor layer_forward(const Int8TftImpl::Layer& l, bool batched, const torch::Tensor& x,
                            Int8Scratch* scratch);

/// The int8 LSTM recurrence on the CPU for the recurrent layer `l`: `gx_in` [B, T, 4H] the input
/// projection (with both biases), state (h0, c0) [B, H]. Returns the outputs [B, T, H] and the
/// final (h, c), as TftQuantOps::lstm_layer.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> int8_lstm_cpu(const Int8TftImpl::Layer& l,
                                                                      const torch::Tensor& gx_in,
                                                                      const torch::Tensor& h0,
                                                                      const torch::Tensor& c0);

}  // namespace foxhunt::models::detail
