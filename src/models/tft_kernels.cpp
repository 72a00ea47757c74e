#include "tft_kernels.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "foxhunt/core/simd.h"

namespace foxhunt::models::kernels {

namespace {

using simd::kLanes;
using simd::v16;
using simd::v16i;
using simd::v16u;

// Dropout of eta1: per lane, the keep factor (0 or 1 / (1 - p)) of unit j of variable v for the
// 16 positions n0.. (VsnDropout: a hash of the coordinates, recomputed by the backward pass).
struct DropoutMask {
  DropoutMask(VsnDropout d, int64_t hi, int64_t np)
      : hi(hi), np(np), seed(d.seed), scale(1.0f / (1.0f - d.p)) {
    const double t = static_cast<double>(d.p) * 4294967296.0;
    threshold = t >= 4294967295.0 ? 0xffffffffu : static_cast<uint32_t>(t);
    for (int64_t l = 0; l < kLanes; ++l) lane_offset[l] = static_cast<uint32_t>(l * hi);
  }
  // Keep factors of units 0..hi-1 of variable v, positions n0..n0+15.
  FOXHUNT_INLINE void factors(int64_t v, int64_t n0, v16* out) const {
    const auto base = static_cast<uint32_t>((v * np + n0) * hi);
    for (int64_t j = 0; j < hi; ++j) {
      const v16u idx = lane_offset + (base + static_cast<uint32_t>(j));
      const v16u r = simd::hash32(simd::hash32(idx) ^ seed);
      out[j] = simd::select(r >= threshold, simd::splat(scale), v16{});
    }
  }
  int64_t hi, np;
  uint32_t seed, threshold = 0;
  float scale;
  v16u lane_offset;
};

// One variable's GRN for the 16 positions in lanes: eta2, eta1 (dropped out when `mask`), the
// GLU's value a and gate sigmoid sg, the normalised yhat; returns rstd.
struct GrnLanes {
  v16 e2[kMaxVsnInner], e1[kMaxVsnInner], keep[kMaxVsnInner];
  v16 a[kMaxVsnHidden], sg[kMaxVsnHidden], yhat[kMaxVsnHidden];
  v16 rstd;
};

struct VariableWeights {
  VariableWeights(const VsnGrnWeights& p, int64_t v)
      : s2(p.fc2_slope + v * p.inner),
        o2(p.fc2_offset + v * p.inner),
        w1(p.fc1_weight + v * p.inner * p.inner),
        b1(p.fc1_bias + v * p.inner),
        wg(p.glu_weight + v * p.inner * 2 * p.hidden),
        bg(p.glu_bias + v * 2 * p.hidden),
        ss(p.skip_slope + v * p.hidden),
        so(p.skip_offset + v * p.hidden),
        nw(p.norm_weight + v * p.hidden),
        nb(p.norm_bias + v * p.hidden) {}
  const float *s2, *o2, *w1, *b1, *wg, *bg, *ss, *so, *nw, *nb;
};

// The GRN of one variable on 16 positions (xs) as the backward pass needs it (the forward kernel
// computes the same numbers in the same order); `keep` null = no dropout. Fills g.e2, g.e1
// (after dropout), g.a, g.sg, g.yhat, g.rstd.
FOXHUNT_INLINE void grn_lanes(const VariableWeights& w, int64_t hi, int64_t h, float eps, v16 xs,
                              const v16* keep, GrnLanes& g) {
  for (int64_t k = 0; k < hi; ++k) g.e2[k] = simd::elu(xs * w.s2[k] + w.o2[k]);
  for (int64_t j = 0; j < hi; ++j) {
    v16 s = simd::splat(w.b1[j]);
    for (int64_t k = 0; k < hi; ++k) s += g.e2[k] * w.w1[k * hi + j];
    g.e1[j] = keep ? s * keep[j] : s;
  }
  v16 sum{};
  for (int64_t c = 0; c < h; ++c) {
    v16 a = simd::splat(w.bg[c]), gate = simd::splat(w.bg[h + c]);
    for (int64_t j = 0; j < hi; ++j) {
      a += g.e1[j] * w.wg[j * 2 * h + c];
      gate += g.e1[j] * w.wg[j * 2 * h + h + c];
    }
    const v16 sg = simd::sigmoid(gate);
    g.a[c] = a;
    g.sg[c] = sg;
    g.yhat[c] = xs * w.ss[c] + w.so[c] + a * sg;  // y, normalised below
    sum += g.yhat[c];
  }
  const v16 mean = sum * (1.0f / static_cast<float>(h));
  v16 var{};
  for (int64_t c = 0; c < h; ++c) {
    const v16 d = g.yhat[c] - mean;
    g.yhat[c] = d;
    var += d * d;
  }
  g.rstd = simd::rsqrt(var * (1.0f / static_cast<float>(h)) + eps);
  for (int64_t c = 0; c < h; ++c) g.yhat[c] *= g.rstd;
}

// Every variable over the lane blocks [first, last) of positions; xt, wt [V, np] (positions
// contiguous), acc [H, np] accumulated in place. Threads given disjoint block ranges write
// disjoint columns of acc. HI and H > 0 fix the inner and hidden widths at compile time (then
// eta1 and eta2 stay in registers and the small loops unroll); 0 takes them from `p`.
template <int64_t HI, int64_t H>
FOXHUNT_INLINE void vsn_variables_body(const VsnGrnWeights& p, const DropoutMask* mask,
                                       const float* xt, const float* wt, int64_t np, int64_t first,
                                       int64_t last, float* acc) {
  // The forward keeps only what it needs per lane (no GLU parts for a backward), and normalises in
  // the accumulating store.
  const int64_t hi = HI > 0 ? HI : p.inner, h = H > 0 ? H : p.hidden;
  constexpr int64_t kHi = HI > 0 ? HI : kMaxVsnInner, kH = H > 0 ? H : kMaxVsnHidden;
  v16 e2[kHi], e1[kHi], keep[kHi], y[kH], g[kH];
  for (int64_t v = 0; v < p.variables; ++v) {
    const VariableWeights w(p, v);
    for (int64_t n0 = first * kLanes; n0 < last * kLanes; n0 += kLanes) {
      const v16 xs = simd::load(xt + v * np + n0);
      const v16 ws = simd::load(wt + v * np + n0);
      if (mask) mask->factors(v, n0, keep);
      for (int64_t k = 0; k < hi; ++k) e2[k] = simd::elu(xs * w.s2[k] + w.o2[k]);
      for (int64_t j = 0; j < hi; ++j) {
        v16 s = simd::splat(w.b1[j]);
        for (int64_t k = 0; k < hi; ++k) s += e2[k] * w.w1[k * hi + j];
        e1[j] = mask ? s * keep[j] : s;
      }
      // Three passes over the units (GLU products, then the sigmoids, then the skip) give the
      // out-of-order core h independent exp/divide chains at a time; one fused pass left each
      // unit's chain (8 FMAs, exp, divide) to run nearly serially. Sums use two accumulators.
      for (int64_t c = 0; c < h; ++c) {
        v16 a = simd::splat(w.bg[c]), gate = simd::splat(w.bg[h + c]);
        for (int64_t j = 0; j < hi; ++j) {
          a += e1[j] * w.wg[j * 2 * h + c];
          gate += e1[j] * w.wg[j * 2 * h + h + c];
        }
        y[c] = a;
        g[c] = gate;
      }
      for (int64_t c = 0; c < h; ++c) g[c] = simd::sigmoid(g[c]);
      for (int64_t c = 0; c < h; ++c) y[c] = xs * w.ss[c] + w.so[c] + y[c] * g[c];
      v16 mean, rstd;
      simd::layer_norm_stats(y, h, p.norm_eps, mean, rstd);
      for (int64_t c = 0; c < h; ++c) {
        float* dst = acc + c * np + n0;
        simd::store(dst, simd::load(dst) + ws * ((y[c] - mean) * rstd * w.nw[c] + w.nb[c]));
      }
    }
  }
}

// The default TFT's widths (embedding 8, hidden 32), then any.
FOXHUNT_KERNEL_CLONES
void vsn_variables_8_32(const VsnGrnWeights& p, const DropoutMask* mask, const float* xt,
                        const float* wt, int64_t np, int64_t first, int64_t last, float* acc) {
  vsn_variables_body<8, 32>(p, mask, xt, wt, np, first, last, acc);
}
FOXHUNT_KERNEL_CLONES
void vsn_variables_any(const VsnGrnWeights& p, const DropoutMask* mask, const float* xt,
                       const float* wt, int64_t np, int64_t first, int64_t last, float* acc) {
  vsn_variables_body<0, 0>(p, mask, xt, wt, np, first, last, acc);
}
void vsn_variables(const VsnGrnWeights& p, const DropoutMask* mask, const float* xt,
                   const float* wt, int64_t np, int64_t first, int64_t last, float* acc) {
  if (p.inner == 8 && p.hidden == 32)
    vsn_variables_8_32(p, mask, xt, wt, np, first, last, acc);
  else
    vsn_variables_any(p, mask, xt, wt, np, first, last, acc);
}

template <int64_t HI, int64_t HB, int64_t NV>
FOXHUNT_INLINE void vsn_row_variables(const VsnGrnWeights& p, const float* x, const float* w,
                                      int64_t v0, float* terms) {
  // NV variables in lockstep: each one's chain (ELU, fc1, GLU, sigmoid, two sums across the lanes,
  // the square root) is latency-bound, and NV independent chains keep the core busy. Each
  // variable's arithmetic is the same whatever NV.
  const int64_t hi = HI > 0 ? HI : p.inner, hb = HB > 0 ? HB : p.hidden / kLanes;
  const int64_t h = hb * kLanes;
  constexpr int64_t kHi = HI > 0 ? HI : kMaxVsnInner;
  constexpr int64_t kHb = HB > 0 ? HB : kMaxVsnHidden / kLanes;
  constexpr int64_t kHiPad = (kHi + kLanes - 1) / kLanes * kLanes;
  float e2[NV][kHiPad] = {};  // eta2, whole vectors for the ELU (the padding stays 0)
  float e1[NV][kHi];
  v16 a[NV][kHb], g[NV][kHb];
  float mean[NV], rstd[NV];
  const float inv_h = 1.0f / static_cast<float>(h);
  for (int64_t u = 0; u < NV; ++u) {
    const VariableWeights vw(p, v0 + u);
    const float xs = x[v0 + u];
    for (int64_t k = 0; k < hi; ++k) e2[u][k] = xs * vw.s2[k] + vw.o2[k];
  }
  for (int64_t u = 0; u < NV; ++u)
    for (int64_t k = 0; k < hi; k += kLanes)
      simd::store(e2[u] + k, simd::elu(simd::load(e2[u] + k)));
  for (int64_t u = 0; u < NV; ++u) {
    const VariableWeights vw(p, v0 + u);
    for (int64_t j = 0; j < hi; ++j) e1[u][j] = vw.b1[j];
    for (int64_t k = 0; k < hi; ++k)
      for (int64_t j = 0; j < hi; ++j) e1[u][j] += e2[u][k] * vw.w1[k * hi + j];
  }
  for (int64_t u = 0; u < NV; ++u) {
    const VariableWeights vw(p, v0 + u);
    for (int64_t b = 0; b < hb; ++b) {
      a[u][b] = simd::load(vw.bg + b * kLanes);
      g[u][b] = simd::load(vw.bg + h + b * kLanes);
    }
    for (int64_t j = 0; j < hi; ++j) {
      const float* row = vw.wg + j * 2 * h;
      for (int64_t b = 0; b < hb; ++b) {
        a[u][b] += e1[u][j] * simd::load(row + b * kLanes);
        g[u][b] += e1[u][j] * simd::load(row + h + b * kLanes);
      }
    }
  }
  for (int64_t u = 0; u < NV; ++u) {
    const VariableWeights vw(p, v0 + u);
    const float xs = x[v0 + u];
    v16 sum{};
    for (int64_t b = 0; b < hb; ++b) {
      a[u][b] = xs * simd::load(vw.ss + b * kLanes) + simd::load(vw.so + b * kLanes) +
                a[u][b] * simd::sigmoid(g[u][b]);
      sum += a[u][b];
    }
    mean[u] = simd::hsum(sum) * inv_h;
  }
  for (int64_t u = 0; u < NV; ++u) {
    v16 var{};
    for (int64_t b = 0; b < hb; ++b) {
      a[u][b] -= mean[u];
      var += a[u][b] * a[u][b];
    }
    rstd[u] = 1.0f / std::sqrt(simd::hsum(var) * inv_h + p.norm_eps);
  }
  for (int64_t u = 0; u < NV; ++u) {
    const VariableWeights vw(p, v0 + u);
    const float ws = w[v0 + u];
    float* dst = terms + (v0 + u) * h;
    for (int64_t b = 0; b < hb; ++b)
      simd::store(dst + b * kLanes, ws * (a[u][b] * rstd[u] * simd::load(vw.nw + b * kLanes) +
                                          simd::load(vw.nb + b * kLanes)));
  }
}

// One position's GRN of every variable in [first, last) with the output units in lanes (hidden a
// multiple of 16): terms[v] [H] = w[v] * GRN_v(x[v]) (eval mode). Variables per pass instead of
// 16 positions per pass (vsn_variables_body), so that a single row uses every lane. HI and HB =
// hidden / 16 > 0 fix the widths at compile time (then 4 variables run in lockstep); 0 takes
// them from `p`.
template <int64_t HI, int64_t HB>
FOXHUNT_INLINE void vsn_row_body(const VsnGrnWeights& p, const float* x, const float* w,
                                 int64_t first, int64_t last, float* terms) {
  constexpr int64_t kNv = HI > 0 && HB > 0 ? 4 : 1;
  int64_t v = first;
  for (; v + kNv <= last; v += kNv) vsn_row_variables<HI, HB, kNv>(p, x, w, v, terms);
  for (; v < last; ++v) vsn_row_variables<HI, HB, 1>(p, x, w, v, terms);
}

FOXHUNT_KERNEL_CLONES
void vsn_row_8_32(const VsnGrnWeights& p, const float* x, const float* w, int64_t first,
                  int64_t last, float* terms) {
  vsn_row_body<8, 2>(p, x, w, first, last, terms);
}
FOXHUNT_KERNEL_CLONES
void vsn_row_any(const VsnGrnWeights& p, const float* x, const float* w, int64_t first,
                 int64_t last, float* terms) {
  vsn_row_body<0, 0>(p, x, w, first, last, terms);
}

FOXHUNT_KERNEL_CLONES
void sum_rows_floats(const float* rows, int64_t n, int64_t h, float* out) {
  std::fill(out, out + h, 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < h; ++c) out[c] += rows[r * h + c];
}

// Per-variable weight-gradient accumulators, one vector per weight (lanes = positions, summed
// at the end of the variable).
struct GradLanes {
  // Through LibTorch's CPU allocator (64-byte aligned, counted by the ledger).
  GradLanes(int64_t hi, int64_t h)
      : hi(hi),
        h(h),
        count(2 * hi + hi * hi + hi + hi * 2 * h + 2 * h + 4 * h),
        store(torch::empty({count * kLanes}, torch::kFloat)) {
    s2 = reinterpret_cast<v16*>(store.mutable_data_ptr<float>());
    o2 = s2 + hi;
    w1 = o2 + hi;
    b1 = w1 + hi * hi;
    wg = b1 + hi;
    bg = wg + hi * 2 * h;
    ss = bg + 2 * h;
    so = ss + h;
    nw = so + h;
    nb = nw + h;
  }
  void zero() { std::fill(s2, s2 + count, v16{}); }
  // Lane sums into the variable's rows of `out`.
  void write(const VsnGrnGrads& out, int64_t v) const {
    const auto put = [](const v16* a, int64_t count, float* dst) {
      for (int64_t i = 0; i < count; ++i) dst[i] = simd::hsum(a[i]);
    };
    put(s2, hi, out.fc2_slope + v * hi);
    put(o2, hi, out.fc2_offset + v * hi);
    put(w1, hi * hi, out.fc1_weight + v * hi * hi);
    put(b1, hi, out.fc1_bias + v * hi);
    put(wg, hi * 2 * h, out.glu_weight + v * hi * 2 * h);
    put(bg, 2 * h, out.glu_bias + v * 2 * h);
    put(ss, h, out.skip_slope + v * h);
    put(so, h, out.skip_offset + v * h);
    put(nw, h, out.norm_weight + v * h);
    put(nb, h, out.norm_bias + v * h);
  }
  int64_t hi, h, count;
  torch::Tensor store;
  v16 *s2, *o2, *w1, *b1, *wg, *bg, *ss, *so, *nw, *nb;
};

// The backward pass for variables [v_first, v_last) over every position: dt [H, np] is the
// upstream gradient, dwt / dxt [V, np] (dxt may be null). Threads given disjoint variable ranges
// write disjoint rows and weight gradients.
FOXHUNT_KERNEL_CLONES
void vsn_variables_backward(const VsnGrnWeights& p, const DropoutMask* mask, const float* xt,
                            const float* wt, const float* dt, int64_t np, int64_t v_first,
                            int64_t v_last, float* dxt, float* dwt, const VsnGrnGrads& out) {
  const int64_t hi = p.inner, h = p.hidden;
  const float inv_h = 1.0f / static_cast<float>(h);
  GrnLanes g;
  GradLanes acc(hi, h);
  v16 dz[kMaxVsnHidden], de1[kMaxVsnInner], de2[kMaxVsnInner];
  for (int64_t v = v_first; v < v_last; ++v) {
    const VariableWeights w(p, v);
    acc.zero();
    for (int64_t n0 = 0; n0 < np; n0 += kLanes) {
      const v16 xs = simd::load(xt + v * np + n0);
      const v16 ws = simd::load(wt + v * np + n0);
      if (mask) mask->factors(v, n0, g.keep);
      grn_lanes(w, hi, h, p.norm_eps, xs, mask ? g.keep : nullptr, g);
      // out = sum_v w_v z_v, z = yhat nw + nb: dw_v = <dout, z>, dz = w_v dout.
      v16 dw{}, s1{}, s2{};
      for (int64_t c = 0; c < h; ++c) {
        const v16 d = simd::load(dt + c * np + n0);
        dw += d * (g.yhat[c] * w.nw[c] + w.nb[c]);
        const v16 dzc = ws * d;
        acc.nw[c] += dzc * g.yhat[c];
        acc.nb[c] += dzc;
        const v16 dyhat = dzc * w.nw[c];
        dz[c] = dyhat;
        s1 += dyhat;
        s2 += dyhat * g.yhat[c];
      }
      simd::store(dwt + v * np + n0, dw);
      // LayerNorm: dy = rstd (dyhat - mean(dyhat) - yhat mean(dyhat yhat)).
      const v16 m1 = s1 * inv_h, m2 = s2 * inv_h;
      v16 dx{};
      for (int64_t j = 0; j < hi; ++j) de1[j] = v16{};
      for (int64_t c = 0; c < h; ++c) {
        const v16 dy = g.rstd * (dz[c] - m1 - g.yhat[c] * m2);
        // y = x ss + so + a sg.
        acc.ss[c] += dy * xs;
        acc.so[c] += dy;
        dx += dy * w.ss[c];
        const v16 da = dy * g.sg[c];
        const v16 dgate = dy * g.a[c] * g.sg[c] * (1.0f - g.sg[c]);
        acc.bg[c] += da;
        acc.bg[h + c] += dgate;
        for (int64_t j = 0; j < hi; ++j) {
          acc.wg[j * 2 * h + c] += g.e1[j] * da;
          acc.wg[j * 2 * h + h + c] += g.e1[j] * dgate;
          de1[j] += da * w.wg[j * 2 * h + c] + dgate * w.wg[j * 2 * h + h + c];
        }
      }
      // Dropout, then eta1 = b1 + eta2 W1.
      for (int64_t k = 0; k < hi; ++k) de2[k] = v16{};
      for (int64_t j = 0; j < hi; ++j) {
        const v16 d = mask ? de1[j] * g.keep[j] : de1[j];
        acc.b1[j] += d;
        for (int64_t k = 0; k < hi; ++k) {
          acc.w1[k * hi + j] += g.e2[k] * d;
          de2[k] += d * w.w1[k * hi + j];
        }
      }
      // eta2 = ELU(x s2 + o2): ELU' = 1 above 0, else ELU + 1.
      for (int64_t k = 0; k < hi; ++k) {
        const v16 slope = simd::select(g.e2[k] > 0.0f, simd::splat(1.0f), g.e2[k] + 1.0f);
        const v16 dpre = de2[k] * slope;
        acc.s2[k] += dpre * xs;
        acc.o2[k] += dpre;
        dx += dpre * w.s2[k];
      }
      if (dxt) simd::store(dxt + v * np + n0, dx);
    }
    acc.write(out, v);
  }
}

// The mask of `d` (none when p = 0).
std::optional<DropoutMask> dropout_mask(VsnDropout d, int64_t hi, int64_t np) {
  if (d.p <= 0.0f) return std::nullopt;
  return std::optional<DropoutMask>(std::in_place, d, hi, np);
}

}  // namespace

// [N, V] row-major -> [V, np] (positions contiguous, zero-padded to whole lanes).
void to_lanes(const float* src, int64_t n, int64_t cols, int64_t np, float* dst) {
  // 16 x 16 tiles: a column-at-a-time copy read each source row once per column (6% of a batch-64
  // BF16 TFT forward, perf).
  constexpr int64_t kTile = 16;
  for (int64_t r0 = 0; r0 < n; r0 += kTile) {
    const int64_t r1 = std::min(n, r0 + kTile);
    for (int64_t i0 = 0; i0 < cols; i0 += kTile) {
      const int64_t i1 = std::min(cols, i0 + kTile);
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t r = r0; r < r1; ++r) dst[i * np + r] = src[r * cols + i];
    }
  }
  for (int64_t i = 0; i < cols; ++i) std::fill(dst + i * np + n, dst + (i + 1) * np, 0.0f);
}

