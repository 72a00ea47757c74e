#pragma once
/// \file simd.h
/// Portable 16-float vectors (GCC/Clang vector extensions) and the elementwise math of the
/// project's CPU kernels (models/ and quant/ include it; not an API for users). Everything is
/// always_inline so that a kernel compiled for several x86-64 levels (FOXHUNT_KERNEL_CLONES) gets
/// each helper in its own instruction set; on other targets the compiler lowers the vectors to
/// what the machine has.
#include <cmath>
#include <cstdint>
#include <cstring>

// The vectors are passed between always_inline helpers only; GCC warns that their ABI differs
// between instruction sets, which cannot matter for inlined code.
#pragma GCC diagnostic ignored "-Wpsabi"

// Per-CPU clones picked by an ifunc resolver at load time. Not under ThreadSanitizer: the
// dynamic loader runs the resolvers before TSan's runtime is up, and GCC instruments them
// (every foxhunt binary crashed at start).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define FOXHUNT_KERNEL_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FOXHUNT_KERNEL_CLONES
#endif
#define FOXHUNT_INLINE inline __attribute__((always_inline))

namespace foxhunt::simd {

constexpr int64_t kLanes = 16;
typedef float v16 __attribute__((vector_size(kLanes * sizeof(float))));
typedef int32_t v16i __attribute__((vector_size(kLanes * sizeof(int32_t))));
typedef uint32_t v16u __attribute__((vector_size(kLanes * sizeof(uint32_t))));

FOXHUNT_INLINE v16 load(const float* p) {
  v16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
FOXHUNT_INLINE void store(float* p, v16 v) {
  std::memcpy(p, &v, sizeof v);
}
FOXHUNT_INLINE v16 splat(float f) {
  return v16{} + f;
}
FOXHUNT_INLINE v16 select(v16i mask, v16 a, v16 b) {
  return mask ? a : b;
}

// exp(x) to ~2 ulp over the float range (x clamped to [-87, 88]: results stay normal): x =
// n ln2 + r with |r| <= ln2 / 2, exp(r) by its Taylor polynomial of degree 7 (truncation
// |r|^8 / 8! < 5e-9), times 2^n built in the exponent bits.
FOXHUNT_INLINE v16 exp(v16 x) {
  x = select(x < -87.0f, splat(-87.0f), x);
  x = select(x > 88.0f, splat(88.0f), x);
  const v16 t = x * 1.44269504088896341f + 0.5f;
  v16i n = __builtin_convertvector(t, v16i);   // truncates toward 0: fix up to floor
  n += (__builtin_convertvector(n, v16) > t);  // true is -1
  const v16 nf = __builtin_convertvector(n, v16);
  const v16 r = (x - nf * 0.693359375f) - nf * -2.12194440e-4f;
  v16 p = splat(1.0f / 5040.0f);
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const v16i bits = (n + 127) << 23;
  v16 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// 1 / (1 + exp(-x)).
FOXHUNT_INLINE v16 sigmoid(v16 x) {
  return 1.0f / (1.0f + exp(-x));
}

// tanh(x): 1 - 2 / (exp(2x) + 1), and its Taylor series below |x| = 0.125 where that form
// cancels (series truncation < 1e-10 there); absolute error ~1e-7.
FOXHUNT_INLINE v16 tanh(v16 x) {
  const v16 big = 1.0f - 2.0f / (exp(x + x) + 1.0f);
  const v16 x2 = x * x;
  const v16 small = x * (1.0f + x2 * (-1.0f / 3.0f + x2 * (2.0f / 15.0f + x2 * (-17.0f / 315.0f))));
  const v16 ax = select(x < 0.0f, -x, x);
  return select(ax < 0.125f, small, big);
}

// ELU with alpha 1: x > 0 ? x : expm1(x); expm1 by its Taylor series above -0.125, where
// exp(x) - 1 cancels (truncation |x|^7 / 7! < 1e-10 relative there), exp(x) - 1 below.
FOXHUNT_INLINE v16 elu(v16 x) {
  const v16 series =
      x * (1.0f + x * (0.5f + x * (1.0f / 6.0f + x * (1.0f / 24.0f +
                                                      x * (1.0f / 120.0f + x * (1.0f / 720.0f))))));
  return select(x > 0.0f, x, select(x > -0.125f, series, exp(x) - 1.0f));
}

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

// LayerNorm statistics per lane over the h vectors y[0, h): the mean and 1 / sqrt(var + eps),
// each sum in two accumulators (alternate units) so that the adds do not wait on each other.
FOXHUNT_INLINE void layer_norm_stats(const v16* y, int64_t h, float eps, v16& mean, v16& rstd) {
  const float inv_h = 1.0f / static_cast<float>(h);
  v16 sum0{}, sum1{};
  for (int64_t c = 0; c < h; ++c) (c % 2 == 0 ? sum0 : sum1) += y[c];
  mean = (sum0 + sum1) * inv_h;
  v16 var0{}, var1{};
  for (int64_t c = 0; c < h; ++c) {
    const v16 d = y[c] - mean;
    (c % 2 == 0 ? var0 : var1) += d * d;
  }
  rstd = rsqrt((var0 + var1) * inv_h + eps);
}

// The elementwise half of one LSTM step for one row: `gates` [4H] the pre-activations (i, f, g,
// o), the cell c and state h [H] updated in place, and h also written to out.
FOXHUNT_INLINE void lstm_cell(const float* gates, int64_t H, float* c, float* h, float* out) {
  const auto sigmoid1 = [](float x) { return 1.0f / (1.0f + std::exp(-x)); };
  int64_t j = 0;
  for (; j + kLanes <= H; j += kLanes) {
    const v16 i = sigmoid(load(gates + j));
    const v16 f = sigmoid(load(gates + H + j));
    const v16 g = tanh(load(gates + 2 * H + j));
    const v16 o = sigmoid(load(gates + 3 * H + j));
    const v16 cn = f * load(c + j) + i * g;
    const v16 hn = o * tanh(cn);
    store(c + j, cn);
    store(h + j, hn);
    store(out + j, hn);
  }
  for (; j < H; ++j) {
    const float cn =
        sigmoid1(gates[H + j]) * c[j] + sigmoid1(gates[j]) * std::tanh(gates[2 * H + j]);
    const float hn = sigmoid1(gates[3 * H + j]) * std::tanh(cn);
    c[j] = cn;
    h[j] = hn;
    out[j] = hn;
  }
}

/// The time loop of an LSTM layer's recurrence (the FP32 kernel of models/ and the INT8 one of
/// quant/): for each step t, and each sequence b inside it, `gate_sums(x, h, gates)` writes the
/// 4H gate pre-activations from the input gates `x` (xg[b, t], 4H) and the state `h` (H), then
/// lstm_cell advances c and h and writes out[b, t]. `xg` [B, T, 4H]; `h`, `c` [B, H]; `out`
/// [B, T, H]; `gates` 4H scratch. `gate_sums` must be always inline: the kernels are cloned per
/// ISA.
template <typename GateSums>
FOXHUNT_INLINE void lstm_steps(const float* xg, int64_t B, int64_t T, int64_t H, float* h, float* c,
                               float* out, float* gates, GateSums gate_sums) {
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < B; ++b) {
      float* hb = h + b * H;
      gate_sums(xg + (b * T + t) * 4 * H, hb, gates);
      lstm_cell(gates, H, c + b * H, hb, out + (b * T + t) * H);
    }
  }
}

// A 32-bit integer hash per lane (lowbias32: two multiply-xorshift rounds; every output bit
// depends on every input bit).
FOXHUNT_INLINE v16u hash32(v16u x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

// The sum of the 16 lanes: halves added as 8- then 4-float vectors.
FOXHUNT_INLINE float hsum(v16 v) {
  typedef float v8 __attribute__((vector_size(8 * sizeof(float))));
  typedef float v4 __attribute__((vector_size(4 * sizeof(float))));
  v8 lo, hi;
  std::memcpy(&lo, &v, sizeof lo);
  std::memcpy(&hi, reinterpret_cast<const char*>(&v) + sizeof lo, sizeof hi);
  lo += hi;
  v4 a, b;
  std::memcpy(&a, &lo, sizeof a);
  std::memcpy(&b, reinterpret_cast<const char*>(&lo) + sizeof a, sizeof b);
  a += b;
  return (a[0] + a[2]) + (a[1] + a[3]);
}

}  // namespace foxhunt::simd
