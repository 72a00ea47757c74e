#include "foxhunt/models/tft_int8.h"

#include "foxhunt/quant/int8_fused.h"
#include "foxhunt/quant/int8_gemm.h"
#include "tft_float_ops.h"
#include "tft_int8_kernels.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "foxhunt/core/error.h"
#include "foxhunt/models/fused_kernels.h"

namespace foxhunt::models {

namespace {

constexpr const char* kTftInt8Component = "quant";
using detail::FloatOps;

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

// The sum of f(item) over `items` (a member function or a callable): the layout's byte totals.
template <typename T, typename F>
int64_t sum_over(const std::vector<T>& items, F f) {
  int64_t n = 0;
  for (const auto& item : items) n += std::invoke(f, item);
  return n;
}

// The fp32 scales of one int8 layer: s_x s_w per output and s_x (2-D), or both per variable.
int64_t scale_count(const Int8TftLayer& l) {
  return l.variables > 0 ? 2 * l.variables : l.out + 1;
}

// ---- the layout ------------------------------------------------------------------------------

struct LayoutBuilder {
  Int8TftLayout l;
  void lin(const std::string& n, int64_t in, int64_t out, bool bias = true) {
    l.layers.push_back({n, 0, in, out, bias});
  }
  void batched(const std::string& n, int64_t v, int64_t in, int64_t out) {
    l.layers.push_back({n, v, in, out, true});
  }
  void fp(const std::string& n, std::vector<int64_t> shape, const char* kind) {
    l.fp32.push_back({n, std::move(shape), kind});
  }
  void gan(const std::string& p, int64_t in, int64_t out) {
    lin(p + ".glu.fc", in, 2 * out);
    fp(p + ".norm.weight", {out}, "layer_norm");
    fp(p + ".norm.bias", {out}, "layer_norm");
  }
  void grn(const std::string& p, int64_t in, int64_t hid, int64_t out, int64_t ctx) {
    lin(p + ".fc2", in, hid);
    if (ctx > 0) lin(p + ".context", ctx, hid, /*bias=*/false);
    lin(p + ".fc1", hid, hid);
    gan(p + ".gate_norm", hid, out);
    if (in != out) lin(p + ".skip", in, out);
  }
  // The VSN as the INT8 model stores it: the per-variable embedding folded into the first
  // layers of every GRN that reads it (models/tft.h, VsnFolding).
  void vsn(const std::string& p, int64_t v, int64_t e, int64_t h) {
    const int64_t hi = std::min(e, h);
    const char* folded = "folded_embedding_map";
    fp(p + ".fc2_slope", {v, 1, hi}, folded);
    fp(p + ".fc2_offset", {v, 1, hi}, folded);
    fp(p + ".skip_slope", {v, 1, h}, folded);
    fp(p + ".skip_offset", {v, 1, h}, folded);
    batched(p + ".fc1", v, hi, hi);
    batched(p + ".glu", v, hi, 2 * h);
    fp(p + ".norm_weight", {v, h}, "layer_norm");
    fp(p + ".norm_bias", {v, h}, "layer_norm");
    if (v == 1) return;
    const std::string s = p + ".selection";
    lin(s + ".fc2", v, h);  // folded: raw values -> hidden
    lin(s + ".context", h, h, /*bias=*/false);
    lin(s + ".fc1", h, h);
    gan(s + ".gate_norm", h, v);
    if (v * e != v) {
      lin(s + ".skip", v, v);  // folded: raw values -> logits
    } else {                   // E == 1: the skip is the embeddings themselves
      fp(p + ".emb_weight", {v, 1, e}, folded);
      fp(p + ".emb_bias", {v, e}, folded);
    }
  }
  void lstm(const std::string& p, int64_t layers, int64_t h) {
    for (int64_t k = 0; k < layers; ++k) {
      lin(p + ".ih" + std::to_string(k), h, 4 * h);  // bias: b_ih + b_hh
      lin(p + ".hh" + std::to_string(k), h, 4 * h, /*bias=*/false);
    }
  }
};

// ---- the shared forward ----------------------------------------------------------------------

torch::Tensor broadcast_context(const torch::Tensor& c, const torch::Tensor& like) {
  return like.dim() == 3 ? c.unsqueeze(1) : c;
}

struct Forward {
  TftQuantOps& ops;
  const TftOptions& o;
  bool training;

