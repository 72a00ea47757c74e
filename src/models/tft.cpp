#include "foxhunt/models/tft.h"

#include "fused_path.h"
#include "tft_bf16_kernels.h"
#include "tft_internal.h"
#include "tft_kernels.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "foxhunt/models/bf16.h"
#include "foxhunt/models/options_io.h"
#include "foxhunt/models/quantile_loss.h"

namespace foxhunt::models {

namespace F = torch::nn::functional;

namespace detail {

torch::Tensor fast_elu(const torch::Tensor& x) {
  if (!fused_cpu_float(x)) return torch::elu(x);
  auto out = torch::empty_like(x);
  kernels::elu(x.data_ptr<float>(), x.numel(), out.data_ptr<float>());
  return out;
}

void init_xavier(torch::nn::Linear& l) {
  torch::nn::init::xavier_uniform_(l->weight);
  if (l->bias.defined()) torch::nn::init::zeros_(l->bias);
}

}  // namespace detail

using detail::fast_elu;
using detail::init_xavier;

namespace {

// ---- overflow-checked counting ----------------------------------------------------------------

int64_t mul(int64_t a, int64_t b) {
  int64_t r = 0;
  FOXHUNT_CHECK(!__builtin_mul_overflow(a, b, &r), "tft", "parameter count overflows int64 (", a,
                " x ", b, ")");
  return r;
}

int64_t add(int64_t a, int64_t b) {
  int64_t r = 0;
  FOXHUNT_CHECK(!__builtin_add_overflow(a, b, &r), "tft", "parameter count overflows int64 (", a,
                " + ", b, ")");
  return r;
}

int64_t linear_count(int64_t in, int64_t out, bool bias = true) {
  return add(mul(in, out), bias ? out : 0);
}

int64_t gate_add_norm_count(int64_t in, int64_t out) {
  return add(linear_count(in, mul(2, out)), mul(2, out));  // GLU + LayerNorm gain/shift
}

// ---- init helpers for [.., fan_in, fan_out] tensors (batched per-variable weights) ------------

void kaiming_normal_fan_in(torch::Tensor& w, int64_t fan_in) {
  w.normal_(0.0, std::sqrt(2.0 / static_cast<double>(fan_in)));
}

void xavier_uniform(torch::Tensor& w, int64_t fan_in, int64_t fan_out) {
  const double bound = std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  w.uniform_(-bound, bound);
}

void init_fc(torch::nn::Linear& l) {
  torch::nn::init::kaiming_normal_(l->weight, 0.0, torch::kFanIn, torch::kReLU);
  if (l->bias.defined()) torch::nn::init::zeros_(l->bias);
}

/// Broadcasts a per-sample context [batch, C] against `like` ([batch, C'] or [batch, time, C']).
torch::Tensor align_context(const torch::Tensor& c, const torch::Tensor& like) {
  return like.dim() == 3 ? c.unsqueeze(1) : c;
}

}  // namespace

// ---- options ----------------------------------------------------------------------------------

// The one field list of TftOptions: its JSON writer, reader and known keys.
FOXHUNT_OPTIONS_JSON(TftOptions, "tft", tft_options_from_json, past_features, future_features,
                     static_categories, hidden, heads, lstm_layers, dropout, window, horizon,
                     quantiles, real_embedding)

void validate(const TftOptions& o) {
  auto positive = [](int64_t v, const char* name) {
    FOXHUNT_CHECK(v > 0, "tft", "option '", name, "': expected > 0, got ", v);
  };
  positive(o.past_features(), "past_features");
  positive(o.future_features(), "future_features");
  positive(o.static_categories(), "static_categories");
  positive(o.hidden(), "hidden");
  positive(o.heads(), "heads");
  positive(o.lstm_layers(), "lstm_layers");
  positive(o.window(), "window");
  positive(o.horizon(), "horizon");
  positive(o.real_embedding(), "real_embedding");
  FOXHUNT_CHECK(o.hidden() % o.heads() == 0, "tft",
                "option 'heads': expected a divisor of hidden=", o.hidden(), ", got ", o.heads());
  FOXHUNT_CHECK(o.dropout() >= 0.0 && o.dropout() < 1.0, "tft",
                "option 'dropout': expected a value in [0, 1), got ", o.dropout());
  FOXHUNT_CHECK(!o.quantiles().empty(), "tft", "option 'quantiles': expected at least one level");
  for (double q : o.quantiles())
    FOXHUNT_CHECK(q > 0.0 && q < 1.0, "tft", "option 'quantiles': expected levels in (0, 1), got ",
                  q);
  for (size_t k = 1; k < o.quantiles().size(); ++k)
    FOXHUNT_CHECK(o.quantiles()[k] > o.quantiles()[k - 1], "tft",
                  "option 'quantiles': expected levels strictly increasing, got ",
                  o.quantiles()[k - 1], " then ", o.quantiles()[k]);
}

int64_t parameter_count(const GatedResidualNetworkOptions& o) {
  int64_t n = linear_count(o.in(), o.hidden());                       // W2, b2
  n = add(n, linear_count(o.context(), o.hidden(), /*bias=*/false));  // W3 (0 when no context)
  n = add(n, linear_count(o.hidden(), o.hidden()));                   // W1, b1
  n = add(n, gate_add_norm_count(o.hidden(), o.out()));               // GLU + LayerNorm
  if (o.in() != o.out()) n = add(n, linear_count(o.in(), o.out()));   // skip projection
  return n;
}

int64_t parameter_count(const VariableSelectionNetworkOptions& o) {
  const int64_t v = o.variables(), e = o.embedding(), h = o.hidden();
  int64_t n = mul(v, linear_count(1, e));  // Linear(1 -> E) per variable
  n = add(n, mul(v, parameter_count(GatedResidualNetworkOptions(e, std::min(e, h), h))));
  if (v > 1)
    n = add(n, parameter_count(GatedResidualNetworkOptions(mul(v, e), h, v).context(o.context())));
  return n;
}

int64_t parameter_count(const TftOptions& o) {
  validate(o);
  const int64_t h = o.hidden(), q = static_cast<int64_t>(o.quantiles().size());
  const int64_t d_k = h / o.heads();
  const auto grn = [&](int64_t context) {
    return parameter_count(GatedResidualNetworkOptions(h, h, h).context(context));
  };
  int64_t n = mul(o.static_categories(), h);  // static embedding
  n = add(n, mul(5, grn(0)));                 // static variable GRN + 4 context encoders
  n = add(
      n, parameter_count(
             VariableSelectionNetworkOptions(o.past_features(), o.real_embedding(), h).context(h)));
  n = add(
      n,
      parameter_count(
          VariableSelectionNetworkOptions(o.future_features(), o.real_embedding(), h).context(h)));
  // Two LSTMs (encoder, decoder), each layer: W_ih, W_hh [4H, H] and b_ih, b_hh [4H].
  const int64_t lstm_layer = add(mul(2, mul(4 * h, h)), mul(2, 4 * h));
  n = add(n, mul(2, mul(o.lstm_layers(), lstm_layer)));
  n = add(n, gate_add_norm_count(h, h));                     // gated skip after the LSTMs
  n = add(n, grn(h));                                        // static enrichment
  n = add(n, mul(2, linear_count(h, mul(o.heads(), d_k))));  // per-head Q and K
  n = add(n, linear_count(h, d_k));                          // shared V
  n = add(n, linear_count(d_k, h));                          // W_H
  n = add(n, gate_add_norm_count(h, h));                     // after attention
  n = add(n, grn(0));                                        // position-wise GRN
  n = add(n, gate_add_norm_count(h, h));                     // before the output layer
  n = add(n, linear_count(h, q));                            // quantile head
  return n;
}

// ---- GLU, GateAddNorm -------------------------------------------------------------------------

GluImpl::GluImpl(int64_t in_, int64_t out_, double dropout_)
    : in(in_), out(out_), dropout_p(dropout_) {
  reset();
}

void GluImpl::reset() {
  FOXHUNT_CHECK(in > 0 && out > 0, "tft", "glu: expected in > 0 and out > 0, got in=", in,
                " out=", out);
  dropout = register_module("dropout", torch::nn::Dropout(dropout_p));
  fc = register_module("fc", torch::nn::Linear(in, 2 * out));
  init_xavier(fc);
}

torch::Tensor GluImpl::forward(const torch::Tensor& x) {
  auto y = fc->forward(dropout->forward(x));
  return y.narrow(-1, 0, out) * torch::sigmoid(y.narrow(-1, out, out));
}

GateAddNormImpl::GateAddNormImpl(int64_t in_, int64_t out_, double dropout_)
    : in(in_), out(out_), dropout_p(dropout_) {
  reset();
}

void GateAddNormImpl::reset() {
  glu = register_module("glu", Glu(in, out, dropout_p));
  norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({out})));
}

