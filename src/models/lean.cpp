#include "foxhunt/models/lean.h"

#include "foxhunt/models/fused_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "foxhunt/core/simd.h"

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

// What follows a layer's product in its epilogue: nothing (the last layer) or the activation.
enum class Epilogue { kNone, kReLU, kTanh };

FOXHUNT_INLINE v16 epilogue(v16 v, Epilogue e) {
  if (e == Epilogue::kReLU) return simd::select(v > 0.0f, v, simd::splat(0.0f));
  if (e == Epilogue::kTanh) return simd::tanh(v);
  return v;
}

FOXHUNT_INLINE float epilogue(float v, Epilogue e) {
  if (e == Epilogue::kReLU) return v > 0.0f ? v : 0.0f;
  if (e == Epilogue::kTanh) return std::tanh(v);
  return v;
}

// The same y = x W^T + b with output lanes: wt [in, outp] is W transposed and zero-padded to
// outp = whole lanes, so each step is a broadcast input times 16 contiguous weights, 6 (or 4, 1)
// rows x 4 lane groups of accumulators, no horizontal sums; bias and activation are applied in
// registers. Better than the dot form when the transpose is amortised over many rows (or cached,
// lean_mlp_forward), and when `in` is shorter than a lane (CartPole's 4 inputs).
template <int RB, int NV>
inline __attribute__((always_inline)) void axpy_block(const float* x, int64_t in, const float* wt,
                                                      int64_t outp, const float* b, int64_t o0,
                                                      int64_t out, Epilogue e, float* y) {
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
  for (int v = 0; v < NV; ++v) {
    const int64_t o = o0 + v * kLanes;
    const int64_t valid = std::min<int64_t>(kLanes, out - o);
    if (valid == kLanes) {
      const v16 bv = b ? simd::load(b + o) : v16{};
      for (int r = 0; r < RB; ++r) simd::store(y + r * out + o, epilogue(acc[r][v] + bv, e));
      continue;
    }
    for (int r = 0; r < RB; ++r) {
      float lane[kLanes];
      simd::store(lane, acc[r][v]);
      for (int64_t l = 0; l < valid; ++l)
        y[r * out + o + l] = epilogue(b ? lane[l] + b[o + l] : lane[l], e);
    }
  }
}

template <int RB>
inline __attribute__((always_inline)) void axpy_rows(const float* x, int64_t in, const float* wt,
                                                     int64_t outp, const float* b, int64_t out,
                                                     Epilogue e, float* y) {
  int64_t o = 0;
  for (; o + 4 * kLanes <= outp; o += 4 * kLanes)
    axpy_block<RB, 4>(x, in, wt, outp, b, o, out, e, y);
  for (; o < outp; o += kLanes) axpy_block<RB, 1>(x, in, wt, outp, b, o, out, e, y);
}

FOXHUNT_KERNEL_CLONES
void linear_kernel_lanes(const float* x, int64_t rows, int64_t in, const float* wt, int64_t outp,
                         const float* b, int64_t out, Epilogue e, float* y) {
  int64_t r = 0;
  for (; r + 6 <= rows; r += 6) axpy_rows<6>(x + r * in, in, wt, outp, b, out, e, y + r * out);
  for (; r + 4 <= rows; r += 4) axpy_rows<4>(x + r * in, in, wt, outp, b, out, e, y + r * out);
  for (; r < rows; ++r) axpy_rows<1>(x + r * in, in, wt, outp, b, out, e, y + r * out);
}