  torch::Tensor gan(const std::string& p, const torch::Tensor& x, const torch::Tensor& skip,
                    int64_t out) {
    auto g = ops.layer(p + ".glu.fc", torch::dropout(x, o.dropout(), training));
    auto y = torch::addcmul(skip, g.narrow(-1, 0, out), torch::sigmoid(g.narrow(-1, out, out)));
    return torch::layer_norm(y, {out}, ops.tensor(p + ".norm.weight"), ops.tensor(p + ".norm.bias"),
                             1e-5);
  }

  torch::Tensor grn_projected(const std::string& p, const torch::Tensor& fc2_a,
                              const torch::Tensor& skip, const torch::Tensor& c, int64_t out) {
    auto h = fc2_a;
    if (c.defined()) h = h + broadcast_context(ops.layer(p + ".context", c), h);
    h = ops.layer(p + ".fc1", torch::elu(h));
    return gan(p + ".gate_norm", h, skip, out);
  }

  torch::Tensor grn(const std::string& p, const torch::Tensor& a, const torch::Tensor& c = {}) {
    const auto skip = ops.has_layer(p + ".skip") ? ops.layer(p + ".skip", a) : a;
    return grn_projected(p, ops.layer(p + ".fc2", a), skip, c, o.hidden());
  }

  // The V per-variable GRNs on xv [V, N, 1] -> [V, N, H].
  torch::Tensor variable_grns(const std::string& p, const torch::Tensor& xv) {
    const int64_t h = o.hidden();
    auto hid =
        torch::elu(torch::addcmul(ops.tensor(p + ".fc2_offset"), xv, ops.tensor(p + ".fc2_slope")));
    hid = ops.layer(p + ".fc1", hid);
    hid = torch::dropout(hid, o.dropout(), training);
    const auto g = ops.layer(p + ".glu", hid);  // [V, N, 2H]
    const auto skip =
        torch::addcmul(ops.tensor(p + ".skip_offset"), xv, ops.tensor(p + ".skip_slope"));
    auto y = torch::addcmul(skip, g.narrow(-1, 0, h), torch::sigmoid(g.narrow(-1, h, h)));
    y = torch::layer_norm(y, {h}, {}, {}, 1e-5);
    return torch::addcmul(ops.tensor(p + ".norm_bias").unsqueeze(1), y,
                          ops.tensor(p + ".norm_weight").unsqueeze(1));
  }

  torch::Tensor vsn(const std::string& p, const torch::Tensor& x, const torch::Tensor& c) {
    const int64_t b = x.size(0), t = x.size(1), v = x.size(2), n = b * t, h = o.hidden();
    const auto x2 = x.reshape({n, v});
    const auto xv = x2.t().contiguous().unsqueeze(-1);  // [V, N, 1]
    if (v == 1) return variable_grns(p, xv).squeeze(0).view({b, t, h});
    const std::string s = p + ".selection";
    auto fc2_a = ops.layer(s + ".fc2", x2).view({b, t, h});
    torch::Tensor skip;
    if (ops.has_layer(s + ".skip")) {
      skip = ops.layer(s + ".skip", x2).view({b, t, v});
    } else {
      skip = torch::addcmul(ops.tensor(p + ".emb_bias"), x.unsqueeze(-1),
                            ops.tensor(p + ".emb_weight").squeeze(1))
                 .reshape({b, t, v});
    }
    const auto weights = torch::softmax(grn_projected(s, fc2_a, skip, c, v), -1).view({n, v});
    if (!training) {
      if (auto y = ops.weighted_variable_grns(p, x2, weights); y.defined())
        return y.view({b, t, h});
    }
    // Blocks of positions keep the [V, block, 2H] intermediates small: 2^15 floats (128 KiB),
    // at least 8 positions. The fp32 model's fused VSN kernel holds no such intermediate, and
    // with the 2^18 budget of the unfused path the int8 model's serving peak exceeded the fp32
    // one on small models (the quantize job's check 3); fewer than 8 positions per block
    // doubled the default model's int8 latency.
    const int64_t block = std::max<int64_t>(8, (int64_t{1} << 15) / (v * 2 * h));
    std::vector<torch::Tensor> parts;
    for (int64_t start = 0; start < n; start += block) {
      const int64_t len = std::min(block, n - start);
      auto y = variable_grns(p, xv.narrow(1, start, len));
      parts.push_back(
          torch::bmm(weights.narrow(0, start, len).unsqueeze(1), y.transpose(0, 1)).squeeze(1));
    }
    return (parts.size() == 1 ? parts[0] : torch::cat(parts, 0)).view({b, t, h});
  }

