#pragma once
// The fused CPU inference kernel of the TFT's variable selection network (private to models/).
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

/// Widest inner / output widths the kernel takes (its per-lane scratch lives on the stack).
constexpr int64_t kMaxVsnInner = 64;
constexpr int64_t kMaxVsnHidden = 256;

/// out [N, H] = sum over v of w[n, v] * GRN_v(x[n, v]), with GRN_v the VSN's v-th per-variable
/// GRN (ELU, fc1, GLU, skip, LayerNorm) in eval mode: the selection-weighted VSN output without
/// any [V, N, .] intermediate. x and w are [N, V] row-major. Lanes are positions: 16 positions
/// run together through one variable's weights, which stay in L1 for the whole pass.
void vsn_weighted_grns(const VsnGrnWeights& p, const float* x, const float* w, int64_t n,
                       float* out);

}  // namespace foxhunt::models::kernels