// wt [in, outp] = W^T for W [out, in], columns out..outp zero; in 16 x 16 tiles so that reads and
// writes both stay within a few cache lines (a plain strided loop cost more than the kernel).
// The 16 x 16 block at w (row stride ldw) transposed into wt (row stride ldt): four butterfly
// stages; at distance k, rows j and j + k swap the halves of their columns that differ in bit k.
// Lane l of the low result takes a's lane l, or b's lane l - K where bit K of l is set; the high
// result takes a's lane l + K, or b's lane l. Constant indices: __builtin_shufflevector (GCC 12+
// and clang) compiles each to one permute.
template <int K, bool Hi, int... L>
inline __attribute__((always_inline)) v16 butterfly_half(v16 a, v16 b,
                                                         std::integer_sequence<int, L...>) {
  constexpr int n = static_cast<int>(kLanes);
  return __builtin_shufflevector(a, b,
                                 (Hi ? ((L & K) ? n + L : L + K) : ((L & K) ? n + L - K : L))...);
}

template <int K>
inline __attribute__((always_inline)) void butterfly(v16* r) {
  using Lanes = std::make_integer_sequence<int, static_cast<int>(kLanes)>;
  for (int j = 0; j < kLanes; ++j) {
    if (j & K) continue;
    const v16 a = r[j], b = r[j + K];
    r[j] = butterfly_half<K, false>(a, b, Lanes{});
    r[j + K] = butterfly_half<K, true>(a, b, Lanes{});
  }
}

inline __attribute__((always_inline)) void transpose_tile(const float* w, int64_t ldw, float* wt,
                                                          int64_t ldt) {
  v16 r[kLanes];
  for (int j = 0; j < kLanes; ++j) r[j] = simd::load(w + j * ldw);
  butterfly<1>(r);
  butterfly<2>(r);
  butterfly<4>(r);
  butterfly<8>(r);
  for (int j = 0; j < kLanes; ++j) simd::store(wt + j * ldt, r[j]);
}