  // A multi-layer LSTM over x [B, T, H] from (h0, c0) [L, B, H]; gate order i, f, g, o.
  std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> lstm(const std::string& p,
                                                               torch::Tensor x,
                                                               const torch::Tensor& h0,
                                                               const torch::Tensor& c0) {
    const int64_t layers = o.lstm_layers();
    std::vector<torch::Tensor> hs, cs;
    for (int64_t k = 0; k < layers; ++k) {
      const auto gx = ops.layer(p + ".ih" + std::to_string(k), x);  // [B, T, 4H]
      auto [out, hk, ck] = ops.lstm_layer(p + ".hh" + std::to_string(k), gx, h0[k], c0[k]);
      x = out;
      if (k + 1 < layers) x = torch::dropout(x, o.dropout(), training);
      hs.push_back(hk);
      cs.push_back(ck);
    }
    return {x, torch::stack(hs), torch::stack(cs)};
  }

  torch::Tensor attention(const torch::Tensor& q, const torch::Tensor& kv,
                          const torch::Tensor& mask) {
    const int64_t b = q.size(0), lq = q.size(1), lk = kv.size(1), heads = o.heads();
    const int64_t dk = o.hidden() / heads;
    auto qh = ops.layer("attention.query", q).view({b, lq, heads, dk}).transpose(1, 2);
    auto kh = ops.layer("attention.key", kv).view({b, lk, heads, dk}).transpose(1, 2);
    auto v = ops.layer("attention.value", kv).unsqueeze(1);
    auto scores = torch::matmul(qh, kh.transpose(-2, -1)) / std::sqrt(static_cast<double>(dk));
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    auto w = torch::softmax(scores, -1);
    auto heads_out = torch::matmul(torch::dropout(w, o.dropout(), training), v);
    return ops.layer("attention.out", heads_out.mean(1));
  }

