// The fused int8 CPU kernels (int8_fused.h).
#include "foxhunt/quant/int8_fused.h"

#include "foxhunt/quant/codes.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include "foxhunt/core/error.h"
#include "foxhunt/core/simd.h"

// AVX512-VNNI for the VSN's GLU products: GCC on x86-64 (a target attribute and a run-time CPU
// check; clang builds, the fuzzers', keep the portable path).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define FOXHUNT_INT8_VNNI 1
#define FOXHUNT_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vnni")))
#else
#define FOXHUNT_INT8_VNNI 0
#endif

namespace foxhunt::quant::detail {

namespace {

using simd::kLanes;
using simd::v16;
using simd::v16i;

// The GLU's products on the portable path: the codes as floats (their products are integers,
// summed exactly: |sum| < 2^24), lanes = positions.
struct FloatGlu {
  float* w = nullptr;  // [Hi, 2H] one variable's codes as floats (scratch)
  void load(const int8_t* codes, int64_t hi, int64_t h2) {
    for (int64_t i = 0; i < hi * h2; ++i) w[i] = static_cast<float>(codes[i]);
  }
  // y[c] (value) and g[c] (gate pre-activation) = s (q1 . codes[:, c]) + bias, c < H.
  FOXHUNT_INLINE void products(const v16* q1, int64_t hi, int64_t h, float scale, const float* bias,
                               v16* y, v16* g) const {
    for (int64_t c = 0; c < h; ++c) {
      v16 a{}, gate{};
      for (int64_t j = 0; j < hi; ++j) {
        a += q1[j] * w[j * 2 * h + c];
        gate += q1[j] * w[j * 2 * h + h + c];
      }
      y[c] = a * scale + bias[c];
      g[c] = gate * scale + bias[h + c];
    }
  }
};

// Every variable over the lane blocks [first, last) of positions; xt, wt [V, np] (positions
// contiguous), acc [H, np] accumulated in place; `w1` holds one variable's fc1 codes as floats
// (Hi * Hi), `glu` its GLU codes (FloatGlu or VnniGlu). HI and H > 0 fix the widths at compile
// time; 0 takes them from `p`.
template <int64_t HI, int64_t H, typename Glu>
FOXHUNT_INLINE void variables_body(const VsnInt8Weights& p, const float* xt, const float* wt,
                                   int64_t np, int64_t first, int64_t last, float* w1, Glu& glu,
                                   float* acc) {
  const int64_t hi = HI > 0 ? HI : p.inner, h = H > 0 ? H : p.hidden;
  constexpr int64_t kHi = HI > 0 ? HI : kMaxInt8VsnInner, kH = H > 0 ? H : kMaxInt8VsnHidden;
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
    const int8_t* c1 = p.fc1_codes + v * hi * hi;
    for (int64_t i = 0; i < hi * hi; ++i) w1[i] = static_cast<float>(c1[i]);
    glu.load(p.glu_codes + v * hi * 2 * h, hi, 2 * h);
    const float inv1 = 1.0f / p.fc1_input_scale[v], sc1 = p.fc1_scale[v];
    const float invg = 1.0f / p.glu_input_scale[v], scg = p.glu_scale[v];
    for (int64_t n0 = first * kLanes; n0 < last * kLanes; n0 += kLanes) {
      const v16 xs = simd::load(xt + v * np + n0);
      const v16 ws = simd::load(wt + v * np + n0);
      for (int64_t k = 0; k < hi; ++k) q2[k] = lane_codes(simd::elu(xs * s2[k] + o2[k]), inv1);
      for (int64_t j = 0; j < hi; ++j) {
        v16 s{};
        for (int64_t k = 0; k < hi; ++k) s += q2[k] * w1[k * hi + j];
        q1[j] = lane_codes(s * sc1 + b1[j], invg);
      }
      // As in the FP32 kernel: the products first, then the sigmoids (independent exp/divide
      // chains for the out-of-order core), then the skip and the LayerNorm.
      glu.products(q1, hi, h, scg, bg, y, g);
      for (int64_t c = 0; c < h; ++c) g[c] = simd::sigmoid(g[c]);
      for (int64_t c = 0; c < h; ++c) y[c] = xs * ss[c] + so[c] + y[c] * g[c];
      v16 mean, rstd;
      simd::layer_norm_stats(y, h, 1e-5f, mean, rstd);
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
  FloatGlu glu{wf + 8 * 8};
  variables_body<8, 32>(p, xt, wt, np, first, last, wf, glu, acc);
}
FOXHUNT_KERNEL_CLONES
void variables_any(const VsnInt8Weights& p, const float* xt, const float* wt, int64_t np,
                   int64_t first, int64_t last, float* wf, float* acc) {
  FloatGlu glu{wf + p.inner * p.inner};
  variables_body<0, 0>(p, xt, wt, np, first, last, wf, glu, acc);
}

#if FOXHUNT_INT8_VNNI
// The GLU's products on AVX512-VNNI: vpdpbusd sums four u8 x s8 products per 32-bit lane, so
// the 8 codes of a position are two int32 lanes' worth (4x fewer instructions than the fp32
// FMAs). The activation codes (-127..127) go in biased by +128 (unsigned bytes); each output's
// accumulator starts at -128 * (sum of its weight codes), so the int32 sum is exactly q1 . w,
// the same integer the portable path sums: the two paths agree bit for bit.
constexpr int64_t kVnniInner = 8, kVnniHidden = 32;
struct VnniGlu {
  int32_t packed[kVnniInner / 4 * 2 * kVnniHidden];  // [Hi / 4, 2H]: byte k = input 4 g + k
  int32_t start[2 * kVnniHidden];                    // -128 * sum of output c's codes
  void load(const int8_t* codes, int64_t hi, int64_t h2) {
    for (int64_t c = 0; c < h2; ++c) {
      int32_t sum = 0;
      for (int64_t j = 0; j < hi; ++j) sum += codes[j * h2 + c];
      start[c] = -128 * sum;
      for (int64_t g = 0; g < hi / 4; ++g) {
        uint32_t word = 0;
        for (int64_t k = 0; k < 4; ++k)
          word |= static_cast<uint32_t>(static_cast<uint8_t>(codes[(4 * g + k) * h2 + c]))
                  << (8 * k);
        packed[g * h2 + c] = static_cast<int32_t>(word);
      }
    }
  }
  FOXHUNT_VNNI_TARGET inline void products(const v16* q1, int64_t hi, int64_t h, float scale,
                                           const float* bias, v16* y, v16* g) const {
    const int64_t h2 = 2 * h, groups = hi / 4;
    __m512i a[kVnniInner / 4];
    for (int64_t gi = 0; gi < groups; ++gi) {
      v16i word{};
      for (int64_t k = 0; k < 4; ++k)
        word |= (__builtin_convertvector(q1[4 * gi + k], v16i) + 128) << (8 * k);
      a[gi] = reinterpret_cast<__m512i>(word);
    }
    for (int64_t c = 0; c < h2; ++c) {
      __m512i s = _mm512_set1_epi32(start[c]);
      for (int64_t gi = 0; gi < groups; ++gi)
        s = _mm512_dpbusd_epi32(s, a[gi], _mm512_set1_epi32(packed[gi * h2 + c]));
      const v16 f = __builtin_convertvector(reinterpret_cast<v16i>(s), v16) * scale + bias[c];
      (c < h ? y[c] : g[c - h]) = f;
    }
  }
};

// flatten: the body, its helpers and VnniGlu::products inlined here, in this target.
FOXHUNT_VNNI_TARGET __attribute__((flatten)) void variables_8_32_vnni(const VsnInt8Weights& p,
                                                                      const float* xt,
                                                                      const float* wt, int64_t np,
                                                                      int64_t first, int64_t last,
                                                                      float* wf, float* acc) {
  VnniGlu glu;
  variables_body<8, 32>(p, xt, wt, np, first, last, wf, glu, acc);
}

bool cpu_has_vnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}
#else
bool cpu_has_vnni() {
  return false;
}
#endif

std::atomic<bool> g_vnni_enabled{true};
std::atomic<int64_t> g_vsn_calls{0}, g_lstm_calls{0};

bool use_vnni() {
  return int8_vnni_available() && g_vnni_enabled.load(std::memory_order_relaxed);
}

void variables(const VsnInt8Weights& p, const float* xt, const float* wt, int64_t np, int64_t first,
               int64_t last, float* acc) {
  // One variable's weights as floats, per thread, through LibTorch's allocator (the ledger
  // counts it): 2.3 KiB at the default widths.
  auto wf = torch::empty({p.inner * p.inner + p.inner * 2 * p.hidden}, torch::kFloat);
  float* f = wf.mutable_data_ptr<float>();
  if (p.inner == 8 && p.hidden == 32) {
#if FOXHUNT_INT8_VNNI
    if (use_vnni()) return variables_8_32_vnni(p, xt, wt, np, first, last, f, acc);
#endif
    variables_8_32(p, xt, wt, np, first, last, f, acc);
  } else {
    variables_any(p, xt, wt, np, first, last, f, acc);
  }
}

// The layout of models/lstm_kernel.cpp's recurrence, on codes: eight 16-gate accumulators at a
// time over the [H, 4H] code matrix (as floats), then the gates' elementwise step.
FOXHUNT_KERNEL_CLONES
void recurrence(const float* gx, const float* w, const float* scale, float input_scale, int64_t B,
                int64_t T, int64_t H, float* h, float* c, float* out, float* gates, float* hq) {
  const int64_t G = 4 * H;
  const int64_t G128 = G / (8 * kLanes) * (8 * kLanes), G16 = G / kLanes * kLanes;
  simd::lstm_steps(
      gx, B, T, H, h, c, out,
      gates, [&](const float* x, const float* hb, float* g) __attribute__((always_inline)) {
        codes_of(hb, hq, H, input_scale);
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
            simd::store(g + o, simd::load(x + o) + acc[v] * simd::load(scale + o));
          }
        }
        for (; o0 < G16; o0 += kLanes) {
          v16 acc{};
          for (int64_t kk = 0; kk < H; ++kk)
            acc += simd::splat(hq[kk]) * simd::load(w + kk * G + o0);
          simd::store(g + o0, simd::load(x + o0) + acc * simd::load(scale + o0));
        }
        for (; o0 < G; ++o0) {
          float acc = 0.0f;
          for (int64_t kk = 0; kk < H; ++kk) acc += hq[kk] * w[kk * G + o0];
          g[o0] = x[o0] + acc * scale[o0];
        }
      });
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
  g_vsn_calls.fetch_add(1, std::memory_order_relaxed);
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

bool int8_vnni_available() {
  static const bool has = cpu_has_vnni();
  return has;
}

bool set_int8_vnni(bool enabled) {
  return g_vnni_enabled.exchange(enabled, std::memory_order_relaxed);
}

Int8FusedCalls int8_fused_calls() {
  return {g_vsn_calls.load(std::memory_order_relaxed),
          g_lstm_calls.load(std::memory_order_relaxed)};
}

int64_t int8_lstm_scratch_floats(int64_t hidden) {
  return 4 * hidden * hidden + 4 * hidden + hidden;
}

void int8_lstm_recurrence(const float* gx, const int8_t* codes, const float* scale,
                          float input_scale, int64_t batch, int64_t steps, int64_t hidden, float* h,
                          float* c, float* out, float* scratch) {
  g_lstm_calls.fetch_add(1, std::memory_order_relaxed);
  const int64_t g = 4 * hidden;
  float* w = scratch;  // the codes as floats: integer products, summed exactly
  for (int64_t i = 0; i < hidden * g; ++i) w[i] = static_cast<float>(codes[i]);
  recurrence(gx, w, scale, input_scale, batch, steps, hidden, h, c, out, w + hidden * g,
             w + hidden * g + g);
}

}  // namespace foxhunt::quant::detail
