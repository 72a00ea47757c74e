#pragma once
/// \file int8_gemm.h
/// The int8 x int8 -> int32 product on any device (Int8Linear and the INT8 TFT's layers).
#include <torch/torch.h>

namespace foxhunt::quant::detail {

/// Largest inner width whose int8 products sum exactly in fp32: k * 127^2 < 2^24.
inline constexpr int64_t kMaxExactFloatInner = 1040;

/// The int32 products `a` [m, k] x `b` [k, n] of int8 codes (`b` row-major), on their device.
/// The CPU runs at::_int_mm for every shape. CUDA runs it (cuBLASLt) where the library takes the
/// shape: m > 16, k and n multiples of 8, and `b` laid out column-major (Hopper's int8 GEMM
/// refuses the row-major "NN" form with CUBLAS_STATUS_NOT_SUPPORTED; an H200 did so on
/// 2026-12-04). Elsewhere, and if cuBLASLt still refuses, the same integer products run on the
/// floating-point unit, exactly: fp32 while k * 127^2 < 2^24, fp64 beyond.
torch::Tensor int8_products(const torch::Tensor& a, const torch::Tensor& b);

/// The fallback of int8_products alone: the same int32 products through torch::mm (fp32 or
/// fp64, exact), on any device.
torch::Tensor float_products(const torch::Tensor& a, const torch::Tensor& b);

}  // namespace foxhunt::quant::detail