FOXHUNT_KERNEL_CLONES
void transpose_padded(const float* w, int64_t out, int64_t in, int64_t outp, float* wt) {
  for (int64_t i0 = 0; i0 < in; i0 += kLanes) {
    const int64_t i1 = std::min(in, i0 + kLanes);
    for (int64_t o0 = 0; o0 < outp; o0 += kLanes) {
      if (i1 - i0 == kLanes && o0 + kLanes <= out) {  // a whole tile: in registers
        transpose_tile(w + o0 * in + i0, in, wt + i0 * outp + o0, outp);
        continue;
      }
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
  return fused_cpu_kernels() && t.defined() && t.device().is_cpu() &&
         t.scalar_type() == torch::kFloat && t.is_contiguous();
}

int64_t lane_padded(int64_t out) {
  return (out + kLanes - 1) / kLanes * kLanes;
}

bool lanes_apply(int64_t rows, int64_t in) {
  // Output lanes over the transposed weights (measured: CartPole DQN's batch-64 TD-target
  // forwards, [4 -> 256 -> 256 -> 2]; the default DQN's batch 64, [256 -> 128 -> 64 -> 3]).
  return rows >= kLaneRows || in < kLanes;
}

// W [out, in] transposed and zero-padded: wt [in, lane_padded(out)].
torch::Tensor transposed_padded(const torch::Tensor& w) {
  const int64_t out = w.size(0), in = w.size(1), outp = lane_padded(out);
  auto wt = torch::empty({in, outp}, torch::kFloat);
  transpose_padded(w.const_data_ptr<float>(), out, in, outp, wt.mutable_data_ptr<float>());
  return wt;
}

// One layer y = act(x W^T + b) on `rows` rows, W [out, in] (no activation when `act` is false).
// `wt`: W transposed and lane-padded when the caller holds it (the inference cache), else null
// (the lane form then transposes into a scratch tensor of its own).
void layer_rows(const float* w, const float* wt, const float* b, int64_t in, int64_t out,
                Activation activation, bool act, const float* x, int64_t rows, float* y) {
  if (lanes_apply(rows, in)) {
    const int64_t outp = lane_padded(out);
    const Epilogue e = !act                              ? Epilogue::kNone
                       : activation == Activation::kReLU ? Epilogue::kReLU
                                                         : Epilogue::kTanh;
    torch::Tensor own;
    if (!wt) {
      // Transposed per call (a trainer's weights change every step). A large layer goes in
      // blocks of output columns whose scratch stays under glibc's mmap threshold (128 KiB):
      // a whole 256 x 256 layer was a fresh mapping per call, page faults included.
      constexpr int64_t kScratchFloats = 24 * 1024;
      const int64_t block = kScratchFloats / (in + rows) / kLanes * kLanes;
      if (in * outp > kScratchFloats && block >= 4 * kLanes) {
        own = torch::empty({(in + rows) * block}, torch::kFloat);
        float* wt_block = own.mutable_data_ptr<float>();
        float* y_block = wt_block + in * block;
        for (int64_t o0 = 0; o0 < out; o0 += block) {
          const int64_t n = std::min(block, out - o0), np = lane_padded(n);
          transpose_padded(w + o0 * in, n, in, np, wt_block);
          linear_kernel_lanes(x, rows, in, wt_block, np, b ? b + o0 : nullptr, n, e, y_block);
          for (int64_t r = 0; r < rows; ++r)
            std::memcpy(y + r * out + o0, y_block + r * n, static_cast<size_t>(n) * sizeof(float));
        }
        return;
      }
      own = torch::empty({in * outp}, torch::kFloat);
      transpose_padded(w, out, in, outp, own.mutable_data_ptr<float>());
      wt = own.const_data_ptr<float>();
    }
    linear_kernel_lanes(x, rows, in, wt, outp, b, out, e, y);
    return;
  }
  linear_kernel(x, rows, in, w, b, out, y);
  if (act) {
    if (activation == Activation::kReLU)
      relu_inplace(y, rows * out);
    else
      tanh_inplace(y, rows * out);
  }
}

using LaneWeights = std::vector<torch::Tensor>;

// The MLP on `rows` rows: layer by layer through two ping-pong buffers in `scratch`. `lanes`:
// each layer's transposed weights, or null.
void mlp_rows(const MlpImpl& mlp, const LaneWeights* lanes, const float* x, int64_t rows,
              float* y) {
  int64_t widest = 0;
  for (const auto& l : mlp.layers) widest = std::max(widest, l->weight.size(0));
  const int64_t half = rows * widest;
  // A few rows' activations live on the stack (8 KiB: a batch-1 forward spent a tenth of its
  // time allocating); more through LibTorch's CPU allocator, so the memory ledger counts them.
  constexpr int64_t kStackFloats = 2048;
  alignas(64) float stack[kStackFloats];
  torch::Tensor scratch;
  float* base = stack;
  if (2 * half > kStackFloats) {
    scratch = torch::empty({2 * half}, torch::kFloat);
    base = scratch.mutable_data_ptr<float>();
  }
  float* bufs[2] = {base, base + half};
  const float* cur = x;
  const size_t n = mlp.layers.size();
  for (size_t k = 0; k < n; ++k) {
    const bool last = k + 1 == n;
    float* dst = last ? y : bufs[k % 2];
    const auto& l = *mlp.layers[k];
    layer_rows(l.weight.const_data_ptr<float>(),
               lanes ? (*lanes)[k].const_data_ptr<float>() : nullptr,
               l.bias.defined() ? l.bias.const_data_ptr<float>() : nullptr, l.weight.size(1),
               l.weight.size(0), mlp.options.activation(), !last, cur, rows, dst);
    cur = dst;
  }
}

// ---- training: the MLP as one autograd node ---------------------------------------------------

// dW rows o0..o0+NO-1 of dW [out, in] = g^T a: NO outputs x 4 lane groups of inputs in registers
// over all rows. (A template, not a lambda: a lambda in a target_clones function is compiled once
// for the baseline instruction set and called out of line.)
template <int NO>
inline __attribute__((always_inline)) void weight_grad_rows(const float* g, const float* a,
                                                            int64_t rows, int64_t in, int64_t out,
                                                            int64_t o0, float* dw) {
  const int64_t full = in / kLanes * kLanes;
  int64_t i = 0;
  for (; i + 4 * kLanes <= full; i += 4 * kLanes) {
    v16 acc[NO][4] = {};
    for (int64_t r = 0; r < rows; ++r) {
      v16 av[4];
      for (int v = 0; v < 4; ++v) av[v] = simd::load(a + r * in + i + v * kLanes);
      for (int q = 0; q < NO; ++q) {
        const v16 gq = simd::splat(g[r * out + o0 + q]);
        for (int v = 0; v < 4; ++v) acc[q][v] += gq * av[v];
      }
    }
    for (int q = 0; q < NO; ++q)
      for (int v = 0; v < 4; ++v) simd::store(dw + (o0 + q) * in + i + v * kLanes, acc[q][v]);
  }
  for (; i < full; i += kLanes) {
    v16 acc[NO] = {};
    for (int64_t r = 0; r < rows; ++r) {
      const v16 av = simd::load(a + r * in + i);
      for (int q = 0; q < NO; ++q) acc[q] += simd::splat(g[r * out + o0 + q]) * av;
    }
    for (int q = 0; q < NO; ++q) simd::store(dw + (o0 + q) * in + i, acc[q]);
  }
}

// dW[:, first..in) = g^T a for the inputs past the last whole lane group (all of them when
// in < 16, e.g. CartPole's 4 observations): lanes over 16 outputs, up to 4 inputs at a time, so
// each row is 4 independent FMAs per load of g (one scalar sum per weight ran at the FMA's
// latency: 64 us of a PPO step's 128).
inline __attribute__((always_inline)) void weight_grad_tail(const float* g, const float* a,
                                                            int64_t rows, int64_t in, int64_t out,
                                                            int64_t first, float* dw) {
  int64_t o = 0;
  for (; o + kLanes <= out; o += kLanes)
    for (int64_t i = first; i < in; i += 4) {
      const int64_t ni = std::min<int64_t>(4, in - i);
      v16 acc[4] = {};
      for (int64_t r = 0; r < rows; ++r) {
        const v16 gv = simd::load(g + r * out + o);
        const float* ar = a + r * in + i;
        for (int t = 0; t < 4; ++t)
          if (t < ni) acc[t] += simd::splat(ar[t]) * gv;
      }
      for (int64_t t = 0; t < ni; ++t)
        for (int64_t l = 0; l < kLanes; ++l) dw[(o + l) * in + i + t] = acc[t][l];
    }
  for (; o < out; ++o)
    for (int64_t i = first; i < in; ++i) {
      float sum = 0.0f;
      for (int64_t r = 0; r < rows; ++r) sum += g[r * out + o] * a[r * in + i];
      dw[o * in + i] = sum;
    }
}

// dW [out, in] = g^T a and db [out] = column sums of g, for g [rows, out], a [rows, in].
FOXHUNT_KERNEL_CLONES
void weight_grad(const float* g, const float* a, int64_t rows, int64_t in, int64_t out, float* dw,
                 float* db) {
  int64_t o = 0;
  for (; o + 4 <= out; o += 4) weight_grad_rows<4>(g, a, rows, in, out, o, dw);
  for (; o < out; ++o) weight_grad_rows<1>(g, a, rows, in, out, o, dw);
  weight_grad_tail(g, a, rows, in, out, in / kLanes * kLanes, dw);
  for (int64_t q = 0; q < out; ++q) db[q] = 0.0f;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t q = 0; q < out; ++q) db[q] += g[r * out + q];
}

// da [rows, in] = g W for g [rows, out], W [out, in], times the activation's derivative at the
// layer input's post-activation values h (ReLU: h > 0; tanh: 1 - h^2; none when h is null).
FOXHUNT_KERNEL_CLONES
void input_grad(const float* g, const float* w, int64_t rows, int64_t in, int64_t out,
                const float* h, Activation activation, float* da) {
  const int64_t full = in / kLanes * kLanes;
  for (int64_t r0 = 0; r0 < rows; r0 += 4) {
    const int64_t nr = std::min<int64_t>(4, rows - r0);
    int64_t i = 0;
    // 4 rows x 4 lane groups of inputs in registers: 4 weight loads per 16 FMAs.
    for (; nr == 4 && i + 4 * kLanes <= full; i += 4 * kLanes) {
      v16 acc[4][4] = {};
      for (int64_t o = 0; o < out; ++o) {
        v16 wv[4];
        for (int v = 0; v < 4; ++v) wv[v] = simd::load(w + o * in + i + v * kLanes);
        for (int r = 0; r < 4; ++r) {
          const v16 gr = simd::splat(g[(r0 + r) * out + o]);
          for (int v = 0; v < 4; ++v) acc[r][v] += gr * wv[v];
        }
      }
      for (int r = 0; r < 4; ++r)
        for (int v = 0; v < 4; ++v) simd::store(da + (r0 + r) * in + i + v * kLanes, acc[r][v]);
    }
    for (; i < full; i += kLanes) {
      v16 acc[4] = {};
      for (int64_t o = 0; o < out; ++o) {
        const v16 wv = simd::load(w + o * in + i);
        for (int64_t r = 0; r < nr; ++r) acc[r] += simd::splat(g[(r0 + r) * out + o]) * wv;
      }
      for (int64_t r = 0; r < nr; ++r) simd::store(da + (r0 + r) * in + i, acc[r]);
    }
    for (int64_t i = full; i < in; ++i)
      for (int64_t r = r0; r < r0 + nr; ++r) {
        float sum = 0.0f;
        for (int64_t o = 0; o < out; ++o) sum += g[r * out + o] * w[o * in + i];
        da[r * in + i] = sum;
      }
  }
  if (!h) return;
  const int64_t n = rows * in;
  if (activation == Activation::kReLU) {
    for (int64_t k = 0; k < n; ++k) da[k] = h[k] > 0.0f ? da[k] : 0.0f;
  } else {
    for (int64_t k = 0; k < n; ++k) da[k] *= 1.0f - h[k] * h[k];
  }
}

// The MLP's forward (the lean kernels, every hidden layer's output saved) and backward (dW, db
// and the input gradients by the kernels above) as one autograd node. Inputs: x, then each
// layer's weight and bias.
struct MlpFunction : public torch::autograd::Function<MlpFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               torch::TensorList params, int64_t activation) {
    const auto act = static_cast<Activation>(activation);
    const int64_t rows = x.size(0);
    const size_t n = params.size() / 2;
    torch::autograd::variable_list saved{x};
    torch::Tensor cur = x;
    for (size_t k = 0; k < n; ++k) {
      const auto& w = params[2 * k];
      const auto& b = params[2 * k + 1];
      const int64_t out = w.size(0), in = w.size(1);
      auto y = torch::empty({rows, out}, torch::kFloat);
      layer_rows(w.const_data_ptr<float>(), nullptr, b.const_data_ptr<float>(), in, out, act,
                 k + 1 < n, cur.const_data_ptr<float>(), rows, y.mutable_data_ptr<float>());
      if (k + 1 < n) saved.push_back(y);
      cur = y;
    }
    for (const auto& p : params) saved.push_back(p);
    ctx->save_for_backward(saved);
    ctx->saved_data["activation"] = activation;
    ctx->saved_data["layers"] = static_cast<int64_t>(n);
    return cur;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto act = static_cast<Activation>(ctx->saved_data["activation"].toInt());
    const auto n = static_cast<size_t>(ctx->saved_data["layers"].toInt());
    // saved: x, h_1 .. h_{n-1}, then (W, b) per layer.
    const auto& x = saved[0];
    const int64_t rows = x.size(0);
    torch::autograd::variable_list grads(1 + 2 * n + 1);
    torch::Tensor g = grad_out[0].contiguous();
    for (size_t k = n; k-- > 0;) {
      const auto& w = saved[n + 2 * k];
      const int64_t out = w.size(0), in = w.size(1);
      const auto& a = k == 0 ? x : saved[k];  // this layer's input
      auto dw = torch::empty_like(w);
      auto db = torch::empty({out}, torch::kFloat);
      weight_grad(g.const_data_ptr<float>(), a.const_data_ptr<float>(), rows, in, out,
                  dw.mutable_data_ptr<float>(), db.mutable_data_ptr<float>());
      grads[1 + 2 * k] = dw;
      grads[2 + 2 * k] = db;
      if (k == 0 && !ctx->needs_input_grad(0)) break;
      auto da = torch::empty({rows, in}, torch::kFloat);
      input_grad(g.const_data_ptr<float>(), w.const_data_ptr<float>(), rows, in, out,
                 k == 0 ? nullptr : a.const_data_ptr<float>(), act, da.mutable_data_ptr<float>());
      if (k == 0) grads[0] = da;
      g = da;
    }
    return grads;
  }
};

}  // namespace

