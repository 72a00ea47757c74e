#pragma once
// The core of the BF16 variable-selection kernel (tft_bf16_kernels.h; private to models/): one
// variable's GRN on 16 positions at a time with its products on AVX512-BF16 (vdpbf16ps, FP32
// accumulation) and its elementwise work at BF16 accuracy. Torch-free (the scratch benchmarks
// compile it alone); every function is compiled for AVX512-BF16 and must only run where the CPU
// has it (models::cpu_has_bf16).
#include <cstdint>
#include <cstring>

#include "tft_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define FOXHUNT_BF16_KERNEL 1  // the lane loop below exists
#define FOXHUNT_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512bf16")))
#define FOXHUNT_BF16_INLINE FOXHUNT_BF16_TARGET inline __attribute__((always_inline))
#endif

namespace foxhunt::models::kernels {

/// The per-variable GRN weights of a VSN after the embedding fold, for the BF16 kernel: the FP32
/// kernel's widths and elementwise vectors (VsnGrnWeights; its fc1_weight and glu_weight stay
/// null), and the products' weights as BF16 pairs over consecutive inputs (one 32-bit word holds
/// (w[2p][j], w[2p+1][j]), the first in the low half, as vdpbf16ps pairs them; an odd last input
/// pairs with 0). V variables, Hi inner width (Hp = (Hi + 1) / 2 pairs), H output width.
struct Bf16VsnWeights : VsnGrnWeights {
  const uint32_t* fc1_pairs = nullptr;  ///< [V, Hp, Hi] (pairs over fc1's input)
  const uint32_t* glu_pairs = nullptr;  ///< [V, Hp, 2H]: value half, then gate half
};

/// `f` rounded to the nearest BF16 (ties to even), as its 16 bits; NaN stays NaN.
inline uint16_t bf16_bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
/// The float a BF16 value's bits stand for.
inline float bf16_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f = 0.0f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
/// One pair word: (lo, hi) rounded to BF16, lo in the low half.
inline uint32_t bf16_pair(float lo, float hi) {
  return static_cast<uint32_t>(bf16_bits(lo)) | (static_cast<uint32_t>(bf16_bits(hi)) << 16);
}

#if defined(FOXHUNT_BF16_KERNEL)
namespace bf16_lanes {

constexpr int64_t kLanes = 16;
// Every lane. The zero-masked forms of the intrinsics below compile to the plain instructions;
// the plain forms start from _mm512_undefined_ps(), which GCC 12 reports as maybe-uninitialized
// once inlined at -O3 (-Werror).
constexpr __mmask16 kAll = 0xffff;
constexpr int64_t kMaxInner = 64, kMaxHidden = 256;

// 2^t for t in float range: t = n + f, |f| <= 1/2, 2^f by a polynomial with p(0) = 1 (so 2^0 is
// exact), 2^n by vscalefps (which also gives 0 and inf outside the float range: no clamps).
// Degree 3: relative error 1.1e-4; degree 4: 3.1e-6 (least squares on Chebyshev nodes, measured
// over [-1/2, 1/2]). BF16 itself keeps 2^-9 = 2e-3.
template <int Degree>
FOXHUNT_BF16_INLINE __m512 exp2(__m512 t) {
  const __m512 n =
      _mm512_maskz_roundscale_ps(kAll, t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 q;
  if constexpr (Degree == 3) {
    q = _mm512_fmadd_ps(_mm512_set1_ps(0.05459282547235489f), f,
                        _mm512_set1_ps(0.24221783876419067f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0.6933686137199402f));
  } else {
    static_assert(Degree == 4, "exp2: degree 3 or 4");
    q = _mm512_fmadd_ps(_mm512_set1_ps(0.00960039533674717f), f,
                        _mm512_set1_ps(0.05591689422726631f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0.24023719131946564f));
    q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(0.6931219696998596f));
  }
  q = _mm512_fmadd_ps(q, f, _mm512_set1_ps(1.0f));
  return _mm512_maskz_scalef_ps(kAll, q, n);
}

constexpr float kLog2e = 1.44269504088896341f;

// 1 / (1 + exp(-x)) to ~3e-5 absolute: the degree-3 exp and vrcp14ps (relative 2^-14) instead of
// a divide (the divides were ~28% of the FP32 kernel).
FOXHUNT_BF16_INLINE __m512 sigmoid(__m512 x) {
  const __m512 e = exp2<3>(_mm512_mul_ps(x, _mm512_set1_ps(-kLog2e)));
  return _mm512_maskz_rcp14_ps(kAll, _mm512_add_ps(e, _mm512_set1_ps(1.0f)));
}

// ELU (alpha 1) to ~3e-6 absolute: max(z, exp(min(z, 0)) - 1), which is z above 0 and expm1(z)
// below (exp(z) - 1 >= z everywhere).
FOXHUNT_BF16_INLINE __m512 elu(__m512 z) {
  const __m512 m = _mm512_maskz_min_ps(kAll, z, _mm512_setzero_ps());
  const __m512 e = exp2<4>(_mm512_mul_ps(m, _mm512_set1_ps(kLog2e)));
  return _mm512_maskz_max_ps(kAll, z, _mm512_sub_ps(e, _mm512_set1_ps(1.0f)));
}

// The 16 lanes of `lo` and `hi` rounded to BF16 (ties to even) and interleaved per lane: lane i
// holds (lo[i], hi[i]), the operand vdpbf16ps pairs with a weight pair word.
FOXHUNT_BF16_INLINE __m512bh pack(__m512 lo, __m512 hi) {
  // cvtne2ps gives [lo 0..15 | hi 0..15] as words; word 2i takes lo[i], word 2i + 1 hi[i].
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8,
                                       23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i words = reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo));
  return reinterpret_cast<__m512bh>(_mm512_maskz_permutexvar_epi16(~__mmask32{0}, idx, words));
}

