// The converted INT8 TFT (tft_int8.h): Int8TftImpl (conversion from an FP32 network, the
// forward over its codes, the per-layer errors) and its registry adapter.
#include <algorithm>
#include <cmath>
#include <limits>

#include "foxhunt/core/error.h"
#include "foxhunt/models/fused_kernels.h"
#include "foxhunt/models/tft_int8.h"
#include "foxhunt/quant/int8_fused.h"
#include "foxhunt/quant/int8_gemm.h"
#include "tft_float_ops.h"
#include "tft_int8_kernels.h"

namespace foxhunt::models {

namespace {

constexpr const char* kTftInt8NetComponent = "quant";
using detail::FloatOps;

// ---- ops over the converted network ----------------------------------------------------------

class Int8Ops final : public TftQuantOps {
 public:
  explicit Int8Ops(const Int8TftImpl& net) : net_(net) {}
  bool has_layer(const std::string& name) const override { return net_.has_layer(name); }
  const torch::Tensor& tensor(const std::string& name) override { return net_.tensor(name); }
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> lstm_layer(const std::string& hh,
                                                                     const torch::Tensor& gx,
                                                                     torch::Tensor h,
                                                                     torch::Tensor c) override {
    if (!gx.device().is_cpu() || !fused_cpu_kernels() ||
        gx.size(2) / 4 > quant::detail::kMaxExactFloatInner)
      return TftQuantOps::lstm_layer(hh, gx, h, c);
    return detail::int8_lstm_cpu(net_.layer(hh), gx, h, c);
  }

  torch::Tensor weighted_variable_grns(const std::string& vsn, const torch::Tensor& x,
                                       const torch::Tensor& weights) override {
    const auto& fc1 = net_.layer(vsn + ".fc1");
    const auto& glu = net_.layer(vsn + ".glu");
    const int64_t hi = fc1.codes.size(1), h = glu.codes.size(2) / 2;
    if (!fused_cpu_kernels() || !x.device().is_cpu() || x.scalar_type() != torch::kFloat ||
        weights.scalar_type() != torch::kFloat || hi > quant::detail::kMaxInt8VsnInner ||
        h > quant::detail::kMaxInt8VsnHidden)
      return {};
    const auto xc = x.contiguous(), wc = weights.contiguous();
    quant::detail::VsnInt8Weights p;
    p.variables = fc1.codes.size(0);
    p.inner = hi;
    p.hidden = h;
    const auto f = [&](const char* name) { return net_.tensor(vsn + name).data_ptr<float>(); };
    p.fc2_slope = f(".fc2_slope");
    p.fc2_offset = f(".fc2_offset");
    p.skip_slope = f(".skip_slope");
    p.skip_offset = f(".skip_offset");
    p.norm_weight = f(".norm_weight");
    p.norm_bias = f(".norm_bias");
    p.fc1_codes = fc1.codes.data_ptr<int8_t>();
    p.fc1_input_scale = fc1.input_scale.data_ptr<float>();
    p.fc1_scale = fc1.scale.data_ptr<float>();
    p.fc1_bias = fc1.bias.data_ptr<float>();
    p.glu_codes = glu.codes.data_ptr<int8_t>();
    p.glu_input_scale = glu.input_scale.data_ptr<float>();
    p.glu_scale = glu.scale.data_ptr<float>();
    p.glu_bias = glu.bias.data_ptr<float>();
    auto out = torch::empty({xc.size(0), h}, torch::kFloat);
    quant::detail::vsn_weighted_grns_int8(p, xc.data_ptr<float>(), wc.data_ptr<float>(), xc.size(0),
                                          out.data_ptr<float>());
    return out;
  }

  torch::Tensor layer(const std::string& name, const torch::Tensor& x) override {
    const auto& l = net_.layer(name);
    if (l.codes.dim() != 3) {
      // A 2-D layer after a VSN's per-variable blocks: their buffers are dead, drop them so
      // they do not add to the peak of what follows.
      if (!dequantized_.empty()) {
        dequantized_.clear();
        scratch_ = detail::Int8Scratch();
      }
      return detail::layer_forward(l, false, x, &scratch_);
    }
    // The batched layers run once per block of positions: their weights dequantized once per
    // forward (transient, freed with the ops), not once per block.
    auto& f = dequantized_[name];
    if (!f.defined()) f = l.codes.to(torch::kFloat) * l.scale;
    Int8TftImpl::Layer view = l;
    view.codes = f;
    return detail::layer_forward(view, true, x, &scratch_);
  }