bool lean_mlp_forward(const MlpImpl& mlp, const float* x, int64_t batch, float* y) {
  for (const auto& l : mlp.layers)
    if (!cpu_float_contiguous(l->weight) || (l->bias.defined() && !cpu_float_contiguous(l->bias)))
      return false;
  if (batch <= 0) return true;
  const int64_t in = mlp.options.in(), out = mlp.options.out();
  // Serving (c10::InferenceMode) keeps the transposed weights per weight version: at batch 64 the
  // transpose was an eighth of the DQN's forward. A trainer's no-grad forwards (acting, TD
  // targets) transpose per call instead, so training holds no derived copy of its weights.
  std::shared_ptr<const LaneWeights> lanes;
  bool any_lanes = false;
  for (const auto& l : mlp.layers) any_lanes |= lanes_apply(batch, l->weight.size(1));
  if (any_lanes && c10::InferenceMode::is_enabled()) {
    std::vector<torch::Tensor> weights;
    for (const auto& l : mlp.layers) weights.push_back(l->weight);
    lanes = mlp.lane_weights.get(with_gradients(weights), [&] {
      LaneWeights t;
      for (const auto& w : weights) t.push_back(transposed_padded(w));
      return t;
    });
  }
  if (batch < 2 * kRowsPerTask || at::get_num_threads() == 1 || at::in_parallel_region()) {
    mlp_rows(mlp, lanes.get(), x, batch, y);
    return true;
  }
  at::parallel_for(0, batch, kRowsPerTask, [&](int64_t begin, int64_t end) {
    mlp_rows(mlp, lanes.get(), x + begin * in, end - begin, y + begin * out);
  });
  return true;
}