// [cols, np] -> [N, cols] row-major.
void from_lanes(const float* src, int64_t n, int64_t cols, int64_t np, float* dst) {
  for (int64_t r = 0; r < n; ++r)
    for (int64_t i = 0; i < cols; ++i) dst[r * cols + i] = src[i * np + r];
}

void vsn_weighted_grns(const VsnGrnWeights& p, const float* x, const float* w, int64_t n,
                       float* out, VsnDropout dropout) {
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
  to_lanes(x, n, v, np, xt);
  to_lanes(w, n, v, np, wt);
  const auto mask = dropout_mask(dropout, p.inner, np);
  const DropoutMask* m = mask ? &*mask : nullptr;
  // Large inputs: lane blocks of positions split across the intra-op threads, each with the whole
  // variable loop (the accumulator columns of a position block belong to one thread).
  const int64_t blocks = np / kLanes;
  const int64_t per_task = std::max<int64_t>(1, 2048 / std::max<int64_t>(1, v));
  std::fill(acc, acc + hn, 0.0f);
  if (blocks < 2 * per_task || at::get_num_threads() == 1 || at::in_parallel_region()) {
    vsn_variables(p, m, xt, wt, np, 0, blocks, acc);
  } else {
    at::parallel_for(0, blocks, per_task,
                     [&](int64_t b0, int64_t b1) { vsn_variables(p, m, xt, wt, np, b0, b1, acc); });
  }
  from_lanes(acc, n, h, np, out);
}

