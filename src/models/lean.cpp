#include "foxhunt/models/lean.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "simd.h"

namespace foxhunt::models {

namespace {

using simd::hsum;
using simd::kLanes;
using simd::v16;

// y[r, o] for RB rows x NO outputs: RB x NO vector accumulators over `in`, each weight and input
// vector loaded once per block, then one horizontal sum per output.
template <int RB, int NO>
inline __attribute__((always_inline)) void dot_block(const float* x, int64_t in, const float* w,
                                                     const float* b, float* y, int64_t ldy) {
  v16 acc[RB][NO];
  for (int r = 0; r < RB; ++r)
    for (int o = 0; o < NO; ++o) acc[r][o] = v16{};
  const int64_t full = in / kLanes * kLanes;
  for (int64_t i = 0; i < full; i += kLanes) {
    v16 xv[RB], wv[NO];
    for (int r = 0; r < RB; ++r) std::memcpy(&xv[r], x + r * in + i, sizeof(v16));
    for (int o = 0; o < NO; ++o) std::memcpy(&wv[o], w + o * in + i, sizeof(v16));
    for (int r = 0; r < RB; ++r)
      for (int o = 0; o < NO; ++o) acc[r][o] += xv[r] * wv[o];
  }
  for (int r = 0; r < RB; ++r)
    for (int o = 0; o < NO; ++o) {
      float sum = hsum(acc[r][o]);
      for (int64_t i = full; i < in; ++i) sum += x[r * in + i] * w[o * in + i];
      y[r * ldy + o] = b ? sum + b[o] : sum;
    }
}

template <int RB>
inline __attribute__((always_inline)) void dot_rows(const float* x, int64_t in, const float* w,
                                                    const float* b, int64_t out, float* y) {
  int64_t o = 0;
  for (; o + 4 <= out; o += 4) dot_block<RB, 4>(x, in, w + o * in, b ? b + o : nullptr, y + o, out);
  for (; o < out; ++o) dot_block<RB, 1>(x, in, w + o * in, b ? b + o : nullptr, y + o, out);
}

FOXHUNT_KERNEL_CLONES
void linear_kernel(const float* x, int64_t rows, int64_t in, const float* w, const float* b,
                   int64_t out, float* y) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) dot_rows<4>(x + r * in, in, w, b, out, y + r * out);
  for (; r < rows; ++r) dot_rows<1>(x + r * in, in, w, b, out, y + r * out);
}

// The same y = x W^T + b with output lanes: wt [in, outp] is W transposed and zero-padded to
// outp = whole lanes, so each step is a broadcast input times 16 contiguous weights, 4 rows x
// 4 lane groups of accumulators, no horizontal sums. Better than the dot form when the transpose
// is amortised over many rows, and when `in` is shorter than a lane (CartPole's 4 inputs).
template <int RB, int NV>
inline __attribute__((always_inline)) void axpy_block(const float* x, int64_t in, const float* wt,
                                                      int64_t outp, const float* b, int64_t o0,
                                                      int64_t out, float* y) {
  v16 acc[RB][NV];
  for (int r = 0; r < RB; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = v16{};
  for (int64_t i = 0; i < in; ++i) {
    v16 wv[NV];
    for (int v = 0; v < NV; ++v) wv[v] = simd::load(wt + i * outp + o0 + v * kLanes);
    for (int r = 0; r < RB; ++r) {
      const v16 xr = simd::splat(x[r * in + i]);
      for (int v = 0; v < NV; ++v) acc[r][v] += xr * wv[v];
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t o = o0 + v * kLanes;
      float lane[kLanes];
      simd::store(lane, acc[r][v]);
      const int64_t valid = std::min<int64_t>(kLanes, out - o);
      for (int64_t l = 0; l < valid; ++l) y[r * out + o + l] = b ? lane[l] + b[o + l] : lane[l];
    }
}

template <int RB>
inline __attribute__((always_inline)) void axpy_rows(const float* x, int64_t in, const float* wt,
                                                     int64_t outp, const float* b, int64_t out,
                                                     float* y) {
  int64_t o = 0;
  for (; o + 4 * kLanes <= outp; o += 4 * kLanes) axpy_block<RB, 4>(x, in, wt, outp, b, o, out, y);
  for (; o < outp; o += kLanes) axpy_block<RB, 1>(x, in, wt, outp, b, o, out, y);
}

FOXHUNT_KERNEL_CLONES
void linear_kernel_lanes(const float* x, int64_t rows, int64_t in, const float* wt, int64_t outp,
                         const float* b, int64_t out, float* y) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) axpy_rows<4>(x + r * in, in, wt, outp, b, out, y + r * out);
  for (; r < rows; ++r) axpy_rows<1>(x + r * in, in, wt, outp, b, out, y + r * out);
}