bool fused_mlp_applies(const MlpImpl& mlp, const torch::Tensor& x) {
  if (!torch::GradMode::is_enabled() || !cpu_float_contiguous(x) || x.dim() != 2 || x.size(0) == 0)
    return false;
  for (const auto& l : mlp.layers)
    if (!cpu_float_contiguous(l->weight) || !cpu_float_contiguous(l->bias)) return false;
  return true;
}

torch::Tensor fused_mlp_forward(const MlpImpl& mlp, const torch::Tensor& x) {
  std::vector<torch::Tensor> params;
  for (const auto& l : mlp.layers) {
    params.push_back(l->weight);
    params.push_back(l->bias);
  }
  // As a TensorList: a std::vector would be taken for a non-tensor argument (no gradients).
  return MlpFunction::apply(x, torch::TensorList(params),
                            static_cast<int64_t>(mlp.options.activation()));
}

bool lean_path_applies(const torch::Tensor& x) {
  // Train and eval mode compute the same MLP (no dropout, no batch norm), so a trainer's
  // no-grad forwards (acting, rollouts, TD targets) take this path too.
  return fused_cpu_kernels() && !torch::GradMode::is_enabled() && x.defined() && x.dim() == 2 &&
         x.device().is_cpu() && x.scalar_type() == torch::kFloat && x.is_contiguous();
}

}  // namespace foxhunt::models
