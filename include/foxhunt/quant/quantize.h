#pragma once
/// \file quantize.h
/// INT8 building blocks on plain tensors (the INT8 TFT, models/tft_int8.h, is built on them):
/// quantization parameters from observed ranges, observers (min/max, moving average, per
/// channel, histogram with an L2-optimal clip), quantize/dequantize, and fake quantization with
/// the straight-through gradient for QAT.
///
/// Layout: a quantized tensor is a plain int8 tensor plus fp32 scales (and, for uint8 affine
/// activations, zero points) kept beside it, not one of PyTorch's deprecated quantized tensor
/// types, so it serializes as int8 bytes and runs on any device with plain ops.
///
/// Conventions: weights are symmetric int8 in [-127, 127] (zero point 0; -128 unused so that
/// negation is exact), per output channel (dimension 0); activations are symmetric int8 per
/// tensor or per row (dynamic), or affine uint8 when a one-sided range wastes half the codes.
/// Every range is widened to include 0, so 0 is exactly representable.
///
/// Example:
///   quant::PerChannelMinMaxObserver obs;
///   obs.observe(linear->weight);
///   auto q = quant::quantize_per_channel(linear->weight, obs.symmetric_scales());
///   auto w = quant::dequantize_per_channel(q, obs.symmetric_scales());  // |w - W| <= scale / 2

#include <torch/torch.h>

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace foxhunt::quant {

/// Largest symmetric int8 code (codes are in [-kQMax, kQMax]).
inline constexpr int64_t kQMax = 127;
/// Smallest scale ever used (an all-zero range would otherwise give scale 0).
inline constexpr float kMinScale = 1e-12f;

/// A closed range of observed values; empty until something was observed.
struct Range {
  float min = std::numeric_limits<float>::infinity();   ///< smallest value seen
  float max = -std::numeric_limits<float>::infinity();  ///< largest value seen
  /// True before the first observation.
  bool empty() const { return min > max; }
};

/// Affine quantization parameters: q = clamp(round(x / scale) + zero_point, qmin, qmax).
struct QParams {
  float scale = 1.0f;      ///< step between codes
  int64_t zero_point = 0;  ///< code of the value 0
  int64_t qmin = -kQMax;   ///< smallest code
  int64_t qmax = kQMax;    ///< largest code
};

/// Symmetric int8 parameters for `r` (widened to include 0): scale = max(|min|, |max|) / 127.
QParams symmetric_qparams(const Range& r);
/// Affine uint8 parameters for `r` (widened to include 0): scale = (max - min) / 255, zero
/// point = round(-min / scale) in [0, 255].
QParams affine_qparams(const Range& r);

/// Running min/max over everything observed.
class MinMaxObserver {
 public:
  /// Widens the range by `x`'s min and max (NaN/Inf are rejected with InputError).
  void observe(const torch::Tensor& x);
  /// The range so far.
  const Range& range() const { return range_; }

 private:
  Range range_;
};

/// Moving-average min/max: the first batch sets the range, later ones move it by
/// `momentum` * (batch_min - min) (QAT's activation observer).
class MovingAverageMinMaxObserver {
 public:
  /// `momentum` in (0, 1].
  explicit MovingAverageMinMaxObserver(double momentum = 0.01);
  /// Moves the range towards `x`'s min and max.
  void observe(const torch::Tensor& x);
  /// The range so far.
  const Range& range() const { return range_; }

 private:
  double momentum_;
  Range range_;
};

/// Min/max per slice along dimension 0 (per output channel of a weight [out, ...]).
class PerChannelMinMaxObserver {
 public:
  /// Widens each channel's range by `w`'s values in that channel; every call must have the same
  /// number of channels.
  void observe(const torch::Tensor& w);
  /// Per-channel minima and maxima ([channels] float; undefined before the first call).
  const torch::Tensor& min() const { return min_; }
  const torch::Tensor& max() const { return max_; }
  /// Symmetric int8 scales per channel: max(|min|, |max|) / 127, at least kMinScale.
  torch::Tensor symmetric_scales() const;

 private:
  torch::Tensor min_, max_;
};

/// Histogram of |x| over the observed values, for choosing a symmetric clip threshold that
/// minimises the expected L2 error of int8 quantization (clipping error of the values beyond
/// the threshold plus the rounding error step^2 / 12 of those inside) instead of covering the
/// largest outlier. The histogram's range grows as needed (bins are merged, never lost).
class HistogramObserver {
 public:
  /// `bins` >= 16.
  explicit HistogramObserver(int64_t bins = 2048);
  /// Adds `x`'s absolute values.
  void observe(const torch::Tensor& x);
  /// Largest |x| seen (0 before any observation).
  float max_abs() const { return max_abs_; }
  /// Values observed.
  int64_t count() const { return count_; }
  /// The threshold c in (0, max_abs] minimising the expected squared error of quantizing the
  /// observed values symmetrically on [-c, c] with 127 steps each side.
  float l2_optimal_threshold() const;
  /// The `p`-th percentile of |x| (p in (0, 100]), linear within a bin.
  float percentile(double p) const;
  /// Expected squared error per value of quantizing on [-c, c] (what l2_optimal_threshold
  /// minimises).
  double expected_squared_error(float c) const;

 private:
  void grow(float new_max);
  int64_t bins_;
  float max_abs_ = 0.0f;  // largest |x| seen
  float edge_ = 0.0f;     // upper edge of the histogram (>= max_abs_; doubles as it grows)
  int64_t count_ = 0;
  std::vector<double> counts_;
};

/// int8 codes of `x` for a symmetric per-tensor `scale`: clamp(round(x / scale), -127, 127).
torch::Tensor quantize_symmetric(const torch::Tensor& x, float scale);
/// float values of symmetric codes: q * scale.
torch::Tensor dequantize_symmetric(const torch::Tensor& q, float scale);
/// int8 codes of `w` per slice along dimension 0 with `scales` [w.size(0)].
torch::Tensor quantize_per_channel(const torch::Tensor& w, const torch::Tensor& scales);
/// float values of per-channel codes: q * scales (broadcast along dimension 0).
torch::Tensor dequantize_per_channel(const torch::Tensor& q, const torch::Tensor& scales);

/// Dynamic per-row quantization of activations `x` [rows, cols]: scales [rows] =
/// max|row| / 127 (at least kMinScale) and int8 codes [rows, cols].
struct RowQuantized {
  torch::Tensor codes;   ///< [rows, cols] int8
  torch::Tensor scales;  ///< [rows] float
};
/// Quantizes each row of `x` (rank 2, floating) on its own range.
RowQuantized quantize_rows(const torch::Tensor& x);

/// Fake quantization for QAT: quantize then dequantize in the forward pass, with the
/// straight-through gradient (1 where x / scale lies inside the code range, 0 outside).
/// Symmetric per tensor.
torch::Tensor fake_quantize_symmetric(const torch::Tensor& x, float scale);
/// The same per channel along dimension 0 with `scales` [x.size(0)] (weights).
torch::Tensor fake_quantize_per_channel(const torch::Tensor& x, const torch::Tensor& scales);

/// One int8 layer's error on a batch against its FP32 layer on the same input.
struct LayerError {
  std::string layer;       ///< the layer's name in its model's int8 layout
  double snr_db = 0.0;     ///< 10 log10(signal / noise); 999 when the outputs are equal
  double rel_error = 0.0;  ///< sqrt(noise / signal); 0 for a zero signal
};

/// {layer, snr_db, rel_error}.
void to_json(nlohmann::json& j, const LayerError& e);

}  // namespace foxhunt::quant
