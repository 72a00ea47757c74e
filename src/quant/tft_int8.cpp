#include "foxhunt/quant/tft_int8.h"

#include "int8_fused.h"
#include "int8_gemm.h"
#include "tft_int8_kernels.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/models/fused_kernels.h"

namespace foxhunt::quant {

namespace {

constexpr const char* kTftInt8Component = "quant";
using detail::kMaxExactFloatInner;  // int8_gemm.h: sums exact in fp32 up to this inner width

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

torch::Tensor align_context(const torch::Tensor& c, const torch::Tensor& like) {
  return like.dim() == 3 ? c.unsqueeze(1) : c;
}

struct Forward {
  TftQuantOps& ops;
  const models::TftOptions& o;
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
    if (c.defined()) h = h + align_context(ops.layer(p + ".context", c), h);
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
    auto att = attention(theta_dec, theta, models::tft_causal_mask(t, k, theta.device()));
    auto delta = gan("attention_gate", att, theta_dec, o.hidden());
    auto psi = grn("positionwise", delta);
    auto out = gan("output_gate", psi, phi.narrow(1, t, k), o.hidden());
    return ops.layer("output", out);
  }
};

// ---- ops over the FP32 network ---------------------------------------------------------------

// The FP32 network's layers in the layout's form (folded VSN maps, fused LSTM biases), run in
// fp32 (optionally recording each layer's input) or fake-quantized (QAT).
class FloatOps final : public TftQuantOps {
 public:
  struct Weights {
    torch::Tensor w, b;  // [out, in] / [out], or batched [V, in, out] / [V, out]
    bool batched = false;
  };

