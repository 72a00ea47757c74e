// The CPU kernels of the INT8 TFT (tft_int8_kernels.h): activation codes, the int8 products of
// one layer, and the LSTM recurrence.
#include "tft_int8_kernels.h"

#include "foxhunt/quant/codes.h"
#include "foxhunt/quant/int8_fused.h"
#include "foxhunt/quant/int8_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "foxhunt/core/error.h"

namespace foxhunt::models {

namespace detail {

namespace {

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
    quant::detail::codes_of(xr, q.data(), in, sx);
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

// The int8 LSTM recurrence on the CPU: the fused kernel (int8_fused.h) over the layer's codes;
// ATen's op-per-gate loop dispatches ~17 ops per step instead.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> int8_lstm_cpu(const Int8TftImpl::Layer& l,
                                                                      const torch::Tensor& gx_in,
                                                                      const torch::Tensor& h0,
                                                                      const torch::Tensor& c0) {
  const auto gx = gx_in.to(torch::kFloat).contiguous();
  const int64_t b = gx.size(0), t = gx.size(1), g4 = gx.size(2), h = g4 / 4;
  FOXHUNT_INTERNAL_ASSERT(l.codes.size(0) == h && l.codes.size(1) == g4, "lstm codes shape");
  FOXHUNT_INTERNAL_ASSERT(h <= quant::detail::kMaxExactFloatInner,
                          "lstm width beyond exact fp32 sums");
  auto out = torch::empty({b, t, h}, torch::kFloat);
  auto c = c0.to(torch::kFloat).contiguous().clone();
  auto hlast = h0.to(torch::kFloat).contiguous().clone();
  // Through LibTorch's allocator, so the memory ledger counts it.
  auto scratch = torch::empty({quant::detail::int8_lstm_scratch_floats(h)}, torch::kFloat);
  const auto codes = l.codes.contiguous();
  quant::detail::int8_lstm_recurrence(gx.data_ptr<float>(), codes.data_ptr<int8_t>(),
                                      l.scale.data_ptr<float>(), l.input_scale.data_ptr<float>()[0],
                                      b, t, h, hlast.data_ptr<float>(), c.data_ptr<float>(),
                                      out.data_ptr<float>(), scratch.data_ptr<float>());
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
      for (int64_t i = 0; i < v; ++i)
        quant::detail::codes_of(src + i * per, dst + i * per, per, s[i]);
    } else {
      xq = x.to(torch::kFloat).div(l.input_scale).round_().clamp_(-quant::kQMax, quant::kQMax);
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
    quant::detail::codes_of(src, q, rows * in, sx);
    // The products become the output in place (int32 and float are both 4 bytes), so the layer
    // never holds an output-sized int32 tensor beside its output.
    auto acc = at::_int_mm(xq, l.codes);
    xq = torch::Tensor();
    dequantize_rows_in_place(acc.data_ptr<int32_t>(), l.scale.data_ptr<float>(),
                             l.bias.defined() ? l.bias.data_ptr<float>() : nullptr, rows, out);
    return acc.view(torch::kFloat).view(shape);
  }
  const auto xq =
      x2.to(torch::kFloat).div(l.input_scale).round_().clamp_(-quant::kQMax, quant::kQMax);
  const auto acc = quant::detail::int8_products(xq.to(torch::kChar), l.codes).to(torch::kFloat);
  auto y = l.bias.defined() ? torch::addcmul(l.bias, acc, l.scale) : acc.mul_(l.scale);
  return y.view(shape);
}

}  // namespace detail

torch::Tensor int8_layer_forward(const Int8TftImpl::Layer& l, bool batched,
                                 const torch::Tensor& x) {
  return detail::layer_forward(l, batched, x, nullptr);
}

}  // namespace foxhunt::models
