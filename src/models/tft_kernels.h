#pragma once
// The fused CPU kernels of the TFT's variable selection network, forward (inference and
// training) and backward (private to models/).
#include <cstdint>

namespace foxhunt::models::kernels {

/// The per-variable GRN weights of a VSN after the embedding fold (VsnFolding), as raw
/// row-major float32 arrays. V variables, Hi inner width, H output width.
struct VsnGrnWeights {
  int64_t variables = 0, inner = 0, hidden = 0;
  const float* fc2_slope = nullptr;    ///< [V, Hi]
  const float* fc2_offset = nullptr;   ///< [V, Hi]
  const float* fc1_weight = nullptr;   ///< [V, Hi, Hi] (in, out)
  const float* fc1_bias = nullptr;     ///< [V, Hi]
  const float* glu_weight = nullptr;   ///< [V, Hi, 2H] (in, out): value half, then gate half
  const float* glu_bias = nullptr;     ///< [V, 2H]
  const float* skip_slope = nullptr;   ///< [V, H]
  const float* skip_offset = nullptr;  ///< [V, H]
  const float* norm_weight = nullptr;  ///< [V, H]
  const float* norm_bias = nullptr;    ///< [V, H]
  float norm_eps = 1e-5f;
};

/// Dropout on each per-variable GRN's eta1 (train mode): unit j of variable v at position r is
/// kept, scaled by 1 / (1 - p), when a 32-bit hash of (seed, v, r, j) is at least p * 2^32. The
/// mask is a function of its coordinates, so the backward pass recomputes it instead of storing
/// it; the same seed gives the same mask.
struct VsnDropout {
  float p = 0.0f;     ///< drop probability in [0, 1); 0 = none (eval)
  uint32_t seed = 0;  ///< the mask's seed (one per forward call)
};

/// Gradients of the per-variable GRN weights (same layouts as VsnGrnWeights); overwritten.
struct VsnGrnGrads {
  float* fc2_slope = nullptr;    ///< [V, Hi]
  float* fc2_offset = nullptr;   ///< [V, Hi]
  float* fc1_weight = nullptr;   ///< [V, Hi, Hi]
  float* fc1_bias = nullptr;     ///< [V, Hi]
  float* glu_weight = nullptr;   ///< [V, Hi, 2H]
  float* glu_bias = nullptr;     ///< [V, 2H]
  float* skip_slope = nullptr;   ///< [V, H]
  float* skip_offset = nullptr;  ///< [V, H]
  float* norm_weight = nullptr;  ///< [V, H]
  float* norm_bias = nullptr;    ///< [V, H]
};

/// Widest inner / output widths the kernel takes (its per-lane scratch lives on the stack).
constexpr int64_t kMaxVsnInner = 64;
constexpr int64_t kMaxVsnHidden = 256;

/// out [N, H] = sum over v of w[n, v] * GRN_v(x[n, v]), with GRN_v the VSN's v-th per-variable
/// GRN (ELU, fc1, GLU, skip, LayerNorm) in eval mode: the selection-weighted VSN output without
/// any [V, N, .] intermediate. x and w are [N, V] row-major. Lanes are positions: 16 positions
/// run together through one variable's weights, which stay in L1 for the whole pass.
/// With `dropout.p > 0` eta1 is dropped out as VsnDropout says (the training forward).
void vsn_weighted_grns(const VsnGrnWeights& p, const float* x, const float* w, int64_t n,
                       float* out, VsnDropout dropout = {});

/// The backward pass of vsn_weighted_grns for the upstream gradient `dout` [N, H]: recomputes
/// each position's GRN (nothing but the inputs is saved) and writes dw [N, V], dx [N, V] (skipped
/// when null) and every weight gradient in `grads`. Same `dropout` as the forward.
void vsn_weighted_grns_backward(const VsnGrnWeights& p, const float* x, const float* w,
                                const float* dout, int64_t n, VsnDropout dropout, float* dx,
                                float* dw, const VsnGrnGrads& grads);

/// [N, cols] row-major -> [cols, np] (positions contiguous per column, zero-padded from N to np, a
/// whole number of 16-position lanes): the kernels' input layout.
void to_lanes(const float* src, int64_t n, int64_t cols, int64_t np, float* dst);
/// [cols, np] -> [N, cols] row-major (the first N positions).
void from_lanes(const float* src, int64_t n, int64_t cols, int64_t np, float* dst);

/// Whether vsn_row_terms takes these widths: inner <= kMaxVsnInner, hidden <= kMaxVsnHidden and a
/// multiple of 16 (its lanes are output units).
bool vsn_row_applies(int64_t inner, int64_t hidden);

/// One position's weighted per-variable GRNs, eval mode: terms[v] [H] = w[v] * GRN_v(x[v]) for
/// v in [first, last), x and w [V], terms [V, H] row-major (rows outside the range untouched).
/// Each variable's arithmetic is its own, so any split of the variables over threads writes the
/// same terms; `sum_rows` then adds them in order (the VSN output). Lanes are output units, so
/// one row uses every lane (vsn_weighted_grns would fill one lane of 16).
void vsn_row_terms(const VsnGrnWeights& p, const float* x, const float* w, int64_t first,
                   int64_t last, float* terms);

/// out [h] = rows[0] + rows[1] + ... + rows[n - 1] (rows [n, h] row-major), added in row order.
void sum_rows(const float* rows, int64_t n, int64_t h, float* out);

/// out = ELU(x) (alpha 1) over n floats; out may be x. LibTorch's CPU ELU (Sleef's expm1) ran
/// ~18x slower than its exp on this machine: 1.8 ms for the 133k values of a batch-64 GRN.
void elu(const float* x, int64_t n, float* out);

}  // namespace foxhunt::models::kernels
