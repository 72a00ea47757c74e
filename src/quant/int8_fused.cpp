// The fused CPU kernels of the INT8 TFT (int8_fused.h).
#include "int8_fused.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "foxhunt/core/error.h"
#include "foxhunt/core/simd.h"

namespace foxhunt::quant::detail {

namespace {

using simd::kLanes;
using simd::v16;

// The codes of x at activation scale 1 / inv, as integer-valued floats: round half to even of
// clamp(x * inv, -127, 127), the rounding of the layer-by-layer path (codes_of in
// tft_int8_kernels.cpp). Adding and subtracting 1.5 * 2^23 leaves the nearest integer.
FOXHUNT_INLINE v16 codes(v16 x, float inv) {
  constexpr float kMagic = 12582912.0f;
  v16 v = x * inv;
  v = simd::select(v < -127.0f, simd::splat(-127.0f), v);
  v = simd::select(v > 127.0f, simd::splat(127.0f), v);
  return (v + kMagic) - kMagic;
}

// Every variable over the lane blocks [first, last) of positions; xt, wt [V, np] (positions
// contiguous), acc [H, np] accumulated in place; `wf` holds one variable's codes as floats
// (Hi * Hi + Hi * 2H). HI and H > 0 fix the widths at compile time; 0 takes them from `p`.
template <int64_t HI, int64_t H>
FOXHUNT_INLINE void variables_body(const VsnInt8Weights& p, const float* xt, const float* wt,
                                   int64_t np, int64_t first, int64_t last, float* wf, float* acc) {
  const int64_t hi = HI > 0 ? HI : p.inner, h = H > 0 ? H : p.hidden;
  constexpr int64_t kHi = HI > 0 ? HI : kMaxInt8VsnInner, kH = H > 0 ? H : kMaxInt8VsnHidden;
  const float inv_h = 1.0f / static_cast<float>(h);
  v16 q2[kHi], q1[kHi], y[kH], g[kH];
  for (int64_t v = 0; v < p.variables; ++v) {
    const float* s2 = p.fc2_slope + v * hi;
    const float* o2 = p.fc2_offset + v * hi;
    const float* b1 = p.fc1_bias + v * hi;
    const float* bg = p.glu_bias + v * 2 * h;
    const float* ss = p.skip_slope + v * h;
    const float* so = p.skip_offset + v * h;
    const float* nw = p.norm_weight + v * h;
    const float* nb = p.norm_bias + v * h;
    // The codes as floats: their products are integers, summed exactly (|sum| < 2^24).
    float* w1 = wf;
    float* wg = wf + hi * hi;
    const int8_t* c1 = p.fc1_codes + v * hi * hi;
    const int8_t* cg = p.glu_codes + v * hi * 2 * h;
    for (int64_t i = 0; i < hi * hi; ++i) w1[i] = static_cast<float>(c1[i]);
    for (int64_t i = 0; i < hi * 2 * h; ++i) wg[i] = static_cast<float>(cg[i]);
    const float inv1 = 1.0f / p.fc1_input_scale[v], sc1 = p.fc1_scale[v];
    const float invg = 1.0f / p.glu_input_scale[v], scg = p.glu_scale[v];
    for (int64_t n0 = first * kLanes; n0 < last * kLanes; n0 += kLanes) {
      const v16 xs = simd::load(xt + v * np + n0);
      const v16 ws = simd::load(wt + v * np + n0);
      for (int64_t k = 0; k < hi; ++k) q2[k] = codes(simd::elu(xs * s2[k] + o2[k]), inv1);
      for (int64_t j = 0; j < hi; ++j) {
        v16 s{};
        for (int64_t k = 0; k < hi; ++k) s += q2[k] * w1[k * hi + j];
        q1[j] = codes(s * sc1 + b1[j], invg);
      }
      // As in the FP32 kernel: the products first, then the sigmoids (independent exp/divide
      // chains for the out-of-order core), then the skip and the LayerNorm.
      for (int64_t c = 0; c < h; ++c) {
        v16 a{}, gate{};
        for (int64_t j = 0; j < hi; ++j) {
          a += q1[j] * wg[j * 2 * h + c];
          gate += q1[j] * wg[j * 2 * h + h + c];
        }
        y[c] = a * scg + bg[c];
        g[c] = gate * scg + bg[h + c];
      }
      for (int64_t c = 0; c < h; ++c) g[c] = simd::sigmoid(g[c]);
      v16 sum0{}, sum1{};
      for (int64_t c = 0; c < h; ++c) {
        y[c] = xs * ss[c] + so[c] + y[c] * g[c];
        (c % 2 == 0 ? sum0 : sum1) += y[c];
      }
      const v16 mean = (sum0 + sum1) * inv_h;
      v16 var0{}, var1{};
      for (int64_t c = 0; c < h; ++c) {
        const v16 d = y[c] - mean;
        (c % 2 == 0 ? var0 : var1) += d * d;
      }
      const v16 rstd = simd::rsqrt((var0 + var1) * inv_h + 1e-5f);
      for (int64_t c = 0; c < h; ++c) {
        float* dst = acc + c * np + n0;
        simd::store(dst, simd::load(dst) + ws * ((y[c] - mean) * rstd * nw[c] + nb[c]));
      }
    }
  }
}

// The default TFT's widths (embedding 8, hidden 32), then any.
FOXHUNT_KERNEL_CLONES
void variables_8_32(const VsnInt8Weights& p, const float* xt, const float* wt, int64_t np,
                    int64_t first, int64_t last, float* wf, float* acc) {
  variables_body<8, 32>(p, xt, wt, np, first, last, wf, acc);
}
FOXHUNT_KERNEL_CLONES
void variables_any(const VsnInt8Weights& p, const float* xt, const float* wt, int64_t np,
                   int64_t first, int64_t last, float* wf, float* acc) {
  variables_body<0, 0>(p, xt, wt, np, first, last, wf, acc);
}

void variables(const VsnInt8Weights& p, const float* xt, const float* wt, int64_t np, int64_t first,
               int64_t last, float* acc) {
  // One variable's weights as floats, per thread, through LibTorch's allocator (the ledger
  // counts it): 2.3 KiB at the default widths.
  auto wf = torch::empty({p.inner * p.inner + p.inner * 2 * p.hidden}, torch::kFloat);
  float* f = wf.mutable_data_ptr<float>();
  if (p.inner == 8 && p.hidden == 32)
    variables_8_32(p, xt, wt, np, first, last, f, acc);
  else
    variables_any(p, xt, wt, np, first, last, f, acc);
}

// codes() of one float: the tail of a vector loop.
FOXHUNT_INLINE float code1(float x, float inv) {
  constexpr float kMagic = 12582912.0f;
  float v = x * inv;
  v = v < -127.0f ? -127.0f : v;
  v = v > 127.0f ? 127.0f : v;
  return (v + kMagic) - kMagic;
}

FOXHUNT_INLINE float sigmoid1(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// The layout of models/lstm_kernel.cpp's recurrence, on codes: eight 16-gate accumulators at a
// time over the [H, 4H] code matrix (as floats), then the gates' elementwise step.
FOXHUNT_KERNEL_CLONES
void recurrence(const float* gx, const float* w, const float* scale, float inv, int64_t B,
                int64_t T, int64_t H, float* h, float* c, float* out, float* gates, float* hq) {
  const int64_t G = 4 * H;
  const int64_t G128 = G / (8 * kLanes) * (8 * kLanes), G16 = G / kLanes * kLanes;
  const int64_t H16 = H / kLanes * kLanes;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      const float* x = gx + (b * T + t) * G;
      float* hb = h + b * H;
      float* cb = c + b * H;
      int64_t k = 0;
      for (; k < H16; k += kLanes) simd::store(hq + k, codes(simd::load(hb + k), inv));
      for (; k < H; ++k) hq[k] = code1(hb[k], inv);
      int64_t o0 = 0;
      for (; o0 < G128; o0 += 8 * kLanes) {
        v16 acc[8] = {};
        for (int64_t kk = 0; kk < H; ++kk) {
          if (hq[kk] == 0.0f) continue;  // a zero code adds nothing (h is often near 0)
          const v16 q = simd::splat(hq[kk]);
          const float* row = w + kk * G + o0;
          for (int64_t v = 0; v < 8; ++v) acc[v] += q * simd::load(row + v * kLanes);
        }
        for (int64_t v = 0; v < 8; ++v) {
          const int64_t o = o0 + v * kLanes;
          simd::store(gates + o, simd::load(x + o) + acc[v] * simd::load(scale + o));
        }
      }
      for (; o0 < G16; o0 += kLanes) {
        v16 acc{};
        for (int64_t kk = 0; kk < H; ++kk) acc += simd::splat(hq[kk]) * simd::load(w + kk * G + o0);
        simd::store(gates + o0, simd::load(x + o0) + acc * simd::load(scale + o0));
      }
      for (; o0 < G; ++o0) {
        float acc = 0.0f;
        for (int64_t kk = 0; kk < H; ++kk) acc += hq[kk] * w[kk * G + o0];
        gates[o0] = x[o0] + acc * scale[o0];
      }
      float* ob = out + (b * T + t) * H;
      int64_t j = 0;
      for (; j < H16; j += kLanes) {
        const v16 i = simd::sigmoid(simd::load(gates + j));
        const v16 f = simd::sigmoid(simd::load(gates + H + j));
        const v16 g = simd::tanh(simd::load(gates + 2 * H + j));
        const v16 o = simd::sigmoid(simd::load(gates + 3 * H + j));
        const v16 cn = f * simd::load(cb + j) + i * g;
        const v16 hn = o * simd::tanh(cn);
        simd::store(cb + j, cn);
        simd::store(hb + j, hn);
        simd::store(ob + j, hn);
      }
      for (; j < H; ++j) {
        const float cn =
            sigmoid1(gates[H + j]) * cb[j] + sigmoid1(gates[j]) * std::tanh(gates[2 * H + j]);
        const float hn = sigmoid1(gates[3 * H + j]) * std::tanh(cn);
        cb[j] = cn;
        hb[j] = hn;
        ob[j] = hn;
      }
    }
  }
}

// [N, cols] row-major -> [cols, np] (positions contiguous), zero-padded to np.
void to_lanes(const float* src, int64_t n, int64_t cols, int64_t np, float* dst) {
  for (int64_t i = 0; i < cols; ++i) {
    float* d = dst + i * np;
    for (int64_t r = 0; r < n; ++r) d[r] = src[r * cols + i];
    std::fill(d + n, d + np, 0.0f);
  }
}

}  // namespace