 private:
  const Int8TftImpl& net_;
  std::map<std::string, torch::Tensor> dequantized_;
  detail::Int8Scratch scratch_;
};

std::string buffer_name(const std::string& name, const char* what) {
  std::string s = name;
  std::replace(s.begin(), s.end(), '.', '_');
  return s + "__" + what;
}

}  // namespace

// ---- the converted network ---------------------------------------------------------------------

Int8TftImpl::Int8TftImpl(TftOptions o) : options(std::move(o)) {
  layout = int8_tft_layout(options);
  const auto f = torch::TensorOptions().dtype(torch::kFloat);
  for (const auto& l : layout.layers) {
    Layer b;
    if (l.variables > 0) {
      const int64_t v = l.variables;
      b.codes = torch::zeros({v, l.in, l.out}, torch::kChar);
      b.scale = torch::zeros({v, 1, 1}, f);
      b.input_scale = torch::ones({v, 1, 1}, f);
      if (l.bias) b.bias = torch::zeros({v, 1, l.out}, f);
    } else {
      b.codes = torch::zeros({l.in, l.out}, torch::kChar);
      b.scale = torch::zeros({l.out}, f);
      b.input_scale = torch::ones({1}, f);
      if (l.bias) b.bias = torch::zeros({l.out}, f);
    }
    b.codes = register_buffer(buffer_name(l.name, "codes"), b.codes);
    b.scale = register_buffer(buffer_name(l.name, "scale"), b.scale);
    b.input_scale = register_buffer(buffer_name(l.name, "input_scale"), b.input_scale);
    if (l.bias) b.bias = register_buffer(buffer_name(l.name, "bias"), b.bias);
    layers_[l.name] = b;
  }
  for (const auto& t : layout.fp32)
    tensors_[t.name] = register_buffer(buffer_name(t.name, "fp32"), torch::zeros(t.shape, f));
}

const Int8TftImpl::Layer& Int8TftImpl::layer(const std::string& name) const {
  auto it = layers_.find(name);
  FOXHUNT_CHECK(it != layers_.end(), kTftInt8NetComponent, "tft int8: no layer '", name, "'");
  return it->second;
}

const torch::Tensor& Int8TftImpl::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  FOXHUNT_CHECK(it != tensors_.end(), kTftInt8NetComponent, "tft int8: no fp32 tensor '", name,
                "'");
  return it->second;
}

torch::Tensor Int8TftImpl::forward(const torch::Tensor& past, const torch::Tensor& future,
                                   const torch::Tensor& static_id) {
  const auto device = layers_.begin()->second.codes.device();
  validate_tft_inputs(options, past, future, static_id, device);
  c10::InferenceMode guard;  // nothing here trains
  Int8Ops ops(*this);
  return tft_quant_forward(ops, options, past.to(torch::kFloat), future.to(torch::kFloat),
                           static_id, false);
}

