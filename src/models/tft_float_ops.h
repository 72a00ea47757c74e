#pragma once
// Private to models/: the FP32 TFT's layers in the INT8 layout's form, which the layout forward,
// calibration, QAT (tft_int8.cpp) and the conversion (tft_int8_net.cpp) all run.

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <utility>

#include "foxhunt/core/error.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/models/tft_int8.h"
#include "foxhunt/quant/quantize.h"

namespace foxhunt::models::detail {

// The FP32 network's layers in the layout's form (folded VSN maps, fused LSTM biases), run in
// fp32 (optionally recording each layer's input) or fake-quantized (QAT).
class FloatOps final : public TftQuantOps {
 public:
  struct Weights {
    torch::Tensor w, b;  // [out, in] / [out], or batched [V, in, out] / [V, out]
    bool batched = false;
  };

  FloatOps(TftNetImpl& net, const Int8TftLayout& layout) {
    for (const auto& item : net.named_parameters()) t_[item.key()] = item.value();
    for (const auto& item : net.named_modules()) {
      if (auto* lin = item.value()->as<torch::nn::Linear>())
        w_[item.key()] = {lin->weight, lin->bias, false};
    }
    for (const auto* p : {"past_vsn", "future_vsn"}) {
      const std::string pre = p;
      auto& vsn = pre == "past_vsn" ? net.past_vsn : net.future_vsn;
      const auto f = vsn->fold();
      t_[pre + ".fc2_slope"] = f.fc2_slope;
      t_[pre + ".fc2_offset"] = f.fc2_offset;
      t_[pre + ".skip_slope"] = f.skip_slope;
      t_[pre + ".skip_offset"] = f.skip_offset;
      w_[pre + ".fc1"] = {vsn->fc1_weight, vsn->fc1_bias, true};
      w_[pre + ".glu"] = {vsn->glu_weight, vsn->glu_bias, true};
      if (vsn->options.variables() > 1) {
        w_[pre + ".selection.fc2"] = {f.sel_fc2.t(), f.sel_fc2_offset, false};
        if (f.sel_skip.defined())
          w_[pre + ".selection.skip"] = {f.sel_skip.t(), f.sel_skip_offset, false};
      }
    }
    for (const auto* p : {"encoder", "decoder"}) {
      const std::string pre = p;
      auto& lstm = pre == "encoder" ? net.encoder : net.decoder;
      const auto params = lstm->named_parameters();
      for (int64_t k = 0; k < net.options.lstm_layers(); ++k) {
        const auto sk = std::to_string(k);
        w_[pre + ".ih" + sk] = {params["weight_ih_l" + sk],
                                params["bias_ih_l" + sk] + params["bias_hh_l" + sk], false};
        w_[pre + ".hh" + sk] = {params["weight_hh_l" + sk], {}, false};
      }
    }
    // Only the layout's layers take part (the unfolded selection weights do not).
    std::map<std::string, Weights> kept;
    for (const auto& l : layout.layers) {
      auto it = w_.find(l.name);
      FOXHUNT_INTERNAL_ASSERT(it != w_.end(), "tft int8 layout: no FP32 layer " + l.name);
      kept[l.name] = it->second;
    }
    w_ = std::move(kept);
    for (const auto& f : layout.fp32)
      FOXHUNT_INTERNAL_ASSERT(t_.count(f.name) == 1, "tft int8 layout: no FP32 tensor " + f.name);
  }

  /// Called with each layer's input before the layer runs.
  std::function<void(const std::string&, const torch::Tensor&)> observe;
  /// When set, the layer's input is fake-quantized with this scale ([1] or [V]) and its weights
  /// per output channel.
  std::function<torch::Tensor(const std::string&, const torch::Tensor&)> fake_quant_scale;

  const Weights& weights(const std::string& name) const { return w_.at(name); }

  bool has_layer(const std::string& name) const override { return w_.count(name) == 1; }
  const torch::Tensor& tensor(const std::string& name) override { return t_.at(name); }

  torch::Tensor layer(const std::string& name, const torch::Tensor& x) override {
    const auto& e = w_.at(name);
    if (observe) observe(name, x);
    auto xin = x;
    auto w = e.w;
    if (fake_quant_scale) {
      const auto s = fake_quant_scale(name, x).to(x.device());
      if (e.batched) {
        xin = torch::fake_quantize_per_channel_affine(
            x, s, torch::zeros({s.size(0)}, s.options().dtype(torch::kInt)), 0, -quant::kQMax,
            quant::kQMax);
        // Weights [V, in, out]: one scale per variable (see the header).
        const int64_t v = w.size(0);
        const auto wv = w.reshape({v, -1});
        const auto sw = (wv.detach().abs().amax(1) / quant::kQMax).clamp_min(quant::kMinScale);
        w = torch::fake_quantize_per_channel_affine(
                wv, sw, torch::zeros({v}, sw.options().dtype(torch::kInt)), 0, -quant::kQMax,
                quant::kQMax)
                .view(w.sizes());
      } else {
        xin = torch::fake_quantize_per_tensor_affine(
            x, s.reshape({1}), torch::zeros({1}, s.options().dtype(torch::kInt)), -quant::kQMax,
            quant::kQMax);
        const auto sw = (w.detach().abs().amax(1) / quant::kQMax).clamp_min(quant::kMinScale);
        w = torch::fake_quantize_per_channel_affine(
            w, sw, torch::zeros({w.size(0)}, sw.options().dtype(torch::kInt)), 0, -quant::kQMax,
            quant::kQMax);
      }
    }
    if (e.batched) return torch::baddbmm(e.b.unsqueeze(1), xin, w);
    return torch::linear(xin, w, e.b);  // what torch::nn::Linear runs
  }

 private:
  std::map<std::string, Weights> w_;
  std::map<std::string, torch::Tensor> t_;
};

}  // namespace foxhunt::models::detail
