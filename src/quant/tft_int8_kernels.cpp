// The CPU kernels of the INT8 TFT (tft_int8_kernels.h): activation codes, the int8 products of
// one layer, and the LSTM recurrence.
#include "tft_int8_kernels.h"

#include "int8_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "foxhunt/core/error.h"

namespace foxhunt::quant {

namespace detail {

namespace {

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}

// GCC keeps the clamps as branches (and the loops scalar) unless it may ignore FP traps; the
// loops below are pure arithmetic, so let it vectorize them.
#if defined(__GNUC__) && !defined(__clang__)
#define FOXHUNT_VECTORIZE __attribute__((optimize("no-trapping-math")))
#else
#define FOXHUNT_VECTORIZE
#endif

// The codes of src[0, n) into dst (integer-valued floats or int8): round-half-even of
// clamp(x / scale, -127, 127), what ATen's div/round/clamp computes, with x / scale taken as
// x * (1 / scale) like torch's fake quantization. Adding and subtracting 1.5 * 2^23 leaves the
// nearest integer (ties to even) of any |v| < 2^22 without a libm call, so the loop vectorizes.
template <typename Out>
FOXHUNT_VECTORIZE void codes_of(const float* __restrict src, Out* __restrict dst, int64_t n,
                                float scale) {
  constexpr float kMagic = 12582912.0f, kMax = static_cast<float>(kQMax);
  const float inv = 1.0f / scale;
  for (int64_t k = 0; k < n; ++k) {
    float v = src[k] * inv;
    v = v < -kMax ? -kMax : v;
    v = v > kMax ? kMax : v;
    v = (v + kMagic) - kMagic;
    if constexpr (std::is_same_v<Out, float>)
      dst[k] = v;
    else
      dst[k] = static_cast<Out>(static_cast<int32_t>(v));
  }
}

// acc[r, c] (int32) becomes acc[r, c] * scale[c] (+ bias[c]) as float in the same 4 bytes; the
// element is read before it is written, through memcpy (no type-punned pointers).
FOXHUNT_VECTORIZE void dequantize_rows_in_place(int32_t* acc, const float* __restrict scale,
                                                const float* __restrict bias, int64_t rows,
                                                int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    int32_t* a = acc + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = static_cast<float>(a[c]) * scale[c] + (bias ? bias[c] : 0.0f);
      std::memcpy(a + c, &v, sizeof v);
    }
  }
}

FOXHUNT_VECTORIZE void add_dequantized(const int32_t* __restrict acc, const float* __restrict scale,
                                       const float* __restrict gx, float* __restrict y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] = gx[j] + static_cast<float>(acc[j]) * scale[j];
}

// c = f * c + i * g over one row (i, f: sigmoids; g: tanh of the cell input).
FOXHUNT_VECTORIZE void lstm_cell(const float* __restrict i, const float* __restrict f,
                                 const float* __restrict g, float* __restrict c, int64_t g4) {
  const int64_t h = g4 / 4;
  for (int64_t j = 0; j < h; ++j) c[j] = f[j] * c[j] + i[j] * g[j];
}

// Few rows on the CPU: quantize, multiply and dequantize in one scalar pass (ATen's per-op
// dispatch dominates there: seven ops for a [1, 32] x [32, 128] product). The rounding is the
// same as the vectorized path's (x / s to nearest even, then clamp), so both give equal codes.
torch::Tensor small_rows_forward(const Int8TftImpl::Layer& l, const torch::Tensor& x2) {
  const int64_t rows = x2.size(0), in = l.codes.size(0), out = l.codes.size(1);
  auto xc = x2.to(torch::kFloat).contiguous();
  auto y = torch::empty({rows, out}, torch::kFloat);
  const float sx = l.input_scale.data_ptr<float>()[0];
  const int8_t* w = l.codes.data_ptr<int8_t>();
  const float* scale = l.scale.data_ptr<float>();
  const float* bias = l.bias.defined() ? l.bias.data_ptr<float>() : nullptr;
  std::vector<int8_t> q(static_cast<size_t>(in));
  std::vector<int32_t> acc(static_cast<size_t>(out));
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = xc.data_ptr<float>() + r * in;
    codes_of(xr, q.data(), in, sx);
    std::fill(acc.begin(), acc.end(), 0);
    for (int64_t k = 0; k < in; ++k) {
      const int32_t qk = q[static_cast<size_t>(k)];
      if (qk == 0) continue;
      const int8_t* wk = w + k * out;
      for (int64_t c = 0; c < out; ++c) acc[static_cast<size_t>(c)] += qk * wk[c];
    }
    float* yr = y.data_ptr<float>() + r * out;
    for (int64_t c = 0; c < out; ++c)
      yr[c] = static_cast<float>(acc[static_cast<size_t>(c)]) * scale[c] + (bias ? bias[c] : 0.f);
  }
  return y;
}

}  // namespace

