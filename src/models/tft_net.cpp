// The TFT's interpretable attention and the network that joins its parts (tft.h): TftNetImpl
// and the LSTM encoder-decoder it runs.
#include <array>
#include <cmath>
#include <limits>

#include "foxhunt/models/tft.h"
#include "fused_path.h"
#include "lstm_kernel.h"
#include "tft_internal.h"

namespace foxhunt::models {

using detail::init_xavier;

// ---- attention --------------------------------------------------------------------------------

InterpretableMultiHeadAttentionImpl::InterpretableMultiHeadAttentionImpl(int64_t hidden_,
                                                                         int64_t heads_,
                                                                         double dropout_)
    : hidden(hidden_), heads(heads_), d_k(heads_ > 0 ? hidden_ / heads_ : 0), dropout_p(dropout_) {
  reset();
}

void InterpretableMultiHeadAttentionImpl::reset() {
  FOXHUNT_CHECK(hidden > 0 && heads > 0 && hidden % heads == 0, "tft",
                "attention: expected heads dividing hidden, got hidden=", hidden, " heads=", heads);
  query = register_module("query", torch::nn::Linear(hidden, heads * d_k));
  key = register_module("key", torch::nn::Linear(hidden, heads * d_k));
  value = register_module("value", torch::nn::Linear(hidden, d_k));
  out = register_module("out", torch::nn::Linear(d_k, hidden));
  for (auto* l : {&query, &key, &value, &out}) init_xavier(*l);
}

AttentionOutput InterpretableMultiHeadAttentionImpl::forward(const torch::Tensor& q,
                                                             const torch::Tensor& kv,
                                                             const torch::Tensor& mask) {
  const int64_t b = q.size(0), lq = q.size(1), lk = kv.size(1);
  auto qh = query->forward(q).view({b, lq, heads, d_k}).transpose(1, 2);  // [B, h, Lq, dk]
  auto kh = key->forward(kv).view({b, lk, heads, d_k}).transpose(1, 2);   // [B, h, Lk, dk]
  auto v = value->forward(kv).unsqueeze(1);                               // [B, 1, Lk, dk]
  auto scores = torch::matmul(qh, kh.transpose(-2, -1)) / std::sqrt(static_cast<double>(d_k));
  if (mask.defined()) {
    FOXHUNT_INTERNAL_ASSERT(mask.dim() == 2 && mask.size(0) == lq && mask.size(1) == lk,
                            "attention mask shape");
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  }
  auto w = torch::softmax(scores, -1);                                             // [B, h, Lq, Lk]
  auto heads_out = torch::matmul(torch::dropout(w, dropout_p, is_training()), v);  // [B,h,Lq,dk]
  AttentionOutput r;
  r.output = out->forward(heads_out.mean(1));  // average heads, then W_H
  r.weights = w.mean(1);
  return r;
}

torch::Tensor tft_causal_mask(int64_t window, int64_t horizon, const torch::Device& device) {
  auto opts = torch::TensorOptions().dtype(torch::kLong).device(device);
  auto keys = torch::arange(window + horizon, opts).unsqueeze(0);     // [1, T+K]
  auto queries = torch::arange(horizon, opts).unsqueeze(1) + window;  // [K, 1] absolute positions
  return keys > queries;  // true = masked: strictly later than the query (self stays visible)
}

// ---- the network ------------------------------------------------------------------------------

TftNetImpl::TftNetImpl(TftOptions options_) : options(std::move(options_)) {
  reset();
}

void TftNetImpl::reset() {
  validate(options);
  const int64_t h = options.hidden();
  const double p = options.dropout();
  const auto grn = [&](const char* name, int64_t context) {
    return register_module(
        name,
        GatedResidualNetwork(GatedResidualNetworkOptions(h, h, h).context(context).dropout(p)));
  };
  static_embedding =
      register_module("static_embedding", torch::nn::Embedding(options.static_categories(), h));
  static_variable = grn("static_variable", 0);
  static_context_selection = grn("static_context_selection", 0);
  static_context_hidden = grn("static_context_hidden", 0);
  static_context_cell = grn("static_context_cell", 0);
  static_context_enrichment = grn("static_context_enrichment", 0);
  past_vsn = register_module(
      "past_vsn", VariableSelectionNetwork(VariableSelectionNetworkOptions(
                                               options.past_features(), options.real_embedding(), h)
                                               .context(h)
                                               .dropout(p)));
  future_vsn = register_module(
      "future_vsn",
      VariableSelectionNetwork(
          VariableSelectionNetworkOptions(options.future_features(), options.real_embedding(), h)
              .context(h)
              .dropout(p)));
  const auto lstm = torch::nn::LSTMOptions(h, h)
                        .num_layers(options.lstm_layers())
                        .batch_first(true)
                        .dropout(options.lstm_layers() > 1 ? p : 0.0);
  encoder = register_module("encoder", torch::nn::LSTM(lstm));
  decoder = register_module("decoder", torch::nn::LSTM(lstm));
  lstm_gate = register_module("lstm_gate", GateAddNorm(h, h, p));
  enrichment = grn("enrichment", h);
  attention = register_module("attention", InterpretableMultiHeadAttention(h, options.heads(), p));
  attention_gate = register_module("attention_gate", GateAddNorm(h, h, p));
  positionwise = grn("positionwise", 0);
  output_gate = register_module("output_gate", GateAddNorm(h, h, p));
  output = register_module("output",
                           torch::nn::Linear(h, static_cast<int64_t>(options.quantiles().size())));
}

void validate_tft_inputs(const TftOptions& o, const torch::Tensor& past,
                         const torch::Tensor& future, const torch::Tensor& static_id,
                         const torch::Device& device) {
  check_float_input("tft", "past", past, {-1, -1, o.past_features()}, device);
  FOXHUNT_CHECK(past.size(0) >= 1, "tft", "past: expected batch >= 1, got shape ",
                shape_str(past.sizes().vec()));
  FOXHUNT_CHECK(past.size(1) >= 1, "tft", "past: expected window >= 1, got shape ",
                shape_str(past.sizes().vec()));
  const int64_t b = past.size(0);
  check_float_input("tft", "future", future, {b, o.horizon(), o.future_features()}, device);
  check_input("tft", "static_id", static_id, {b}, torch::kLong, device);
  const int64_t lo = static_id.min().item<int64_t>(), hi = static_id.max().item<int64_t>();
  FOXHUNT_CHECK(lo >= 0 && hi < o.static_categories(), "tft", "static_id: expected values in [0, ",
                o.static_categories(), "), got ", lo < 0 ? lo : hi);
}

void TftNetImpl::validate_inputs(const torch::Tensor& past, const torch::Tensor& future,
                                 const torch::Tensor& static_id) {
  validate_tft_inputs(options, past, future, static_id, module_device(*this));
}

torch::Tensor TftNetImpl::forward(const torch::Tensor& past, const torch::Tensor& future,
                                  const torch::Tensor& static_id) {
  return forward_with_details(past, future, static_id).prediction;
}

TftStaticContext TftNetImpl::static_context(const torch::Tensor& static_id) {
  const auto s = static_variable->forward(static_embedding->forward(static_id));  // [B, H]
  TftStaticContext ctx;
  ctx.selection = static_context_selection->forward(s);
  ctx.hidden = static_context_hidden->forward(s);
  ctx.cell = static_context_cell->forward(s);
  ctx.enrichment = static_context_enrichment->forward(s);
  return ctx;
}

TftOutput TftNetImpl::forward_with_details(const torch::Tensor& past_in,
                                           const torch::Tensor& future_in,
                                           const torch::Tensor& static_id) {
  validate_inputs(past_in, future_in, static_id);
  const auto dtype = output->weight.scalar_type();
  const auto past = past_in.to(dtype), future = future_in.to(dtype);

  // Static covariate encoders, then variable selection.
  const auto ctx = static_context(static_id);
  auto past_sel = past_vsn->forward(past, ctx.selection);
  auto future_sel = future_vsn->forward(future, ctx.selection);
  TftOutput r = forward_selected(past_sel.output, future_sel.output, ctx);
  r.past_weights = past_sel.weights;
  r.future_weights = future_sel.weights;
  return r;
}

namespace detail {

// An LSTM over x [B, T, in] from `state0` (h0, c0 [layers, B, H]), returning what the module
// returns: (out [B, T, H], (h_n, c_n)). CPU fp32 inference runs one GEMM for the input gates of
// every position and the fused recurrence kernel per layer (LibTorch's LSTM stacked its weights
// and ran oneDNN's RNN primitive on each call: ~40% of a batch-1 TFT forward); autograd, other
// devices or dtypes, dropout between layers in train mode and projections run the module.
std::tuple<torch::Tensor, LstmState> run_lstm(torch::nn::LSTMImpl& m, const torch::Tensor& x,
                                              const LstmState& state0) {
  // An LSTM whose dtype differs from its input's (a network converted in parts): the input enters
  // in the LSTM's dtype and the outputs leave in the input's; the final state stays in the LSTM's
  // (the decoder starts from the encoder's state unrounded).
  if (const auto wt = m.parameters(/*recurse=*/false).front().scalar_type();
      x.scalar_type() != wt) {
    auto [out, state] =
        run_lstm(m, x.to(wt), {std::get<0>(state0).to(wt), std::get<1>(state0).to(wt)});
    return {out.to(x.scalar_type()), state};
  }
  const auto& o = m.options;
  const auto& [h0, c0] = state0;
  bool fused = fused_cpu_kernels() && !torch::GradMode::is_enabled() && x.device().is_cpu() &&
               x.scalar_type() == torch::kFloat && x.dim() == 3 && x.size(1) > 0 &&
               o.batch_first() && !o.bidirectional() && o.proj_size() == 0 &&
               !(m.is_training() && o.dropout() > 0.0) && h0.scalar_type() == torch::kFloat &&
               c0.scalar_type() == torch::kFloat && h0.device().is_cpu() && c0.device().is_cpu();
  std::vector<std::array<torch::Tensor, 4>> layers;  // w_ih, w_hh, b_ih, b_hh
  if (fused) {
    const auto params = m.named_parameters(/*recurse=*/false);
    for (int64_t l = 0; l < o.num_layers() && fused; ++l) {
      const auto suffix = "_l" + std::to_string(l);
      std::array<torch::Tensor, 4> w;
      const char* names[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
      for (int i = 0; i < 4; ++i) {
        const auto* t = params.find(names[i] + suffix);
        if (t == nullptr) {
          if (i < 2 || o.bias()) fused = false;
          continue;
        }
        if (!fused_cpu_float(*t)) fused = false;
        w[i] = *t;
      }
      layers.push_back(std::move(w));
    }
  }
  if (!fused) return m.forward(x, state0);

  const int64_t B = x.size(0), T = x.size(1), H = o.hidden_size();
  auto hn = h0.contiguous().clone(), cn = c0.contiguous().clone();  // the kernel updates them
  auto scratch = torch::empty({kernels::lstm_scratch_floats(H)}, x.options());
  auto in = x.contiguous();
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& [w_ih, w_hh, b_ih, b_hh] = layers[l];
    const auto flat = in.view({B * T, in.size(2)});
    auto xg =
        b_ih.defined() ? torch::addmm(b_ih + b_hh, flat, w_ih.t()) : torch::mm(flat, w_ih.t());
    auto out = torch::empty({B, T, H}, x.options());
    kernels::lstm_recurrence(xg.data_ptr<float>(), w_hh.data_ptr<float>(), B, T, H,
                             hn[static_cast<int64_t>(l)].data_ptr<float>(),
                             cn[static_cast<int64_t>(l)].data_ptr<float>(), out.data_ptr<float>(),
                             scratch.data_ptr<float>());
    in = out;
  }
  return {in, {hn, cn}};
}

}  // namespace detail

using detail::run_lstm;

TftOutput TftNetImpl::forward_selected(const torch::Tensor& past_selected,
                                       const torch::Tensor& future_selected,
                                       const TftStaticContext& ctx) {
  const int64_t t = past_selected.size(1), k = future_selected.size(1);
  const int64_t layers = options.lstm_layers();
  // The LSTM encoder seeded with (c_h, c_c) and the decoder seeded with the encoder's final
  // state.
  auto state0 = std::make_tuple(ctx.hidden.unsqueeze(0).repeat({layers, 1, 1}),
                                ctx.cell.unsqueeze(0).repeat({layers, 1, 1}));
  auto [enc_out, enc_state] = run_lstm(*encoder, past_selected, state0);
  auto dec_out = std::get<0>(run_lstm(*decoder, future_selected, enc_state));

  // Gated skip over the LSTMs, static enrichment.
  const auto phi = lstm_gate->forward(torch::cat({enc_out, dec_out}, 1),
                                      torch::cat({past_selected, future_selected}, 1));
  const auto theta = enrichment->forward(phi, ctx.enrichment);  // [B, T+K, H]
  const auto theta_dec = theta.narrow(1, t, k);

  // Decoder steps attend to the whole window and to decoder steps up to and including their own.
  auto att = attention->forward(theta_dec, theta, tft_causal_mask(t, k, theta.device()));
  auto delta = attention_gate->forward(att.output, theta_dec);
  auto psi = positionwise->forward(delta);
  auto out = output_gate->forward(psi, phi.narrow(1, t, k));

  TftOutput r;
  r.prediction = output->forward(out);  // [B, K, Q]
  r.attention = att.weights;
  return r;
}

}  // namespace foxhunt::models