std::shared_ptr<Int8TftImpl> Int8TftImpl::convert(TftNetImpl& net, const InputScales& scales) {
  torch::NoGradGuard no_grad;
  auto q = std::make_shared<Int8TftImpl>(net.options);
  const auto device = module_device(net);
  q->to(device);
  FloatOps ops(net, q->layout);
  for (const auto& l : q->layout.layers) {
    auto it = scales.find(l.name);
    FOXHUNT_CHECK(it != scales.end(), kTftInt8NetComponent,
                  "tft int8 conversion: no activation scale for '", l.name,
                  "' (calibrate or train with QAT first)");
    const auto sx = it->second.to(device, torch::kFloat);
    const auto& w = ops.weights(l.name);
    auto& b = q->layers_.at(l.name);
    if (l.variables > 0) {
      FOXHUNT_CHECK(sx.numel() == l.variables, kTftInt8NetComponent, "tft int8 conversion: '",
                    l.name, "' expects ", l.variables, " activation scales, got ", sx.numel());
      const auto wf = w.w.detach().to(torch::kFloat);  // [V, in, out]
      const auto sw =
          (wf.abs().amax({1, 2}, true) / quant::kQMax).clamp_min(quant::kMinScale);  // [V, 1, 1]
      b.codes.copy_(wf.div(sw).round_().clamp_(-quant::kQMax, quant::kQMax).to(torch::kChar));
      b.input_scale.copy_(sx.view({l.variables, 1, 1}));
      b.scale.copy_(sx.view({l.variables, 1, 1}) * sw);
      b.bias.copy_(w.b.detach().unsqueeze(1));
    } else {
      FOXHUNT_CHECK(sx.numel() == 1, kTftInt8NetComponent, "tft int8 conversion: '", l.name,
                    "' expects one activation scale, got ", sx.numel());
      const auto wf = w.w.detach().to(torch::kFloat);  // [out, in]
      const auto sw = (wf.abs().amax(1) / quant::kQMax).clamp_min(quant::kMinScale);
      b.codes.copy_(wf.div(sw.unsqueeze(1))
                        .round_()
                        .clamp_(-quant::kQMax, quant::kQMax)
                        .to(torch::kChar)
                        .t());
      b.input_scale.copy_(sx.view({1}));
      b.scale.copy_(sx.view({1}) * sw);
      if (l.bias) b.bias.copy_(w.b.detach());
    }
  }
  for (const auto& t : q->layout.fp32) q->tensors_.at(t.name).copy_(ops.tensor(t.name).detach());
  q->eval();
  return q;
}

std::vector<quant::LayerError> Int8TftImpl::layer_errors(TftNetImpl& net, const torch::Tensor& past,
                                                         const torch::Tensor& future,
                                                         const torch::Tensor& static_id) {
  validate_tft_inputs(net.options, past, future, static_id, module_device(net));
  torch::NoGradGuard no_grad;
  net.eval();
  FloatOps ops(net, layout);
  struct Sums {
    double signal = 0, noise = 0, ref = 0;
  };
  std::map<std::string, Sums> sums;
  ops.observe = [&](const std::string& name, const torch::Tensor& x) {
    const auto& w = ops.weights(name);
    const auto yf = w.batched
                        ? torch::baddbmm(w.b.unsqueeze(1), x, w.w)
                        : (w.b.defined() ? torch::addmm(w.b, x.reshape({-1, w.w.size(1)}), w.w.t())
                                         : torch::mm(x.reshape({-1, w.w.size(1)}), w.w.t()));
    const auto& l = layer(name);
    const auto y8 = int8_layer_forward(l, w.batched, x).reshape(yf.sizes());
    auto& s = sums[name];
    s.signal += yf.pow(2).sum().item<double>();
    s.noise += (yf - y8).pow(2).sum().item<double>();
  };
  const auto dtype = net.output->weight.scalar_type();
  tft_quant_forward(ops, net.options, past.to(dtype), future.to(dtype), static_id, false);
  std::vector<quant::LayerError> rows;
  for (const auto& l : layout.layers) {
    const auto& s = sums.at(l.name);
    const double snr = s.noise > 0 ? 10.0 * std::log10(s.signal / s.noise) : 999.0;
    rows.push_back({l.name, snr, s.signal > 0 ? std::sqrt(s.noise / s.signal) : 0.0});
  }
  return rows;
}

// ---- adapter -----------------------------------------------------------------------------------

namespace {

class Int8TftModel final : public ForecasterAdapter<Int8Tft> {
 public:
  explicit Int8TftModel(Int8Tft net) : ForecasterAdapter("tft", net, io_spec(net->options)) {}
  Precision precision() const override { return Precision::kInt8; }
  std::vector<torch::Tensor> forward(const Batch& b) override {
    check_inputs(b);
    return {net_->forward(b.inputs[0], b.inputs[1], b.inputs[2])};
  }
};

}  // namespace

std::unique_ptr<Model> make_int8_tft_model(const nlohmann::json& options) {
  return int8_tft_model(Int8Tft(tft_options_from_json(options)));
}

std::unique_ptr<Model> int8_tft_model(Int8Tft net) {
  return std::make_unique<Int8TftModel>(std::move(net));
}

}  // namespace foxhunt::models