// The int8 LSTM recurrence on the CPU: per step one quantization pass over h, the int8
// product (at::_int_mm, or scalar for a few rows) and one fused pass for the gates and the
// state; ATen's op-per-gate loop dispatches ~17 ops per step instead.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> int8_lstm_cpu(const Int8TftImpl::Layer& l,
                                                                      const torch::Tensor& gx_in,
                                                                      const torch::Tensor& h0,
                                                                      const torch::Tensor& c0) {
  const auto gx = gx_in.to(torch::kFloat).contiguous();
  const int64_t b = gx.size(0), t = gx.size(1), g4 = gx.size(2), h = g4 / 4;
  FOXHUNT_INTERNAL_ASSERT(l.codes.size(0) == h && l.codes.size(1) == g4, "lstm codes shape");
  auto out = torch::empty({b, t, h}, torch::kFloat);
  auto hq = torch::empty({b, h}, torch::kChar);
  auto c = c0.to(torch::kFloat).contiguous().clone();
  auto hlast = h0.to(torch::kFloat).contiguous().clone();
  const float sx = l.input_scale.data_ptr<float>()[0];
  const float* scale = l.scale.data_ptr<float>();
  const int8_t* w = l.codes.data_ptr<int8_t>();
  float* cp = c.data_ptr<float>();
  float* hp = hlast.data_ptr<float>();
  int8_t* q = hq.data_ptr<int8_t>();
  std::vector<int32_t> small(static_cast<size_t>(b * g4));
  torch::Tensor acc_t;
  torch::Tensor gates, act, cell_in, tanh_c;
  if (b > 4) {
    gates = torch::empty({b, g4}, torch::kFloat);
    act = torch::empty({b, g4}, torch::kFloat);
    cell_in = torch::empty({b, h}, torch::kFloat);
    tanh_c = torch::empty({b, h}, torch::kFloat);
  }
  for (int64_t s = 0; s < t; ++s) {
    codes_of(hp, q, b * h, sx);
    const int32_t* acc = nullptr;
    if (b <= 4) {
      std::fill(small.begin(), small.end(), 0);
      for (int64_t r = 0; r < b; ++r) {
        int32_t* ar = small.data() + r * g4;
        for (int64_t k = 0; k < h; ++k) {
          const int32_t qk = q[r * h + k];
          if (qk == 0) continue;
          const int8_t* wk = w + k * g4;
          for (int64_t j = 0; j < g4; ++j) ar[j] += qk * wk[j];
        }
      }
      acc = small.data();
    } else {
      acc_t = at::_int_mm(hq, l.codes);
      acc = acc_t.data_ptr<int32_t>();
    }
    const float* gs = gx.data_ptr<float>() + s * g4;
    float* os = out.data_ptr<float>() + s * h;
    if (b > 4) {
      // Many rows: the gates' transcendentals through ATen's vectorized kernels.
      float* pre = gates.data_ptr<float>();
      for (int64_t r = 0; r < b; ++r)
        add_dequantized(acc + r * g4, scale, gs + r * t * g4, pre + r * g4, g4);
      at::sigmoid_out(act, gates);
      at::tanh_out(cell_in, gates.narrow(1, 2 * h, h));
      const float* a = act.data_ptr<float>();
      const float* gt = cell_in.data_ptr<float>();
      for (int64_t r = 0; r < b; ++r) {
        const float* ar = a + r * g4;
        lstm_cell(ar, ar + h, gt + r * h, cp + r * h, g4);
      }
      at::tanh_out(tanh_c, c);
      const float* tc = tanh_c.data_ptr<float>();
      for (int64_t r = 0; r < b; ++r) {
        const float* og = a + r * g4 + 3 * h;
        float* hr = hp + r * h;
        float* orow = os + r * t * h;
        for (int64_t j = 0; j < h; ++j) orow[j] = hr[j] = og[j] * tc[r * h + j];
      }
      continue;
    }
    for (int64_t r = 0; r < b; ++r) {
      const float* gr = gs + r * t * g4;
      const int32_t* ar = acc + r * g4;
      float* cr = cp + r * h;
      float* hr = hp + r * h;
      float* orow = os + r * t * h;
      for (int64_t j = 0; j < h; ++j) {
        const float gi = gr[j] + static_cast<float>(ar[j]) * scale[j];
        const float gf = gr[h + j] + static_cast<float>(ar[h + j]) * scale[h + j];
        const float gg = gr[2 * h + j] + static_cast<float>(ar[2 * h + j]) * scale[2 * h + j];
        const float go = gr[3 * h + j] + static_cast<float>(ar[3 * h + j]) * scale[3 * h + j];
        cr[j] = sigmoid(gf) * cr[j] + sigmoid(gi) * std::tanh(gg);
        hr[j] = sigmoid(go) * std::tanh(cr[j]);
        orow[j] = hr[j];
      }
    }
  }
  return {out, hlast, c};
}