// wt [in, outp] = W^T for W [out, in], columns out..outp zero; in 16 x 16 tiles so that reads and
// writes both stay within a few cache lines (a plain strided loop cost more than the kernel).
FOXHUNT_KERNEL_CLONES
void transpose_padded(const float* w, int64_t out, int64_t in, int64_t outp, float* wt) {
  for (int64_t i0 = 0; i0 < in; i0 += kLanes) {
    const int64_t i1 = std::min(in, i0 + kLanes);
    for (int64_t o0 = 0; o0 < outp; o0 += kLanes) {
      float tile[kLanes][kLanes] = {};
      const int64_t o1 = std::min(out, o0 + kLanes);
      for (int64_t o = o0; o < o1; ++o)
        for (int64_t i = i0; i < i1; ++i) tile[i - i0][o - o0] = w[o * in + i];
      for (int64_t i = i0; i < i1; ++i)
        std::memcpy(wt + i * outp + o0, tile[i - i0], sizeof tile[0]);
    }
  }
}

FOXHUNT_KERNEL_CLONES
void relu_inplace(float* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] > 0.0f ? p[i] : 0.0f;
}

FOXHUNT_KERNEL_CLONES
void tanh_inplace(float* p, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) simd::store(p + i, simd::tanh(simd::load(p + i)));
  for (; i < n; ++i) p[i] = std::tanh(p[i]);
}

FOXHUNT_KERNEL_CLONES
bool all_finite_kernel(const float* p, int64_t n) {
  // Exponent bits all ones = Inf or NaN; an OR-reduction of a flag vectorises without branches.
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, p + i, sizeof bits);
    bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

// From this many rows on, a layer transposes its weights and runs with output lanes.
constexpr int64_t kLaneRows = 8;

// Rows per task when a large batch is split across intra-op threads: below this a batch runs on
// the calling thread (the fork/join costs more than it saves).
constexpr int64_t kRowsPerTask = 64;

}  // namespace

bool all_finite(const float* p, int64_t n) {
  return all_finite_kernel(p, n);
}

bool tensor_all_finite(const torch::Tensor& t) {
  if (t.numel() == 0) return true;
  if (t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous())
    return all_finite(t.const_data_ptr<float>(), t.numel());
  return torch::isfinite(t).all().item<bool>();
}

namespace {

bool cpu_float_contiguous(const torch::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.scalar_type() == torch::kFloat &&
         t.is_contiguous();
}

// The MLP on `rows` rows: layer by layer through two ping-pong buffers in `scratch`.
void mlp_rows(const MlpImpl& mlp, const float* x, int64_t rows, float* y) {
  int64_t widest = 0;
  for (const auto& l : mlp.layers) widest = std::max(widest, l->weight.size(0));
  const int64_t half = rows * widest;
  // Through LibTorch's CPU allocator (not std::vector), so the memory ledger counts it.
  auto scratch = torch::empty({2 * half}, torch::kFloat);
  float* bufs[2] = {scratch.mutable_data_ptr<float>(), scratch.mutable_data_ptr<float>() + half};
  const float* cur = x;
  const size_t n = mlp.layers.size();
  for (size_t k = 0; k < n; ++k) {
    const auto& l = *mlp.layers[k];
    const int64_t out = l.weight.size(0), in = l.weight.size(1);
    const bool last = k + 1 == n;
    float* dst = last ? y : bufs[k % 2];
    const float* w = l.weight.const_data_ptr<float>();
    const float* b = l.bias.defined() ? l.bias.const_data_ptr<float>() : nullptr;
    if (rows >= kLaneRows || in < kLanes) {
      // Output lanes over the transposed weights (measured: CartPole DQN's batch-64 TD-target
      // forwards, [4 -> 256 -> 256 -> 2]).
      const int64_t outp = (out + kLanes - 1) / kLanes * kLanes;
      auto wt_t = torch::empty({in * outp}, torch::kFloat);
      float* wt = wt_t.mutable_data_ptr<float>();
      transpose_padded(w, out, in, outp, wt);
      linear_kernel_lanes(cur, rows, in, wt, outp, b, out, dst);
    } else {
      linear_kernel(cur, rows, in, w, b, out, dst);
    }
    if (!last) {
      if (mlp.options.activation() == Activation::kReLU)
        relu_inplace(dst, rows * out);
      else
        tanh_inplace(dst, rows * out);
    }
    cur = dst;
  }
}

}  // namespace

bool lean_mlp_forward(const MlpImpl& mlp, const float* x, int64_t batch, float* y) {
  for (const auto& l : mlp.layers)
    if (!cpu_float_contiguous(l->weight) || (l->bias.defined() && !cpu_float_contiguous(l->bias)))
      return false;
  if (batch <= 0) return true;
  const int64_t in = mlp.options.in(), out = mlp.options.out();
  if (batch < 2 * kRowsPerTask || at::get_num_threads() == 1 || at::in_parallel_region()) {
    mlp_rows(mlp, x, batch, y);
    return true;
  }
  at::parallel_for(0, batch, kRowsPerTask, [&](int64_t begin, int64_t end) {
    mlp_rows(mlp, x + begin * in, end - begin, y + begin * out);
  });
  return true;
}

bool lean_path_applies(const torch::Tensor& x) {
  // Train and eval mode compute the same MLP (no dropout, no batch norm), so a trainer's
  // no-grad forwards (acting, rollouts, TD targets) take this path too.
  return !torch::GradMode::is_enabled() && x.defined() && x.dim() == 2 && x.device().is_cpu() &&
         x.scalar_type() == torch::kFloat && x.is_contiguous();
}

}  // namespace foxhunt::models