torch::Tensor GateAddNormImpl::forward(const torch::Tensor& x, const torch::Tensor& skip) {
  return norm->forward(glu->forward(x) + skip);
}

// ---- GRN --------------------------------------------------------------------------------------

GatedResidualNetworkImpl::GatedResidualNetworkImpl(GatedResidualNetworkOptions options_)
    : options(std::move(options_)) {
  reset();
}

void GatedResidualNetworkImpl::reset() {
  const auto& o = options;
  FOXHUNT_CHECK(o.in() > 0 && o.hidden() > 0 && o.out() > 0 && o.context() >= 0, "tft",
                "grn: expected positive sizes, got in=", o.in(), " hidden=", o.hidden(),
                " out=", o.out(), " context=", o.context());
  context = nullptr;
  skip = nullptr;
  fc2 = register_module("fc2", torch::nn::Linear(o.in(), o.hidden()));
  init_fc(fc2);
  if (o.context() > 0) {
    context = register_module(
        "context",
        torch::nn::Linear(torch::nn::LinearOptions(o.context(), o.hidden()).bias(false)));
    init_xavier(context);
  }
  fc1 = register_module("fc1", torch::nn::Linear(o.hidden(), o.hidden()));
  init_fc(fc1);
  gate_norm = register_module("gate_norm", GateAddNorm(o.hidden(), o.out(), o.dropout()));
  if (o.in() != o.out()) {
    skip = register_module("skip", torch::nn::Linear(o.in(), o.out()));
    init_fc(skip);
  }
}