void vsn_weighted_grns_backward(const VsnGrnWeights& p, const float* x, const float* w,
                                const float* dout, int64_t n, VsnDropout dropout, float* dx,
                                float* dw, const VsnGrnGrads& grads) {
  const int64_t v = p.variables, h = p.hidden;
  if (n <= 0) {  // no positions: every gradient is zero
    const int64_t hi = p.inner;
    const std::pair<float*, int64_t> all[] = {
        {grads.fc2_slope, v * hi},          {grads.fc2_offset, v * hi},
        {grads.fc1_weight, v * hi * hi},    {grads.fc1_bias, v * hi},
        {grads.glu_weight, v * hi * 2 * h}, {grads.glu_bias, v * 2 * h},
        {grads.skip_slope, v * h},          {grads.skip_offset, v * h},
        {grads.norm_weight, v * h},         {grads.norm_bias, v * h}};
    for (const auto& [ptr, count] : all) std::fill(ptr, ptr + count, 0.0f);
    return;
  }
  const int64_t np = (n + kLanes - 1) / kLanes * kLanes;
  const int64_t vn = v * np, hn = h * np;
  auto scratch = torch::empty({(dx ? 4 : 3) * vn + hn}, torch::kFloat);
  float* xt = scratch.mutable_data_ptr<float>();
  float* wt = xt + vn;
  float* dwt = wt + vn;
  float* dt = dwt + vn;
  float* dxt = dx ? dt + hn : nullptr;
  to_lanes(x, n, v, np, xt);
  to_lanes(w, n, v, np, wt);
  to_lanes(dout, n, h, np, dt);
  const auto mask = dropout_mask(dropout, p.inner, np);
  const DropoutMask* m = mask ? &*mask : nullptr;
  // Variables are independent in backward (each owns its rows and weight gradients).
  if (v < 2 || at::get_num_threads() == 1 || at::in_parallel_region()) {
    vsn_variables_backward(p, m, xt, wt, dt, np, 0, v, dxt, dwt, grads);
  } else {
    at::parallel_for(0, v, 1, [&](int64_t v0, int64_t v1) {
      vsn_variables_backward(p, m, xt, wt, dt, np, v0, v1, dxt, dwt, grads);
    });
  }
  from_lanes(dwt, n, v, np, dw);
  if (dx) from_lanes(dxt, n, v, np, dx);
}

namespace {

FOXHUNT_KERNEL_CLONES
void elu_floats(const float* x, int64_t n, float* out) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::store(out + i, simd::elu(simd::load(x + i)));
  for (; i < n; ++i) out[i] = x[i] > 0.0f ? x[i] : std::expm1(x[i]);
}

}  // namespace

void elu(const float* x, int64_t n, float* out) {
  elu_floats(x, n, out);
}

bool vsn_row_applies(int64_t inner, int64_t hidden) {
  return inner > 0 && inner <= kMaxVsnInner && hidden > 0 && hidden <= kMaxVsnHidden &&
         hidden % kLanes == 0;
}

void vsn_row_terms(const VsnGrnWeights& p, const float* x, const float* w, int64_t first,
                   int64_t last, float* terms) {
  if (p.inner == 8 && p.hidden == 32)
    vsn_row_8_32(p, x, w, first, last, terms);
  else
    vsn_row_any(p, x, w, first, last, terms);
}

void sum_rows(const float* rows, int64_t n, int64_t h, float* out) {
  sum_rows_floats(rows, n, h, out);
}

}  // namespace foxhunt::models::kernels