  torch::Tensor run(const torch::Tensor& past, const torch::Tensor& future,
                    const torch::Tensor& static_id) {
    const int64_t t = past.size(1), k = future.size(1), layers = o.lstm_layers();
    const auto s =
        grn("static_variable", torch::embedding(ops.tensor("static_embedding.weight"), static_id));
    const auto cs = grn("static_context_selection", s);
    const auto ch = grn("static_context_hidden", s);
    const auto cc = grn("static_context_cell", s);
    const auto ce = grn("static_context_enrichment", s);
    const auto past_sel = vsn("past_vsn", past, cs);
    const auto future_sel = vsn("future_vsn", future, cs);
    auto [enc, h_enc, c_enc] = lstm("encoder", past_sel, ch.unsqueeze(0).repeat({layers, 1, 1}),
                                    cc.unsqueeze(0).repeat({layers, 1, 1}));
    auto dec = std::get<0>(lstm("decoder", future_sel, h_enc, c_enc));
    const auto phi = gan("lstm_gate", torch::cat({enc, dec}, 1),
                         torch::cat({past_sel, future_sel}, 1), o.hidden());
    const auto theta = grn("enrichment", phi, ce);
    const auto theta_dec = theta.narrow(1, t, k);
    auto att = attention(theta_dec, theta, tft_causal_mask(t, k, theta.device()));
    auto delta = gan("attention_gate", att, theta_dec, o.hidden());
    auto psi = grn("positionwise", delta);
    auto out = gan("output_gate", psi, phi.narrow(1, t, k), o.hidden());
    return ops.layer("output", out);
  }
};

}  // namespace

// ---- layout ------------------------------------------------------------------------------------

int64_t Int8TftLayer::code_bytes() const {
  return std::max<int64_t>(variables, 1) * in * out;
}

int64_t Int8TftLayer::fp32_bytes() const {
  const int64_t v = std::max<int64_t>(variables, 1);
  return 4 * (scale_count(*this) + (bias ? v * out : 0));
}

int64_t Int8TftLayer::float_bytes() const {
  const int64_t v = std::max<int64_t>(variables, 1);
  return 4 * v * (in * out + (bias ? out : 0));
}

int64_t Fp32TftTensor::bytes() const {
  return 4 * numel(shape);
}

int64_t Int8TftLayout::code_bytes() const {
  return sum_over(layers, &Int8TftLayer::code_bytes);
}
int64_t Int8TftLayout::layer_fp32_bytes() const {
  return sum_over(layers, &Int8TftLayer::fp32_bytes);
}
int64_t Int8TftLayout::scale_bytes() const {
  return 4 * sum_over(layers, scale_count);
}
int64_t Int8TftLayout::other_fp32_bytes() const {
  return sum_over(fp32, &Fp32TftTensor::bytes);
}
int64_t Int8TftLayout::total_bytes() const {
  return code_bytes() + layer_fp32_bytes() + other_fp32_bytes();
}
int64_t Int8TftLayout::quantized_float_bytes() const {
  return sum_over(layers, &Int8TftLayer::float_bytes);
}
const Int8TftLayer& Int8TftLayout::layer(const std::string& name) const {
  for (const auto& l : layers)
    if (l.name == name) return l;
  throw InputError(kTftInt8Component, "tft int8: no layer '" + name + "'");
}

Int8TftLayout int8_tft_layout(const TftOptions& o) {
  validate(o);
  const int64_t h = o.hidden(), e = o.real_embedding(), dk = h / o.heads();
  LayoutBuilder b;
  b.fp("static_embedding.weight", {o.static_categories(), h}, "embedding");
  for (const auto* n : {"static_variable", "static_context_selection", "static_context_hidden",
                        "static_context_cell", "static_context_enrichment"})
    b.grn(n, h, h, h, 0);
  b.vsn("past_vsn", o.past_features(), e, h);
  b.vsn("future_vsn", o.future_features(), e, h);
  b.lstm("encoder", o.lstm_layers(), h);
  b.lstm("decoder", o.lstm_layers(), h);
  b.gan("lstm_gate", h, h);
  b.grn("enrichment", h, h, h, h);
  b.lin("attention.query", h, o.heads() * dk);
  b.lin("attention.key", h, o.heads() * dk);
  b.lin("attention.value", h, dk);
  b.lin("attention.out", dk, h);
  b.gan("attention_gate", h, h);
  b.grn("positionwise", h, h, h, 0);
  b.gan("output_gate", h, h);
  b.lin("output", h, static_cast<int64_t>(o.quantiles().size()));
  for (const auto& l : b.l.layers)
    FOXHUNT_CHECK(l.variables == 0 || l.in <= quant::detail::kMaxExactFloatInner, kTftInt8Component,
                  "tft int8: layer '", l.name, "' has ", l.in, " inputs per variable; at most ",
                  quant::detail::kMaxExactFloatInner, " keep its integer products exact");
  return b.l;
}

nlohmann::json tft_precision_bytes(const TftOptions& o) {
  const auto l = int8_tft_layout(o);
  const int64_t fp32 = 4 * parameter_count(o);
  return {{"fp32", {{"parameter_bytes", fp32}}},
          {"int8",
           {{"parameter_bytes", l.total_bytes()},
            {"int8_bytes", l.code_bytes()},
            {"fp32_bytes", l.layer_fp32_bytes() + l.other_fp32_bytes()},
            {"scale_and_bias_bytes", l.layer_fp32_bytes()},
            {"fp32_tensor_bytes", l.other_fp32_bytes()},
            {"float_layout_bytes", l.float_layout_bytes()},
            {"ratio_to_fp32", static_cast<double>(l.total_bytes()) / static_cast<double>(fp32)},
            {"ratio_to_float_layout",
             static_cast<double>(l.total_bytes()) / static_cast<double>(l.float_layout_bytes())},
            {"quantized_layers", l.layers.size()},
            {"fp32_tensors", l.fp32.size()}}}};
}

std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> TftQuantOps::lstm_layer(
    const std::string& hh, const torch::Tensor& gx, torch::Tensor hk, torch::Tensor ck) {
  const int64_t t = gx.size(1), h = gx.size(2) / 4;
  std::vector<torch::Tensor> outs;
  outs.reserve(static_cast<size_t>(t));
  for (int64_t s = 0; s < t; ++s) {
    const auto g = gx.select(1, s) + layer(hh, hk);
    const auto i = torch::sigmoid(g.narrow(1, 0, h));
    const auto f = torch::sigmoid(g.narrow(1, h, h));
    const auto gg = torch::tanh(g.narrow(1, 2 * h, h));
    const auto og = torch::sigmoid(g.narrow(1, 3 * h, h));
    ck = torch::addcmul(f * ck, i, gg);
    hk = og * torch::tanh(ck);
    outs.push_back(hk);
  }
  return {torch::stack(outs, 1), hk, ck};
}

torch::Tensor tft_quant_forward(TftQuantOps& ops, const TftOptions& o, const torch::Tensor& past,
                                const torch::Tensor& future, const torch::Tensor& static_id,
                                bool training) {
  Forward f{ops, o, training};
  return f.run(past, future, static_id);
}

torch::Tensor tft_layout_forward(TftNetImpl& net, const torch::Tensor& past,
                                 const torch::Tensor& future, const torch::Tensor& static_id) {
  validate_tft_inputs(net.options, past, future, static_id, module_device(net));
  FloatOps ops(net, int8_tft_layout(net.options));
  const auto dtype = net.output->weight.scalar_type();
  return tft_quant_forward(ops, net.options, past.to(dtype), future.to(dtype), static_id,
                           net.is_training());
}

// ---- calibration -------------------------------------------------------------------------------

TftCalibrator::TftCalibrator(TftNet net, double percentile)
    : net_(std::move(net)), percentile_(percentile) {
  FOXHUNT_CHECK(percentile >= 0.0 && percentile <= 100.0, kTftInt8Component,
                "calibration percentile: expected 0 (L2-optimal clip) or a value in (0, 100], got ",
                percentile);
}

void TftCalibrator::observe(const torch::Tensor& past, const torch::Tensor& future,
                            const torch::Tensor& static_id) {
  auto& net = *net_;
  validate_tft_inputs(net.options, past, future, static_id, module_device(net));
  torch::NoGradGuard no_grad;
  const bool was_training = net.is_training();
  net.eval();
  const auto layout = int8_tft_layout(net.options);
  FloatOps ops(net, layout);
  ops.observe = [&](const std::string& name, const torch::Tensor& x) {
    if (x.dim() == 3 && ops.weights(name).batched) {
      const auto m = x.detach().abs().amax({1, 2}).to(torch::kCPU, torch::kFloat);
      auto& a = absmax_[name];
      a = a.defined() ? torch::maximum(a, m) : m;
    } else {
      hist_[name].observe(x.detach());
    }
  };
  const auto dtype = net.output->weight.scalar_type();
  tft_quant_forward(ops, net.options, past.to(dtype), future.to(dtype), static_id, false);
  if (was_training) net.train();
  windows_ += past.size(0);
}

InputScales TftCalibrator::scales() const {
  FOXHUNT_CHECK(windows_ > 0, kTftInt8Component,
                "calibration: expected at least one observed batch");
  InputScales s;
  for (const auto& [name, h] : hist_) {
    const float c = percentile_ > 0 ? h.percentile(percentile_) : h.l2_optimal_threshold();
    s[name] = torch::full({1}, std::max(c / static_cast<float>(quant::kQMax), quant::kMinScale));
  }
  for (const auto& [name, a] : absmax_) s[name] = (a / quant::kQMax).clamp_min(quant::kMinScale);
  return s;
}

// ---- QAT -------------------------------------------------------------------------------------

QatTftModel::QatTftModel(TftNet net, QatOptions options, InputScales initial)
    : ForecasterAdapter("tft", net, io_spec(net->options)), options_(options) {
  FOXHUNT_CHECK(options.observer_steps() >= 0, kTftInt8Component,
                "qat observer_steps: expected >= 0, got ", options.observer_steps());
  FOXHUNT_CHECK(options.momentum() > 0 && options.momentum() <= 1, kTftInt8Component,
                "qat momentum: expected a value in (0, 1], got ", options.momentum());
  for (auto& [name, s] : initial) absmax_[name] = (s * quant::kQMax).to(torch::kCPU, torch::kFloat);
}

std::vector<torch::Tensor> QatTftModel::forward(const Batch& b) {
  check_inputs(b);
  auto& net = *net_;
  validate_tft_inputs(net.options, b.inputs[0], b.inputs[1], b.inputs[2], module_device(net));
  const bool training = net.is_training();
  const bool update = training && !frozen();
  const auto layout = int8_tft_layout(net.options);
  FloatOps ops(net, layout);
  // The observers move once per forward, towards the largest |x| each layer saw in it: the
  // LSTM's recurrent layers run once per step, and an average over steps would let the
  // many |h| < 1 steps pull the scale below the initial state's range.
  std::map<std::string, torch::Tensor> seen;
  ops.fake_quant_scale = [&](const std::string& name, const torch::Tensor& x) {
    const bool batched = ops.weights(name).batched;
    auto& a = absmax_[name];
    if (update || !a.defined()) {
      torch::NoGradGuard no_grad;
      const auto m =
          (batched ? x.detach().abs().amax({1, 2}) : x.detach().abs().amax().reshape({1}))
              .to(torch::kCPU, torch::kFloat);
      auto& s = seen[name];
      s = s.defined() ? torch::maximum(s, m) : m;
      if (!a.defined()) a = m;  // no scale yet: this batch's range
    }
    return (a / quant::kQMax).clamp_min(quant::kMinScale);
  };
  const auto dtype = net.output->weight.scalar_type();
  auto y = tft_quant_forward(ops, net.options, b.inputs[0].to(dtype), b.inputs[1].to(dtype),
                             b.inputs[2], training);
  if (update) {
    for (const auto& [name, m] : seen) {
      auto& a = absmax_.at(name);
      a = a + options_.momentum() * (m - a);
    }
    ++steps_;
  }
  return {y};
}

Batch QatTftModel::example_batch(int64_t batch, int64_t seq_len, const torch::Device& device,
                                 uint64_t seed) const {
  return example_batch_of(net_->options, batch, seq_len, device, seed);
}

InputScales QatTftModel::scales() const {
  InputScales s;
  for (const auto& [name, a] : absmax_) s[name] = (a / quant::kQMax).clamp_min(quant::kMinScale);
  return s;
}

int64_t QatTftModel::observer_bytes() const {
  int64_t n = 0;
  for (const auto& [name, a] : absmax_) n += a.numel() * static_cast<int64_t>(a.element_size());
  return n;
}

}  // namespace foxhunt::models