torch::Tensor GatedResidualNetworkImpl::forward(const torch::Tensor& a, const torch::Tensor& c) {
  FOXHUNT_CHECK(a.dim() >= 1 && a.size(-1) == options.in(), "tft", "grn: expected input with ",
                options.in(), " features, got shape ", shape_str(a.sizes().vec()));
  return forward_projected(fc2->forward(a), skip.is_empty() ? a : skip->forward(a), c);
}

torch::Tensor GatedResidualNetworkImpl::forward_projected(const torch::Tensor& fc2_a,
                                                          const torch::Tensor& skip_term,
                                                          const torch::Tensor& c) {
  auto h = fc2_a;
  if (c.defined()) {
    FOXHUNT_CHECK(!context.is_empty(), "tft",
                  "grn: got a context input but the GRN was built without one (context=0)");
    FOXHUNT_CHECK(c.dim() == 2 && c.size(0) == fc2_a.size(0) && c.size(1) == options.context(),
                  "tft", "grn: expected context of shape ",
                  shape_str({fc2_a.size(0), options.context()}), ", got ",
                  shape_str(c.sizes().vec()));
    h = h + align_context(context->forward(c), h);
  }  // no context given: the W3 c term is zero (as with no static inputs)
  h = fc1->forward(fast_elu(h));
  return gate_norm->forward(h, skip_term);
}

// ---- VSN --------------------------------------------------------------------------------------

VariableSelectionNetworkImpl::VariableSelectionNetworkImpl(VariableSelectionNetworkOptions o)
    : options(std::move(o)) {
  reset();
}

void VariableSelectionNetworkImpl::reset() {
  const int64_t v = options.variables(), e = options.embedding(), h = options.hidden();
  FOXHUNT_CHECK(v > 0 && e > 0 && h > 0 && options.context() >= 0, "tft",
                "vsn: expected positive sizes, got variables=", v, " embedding=", e, " hidden=", h,
                " context=", options.context());
  torch::NoGradGuard no_grad;
  // Linear(1 -> E) per variable with LibTorch's default init (U(+-1/sqrt(fan_in)), fan_in = 1).
  emb_weight = register_parameter("emb_weight", torch::empty({v, 1, e}).uniform_(-1.0, 1.0));
  emb_bias = register_parameter("emb_bias", torch::empty({v, e}).uniform_(-1.0, 1.0));
  const int64_t hi = inner();
  fc2_weight = register_parameter("fc2_weight", torch::empty({v, e, hi}));
  kaiming_normal_fan_in(fc2_weight, e);
  fc2_bias = register_parameter("fc2_bias", torch::zeros({v, hi}));
  fc1_weight = register_parameter("fc1_weight", torch::empty({v, hi, hi}));
  kaiming_normal_fan_in(fc1_weight, hi);
  fc1_bias = register_parameter("fc1_bias", torch::zeros({v, hi}));
  glu_weight = register_parameter("glu_weight", torch::empty({v, hi, 2 * h}));
  xavier_uniform(glu_weight, hi, 2 * h);
  glu_bias = register_parameter("glu_bias", torch::zeros({v, 2 * h}));
  norm_weight = register_parameter("norm_weight", torch::ones({v, h}));
  norm_bias = register_parameter("norm_bias", torch::zeros({v, h}));
  if (e != h) {
    skip_weight = register_parameter("skip_weight", torch::empty({v, e, h}));
    kaiming_normal_fan_in(skip_weight, e);
    skip_bias = register_parameter("skip_bias", torch::zeros({v, h}));
  } else {
    skip_weight = torch::Tensor();
    skip_bias = torch::Tensor();
  }
  selection = nullptr;
  if (v > 1) {
    selection =
        register_module("selection", GatedResidualNetwork(GatedResidualNetworkOptions(v * e, h, v)
                                                              .context(options.context())
                                                              .dropout(options.dropout())));
  }
}