// acc + the pair products of `x` (lane pairs) with the weight pair word `w` in every lane.
FOXHUNT_BF16_INLINE __m512 dot(__m512 acc, __m512bh x, uint32_t w) {
  return _mm512_dpbf16_ps(acc, x,
                          reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int32_t>(w))));
}

// Every variable over the lane blocks [first, last) of positions: xt, wt [V, np] (positions
// contiguous), acc [H, np] accumulated in place (sum over v of w_v GRN_v). HI and H > 0 fix the
// widths at compile time (the default TFT's 8 and 32); 0 takes them from `p`.
template <int64_t HI, int64_t H>
FOXHUNT_BF16_INLINE void variables(const Bf16VsnWeights& p, const float* xt, const float* wt,
                                   int64_t np, int64_t first, int64_t last, float* acc) {
  const int64_t hi = HI > 0 ? HI : p.inner, h = H > 0 ? H : p.hidden;
  const int64_t hp = (hi + 1) / 2;
  constexpr int64_t kHi = HI > 0 ? HI : kMaxInner, kH = H > 0 ? H : kMaxHidden;
  constexpr int64_t kHp = (kHi + 1) / 2;
  const float inv_h = 1.0f / static_cast<float>(h);
  __m512 e[kHp * 2 + 1], y[kH], g[kH];
  __m512bh pairs[kHp];
  for (int64_t v = 0; v < p.variables; ++v) {
    const float* s2 = p.fc2_slope + v * hi;
    const float* o2 = p.fc2_offset + v * hi;
    const uint32_t* w1 = p.fc1_pairs + v * hp * hi;
    const float* b1 = p.fc1_bias + v * hi;
    const uint32_t* wg = p.glu_pairs + v * hp * 2 * h;
    const float* bg = p.glu_bias + v * 2 * h;
    const float* ss = p.skip_slope + v * h;
    const float* so = p.skip_offset + v * h;
    const float* nw = p.norm_weight + v * h;
    const float* nb = p.norm_bias + v * h;
    for (int64_t n0 = first * kLanes; n0 < last * kLanes; n0 += kLanes) {
      const __m512 xs = _mm512_loadu_ps(xt + v * np + n0);
      const __m512 ws = _mm512_loadu_ps(wt + v * np + n0);
      // eta2 = ELU(x s2 + o2), packed in pairs (an odd last unit pairs with 0).
      e[hi] = _mm512_setzero_ps();
      for (int64_t k = 0; k < hi; ++k)
        e[k] = elu(_mm512_fmadd_ps(xs, _mm512_set1_ps(s2[k]), _mm512_set1_ps(o2[k])));
      for (int64_t q = 0; q < hp; ++q) pairs[q] = pack(e[2 * q], e[2 * q + 1]);
      // eta1 = b1 + eta2 W1.
      for (int64_t j = 0; j < hi; ++j) {
        __m512 s = _mm512_set1_ps(b1[j]);
        for (int64_t q = 0; q < hp; ++q) s = dot(s, pairs[q], w1[q * hi + j]);
        e[j] = s;
      }
      for (int64_t q = 0; q < hp; ++q) pairs[q] = pack(e[2 * q], e[2 * q + 1]);
      // The GLU's value and gate halves, then the sigmoids, then the skip: h independent chains
      // per pass for the out-of-order core.
      for (int64_t c = 0; c < h; ++c) {
        __m512 a = _mm512_set1_ps(bg[c]), gate = _mm512_set1_ps(bg[h + c]);
        for (int64_t q = 0; q < hp; ++q) {
          a = dot(a, pairs[q], wg[q * 2 * h + c]);
          gate = dot(gate, pairs[q], wg[q * 2 * h + h + c]);
        }
        y[c] = a;
        g[c] = gate;
      }
      for (int64_t c = 0; c < h; ++c) g[c] = sigmoid(g[c]);
      __m512 sum0 = _mm512_setzero_ps(), sum1 = _mm512_setzero_ps();
      for (int64_t c = 0; c < h; ++c) {
        y[c] = _mm512_fmadd_ps(y[c], g[c],
                               _mm512_fmadd_ps(xs, _mm512_set1_ps(ss[c]), _mm512_set1_ps(so[c])));
        if (c % 2 == 0)
          sum0 = _mm512_add_ps(sum0, y[c]);
        else
          sum1 = _mm512_add_ps(sum1, y[c]);
      }
      // LayerNorm: two-pass variance, vrsqrt14ps (relative 2^-14).
      const __m512 mean = _mm512_mul_ps(_mm512_add_ps(sum0, sum1), _mm512_set1_ps(inv_h));
      __m512 var0 = _mm512_setzero_ps(), var1 = _mm512_setzero_ps();
      for (int64_t c = 0; c < h; ++c) {
        y[c] = _mm512_sub_ps(y[c], mean);
        if (c % 2 == 0)
          var0 = _mm512_fmadd_ps(y[c], y[c], var0);
        else
          var1 = _mm512_fmadd_ps(y[c], y[c], var1);
      }
      const __m512 rstd = _mm512_maskz_rsqrt14_ps(
          kAll, _mm512_fmadd_ps(_mm512_add_ps(var0, var1), _mm512_set1_ps(inv_h),
                                _mm512_set1_ps(p.norm_eps)));
      // acc += w (yhat nw + nb) = (w rstd nw) (y - mean) + w nb.
      const __m512 wr = _mm512_mul_ps(ws, rstd);
      for (int64_t c = 0; c < h; ++c) {
        float* dst = acc + c * np + n0;
        const __m512 base = _mm512_fmadd_ps(ws, _mm512_set1_ps(nb[c]), _mm512_loadu_ps(dst));
        _mm512_storeu_ps(dst,
                         _mm512_fmadd_ps(_mm512_mul_ps(wr, _mm512_set1_ps(nw[c])), y[c], base));
      }
    }
  }
}

}  // namespace bf16_lanes
#endif
}  // namespace foxhunt::models::kernels
