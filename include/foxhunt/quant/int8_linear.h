#pragma once
/// \file int8_linear.h
/// A real int8 linear layer: int8 weights with fp32 scales per output channel, activations
/// quantized per row at run time (dynamic), int8 x int8 -> int32 products by ATen's
/// `at::_int_mm` (plain int8 tensors: no deprecated quantized types, and the same op runs on
/// CUDA), dequantized once per output by scale_x[row] * scale_w[col].
///
///   y[n, o] = s_x[n] * s_w[o] * sum_k qx[n, k] * qw[o, k] + b[o]
///
/// Error bound (tested): with |x - s_x qx| <= s_x / 2 and |W - s_w qw| <= s_w / 2 per element,
///   |y - (x W^T + b)| <= s_w/2 * sum_k |x_k| + s_x/2 * sum_k |W_ok| + K * s_x * s_w / 4.
/// The int32 accumulator cannot overflow below K = 133,143 inputs (127^2 K < 2^31).

#include <torch/torch.h>

#include <cstdint>

namespace foxhunt::quant {

/// Int8 weights of one Linear(in -> out).
class Int8Linear {
 public:
  Int8Linear() = default;
  /// Quantizes `weight` [out, in] symmetrically per output channel (scale = max|row| / 127);
  /// `bias` [out] (or undefined) stays fp32.
  static Int8Linear from_float(const torch::Tensor& weight, const torch::Tensor& bias = {});
  /// The same with given per-channel `scales` [out] (e.g. from a QAT observer).
  static Int8Linear from_float(const torch::Tensor& weight, const torch::Tensor& bias,
                               const torch::Tensor& scales);

  /// `x` [..., in] floating -> [..., out] float.
  torch::Tensor forward(const torch::Tensor& x) const;
  /// The fp32 weights these codes stand for: codes * scales, [out, in].
  torch::Tensor dequantized_weight() const;

  /// Input features.
  int64_t in_features() const { return in_; }
  /// Output features.
  int64_t out_features() const { return out_; }
  /// int8 codes [in, out] (transposed once for `_int_mm`).
  const torch::Tensor& codes_t() const { return codes_t_; }
  /// Per-output-channel scales [out] float.
  const torch::Tensor& scales() const { return scales_; }
  /// Bias [out] float, or undefined.
  const torch::Tensor& bias() const { return bias_; }
  /// Bytes held: in*out int8 codes + 4*out scales + 4*out bias (if any).
  int64_t bytes() const;
  /// Moves codes, scales and bias to `device`.
  void to(const torch::Device& device);

 private:
  int64_t in_ = 0, out_ = 0;
  torch::Tensor codes_t_, scales_, bias_;
};

}  // namespace foxhunt::quant