namespace {

bool cpu_float(const torch::Tensor& t) {
  return fused_cpu_kernels() && t.defined() && t.device().is_cpu() &&
         t.scalar_type() == torch::kFloat;
}

// The fused kernels (tft_kernels.h) take CPU float32 weights and input and widths within their
// stack scratch; inference, training forward (dropout) and backward alike.
bool fused_vsn_applies(const VariableSelectionNetworkImpl& m, const torch::Tensor& x) {
  if (!cpu_float(x)) return false;
  if (m.inner() > kernels::kMaxVsnInner || m.options.hidden() > kernels::kMaxVsnHidden)
    return false;
  for (const auto* t : {&m.fc1_weight, &m.fc1_bias, &m.glu_weight, &m.glu_bias, &m.norm_weight,
                        &m.norm_bias, &m.emb_weight})
    if (!cpu_float(*t)) return false;
  return true;
}

// `t` in FP32 where it is BF16 (the BF16 TFT's per-variable VSN weights, bf16.h: every use
// outside the BF16 kernel computes in FP32 on their upcast values), else `t` itself.
torch::Tensor as_float(const torch::Tensor& t) {
  return t.defined() && t.scalar_type() == torch::kBFloat16 ? t.to(torch::kFloat) : t;
}

// The BF16 kernel (tft_bf16_kernels.h) runs inference of a VSN whose per-variable weights are BF16
// on a CPU with BF16 dot products, on CPU float32 input.
bool bf16_vsn_applies(const VariableSelectionNetworkImpl& m, const torch::Tensor& x) {
  if (!cpu_float(x) || torch::GradMode::is_enabled()) return false;
  if (m.inner() > kernels::kMaxVsnInner || m.options.hidden() > kernels::kMaxVsnHidden)
    return false;
  for (const auto* t : {&m.fc1_weight, &m.glu_weight})
    if (t->scalar_type() != torch::kBFloat16 || !t->device().is_cpu()) return false;
  return cpu_has_bf16();
}

// The kernels' per-variable weights, in this order (every tensor contiguous, [V, ...]).
enum VsnWeight { kS2, kO2, kW1, kB1, kWg, kBg, kSs, kSo, kNw, kNb, kVsnWeights };

kernels::VsnGrnWeights grn_weights(const torch::Tensor* t, int64_t variables, int64_t inner,
                                   int64_t hidden) {
  kernels::VsnGrnWeights p;
  p.variables = variables;
  p.inner = inner;
  p.hidden = hidden;
  p.fc2_slope = t[kS2].const_data_ptr<float>();
  p.fc2_offset = t[kO2].const_data_ptr<float>();
  p.fc1_weight = t[kW1].const_data_ptr<float>();
  p.fc1_bias = t[kB1].const_data_ptr<float>();
  p.glu_weight = t[kWg].const_data_ptr<float>();
  p.glu_bias = t[kBg].const_data_ptr<float>();
  p.skip_slope = t[kSs].const_data_ptr<float>();
  p.skip_offset = t[kSo].const_data_ptr<float>();
  p.norm_weight = t[kNw].const_data_ptr<float>();
  p.norm_bias = t[kNb].const_data_ptr<float>();
  return p;
}

// sum_v w[n, v] GRN_v(x[n, v]) as one autograd node: the fused forward saves only its inputs,
// and the fused backward recomputes each position's GRN (no [V, N, .] activation is stored;
// those were most of a training step's time and memory). Dropout masks come from `seed`.
struct FusedVsnFunction : public torch::autograd::Function<FusedVsnFunction> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& w, const torch::Tensor& s2,
                               const torch::Tensor& o2, const torch::Tensor& w1,
                               const torch::Tensor& b1, const torch::Tensor& wg,
                               const torch::Tensor& bg, const torch::Tensor& ss,
                               const torch::Tensor& so, const torch::Tensor& nw,
                               const torch::Tensor& nb, int64_t inner, double dropout,
                               int64_t seed) {
    const torch::Tensor t[] = {s2, o2, w1, b1, wg, bg, ss, so, nw, nb};
    const int64_t n = x.size(0), v = x.size(1), h = nw.size(1);
    auto out = torch::empty({n, h});
    kernels::vsn_weighted_grns(grn_weights(t, v, inner, h), x.const_data_ptr<float>(),
                               w.const_data_ptr<float>(), n, out.mutable_data_ptr<float>(),
                               dropout_of(dropout, seed));
    ctx->save_for_backward({x, w, s2, o2, w1, b1, wg, bg, ss, so, nw, nb});
    ctx->saved_data["inner"] = inner;
    ctx->saved_data["dropout"] = dropout;
    ctx->saved_data["seed"] = seed;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_out) {
    const auto saved = ctx->get_saved_variables();
    const auto& x = saved[0];
    const auto& w = saved[1];
    const torch::Tensor* t = saved.data() + 2;
    const int64_t n = x.size(0), v = x.size(1), h = t[kNw].size(1);
    const auto dout = grad_out[0].contiguous();
    torch::Tensor g[kVsnWeights];
    for (int i = 0; i < kVsnWeights; ++i) g[i] = torch::empty_like(t[i]);
    kernels::VsnGrnGrads grads;
    grads.fc2_slope = g[kS2].mutable_data_ptr<float>();
    grads.fc2_offset = g[kO2].mutable_data_ptr<float>();
    grads.fc1_weight = g[kW1].mutable_data_ptr<float>();
    grads.fc1_bias = g[kB1].mutable_data_ptr<float>();
    grads.glu_weight = g[kWg].mutable_data_ptr<float>();
    grads.glu_bias = g[kBg].mutable_data_ptr<float>();
    grads.skip_slope = g[kSs].mutable_data_ptr<float>();
    grads.skip_offset = g[kSo].mutable_data_ptr<float>();
    grads.norm_weight = g[kNw].mutable_data_ptr<float>();
    grads.norm_bias = g[kNb].mutable_data_ptr<float>();
    const bool want_dx = ctx->needs_input_grad(0);
    auto dw = torch::empty_like(w);
    auto dx = want_dx ? torch::empty_like(x) : torch::Tensor();
    kernels::vsn_weighted_grns_backward(
        grn_weights(t, v, ctx->saved_data["inner"].toInt(), h), x.const_data_ptr<float>(),
        w.const_data_ptr<float>(), dout.const_data_ptr<float>(), n,
        dropout_of(ctx->saved_data["dropout"].toDouble(), ctx->saved_data["seed"].toInt()),
        want_dx ? dx.mutable_data_ptr<float>() : nullptr, dw.mutable_data_ptr<float>(), grads);
    return {dx,     dw,     g[kS2],          g[kO2],          g[kW1],
            g[kB1], g[kWg], g[kBg],          g[kSs],          g[kSo],
            g[kNw], g[kNb], torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }

  static kernels::VsnDropout dropout_of(double p, int64_t seed) {
    return {static_cast<float>(p), static_cast<uint32_t>(seed)};
  }
};

