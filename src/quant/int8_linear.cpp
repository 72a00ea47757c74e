#include "foxhunt/quant/int8_linear.h"

#include "foxhunt/quant/int8_gemm.h"

#include "foxhunt/core/error.h"
#include "foxhunt/quant/quantize.h"

namespace foxhunt::quant {

Int8Linear Int8Linear::from_float(const torch::Tensor& weight, const torch::Tensor& bias) {
  FOXHUNT_CHECK(weight.defined() && weight.dim() == 2, "quant",
                "int8 linear: expected a weight [out, in]");
  PerChannelMinMaxObserver obs;
  obs.observe(weight);
  return from_float(weight, bias, obs.symmetric_scales());
}

Int8Linear Int8Linear::from_float(const torch::Tensor& weight, const torch::Tensor& bias,
                                  const torch::Tensor& scales) {
  FOXHUNT_CHECK(weight.defined() && weight.dim() == 2 && weight.is_floating_point(), "quant",
                "int8 linear: expected a floating weight [out, in]");
  FOXHUNT_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == weight.size(0)), "quant",
                "int8 linear: expected a bias [", weight.size(0), "]");
  torch::NoGradGuard no_grad;
  Int8Linear l;
  l.out_ = weight.size(0);
  l.in_ = weight.size(1);
  l.scales_ = scales.detach().to(torch::kFloat).clamp_min(kMinScale).contiguous();
  l.codes_t_ = quantize_per_channel(weight.detach(), l.scales_).t().contiguous();
  if (bias.defined()) l.bias_ = bias.detach().to(torch::kFloat).clone();
  return l;
}

torch::Tensor Int8Linear::forward(const torch::Tensor& x) const {
  FOXHUNT_CHECK(codes_t_.defined(), "quant", "int8 linear: not initialised");
  FOXHUNT_CHECK(x.dim() >= 1 && x.size(-1) == in_, "quant", "int8 linear: expected [..., ", in_,
                "] input, got shape ", x.sizes());
  auto shape = x.sizes().vec();
  const auto rows = quantize_rows(x.reshape({-1, in_}));
  const auto acc = detail::int8_products(rows.codes, codes_t_);  // [rows, out] int32
  torch::Tensor y;
  if (acc.device().is_cpu() && acc.numel() <= 4096) {
    // Few rows: one scalar pass from int32 to the result (ATen's four ops cost more in
    // dispatch than in arithmetic there; beyond ~4k outputs its vectorized kernels win).
    const int64_t n = acc.size(0);
    y = torch::empty({n, out_}, torch::kFloat);
    const int32_t* a = acc.data_ptr<int32_t>();
    const float* sx = rows.scales.data_ptr<float>();
    const float* sw = scales_.data_ptr<float>();
    const float* b = bias_.defined() ? bias_.data_ptr<float>() : nullptr;
    float* o = y.data_ptr<float>();
    for (int64_t r = 0; r < n; ++r) {
      const float s = sx[r];
      const int32_t* ar = a + r * out_;
      float* orow = o + r * out_;
      if (b)
        for (int64_t c = 0; c < out_; ++c) orow[c] = static_cast<float>(ar[c]) * s * sw[c] + b[c];
      else
        for (int64_t c = 0; c < out_; ++c) orow[c] = static_cast<float>(ar[c]) * s * sw[c];
    }
  } else {
    y = acc.to(torch::kFloat).mul_(rows.scales.unsqueeze(1)).mul_(scales_.unsqueeze(0));
    if (bias_.defined()) y.add_(bias_);
  }
  shape.back() = out_;
  return y.view(shape);
}

torch::Tensor Int8Linear::dequantized_weight() const {
  return dequantize_per_channel(codes_t_.t(), scales_);
}

int64_t Int8Linear::bytes() const {
  return in_ * out_ + 4 * out_ + (bias_.defined() ? 4 * out_ : 0);
}

void Int8Linear::to(const torch::Device& device) {
  codes_t_ = codes_t_.to(device);
  scales_ = scales_.to(device);
  if (bias_.defined()) bias_ = bias_.to(device);
}

}  // namespace foxhunt::quant