  FloatOps(models::TftNetImpl& net, const Int8TftLayout& layout) {
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
            x, s, torch::zeros({s.size(0)}, s.options().dtype(torch::kInt)), 0, -kQMax, kQMax);
        // Weights [V, in, out]: one scale per variable (see the header).
        const int64_t v = w.size(0);
        const auto wv = w.reshape({v, -1});
        const auto sw = (wv.detach().abs().amax(1) / kQMax).clamp_min(kMinScale);
        w = torch::fake_quantize_per_channel_affine(
                wv, sw, torch::zeros({v}, sw.options().dtype(torch::kInt)), 0, -kQMax, kQMax)
                .view(w.sizes());
      } else {
        xin = torch::fake_quantize_per_tensor_affine(
            x, s.reshape({1}), torch::zeros({1}, s.options().dtype(torch::kInt)), -kQMax, kQMax);
        const auto sw = (w.detach().abs().amax(1) / kQMax).clamp_min(kMinScale);
        w = torch::fake_quantize_per_channel_affine(
            w, sw, torch::zeros({w.size(0)}, sw.options().dtype(torch::kInt)), 0, -kQMax, kQMax);
      }
    }
    if (e.batched) return torch::baddbmm(e.b.unsqueeze(1), xin, w);
    return torch::linear(xin, w, e.b);  // what torch::nn::Linear runs
  }

 private:
  std::map<std::string, Weights> w_;
  std::map<std::string, torch::Tensor> t_;
};

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
    if (!gx.device().is_cpu() || !models::fused_cpu_kernels() ||
        gx.size(2) / 4 > kMaxExactFloatInner)
      return TftQuantOps::lstm_layer(hh, gx, h, c);
    return detail::int8_lstm_cpu(net_.layer(hh), gx, h, c);
  }

  torch::Tensor weighted_variable_grns(const std::string& vsn, const torch::Tensor& x,
                                       const torch::Tensor& weights) override {
    const auto& fc1 = net_.layer(vsn + ".fc1");
    const auto& glu = net_.layer(vsn + ".glu");
    const int64_t hi = fc1.codes.size(1), h = glu.codes.size(2) / 2;
    if (!models::fused_cpu_kernels() || !x.device().is_cpu() || x.scalar_type() != torch::kFloat ||
        weights.scalar_type() != torch::kFloat || hi > detail::kMaxInt8VsnInner ||
        h > detail::kMaxInt8VsnHidden)
      return {};
    const auto xc = x.contiguous(), wc = weights.contiguous();
    detail::VsnInt8Weights p;
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
    detail::vsn_weighted_grns_int8(p, xc.data_ptr<float>(), wc.data_ptr<float>(), xc.size(0),
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

Int8TftLayout int8_tft_layout(const models::TftOptions& o) {
  models::validate(o);
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
    FOXHUNT_CHECK(l.variables == 0 || l.in <= kMaxExactFloatInner, kTftInt8Component,
                  "tft int8: layer '", l.name, "' has ", l.in, " inputs per variable; at most ",
                  kMaxExactFloatInner, " keep its integer products exact");
  return b.l;
}

nlohmann::json tft_precision_bytes(const models::TftOptions& o) {
  const auto l = int8_tft_layout(o);
  const int64_t fp32 = 4 * models::parameter_count(o);
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

torch::Tensor tft_quant_forward(TftQuantOps& ops, const models::TftOptions& o,
                                const torch::Tensor& past, const torch::Tensor& future,
                                const torch::Tensor& static_id, bool training) {
  Forward f{ops, o, training};
  return f.run(past, future, static_id);
}

torch::Tensor tft_layout_forward(models::TftNetImpl& net, const torch::Tensor& past,
                                 const torch::Tensor& future, const torch::Tensor& static_id) {
  models::validate_tft_inputs(net.options, past, future, static_id, models::module_device(net));
  FloatOps ops(net, int8_tft_layout(net.options));
  const auto dtype = net.output->weight.scalar_type();
  return tft_quant_forward(ops, net.options, past.to(dtype), future.to(dtype), static_id,
                           net.is_training());
}

// ---- calibration -------------------------------------------------------------------------------

TftCalibrator::TftCalibrator(models::TftNet net, double percentile)
    : net_(std::move(net)), percentile_(percentile) {
  FOXHUNT_CHECK(percentile >= 0.0 && percentile <= 100.0, kTftInt8Component,
                "calibration percentile: expected 0 (L2-optimal clip) or a value in (0, 100], got ",
                percentile);
}

void TftCalibrator::observe(const torch::Tensor& past, const torch::Tensor& future,
                            const torch::Tensor& static_id) {
  auto& net = *net_;
  models::validate_tft_inputs(net.options, past, future, static_id, models::module_device(net));
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
    s[name] = torch::full({1}, std::max(c / static_cast<float>(kQMax), kMinScale));
  }
  for (const auto& [name, a] : absmax_) s[name] = (a / kQMax).clamp_min(kMinScale);
  return s;
}

// ---- QAT -------------------------------------------------------------------------------------

QatTftModel::QatTftModel(models::TftNet net, QatOptions options, InputScales initial)
    : ForecasterAdapter("tft", net, models::io_spec(net->options)), options_(options) {
  FOXHUNT_CHECK(options.observer_steps() >= 0, kTftInt8Component,
                "qat observer_steps: expected >= 0, got ", options.observer_steps());
  FOXHUNT_CHECK(options.momentum() > 0 && options.momentum() <= 1, kTftInt8Component,
                "qat momentum: expected a value in (0, 1], got ", options.momentum());
  for (auto& [name, s] : initial) absmax_[name] = (s * kQMax).to(torch::kCPU, torch::kFloat);
}

std::vector<torch::Tensor> QatTftModel::forward(const models::Batch& b) {
  check_inputs(b);
  auto& net = *net_;
  models::validate_tft_inputs(net.options, b.inputs[0], b.inputs[1], b.inputs[2],
                              models::module_device(net));
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
    return (a / kQMax).clamp_min(kMinScale);
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

models::Batch QatTftModel::example_batch(int64_t batch, int64_t seq_len,
                                         const torch::Device& device, uint64_t seed) const {
  return models::tft_example_batch(net_->options, batch, seq_len, device, seed);
}

InputScales QatTftModel::scales() const {
  InputScales s;
  for (const auto& [name, a] : absmax_) s[name] = (a / kQMax).clamp_min(kMinScale);
  return s;
}

int64_t QatTftModel::observer_bytes() const {
  int64_t n = 0;
  for (const auto& [name, a] : absmax_) n += a.numel() * static_cast<int64_t>(a.element_size());
  return n;
}

// ---- the converted network ---------------------------------------------------------------------

Int8TftImpl::Int8TftImpl(models::TftOptions o) : options(std::move(o)) {
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
  FOXHUNT_CHECK(it != layers_.end(), kTftInt8Component, "tft int8: no layer '", name, "'");
  return it->second;
}

const torch::Tensor& Int8TftImpl::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  FOXHUNT_CHECK(it != tensors_.end(), kTftInt8Component, "tft int8: no fp32 tensor '", name, "'");
  return it->second;
}

torch::Tensor Int8TftImpl::forward(const torch::Tensor& past, const torch::Tensor& future,
                                   const torch::Tensor& static_id) {
  const auto device = layers_.begin()->second.codes.device();
  models::validate_tft_inputs(options, past, future, static_id, device);
  c10::InferenceMode guard;  // nothing here trains
  Int8Ops ops(*this);
  return tft_quant_forward(ops, options, past.to(torch::kFloat), future.to(torch::kFloat),
                           static_id, false);
}

std::shared_ptr<Int8TftImpl> Int8TftImpl::convert(models::TftNetImpl& net,
                                                  const InputScales& scales) {
  torch::NoGradGuard no_grad;
  auto q = std::make_shared<Int8TftImpl>(net.options);
  const auto device = models::module_device(net);
  q->to(device);
  FloatOps ops(net, q->layout);
  for (const auto& l : q->layout.layers) {
    auto it = scales.find(l.name);
    FOXHUNT_CHECK(it != scales.end(), kTftInt8Component,
                  "tft int8 conversion: no activation scale for '", l.name,
                  "' (calibrate or train with QAT first)");
    const auto sx = it->second.to(device, torch::kFloat);
    const auto& w = ops.weights(l.name);
    auto& b = q->layers_.at(l.name);
    if (l.variables > 0) {
      FOXHUNT_CHECK(sx.numel() == l.variables, kTftInt8Component, "tft int8 conversion: '", l.name,
                    "' expects ", l.variables, " activation scales, got ", sx.numel());
      const auto wf = w.w.detach().to(torch::kFloat);                              // [V, in, out]
      const auto sw = (wf.abs().amax({1, 2}, true) / kQMax).clamp_min(kMinScale);  // [V, 1, 1]
      b.codes.copy_(wf.div(sw).round_().clamp_(-kQMax, kQMax).to(torch::kChar));
      b.input_scale.copy_(sx.view({l.variables, 1, 1}));
      b.scale.copy_(sx.view({l.variables, 1, 1}) * sw);
      b.bias.copy_(w.b.detach().unsqueeze(1));
    } else {
      FOXHUNT_CHECK(sx.numel() == 1, kTftInt8Component, "tft int8 conversion: '", l.name,
                    "' expects one activation scale, got ", sx.numel());
      const auto wf = w.w.detach().to(torch::kFloat);  // [out, in]
      const auto sw = (wf.abs().amax(1) / kQMax).clamp_min(kMinScale);
      b.codes.copy_(wf.div(sw.unsqueeze(1)).round_().clamp_(-kQMax, kQMax).to(torch::kChar).t());
      b.input_scale.copy_(sx.view({1}));
      b.scale.copy_(sx.view({1}) * sw);
      if (l.bias) b.bias.copy_(w.b.detach());
    }
  }
  for (const auto& t : q->layout.fp32) q->tensors_.at(t.name).copy_(ops.tensor(t.name).detach());
  q->eval();
  return q;
}

void to_json(nlohmann::json& j, const LayerError& e) {
  j = nlohmann::json::object();
  FOXHUNT_JSON_FIELDS(j, e, layer, snr_db, rel_error);
}

std::vector<LayerError> Int8TftImpl::layer_errors(models::TftNetImpl& net,
                                                  const torch::Tensor& past,
                                                  const torch::Tensor& future,
                                                  const torch::Tensor& static_id) {
  models::validate_tft_inputs(net.options, past, future, static_id, models::module_device(net));
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
  std::vector<LayerError> rows;
  for (const auto& l : layout.layers) {
    const auto& s = sums.at(l.name);
    const double snr = s.noise > 0 ? 10.0 * std::log10(s.signal / s.noise) : 999.0;
    rows.push_back({l.name, snr, s.signal > 0 ? std::sqrt(s.noise / s.signal) : 0.0});
  }
  return rows;
}

// ---- adapter -----------------------------------------------------------------------------------

namespace {

class Int8TftModel final : public models::ForecasterAdapter<Int8Tft> {
 public:
  explicit Int8TftModel(Int8Tft net)
      : ForecasterAdapter("tft", net, models::io_spec(net->options)) {}
  models::Precision precision() const override { return models::Precision::kInt8; }
  std::vector<torch::Tensor> forward(const models::Batch& b) override {
    check_inputs(b);
    return {net_->forward(b.inputs[0], b.inputs[1], b.inputs[2])};
  }
  models::Batch example_batch(int64_t batch, int64_t seq_len, const torch::Device& device,
                              uint64_t seed) const override {
    return models::tft_example_batch(net_->options, batch, seq_len, device, seed);
  }
};

}  // namespace

std::unique_ptr<models::Model> make_int8_tft_model(const nlohmann::json& options) {
  return int8_tft_model(Int8Tft(models::tft_options_from_json(options)));
}

std::unique_ptr<models::Model> int8_tft_model(Int8Tft net) {
  return std::make_unique<Int8TftModel>(std::move(net));
}

}  // namespace foxhunt::quant
