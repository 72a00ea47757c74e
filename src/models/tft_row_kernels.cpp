#include "tft_row_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "foxhunt/core/simd.h"
#include "lstm_kernel.h"

namespace foxhunt::models::kernels {

namespace {

using simd::kLanes;
using simd::v16;

// y = x W + b for one row: the outputs in blocks of 4 x 16 (four independent FMA chains per
// input), then of 16, then one by one.
FOXHUNT_INLINE void linear_row(const float* wt, const float* b, int64_t in, int64_t out,
                               const float* x, float* y) {
  int64_t c = 0;
  for (; c + 4 * kLanes <= out; c += 4 * kLanes) {
    v16 a[4];
    for (int v = 0; v < 4; ++v) a[v] = b ? simd::load(b + c + v * kLanes) : v16{};
    for (int64_t i = 0; i < in; ++i) {
      const v16 xi = simd::splat(x[i]);
      const float* w = wt + i * out + c;
      for (int v = 0; v < 4; ++v) a[v] += xi * simd::load(w + v * kLanes);
    }
    for (int v = 0; v < 4; ++v) simd::store(y + c + v * kLanes, a[v]);
  }
  for (; c + kLanes <= out; c += kLanes) {
    v16 a = b ? simd::load(b + c) : v16{};
    for (int64_t i = 0; i < in; ++i) a += simd::splat(x[i]) * simd::load(wt + i * out + c);
    simd::store(y + c, a);
  }
  for (; c < out; ++c) {
    float a = b ? b[c] : 0.0f;
    for (int64_t i = 0; i < in; ++i) a += x[i] * wt[i * out + c];
    y[c] = a;
  }
}

FOXHUNT_KERNEL_CLONES
void linear_rows(const float* wt, const float* b, int64_t in, int64_t out, const float* x,
                 int64_t ldx, int64_t n, float* y) {
  for (int64_t r = 0; r < n; ++r) linear_row(wt, b, in, out, x + r * ldx, y + r * out);
}

// y = LayerNorm(skip + v * sigmoid(g)) per row, t [n, 2h] = [v | g].
FOXHUNT_KERNEL_CLONES
void gate_add_norm(const float* t, const float* skip, int64_t ldskip, int64_t n, int64_t h,
                   const float* ln_w, const float* ln_b, float eps, float* y) {
  for (int64_t r = 0; r < n; ++r) {
    const float* v = t + r * 2 * h;
    const float* g = v + h;
    const float* s = skip + r * ldskip;
    float* yr = y + r * h;
    int64_t c = 0;
    for (; c + kLanes <= h; c += kLanes)
      simd::store(yr + c, simd::load(s + c) + simd::load(v + c) * simd::sigmoid(simd::load(g + c)));
    for (; c < h; ++c) yr[c] = s[c] + v[c] * (1.0f / (1.0f + std::exp(-g[c])));
    float mean = 0.0f;
    for (c = 0; c < h; ++c) mean += yr[c];
    mean /= static_cast<float>(h);
    float var = 0.0f;
    for (c = 0; c < h; ++c) var += (yr[c] - mean) * (yr[c] - mean);
    const float rstd = 1.0f / std::sqrt(var / static_cast<float>(h) + eps);
    for (c = 0; c < h; ++c) yr[c] = (yr[c] - mean) * rstd * ln_w[c] + ln_b[c];
  }
}

FOXHUNT_KERNEL_CLONES
void elu_in_place(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::store(x + i, simd::elu(simd::load(x + i)));
  for (; i < n; ++i) x[i] = x[i] > 0.0f ? x[i] : std::expm1(x[i]);
}

// exp(x - max) over x[0, n) in place; returns their sum.
FOXHUNT_KERNEL_CLONES
float exp_shifted(float* x, int64_t n, float max) {
  float sum = 0.0f;
  int64_t i = 0;
  v16 acc{};
  for (; i + kLanes <= n; i += kLanes) {
    const v16 e = simd::exp(simd::load(x + i) - max);
    simd::store(x + i, e);
    acc += e;
  }
  for (; i < n; ++i) sum += (x[i] = std::exp(x[i] - max));
  return sum + simd::hsum(acc);
}

}  // namespace

void rows_linear(const RowLinear& l, const float* x, int64_t ldx, int64_t n, float* y,
                 const float* bias) {
  linear_rows(l.wt, bias ? bias : l.b, l.in, l.out, x, ldx, n, y);
}

int64_t rows_gan_scratch(const RowGan& g, int64_t n) {
  return n * g.glu.out;
}

void rows_gan(const RowGan& g, const float* x, const float* skip, int64_t ldskip, int64_t n,
              float* y, float* scratch) {
  rows_linear(g.glu, x, g.glu.in, n, scratch);
  gate_add_norm(scratch, skip, ldskip, n, g.glu.out / 2, g.ln_w, g.ln_b, g.eps, y);
}

int64_t rows_grn_scratch(const RowGrn& g, int64_t n) {
  const int64_t skip = g.skip.wt ? g.skip.out : 0;
  return n * (g.fc2.out + g.fc1.out + skip) + rows_gan_scratch(g.gan, n);
}

void rows_grn(const RowGrn& g, const float* a, const float* fc2_bias, int64_t n, float* y,
              float* scratch) {
  float* eta2 = scratch;
  float* eta1 = eta2 + n * g.fc2.out;
  float* skip = eta1 + n * g.fc1.out;
  float* rest = skip + (g.skip.wt ? n * g.skip.out : 0);
  rows_linear(g.fc2, a, g.fc2.in, n, eta2, fc2_bias);
  elu_in_place(eta2, n * g.fc2.out);
  rows_linear(g.fc1, eta2, g.fc2.out, n, eta1);
  const float* s = a;
  int64_t lds = g.fc2.in;
  if (g.skip.wt) {
    rows_linear(g.skip, a, g.fc2.in, n, skip);
    s = skip;
    lds = g.skip.out;
  }
  rows_gan(g.gan, eta1, s, lds, n, y, rest);
}

int64_t rows_lstm_scratch(const RowLstm& m, int64_t steps) {
  return steps * 4 * m.hidden + 2 * steps * m.hidden + 4 * m.hidden;
}

void rows_lstm(const RowLstm& m, const float* x, int64_t ldx, int64_t steps, float* h, float* c,
               float* out, float* scratch) {
  const int64_t H = m.hidden, layers = static_cast<int64_t>(m.ih.size());
  float* xg = scratch;
  float* tmp[2] = {xg + steps * 4 * H, xg + steps * 5 * H};
  float* gates = xg + steps * 6 * H;
  const float* in = x;
  int64_t ld = ldx;
  for (int64_t l = 0; l < layers; ++l) {
    rows_linear(m.ih[l], in, ld, steps, xg);
    float* dst = l + 1 == layers ? out : tmp[l % 2];
    lstm_recurrence_transposed(xg, m.hh_t[l], 1, steps, H, h + l * H, c + l * H, dst, gates);
    in = dst;
    ld = H;
  }
}

void rows_attention(const float* q, const float* k, const float* v, int64_t queries, int64_t keys,
                    int64_t heads, int64_t dk, int64_t dv, float* out, float* scratch) {
  float* wsum = scratch;   // [keys] the head-summed weights
  float* e = wsum + keys;  // [keys] one head's scores, then weights
  const int64_t d = heads * dk;
  for (int64_t j = 0; j < queries; ++j) {
    const int64_t visible = keys - queries + j + 1;
    std::fill(wsum, wsum + visible, 0.0f);
    for (int64_t hd = 0; hd < heads; ++hd) {
      const float* qh = q + j * d + hd * dk;
      float max = -std::numeric_limits<float>::infinity();
      for (int64_t l = 0; l < visible; ++l) {
        const float* kh = k + l * d + hd * dk;
        float s = 0.0f;
        for (int64_t i = 0; i < dk; ++i) s += qh[i] * kh[i];
        e[l] = s;
        max = std::max(max, s);
      }
      const float inv = 1.0f / exp_shifted(e, visible, max);
      for (int64_t l = 0; l < visible; ++l) wsum[l] += e[l] * inv;
    }
    float* o = out + j * dv;
    std::fill(o, o + dv, 0.0f);
    for (int64_t l = 0; l < visible; ++l)
      for (int64_t i = 0; i < dv; ++i) o[i] += wsum[l] * v[l * dv + i];
  }
}

}  // namespace foxhunt::models::kernels
