#include "tft_kernels.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstring>

#include "simd.h"

namespace foxhunt::models::kernels {

namespace {

using simd::kLanes;
using simd::v16;
using simd::v16i;

// 1 / sqrt(x) for x > 0: the classic exponent-halving first guess, then three Newton steps
// (relative error 1.7e-3 -> 4.7e-6 -> 3e-11, i.e. float rounding).
FOXHUNT_INLINE v16 rsqrt(v16 x) {
  v16i i;
  std::memcpy(&i, &x, sizeof i);
  i = 0x5f3759df - (i >> 1);
  v16 y;
  std::memcpy(&y, &i, sizeof y);
  const v16 half = x * 0.5f;
  for (int k = 0; k < 3; ++k) y = y * (1.5f - half * y * y);
  return y;
}

// Every variable over the lane blocks [first, last) of positions; xt, wt [V, np] (positions
// contiguous), acc [H, np] accumulated in place. Threads given disjoint block ranges write
// disjoint columns of acc.
FOXHUNT_KERNEL_CLONES
void vsn_variables(const VsnGrnWeights& p, const float* xt, const float* wt, int64_t np,
                   int64_t first, int64_t last, float* acc) {
  const int64_t hi = p.inner, h = p.hidden;
  v16 e2[kMaxVsnInner], e1[kMaxVsnInner], y[kMaxVsnHidden];
  for (int64_t v = 0; v < p.variables; ++v) {
    const float* s2 = p.fc2_slope + v * hi;
    const float* o2 = p.fc2_offset + v * hi;
    const float* w1 = p.fc1_weight + v * hi * hi;
    const float* b1 = p.fc1_bias + v * hi;
    const float* wg = p.glu_weight + v * hi * 2 * h;
    const float* bg = p.glu_bias + v * 2 * h;
    const float* ss = p.skip_slope + v * h;
    const float* so = p.skip_offset + v * h;
    const float* nw = p.norm_weight + v * h;
    const float* nb = p.norm_bias + v * h;
    for (int64_t n0 = first * kLanes; n0 < last * kLanes; n0 += kLanes) {
      const v16 xs = simd::load(xt + v * np + n0);
      const v16 ws = simd::load(wt + v * np + n0);
      for (int64_t k = 0; k < hi; ++k) e2[k] = simd::elu(xs * s2[k] + o2[k]);
      for (int64_t j = 0; j < hi; ++j) {
        v16 s = simd::splat(b1[j]);
        for (int64_t k = 0; k < hi; ++k) s += e2[k] * w1[k * hi + j];
        e1[j] = s;
      }
      v16 sum{};
      for (int64_t c = 0; c < h; ++c) {
        v16 a = simd::splat(bg[c]), g = simd::splat(bg[h + c]);
        for (int64_t j = 0; j < hi; ++j) {
          a += e1[j] * wg[j * 2 * h + c];
          g += e1[j] * wg[j * 2 * h + h + c];
        }
        y[c] = xs * ss[c] + so[c] + a * simd::sigmoid(g);
        sum += y[c];
      }
      const v16 mean = sum * (1.0f / static_cast<float>(h));
      v16 var{};
      for (int64_t c = 0; c < h; ++c) {
        const v16 d = y[c] - mean;
        var += d * d;
      }
      const v16 rstd = rsqrt(var * (1.0f / static_cast<float>(h)) + p.norm_eps);
      for (int64_t c = 0; c < h; ++c) {
        float* dst = acc + c * np + n0;
        simd::store(dst, simd::load(dst) + ws * ((y[c] - mean) * rstd * nw[c] + nb[c]));
      }
    }
  }
}

}  // namespace

void vsn_weighted_grns(const VsnGrnWeights& p, const float* x, const float* w, int64_t n,
                       float* out) {
  const int64_t v = p.variables, h = p.hidden;
  if (n <= 0) return;
  const int64_t np = (n + kLanes - 1) / kLanes * kLanes;
  // Positions contiguous per variable, zero-padded to whole lanes (weight 0: no contribution).
  // Through LibTorch's CPU allocator (not std::vector), so the memory ledger counts it.
  const int64_t vn = v * np, hn = h * np;
  auto scratch = torch::empty({2 * vn + hn}, torch::kFloat);
  float* xt = scratch.mutable_data_ptr<float>();
  float* wt = xt + vn;
  float* acc = wt + vn;
  for (int64_t i = 0; i < v; ++i) {
    for (int64_t r = 0; r < n; ++r) {
      xt[i * np + r] = x[r * v + i];
      wt[i * np + r] = w[r * v + i];
    }
    std::fill(xt + i * np + n, xt + (i + 1) * np, 0.0f);
    std::fill(wt + i * np + n, wt + (i + 1) * np, 0.0f);
  }
  // Large inputs: lane blocks of positions split across the intra-op threads, each with the whole
  // variable loop (the accumulator columns of a position block belong to one thread).
  const int64_t blocks = np / kLanes;
  const int64_t per_task = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, v));
  std::fill(acc, acc + hn, 0.0f);
  if (blocks < 2 * per_task || at::get_num_threads() == 1 || at::in_parallel_region()) {
    vsn_variables(p, xt, wt, np, 0, blocks, acc);
  } else {
    at::parallel_for(0, blocks, per_task,
                     [&](int64_t b0, int64_t b1) { vsn_variables(p, xt, wt, np, b0, b1, acc); });
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < h; ++c) out[r * h + c] = acc[c * np + r];
}

}  // namespace foxhunt::models::kernels
