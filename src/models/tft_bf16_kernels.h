#pragma once
// The BF16 TFT's variable-selection kernel (private to models/): vsn_weighted_grns with the
// per-variable GRNs' products on AVX512-BF16 (vdpbf16ps, FP32 accumulation) and their
// elementwise work at BF16 accuracy. Runs only where models::cpu_has_bf16() holds.
#include <torch/torch.h>

#include <cstdint>

#include "tft_bf16_lanes.h"
#include "tft_kernels.h"

namespace foxhunt::models::kernels {

/// Bf16VsnWeights with its storage: tensors through LibTorch's CPU allocator (the memory ledger
/// counts them), `weights` points into them. Made once per weights (a DerivedCache value).
struct Bf16VsnPack {
  torch::Tensor pairs;     ///< int32 words: fc1 pairs [V, Hp, Hi], then GLU pairs [V, Hp, 2H]
  torch::Tensor floats;    ///< the FP32 per-variable vectors, in Bf16VsnWeights order
  Bf16VsnWeights weights;  ///< views into `pairs` and `floats`
  /// Bytes held (both tensors).
  int64_t bytes() const;
};

/// The FP32 per-variable weights `w` (VsnGrnWeights layouts) packed for the BF16 kernel: fc1's
/// and the GLU's weights rounded to BF16 (nearest, ties to even: what torch's cast gives) in
/// pairs over consecutive inputs, the rest copied as FP32.
Bf16VsnPack pack_bf16_vsn(const VsnGrnWeights& w);

/// out [N, H] = sum over v of w[n, v] * GRN_v(x[n, v]) as vsn_weighted_grns in eval mode (same
/// layouts), with eta2 and eta1 rounded to BF16 before the products (vdpbf16ps rounds nothing
/// else: FP32 accumulation), the sigmoid, ELU and LayerNorm's 1/sqrt at ~1e-4 relative
/// (tft_bf16_lanes.h). Requires kMaxVsnInner >= inner, kMaxVsnHidden >= hidden, and a CPU
/// with AVX512-BF16 (an internal error otherwise: callers check models::cpu_has_bf16()).
void vsn_weighted_grns_bf16(const Bf16VsnWeights& p, const float* x, const float* w, int64_t n,
                            float* out);

}  // namespace foxhunt::models::kernels
