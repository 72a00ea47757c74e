#pragma once
/// \file codes.h
/// Activation codes on the CPU: the one rounding every int8 path uses, over an array (codes_of)
/// and over 16 lanes in registers (lane_codes).
#include <cstdint>
#include <type_traits>

#include "foxhunt/core/simd.h"
#include "foxhunt/quant/quantize.h"

namespace foxhunt::quant::detail {

// GCC keeps the clamps as branches (and the loops scalar) unless it may ignore FP traps; the
// loops below are pure arithmetic, so let it vectorize them.
#if defined(__GNUC__) && !defined(__clang__)
#define FOXHUNT_VECTORIZE __attribute__((optimize("no-trapping-math")))
#else
#define FOXHUNT_VECTORIZE
#endif

/// 1.5 * 2^23: adding and subtracting it leaves the nearest integer (ties to even) of any
/// |v| < 2^22 without a libm call.
inline constexpr float kRoundMagic = 12582912.0f;

/// The codes of src[0, n) into dst (integer-valued floats or int8): round-half-even of
/// clamp(x / scale, -127, 127), what ATen's div/round/clamp computes, with x / scale taken as
/// x * (1 / scale) like torch's fake quantization.
template <typename Out>
FOXHUNT_VECTORIZE void codes_of(const float* __restrict src, Out* __restrict dst, int64_t n,
                                float scale) {
  constexpr float kMax = static_cast<float>(kQMax);
  const float inv = 1.0f / scale;
  for (int64_t k = 0; k < n; ++k) {
    float v = src[k] * inv;
    v = v < -kMax ? -kMax : v;
    v = v > kMax ? kMax : v;
    v = (v + kRoundMagic) - kRoundMagic;
    if constexpr (std::is_same_v<Out, float>)
      dst[k] = v;
    else
      dst[k] = static_cast<Out>(static_cast<int32_t>(v));
  }
}

/// codes_of for 16 values in registers, at the inverse scale `inv` = 1 / scale.
FOXHUNT_INLINE simd::v16 lane_codes(simd::v16 x, float inv) {
  constexpr float kMax = static_cast<float>(kQMax);
  simd::v16 v = x * inv;
  v = simd::select(v < -kMax, simd::splat(-kMax), v);
  v = simd::select(v > kMax, simd::splat(kMax), v);
  return (v + kRoundMagic) - kRoundMagic;
}

}  // namespace foxhunt::quant::detail
