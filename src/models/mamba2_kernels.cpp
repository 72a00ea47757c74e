#include "mamba2_kernels.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>

#include "foxhunt/core/simd.h"

namespace foxhunt::models::kernels {

namespace {

using simd::kLanes;
using simd::v16;

// x <- x * sigmoid(x) over n floats.
FOXHUNT_INLINE void silu_inplace(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const v16 v = simd::load(x + i);
    simd::store(x + i, v * simd::sigmoid(v));
  }
  for (; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

// out <- x * sigmoid(x) over n floats.
FOXHUNT_INLINE void silu_to(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const v16 v = simd::load(x + i);
    simd::store(out + i, v * simd::sigmoid(v));
  }
  for (; i < n; ++i) out[i] = x[i] / (1.0f + std::exp(-x[i]));
}

// x <- exp(x) over n floats, n a multiple of the lane count.
FOXHUNT_INLINE void exp_inplace(float* x, int64_t n) {
  for (int64_t i = 0; i < n; i += kLanes) simd::store(x + i, simd::exp(simd::load(x + i)));
}

FOXHUNT_INLINE float sum_squares(const float* x, int64_t n) {
  v16 acc{};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const v16 v = simd::load(x + i);
    acc += v * v;
  }
  float s = simd::hsum(acc);
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

// Softplus as LibTorch computes it (beta 1, threshold 20).
FOXHUNT_INLINE float softplus(float v) {
  return v > 20.0f ? v : std::log1p(std::exp(v));
}

int64_t round_up(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

// One sequence of the mixer core (rows `R` floats apart); `scratch` holds at least
// `scratch_floats(w, len)` floats. `last_only`: the output of the last position only.
FOXHUNT_KERNEL_CLONES
void mixer_core_one(const Mamba2CoreWeights& w, const float* in, int64_t R, int64_t len,
                    bool last_only, float* out, float* scratch) {
  const int64_t di = w.d_inner, H = w.nheads, P = w.headdim, G = w.ngroups, N = w.d_state;
  const int64_t K = w.d_conv, C = di + 2 * G * N;
  const int64_t L = len, Lp = round_up(L, kLanes), heads_per_group = H / G;
  const int64_t first = last_only ? L - 1 : 0;  // the first output row

  float* taps = scratch;         // [K, C]
  float* xbc = taps + K * C;     // [L, C]
  float* delta = xbc + L * C;    // [H, L]
  float* a = delta + H * L;      // [H, L] log-decays A delta
  float* Bt = a + H * L;         // [N, Lp] one group's B, transposed
  float* CB = Bt + N * Lp;       // [L, Lp] one group's C_l . B_s
  float* E = CB + L * Lp;        // [Lp + 4, Lp] one head's weights (zero rows past L)
  float* y = E + (Lp + 4) * Lp;  // [L, di]
  float* gate = y + L * di;      // [di]

  for (int64_t c = 0; c < C; ++c)
    for (int64_t k = 0; k < K; ++k) taps[k * C + c] = w.conv_weight[c * K + k];

  // Causal depthwise convolution (zeros before the first row), bias first, then SiLU.
  for (int64_t t = 0; t < L; ++t) {
    float* dst = xbc + t * C;
    std::copy(w.conv_bias, w.conv_bias + C, dst);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t src = t - (K - 1) + k;
      if (src < 0) continue;
      const float* row = in + src * R + di;
      const float* tap = taps + k * C;
      for (int64_t c = 0; c < C; ++c) dst[c] += row[c] * tap[c];
    }
    silu_inplace(dst, C);
  }

  for (int64_t h = 0; h < H; ++h) {
    const float rate = -std::exp(w.A_log[h]);
    for (int64_t t = 0; t < L; ++t) {
      const float d = softplus(in[t * R + di + C + h] + w.dt_bias[h]);
      delta[h * L + t] = d;
      a[h * L + t] = rate * d;
    }
  }

  for (int64_t g = 0; g < G; ++g) {
    // CB[l, s] = C_l . B_s for s <= l: 16 columns at a time in a register, summed over n.
    for (int64_t s = 0; s < Lp; ++s)
      for (int64_t n = 0; n < N; ++n) Bt[n * Lp + s] = s < L ? xbc[s * C + di + g * N + n] : 0.0f;
    for (int64_t l = first; l < L; ++l) {
      const float* Cl = xbc + l * C + di + G * N + g * N;
      for (int64_t s0 = 0; s0 <= l; s0 += kLanes) {
        v16 acc{};
        for (int64_t n = 0; n < N; ++n) acc += simd::splat(Cl[n]) * simd::load(Bt + n * Lp + s0);
        simd::store(CB + l * Lp + s0, acc);
      }
    }
    for (int64_t hh = 0; hh < heads_per_group; ++hh) {
      const int64_t h = g * heads_per_group + hh;
      const float* ah = a + h * L;
      const float* dh = delta + h * L;
      // Segment sums sum_{k=s+1..l} a_k: row l is row l-1 plus a_l, so every entry adds its
      // terms in increasing k (the order of segsum's cumsum), never a difference of two prefix
      // sums. Then exp, times C_l . B_s and delta_s; 0 above the diagonal and in the pad rows.
      if (last_only) {  // the last row alone: suffix sums, accumulated from the diagonal down
        float* row = E + (L - 1) * Lp;
        std::fill(row, row + Lp, 0.0f);
        float run = 0.0f;
        for (int64_t s = L - 2; s >= 0; --s) row[s] = run += ah[s + 1];
        exp_inplace(row, Lp);
      } else {
        std::fill(E, E + Lp, 0.0f);
        for (int64_t l = 1; l < L; ++l) {
          const float al = ah[l];
          const float* prev = E + (l - 1) * Lp;
          float* row = E + l * Lp;
          for (int64_t s = 0; s < l; ++s) row[s] = prev[s] + al;
          std::fill(row + l, row + Lp, 0.0f);
        }
        exp_inplace(E, L * Lp);
      }
      for (int64_t l = first; l < L; ++l) {
        float* e = E + l * Lp;
        const float* cb = CB + l * Lp;
        for (int64_t s = 0; s <= l; ++s) e[s] *= cb[s] * dh[s];
        std::fill(e + l + 1, e + Lp, 0.0f);
      }
      std::fill(E + L * Lp, E + (Lp + 4) * Lp, 0.0f);
      // y[l] = sum_{s <= l} E[l, s] x_s + D x_l, four rows at a time so that four independent
      // accumulators hide the FMA latency; the x rows are read once per block.
      const float Dh = w.D[h];
      const int64_t P16 = P / kLanes * kLanes;
      for (int64_t l0 = first; l0 < L; l0 += 4) {
        const int64_t rows = std::min<int64_t>(4, L - l0), send = l0 + rows;
        const float* e0 = E + l0 * Lp;
        for (int64_t p0 = 0; p0 < P16; p0 += kLanes) {
          v16 acc0{}, acc1{}, acc2{}, acc3{};
          for (int64_t s = 0; s < send; ++s) {
            const v16 xs = simd::load(xbc + s * C + h * P + p0);
            acc0 += simd::splat(e0[s]) * xs;
            acc1 += simd::splat(e0[Lp + s]) * xs;
            acc2 += simd::splat(e0[2 * Lp + s]) * xs;
            acc3 += simd::splat(e0[3 * Lp + s]) * xs;
          }
          const v16 accs[4] = {acc0, acc1, acc2, acc3};
          for (int64_t i = 0; i < rows; ++i) {
            const float* xl = xbc + (l0 + i) * C + h * P + p0;
            simd::store(y + (l0 + i) * di + h * P + p0, accs[i] + simd::load(xl) * Dh);
          }
        }
        for (int64_t i = 0; i < rows; ++i) {  // headdim not a multiple of 16: the tail
          const int64_t l = l0 + i;
          for (int64_t p = P16; p < P; ++p) {
            float acc = 0.0f;
            for (int64_t s = 0; s <= l; ++s) acc += E[l * Lp + s] * xbc[s * C + h * P + p];
            y[l * di + h * P + p] = acc + xbc[l * C + h * P + p] * Dh;
          }
        }
      }
    }
  }

  // Gate with SiLU(z), then RMS-normalise per group of d_inner / ngroups channels.
  const int64_t gs = di / G;
  for (int64_t t = first; t < L; ++t) {
    silu_to(in + t * R, di, gate);
    float* yt = y + t * di;
    float* ot = out + (t - first) * di;
    for (int64_t c = 0; c < di; ++c) yt[c] *= gate[c];
    for (int64_t j = 0; j < G; ++j) {
      const float* src = yt + j * gs;
      const float r =
          w.norm_scale / std::sqrt(sum_squares(src, gs) / static_cast<float>(gs) + w.norm_eps);
      if (w.norm_weight == nullptr)
        for (int64_t c = 0; c < gs; ++c) ot[j * gs + c] = src[c] * r;
      else
        for (int64_t c = 0; c < gs; ++c) ot[j * gs + c] = src[c] * r * w.norm_weight[j * gs + c];
    }
  }
}

int64_t scratch_floats(const Mamba2CoreWeights& w, int64_t len) {
  const int64_t di = w.d_inner, H = w.nheads, G = w.ngroups, N = w.d_state;
  const int64_t C = di + 2 * G * N, Lp = round_up(len, kLanes);
  return w.d_conv * C + len * C + 2 * H * len + N * Lp + len * Lp + (Lp + 4) * Lp + len * di + di;
}

FOXHUNT_KERNEL_CLONES
void rms_rows(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
              float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* o = out + r * dim;
    const float s = 1.0f / std::sqrt(sum_squares(xr, dim) / static_cast<float>(dim) + eps);
    for (int64_t c = 0; c < dim; ++c) o[c] = xr[c] * s * weight[c];
  }
}

}  // namespace

void mamba2_mixer_core(const Mamba2CoreWeights& w, const float* zxbcdt, int64_t batch, int64_t len,
                       float* out, int64_t row_stride, bool last_only) {
  const int64_t width = 2 * w.d_inner + 2 * w.ngroups * w.d_state + w.nheads;
  const int64_t R = row_stride > 0 ? row_stride : width;
  const int64_t out_rows = last_only ? 1 : len;
  const int64_t need = scratch_floats(w, len);
  at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
    // Through LibTorch's allocator, so that the memory ledger sees the scratch.
    auto scratch = torch::empty({need}, torch::kFloat);
    for (int64_t b = begin; b < end; ++b)
      mixer_core_one(w, zxbcdt + b * len * R, R, len, last_only, out + b * out_rows * w.d_inner,
                     scratch.data_ptr<float>());
  });
}

void rms_norm_rows(const float* x, const float* weight, int64_t rows, int64_t dim, float eps,
                   float* out) {
  rms_rows(x, weight, rows, dim, eps, out);
}

}  // namespace foxhunt::models::kernels