// sum_v w[n, v] GRN_v(x[n, v]) for x, w [N, V]: the fused kernels over the folded weights. With
// gradients recorded it is one autograd node (FusedVsnFunction); in train mode eta1 is dropped
// out with a mask seeded from LibTorch's default generator (torch::manual_seed reproduces it).
torch::Tensor fused_vsn(const VariableSelectionNetworkImpl& m, const VsnFolding& f,
                        const torch::Tensor& x, const torch::Tensor& w) {
  const int64_t n = x.size(0), h = m.options.hidden();
  // Contiguous views (no copy for the module's own parameters) kept alive for the call.
  const torch::Tensor t[] = {f.fc2_slope.contiguous(),   f.fc2_offset.contiguous(),
                             m.fc1_weight.contiguous(),  m.fc1_bias.contiguous(),
                             m.glu_weight.contiguous(),  m.glu_bias.contiguous(),
                             f.skip_slope.contiguous(),  f.skip_offset.contiguous(),
                             m.norm_weight.contiguous(), m.norm_bias.contiguous()};
  const auto xc = x.contiguous(), wc = w.contiguous();
  const double p = m.is_training() ? m.options.dropout() : 0.0;
  const int64_t seed =
      p > 0.0
          ? torch::randint(std::numeric_limits<int32_t>::max(), {1}, torch::kLong).item<int64_t>()
          : 0;
  bool record = torch::GradMode::is_enabled() && (xc.requires_grad() || wc.requires_grad());
  for (const auto& ti : t) record = record || (torch::GradMode::is_enabled() && ti.requires_grad());
  if (record)
    return FusedVsnFunction::apply(xc, wc, t[kS2], t[kO2], t[kW1], t[kB1], t[kWg], t[kBg], t[kSs],
                                   t[kSo], t[kNw], t[kNb], m.inner(), p, seed);
  auto out = torch::empty({n, h});
  kernels::vsn_weighted_grns(grn_weights(t, m.options.variables(), m.inner(), h),
                             xc.const_data_ptr<float>(), wc.const_data_ptr<float>(), n,
                             out.mutable_data_ptr<float>(), FusedVsnFunction::dropout_of(p, seed));
  return out;
}

// Chunks of variables a single row's GRNs are split into (any split gives the same terms).
constexpr int64_t kVsnRowChunks = 4;

