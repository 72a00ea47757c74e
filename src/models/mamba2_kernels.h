#pragma once
// Fused CPU inference kernels of the Mamba-2 mixer (private to models/).
#include <cstdint>

namespace foxhunt::models::kernels {

/// The mixer's weights between its two projections, as raw row-major float32 arrays.
struct Mamba2CoreWeights {
  int64_t d_inner = 0, nheads = 0, headdim = 0, ngroups = 0, d_state = 0, d_conv = 0;
  const float* conv_weight = nullptr;  ///< [conv_dim, d_conv] (conv1d's [C, 1, K])
  const float* conv_bias = nullptr;    ///< [conv_dim]
  const float* dt_bias = nullptr;      ///< [nheads]
  const float* A_log = nullptr;        ///< [nheads]; the decay rate is -exp(A_log)
  const float* D = nullptr;            ///< [nheads]
  const float* norm_weight = nullptr;  ///< [d_inner]; null: ones
  float norm_eps = 1e-5f;
  float norm_scale = 1.0f;  ///< multiplies the normalised output (with or without the weight)
};

/// Everything the mixer computes between in_proj and out_proj, for `batch` sequences of `len`
/// positions starting from a zero state: the causal depthwise convolution and SiLU of xBC,
/// delta = softplus(dt + dt_bias), the SSD scan as one masked quadratic block (stable segment
/// sums, as `segsum`), the D skip, the SiLU(z) gate and the grouped RMS norm times its weight.
/// zxbcdt [batch, len, 2 d_inner + 2 ngroups d_state + nheads] -> out [batch, len, d_inner].
/// `row_stride`: floats between consecutive input rows (0: the row width; a sequence is `len`
/// rows). `last_only`: out [batch, 1, d_inner] holds the last position only (its scan row alone,
/// O(len) instead of O(len^2): what a stream's last layer needs).
/// Its scratch (~(d_conv + len) * conv_dim + 2 len^2 floats per thread) comes from LibTorch's
/// allocator, where the memory ledger counts it.
void mamba2_mixer_core(const Mamba2CoreWeights& w, const float* zxbcdt, int64_t batch, int64_t len,
                       float* out, int64_t row_stride = 0, bool last_only = false);

/// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of `dim` floats.
void rms_norm_rows(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                   float* out);

}  // namespace foxhunt::models::kernels