torch::Tensor layer_forward(const Int8TftImpl::Layer& l, bool batched, const torch::Tensor& x,
                            Int8Scratch* scratch) {
  Int8Scratch local;
  Int8Scratch& sc = scratch ? *scratch : local;
  const bool cpu = x.device().is_cpu();
  if (batched) {
    // [V, N, in] on weights dequantized to fp32 (W = s_x s_w q_w, once per forward when the
    // caller passes them in `codes`): the per-variable matrices are 8 wide, too small for an
    // int8 GEMM to pay, so they multiply the integer input codes on the fp32 unit.
    const auto w =
        l.codes.scalar_type() == torch::kFloat ? l.codes : l.codes.to(torch::kFloat) * l.scale;
    torch::Tensor xq;
    if (cpu) {
      const auto xc = x.to(torch::kFloat).contiguous();
      xq = Int8Scratch::take(sc.f32, xc.numel(), torch::kFloat).view(xc.sizes());
      const int64_t v = xc.size(0), per = xc.numel() / std::max<int64_t>(v, 1);
      const float* s = l.input_scale.data_ptr<float>();
      const float* src = xc.data_ptr<float>();
      float* dst = xq.data_ptr<float>();
      for (int64_t i = 0; i < v; ++i) codes_of(src + i * per, dst + i * per, per, s[i]);
    } else {
      xq = x.to(torch::kFloat).div(l.input_scale).round_().clamp_(-kQMax, kQMax);
    }
    return torch::baddbmm(l.bias, xq, w);
  }
  const int64_t in = l.codes.size(0), out = l.codes.size(1);
  auto shape = x.sizes().vec();
  shape.back() = out;
  const auto x2 = x.reshape({-1, in});
  const int64_t rows = x2.size(0);
  if (cpu && rows <= 4) return small_rows_forward(l, x2).view(shape);
  if (cpu) {
    // One pass to codes, the int8 GEMM, one pass back to fp32 (ATen would take five and two).
    const auto xc = x2.to(torch::kFloat).contiguous();
    // Fresh (not scratch) buffers: they die with this layer, so the peak holds one layer's.
    auto xq = torch::empty({rows, in}, torch::kChar);
    const float sx = l.input_scale.data_ptr<float>()[0];
    const float* src = xc.data_ptr<float>();
    int8_t* q = xq.data_ptr<int8_t>();
    codes_of(src, q, rows * in, sx);
    // The products become the output in place (int32 and float are both 4 bytes), so the layer
    // never holds an output-sized int32 tensor beside its output.
    auto acc = at::_int_mm(xq, l.codes);
    xq = torch::Tensor();
    dequantize_rows_in_place(acc.data_ptr<int32_t>(), l.scale.data_ptr<float>(),
                             l.bias.defined() ? l.bias.data_ptr<float>() : nullptr, rows, out);
    return acc.view(torch::kFloat).view(shape);
  }
  const auto xq = x2.to(torch::kFloat).div(l.input_scale).round_().clamp_(-kQMax, kQMax);
  const auto acc = int8_products(xq.to(torch::kChar), l.codes).to(torch::kFloat);
  auto y = l.bias.defined() ? torch::addcmul(l.bias, acc, l.scale) : acc.mul_(l.scale);
  return y.view(shape);
}

}  // namespace detail

torch::Tensor int8_layer_forward(const Int8TftImpl::Layer& l, bool batched,
                                 const torch::Tensor& x) {
  return detail::layer_forward(l, batched, x, nullptr);
}

}  // namespace foxhunt::quant
