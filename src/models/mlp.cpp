#include "foxhunt/models/mlp.h"

#include "foxhunt/core/checked_math.h"
#include "foxhunt/core/error.h"
#include "foxhunt/models/lean.h"

namespace foxhunt::models {

int64_t mlp_parameter_count(const MlpOptions& o) {
  // Checked: the sizes may come from a file's options (a bundle header).
  auto linear = [](int64_t in, int64_t out) {
    return checked_add(checked_mul(in, out, "mlp", "parameter count"), out, "mlp",
                       "parameter count");
  };
  int64_t total = 0;
  int64_t in = o.in();
  for (int64_t h : o.hidden()) {
    total = checked_add(total, linear(in, h), "mlp", "parameter count");
    in = h;
  }
  return checked_add(total, linear(in, o.out()), "mlp", "parameter count");
}

MlpImpl::MlpImpl(MlpOptions options_) : options(std::move(options_)) {
  reset();
}

void MlpImpl::reset() {
  FOXHUNT_CHECK(options.in() > 0 && options.out() > 0, "mlp",
                "expected in > 0 and out > 0, got in=", options.in(), " out=", options.out());
  layers.clear();
  int64_t in = options.in();
  std::vector<int64_t> widths = options.hidden();
  widths.push_back(options.out());
  for (size_t i = 0; i < widths.size(); ++i) {
    FOXHUNT_CHECK(widths[i] > 0, "mlp", "expected positive layer widths, got ", widths[i]);
    layers.push_back(register_module("fc" + std::to_string(i), torch::nn::Linear(in, widths[i])));
    in = widths[i];
  }
}

torch::Tensor MlpImpl::forward(torch::Tensor x) {
  if (fused_mlp_applies(*this, x)) return fused_mlp_forward(*this, x);
  for (size_t i = 0; i < layers.size(); ++i) {
    x = layers[i]->forward(x);
    if (i + 1 < layers.size())
      x = options.activation() == Activation::kReLU ? torch::relu(x) : torch::tanh(x);
  }
  return x;
}

void MlpImpl::orthogonal_init(double hidden_gain, double out_gain) {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < layers.size(); ++i) {
    torch::nn::init::orthogonal_(layers[i]->weight, i + 1 < layers.size() ? hidden_gain : out_gain);
    torch::nn::init::zeros_(layers[i]->bias);
  }
}

}  // namespace foxhunt::models