// fused_vsn on one row (x, w [1, V]) through the unit-lane kernel: each chunk of variables writes
// its rows of the weighted GRN terms [V, H], which are then added in variable order. Eval mode.
torch::Tensor fused_vsn_row(const VariableSelectionNetworkImpl& m, const VsnFolding& f,
                            const torch::Tensor& x, const torch::Tensor& w, ChunkRunner* runner) {
  const int64_t v = m.options.variables(), h = m.options.hidden();
  const torch::Tensor t[] = {f.fc2_slope.contiguous(),   f.fc2_offset.contiguous(),
                             m.fc1_weight.contiguous(),  m.fc1_bias.contiguous(),
                             m.glu_weight.contiguous(),  m.glu_bias.contiguous(),
                             f.skip_slope.contiguous(),  f.skip_offset.contiguous(),
                             m.norm_weight.contiguous(), m.norm_bias.contiguous()};
  const auto p = grn_weights(t, v, m.inner(), h);
  const auto xc = x.contiguous(), wc = w.contiguous();
  auto terms = torch::empty({v, h});
  const float* xp = xc.const_data_ptr<float>();
  const float* wp = wc.const_data_ptr<float>();
  float* tp = terms.mutable_data_ptr<float>();
  const int64_t chunks = std::min(v, kVsnRowChunks);
  run_chunks(runner, chunks, [&](int64_t i) {
    const auto [first, last] = chunk_range(v, chunks, i);
    kernels::vsn_row_terms(p, xp, wp, first, last, tp);
  });
  auto out = torch::empty({1, h});
  kernels::sum_rows(tp, v, h, out.mutable_data_ptr<float>());
  return out;
}

}  // namespace

torch::Tensor VariableSelectionNetworkImpl::embed(const torch::Tensor& x) const {
  // [B, T, V, 1] * [V, E] + [V, E]
  return torch::addcmul(as_float(emb_bias), x.unsqueeze(-1), as_float(emb_weight).squeeze(1));
}

torch::Tensor VariableSelectionNetworkImpl::variable_grns(const torch::Tensor& xv,
                                                          const VsnFolding& in) {
  const int64_t h = options.hidden();
  // Contiguous operands throughout: elementwise kernels on strided views are several times slower.
  auto hid = fast_elu(torch::addcmul(in.fc2_offset, xv, in.fc2_slope));  // eta2 [V, N, Hi]
  hid = torch::baddbmm(as_float(fc1_bias).unsqueeze(1), hid, as_float(fc1_weight));  // eta1
  hid = torch::dropout(hid, options.dropout(), is_training());
  const auto g = torch::baddbmm(as_float(glu_bias).unsqueeze(1), hid, as_float(glu_weight));
  const auto skip = torch::addcmul(in.skip_offset, xv, in.skip_slope);  // [V, N, H]
  // torch::glu: value * sigmoid(gate) as one op with one backward node (two narrows of g would
  // each zero-fill a whole [V, N, 2H] gradient in backward).
  auto y = skip + torch::glu(g, -1);
  y = torch::layer_norm(y, {h}, {}, {}, 1e-5);
  return torch::addcmul(as_float(norm_bias).unsqueeze(1), y,
                        as_float(norm_weight).unsqueeze(1));  // [V, N, H]
}