void vsn_weighted_grns_int8(const VsnInt8Weights& p, const float* x, const float* w, int64_t n,
                            float* out) {
  FOXHUNT_INTERNAL_ASSERT(
      p.inner > 0 && p.inner <= kMaxInt8VsnInner && p.hidden > 0 && p.hidden <= kMaxInt8VsnHidden,
      "int8 vsn kernel widths");
  if (n <= 0) return;
  const int64_t v = p.variables, h = p.hidden;
  const int64_t np = (n + kLanes - 1) / kLanes * kLanes;
  // Padded positions have weight 0: they add nothing.
  auto scratch = torch::empty({2 * v * np + h * np}, torch::kFloat);
  float* xt = scratch.mutable_data_ptr<float>();
  float* wt = xt + v * np;
  float* acc = wt + v * np;
  to_lanes(x, n, v, np, xt);
  to_lanes(w, n, v, np, wt);
  std::fill(acc, acc + h * np, 0.0f);
  const int64_t blocks = np / kLanes;
  const int64_t per_task = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, v));
  if (blocks < 2 * per_task || at::get_num_threads() == 1 || at::in_parallel_region()) {
    variables(p, xt, wt, np, 0, blocks, acc);
  } else {
    at::parallel_for(0, blocks, per_task,
                     [&](int64_t b0, int64_t b1) { variables(p, xt, wt, np, b0, b1, acc); });
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < h; ++c) out[r * h + c] = acc[c * np + r];
}

int64_t int8_lstm_scratch_floats(int64_t hidden) {
  return 4 * hidden * hidden + 4 * hidden + hidden;
}

void int8_lstm_recurrence(const float* gx, const int8_t* codes, const float* scale, float inv_scale,
                          int64_t batch, int64_t steps, int64_t hidden, float* h, float* c,
                          float* out, float* scratch) {
  const int64_t g = 4 * hidden;
  float* w = scratch;  // the codes as floats: integer products, summed exactly
  for (int64_t i = 0; i < hidden * g; ++i) w[i] = static_cast<float>(codes[i]);
  recurrence(gx, w, scale, inv_scale, batch, steps, hidden, h, c, out, w + hidden * g,
             w + hidden * g + g);
}

}  // namespace foxhunt::quant::detail