VsnFolding VariableSelectionNetworkImpl::fold() const {
  // Named in profiles (models_bench --profile-forward): our own work, not one ATen op.
  RECORD_FUNCTION("tft::vsn_fold", std::vector<c10::IValue>());
  const int64_t v = options.variables(), e = options.embedding();
  // FP32 throughout (a no-op on an FP32 module): the BF16 TFT folds its BF16 weights upcast.
  const auto emb_w = as_float(emb_weight), emb_b = as_float(emb_bias);
  const auto fc2_w = as_float(fc2_weight);
  const auto we = emb_w.squeeze(1);  // [V, E]
  // fc2 and the skip projection of each variable's embedding as affine maps of the raw value
  // (see the header): fc2(embed(x)) = x (w_e W2) + (b_e W2 + b2), likewise the skip.
  // Per variable a [1, E] x [E, out] product, as a broadcast multiply and a sum over E: V tiny
  // matrix products through bmm cost ~4x more.
  VsnFolding f;
  const auto we_col = emb_w.transpose(1, 2);                // [V, E, 1]
  const auto be_col = emb_b.unsqueeze(-1);                  // [V, E, 1]
  f.fc2_slope = (we_col * fc2_w).sum(1, /*keepdim=*/true);  // [V, 1, Hi]
  f.fc2_offset = (be_col * fc2_w).sum(1, true) + as_float(fc2_bias).unsqueeze(1);
  if (skip_weight.defined()) {
    const auto skip_w = as_float(skip_weight);
    f.skip_slope = (we_col * skip_w).sum(1, true);  // [V, 1, H]
    f.skip_offset = (be_col * skip_w).sum(1, true) + as_float(skip_bias).unsqueeze(1);
  } else {  // E == H: the skip is the embedding itself
    f.skip_slope = emb_w;
    f.skip_offset = emb_b.unsqueeze(1);
  }
  if (v == 1) return f;
  // Selection logits: GRN(flattened embeddings [N, V*E], c). Its fc2 and skip consume the
  // embeddings linearly, so fold them too: W (x * w_e + b_e) = x A + W b_e, A[v] = W[:, v] w_e[v].
  const auto fold_flat = [&](const torch::Tensor& weight, const torch::Tensor& bias,
                             torch::Tensor& a, torch::Tensor& offset) {
    // a[v] = w_e[v] W[:, v, :]^T as one batched [1, E] x [E, out] product per variable (3.5x
    // faster than the equivalent einsum on the default past VSN: 110 vs 390 us); offset = W b_e.
    const auto w = as_float(weight);
    auto w3 = w.view({w.size(0), v, e});                                // [out, V, E]
    a = torch::bmm(we.unsqueeze(1), w3.permute({1, 2, 0})).squeeze(1);  // [V, out]
    offset = torch::addmv(as_float(bias), w, emb_b.reshape({v * e}));   // [out]
  };
  fold_flat(selection->fc2->weight, selection->fc2->bias, f.sel_fc2, f.sel_fc2_offset);
  if (selection->has_skip_projection())
    fold_flat(selection->skip->weight, selection->skip->bias, f.sel_skip, f.sel_skip_offset);
  f.sel_fc1_t = selection->fc1->weight.t().contiguous();
  f.sel_glu_t = selection->gate_norm->glu->fc->weight.t().contiguous();
  return f;
}

torch::Tensor VariableSelectionNetworkImpl::selection_bias(const VsnFolding& f,
                                                           const torch::Tensor& c) const {
  if (options.variables() == 1) return {};
  if (!c.defined() || selection->context.is_empty()) return f.sel_fc2_offset;
  return torch::addmm(f.sel_fc2_offset, c, selection->context->weight.t()).squeeze(0);
}

torch::Tensor VariableSelectionNetworkImpl::forward_rows(const torch::Tensor& x,
                                                         const torch::Tensor& sel_bias,
                                                         const VsnFolding& f, ChunkRunner* runner) {
  const int64_t n = x.size(0), v = options.variables(), h = options.hidden();
  const auto xv = [&] {
    return n == 1 ? x.reshape({v, 1, 1}) : x.t().contiguous().unsqueeze(-1);  // [V, N, 1]
  };
  if (v == 1) return variable_grns(xv(), f).squeeze(0);
  // Selection weights: the GRN of forward_projected on rows, context folded into the bias.
  const auto& sel = *selection;
  const auto& glu = *sel.gate_norm->glu;
  const auto& ln = *sel.gate_norm->norm;
  auto hid = fast_elu(torch::addmm(sel_bias, x, f.sel_fc2));
  hid = torch::addmm(sel.fc1->bias, hid, f.sel_fc1_t);
  auto g = torch::addmm(glu.fc->bias, hid, f.sel_glu_t);  // [N, 2V]
  auto skip = f.sel_skip.defined() ? torch::addmm(f.sel_skip_offset, x, f.sel_skip)
                                   : embed(x).reshape({n, v * options.embedding()});
  auto s = torch::addcmul(skip, g.narrow(1, 0, v), torch::sigmoid(g.narrow(1, v, v)));
  auto w = torch::softmax(torch::layer_norm(s, {v}, ln.weight, ln.bias, ln.options.eps()), -1);
  if (bf16_vsn_applies(*this, x)) return bf16_weighted_grns(x, w);
  if (fused_vsn_applies(*this, x)) {
    if (n == 1 && !torch::GradMode::is_enabled() && !is_training() &&
        kernels::vsn_row_applies(inner(), h))
      return fused_vsn_row(*this, f, x, w, runner);
    return fused_vsn(*this, f, x, w);
  }
  const auto y = variable_grns(xv(), f);                            // [V, N, H]
  if (n == 1) return torch::mm(w, y.view({v, h}));                  // [1, H]
  return torch::bmm(w.unsqueeze(1), y.transpose(0, 1)).squeeze(1);  // [N, H]
}

VsnOutput VariableSelectionNetworkImpl::forward(const torch::Tensor& x, const torch::Tensor& c) {
  if (torch::GradMode::is_enabled()) return forward(x, c, fold());
  return forward(x, c, *folded());
}

torch::Tensor VariableSelectionNetworkImpl::bf16_weighted_grns(const torch::Tensor& x,
                                                               const torch::Tensor& w) const {
  const auto pack = bf16_cache_.get(module_state(*this), [&] {
    const auto f = folded();
    const int64_t v = options.variables(), hi = inner(), h = options.hidden();
    const auto fl = [](const torch::Tensor& t) { return as_float(t).contiguous(); };
    const torch::Tensor t[] = {
        fl(f->fc2_slope), fl(f->fc2_offset), fl(fc1_weight),     fl(fc1_bias),    fl(glu_weight),
        fl(glu_bias),     fl(f->skip_slope), fl(f->skip_offset), fl(norm_weight), fl(norm_bias)};
    return kernels::pack_bf16_vsn(grn_weights(t, v, hi, h));
  });
  const int64_t n = x.size(0);
  auto out = torch::empty({n, options.hidden()});
  const auto xc = x.contiguous(), wc = w.contiguous();
  kernels::vsn_weighted_grns_bf16(pack->weights, xc.const_data_ptr<float>(),
                                  wc.const_data_ptr<float>(), n, out.mutable_data_ptr<float>());
  return out;
}

std::shared_ptr<const VsnFolding> VariableSelectionNetworkImpl::folded() const {
  return fold_cache_.get(with_gradients(module_state(*this)), [&] { return fold(); });
}

VsnOutput VariableSelectionNetworkImpl::forward(const torch::Tensor& x, const torch::Tensor& c,
                                                const VsnFolding& folded) {
  RECORD_FUNCTION("tft::vsn_forward", std::vector<c10::IValue>());
  const int64_t v = options.variables(), e = options.embedding(), h = options.hidden();
  FOXHUNT_CHECK(x.dim() == 3 && x.size(2) == v, "tft", "vsn: expected input [batch, time, ", v,
                "], got ", shape_str(x.sizes().vec()));
  const int64_t b = x.size(0), t = x.size(1), n = b * t;
  const auto x2 = x.reshape({n, v});

  VsnOutput out;
  if (v == 1) {  // a single variable needs no selection
    out.output =
        variable_grns(x2.t().contiguous().unsqueeze(-1), folded).squeeze(0).view({b, t, h});
    out.weights = torch::ones({b, t, 1}, x.options());
    return out;
  }

  auto& sel = selection;
  auto fc2_a = torch::addmm(folded.sel_fc2_offset, x2, folded.sel_fc2).view({b, t, -1});
  auto sel_skip = sel->has_skip_projection()
                      ? torch::addmm(folded.sel_skip_offset, x2, folded.sel_skip).view({b, t, -1})
                      : embed(x).reshape({b, t, v * e});  // E == 1: the embeddings themselves
  out.weights = torch::softmax(sel->forward_projected(fc2_a, sel_skip, c), -1);  // [B, T, V]
  if (bf16_vsn_applies(*this, x2)) {
    out.output = bf16_weighted_grns(x2, out.weights.view({n, v}).contiguous()).view({b, t, h});
    return out;
  }
  if (fused_vsn_applies(*this, x)) {
    out.output = fused_vsn(*this, folded, x2, out.weights.view({n, v})).view({b, t, h});
    return out;
  }

  // The per-variable GRNs run over blocks of positions so that their [V, positions, 2H]
  // intermediates stay cache-sized: at batch 64 x window 60 a whole-batch intermediate is
  // 225 x 3840 x 64 floats = 221 MB, and allocating (page faults) and streaming those dominated
  // the run time.
  const auto xv = x2.t().contiguous().unsqueeze(-1);  // [V, N, 1] (the fused paths need none)
  const auto weights = out.weights.view({n, v});
  // Budget: 2^18 floats (1 MiB) for the largest block intermediate, [V, block, 2H]; measured on
  // the default model (V = 225) against 2^16..2^23: 2^17-2^18 were fastest, whole-batch
  // tensors ~2x slower at batch 64.
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 18) / (v * 2 * h));
  // One split of the weights (not a narrow per block): in backward a narrow zero-fills a whole
  // [N, V] gradient per block, which was 44% of a batch-64 training step.
  const auto weight_blocks = weights.split(block, 0);
  std::vector<torch::Tensor> parts;
  for (int64_t start = 0, i = 0; start < n; start += block, ++i) {
    const int64_t len = std::min(block, n - start);
    auto y = variable_grns(xv.narrow(1, start, len), folded);  // [V, len, H]
    // Selection-weighted sum over variables: [len, 1, V] x [len, V, H].
    parts.push_back(torch::bmm(weight_blocks[i].unsqueeze(1), y.transpose(0, 1)).squeeze(1));
  }
  out.output = (parts.size() == 1 ? parts[0] : torch::cat(parts, 0)).view({b, t, h});
  return out;
}

}  // namespace foxhunt::models
