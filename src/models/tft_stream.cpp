// TftStream (tft.h): the TFT served one bar at a time, split from tft.cpp; the helpers it shares
// with the window forward are in tft_internal.h.
#include <algorithm>
#include <cmath>

#include "foxhunt/models/parallel.h"
#include "foxhunt/models/tft.h"
#include "fused_path.h"
#include "tft_internal.h"
#include "tft_kernels.h"

namespace foxhunt::models {

namespace F = torch::nn::functional;
using detail::fast_elu;
using detail::LstmState;
using detail::run_lstm;

// ---- per-instrument streaming ----------------------------------------------------------------

namespace {

// Batch-1 forms of the building blocks on 2-D rows [rows, features], for the stream.
struct Lin {
  torch::Tensor wt, b;  // [in, out] contiguous, [out] (undefined: no bias)
};

Lin lin_of(const torch::nn::Linear& l, double scale = 1.0) {
  Lin r;
  r.wt = (scale == 1.0 ? l->weight : l->weight * scale).t().contiguous();
  if (l->bias.defined()) r.b = scale == 1.0 ? l->bias : l->bias * scale;
  return r;
}

torch::Tensor apply(const Lin& l, const torch::Tensor& x) {
  return l.b.defined() ? torch::addmm(l.b, x, l.wt) : torch::mm(x, l.wt);
}

struct Gan {  // GateAddNorm
  Lin glu;
  int64_t out = 0;
  torch::Tensor ln_w, ln_b;
  double eps = 1e-5;
};

Gan gan_of(const GateAddNorm& g) {
  return {lin_of(g->glu->fc), g->out, g->norm->weight, g->norm->bias, g->norm->options.eps()};
}

// LayerNorm(value * sigmoid(gate) + skip).
torch::Tensor apply(const Gan& g, const torch::Tensor& x, const torch::Tensor& skip) {
  auto y = apply(g.glu, x);
  auto s = torch::addcmul(skip, y.narrow(1, 0, g.out), torch::sigmoid(y.narrow(1, g.out, g.out)));
  return torch::layer_norm(s, {g.out}, g.ln_w, g.ln_b, g.eps);
}

struct Grn {
  Lin fc2, fc1, skip;  // skip.wt undefined: identity
  Gan gan;
  torch::Tensor context_wt;  // [context, hidden] (undefined: no context)
};

Grn grn_of(const GatedResidualNetwork& g) {
  Grn r;
  r.fc2 = lin_of(g->fc2);
  r.fc1 = lin_of(g->fc1);
  if (g->has_skip_projection()) r.skip = lin_of(g->skip);
  r.gan = gan_of(g->gate_norm);
  if (!g->context.is_empty()) r.context_wt = g->context->weight.t().contiguous();
  return r;
}

// GRN(a) with fc2's bias replaced by `fc2_bias` (fc2 bias + W3 c when there is a context).
torch::Tensor apply(const Grn& g, const torch::Tensor& a, const torch::Tensor& fc2_bias) {
  auto h = apply(g.fc1, fast_elu(torch::addmm(fc2_bias, a, g.fc2.wt)));
  return apply(g.gan, h, g.skip.wt.defined() ? apply(g.skip, a) : a);
}

}  // namespace

struct TftStream::Prepared {
  Gan lstm_gate, attention_gate, output_gate;
  Grn enrichment, positionwise;
  Lin query, key, value, out, output;  // query scaled by 1 / sqrt(d_k), value by 1 / heads
  // Per static id:
  torch::Tensor past_selection_bias, future_selection_bias;  // VSN selection fc2 bias + W3 c_s
  torch::Tensor enrichment_bias;                             // fc2 bias + W3 c_e
  std::tuple<torch::Tensor, torch::Tensor> h0;  // (c_h, c_c) repeated over the LSTM layers
  torch::Tensor mask;                           // [horizon, window + horizon] causal mask
};

TftStream::TftStream(TftNet net, int64_t window) : net_(std::move(net)) {
  FOXHUNT_CHECK(!net_.is_empty(), "tft", "stream: expected a network, got an empty holder");
  FOXHUNT_CHECK(window >= 0, "tft", "stream: expected window >= 0 (0 = the options' window), got ",
                window);
  window_ = window > 0 ? window : net_->options.window();
  allocate();
}

void TftStream::allocate() {
  c10::InferenceMode guard;
  const auto& o = net_->options;
  buf_ = torch::zeros({2 * window_, o.past_features() + o.hidden()},
                      net_->output->weight.options().requires_grad(false));
  bars_ = 0;
  static_id_ = -1;  // forces refresh() on the next push
}

void TftStream::reset() {
  allocate();
}

// Derived weights, static contexts, VSN foldings and the cached VSN outputs of the window for
// the current weights and `static_id`.
void TftStream::refresh(int64_t static_id) {
  const auto opts = net_->output->weight.options();
  if (buf_.device() != opts.device() || buf_.scalar_type() != opts.dtype()) {
    buf_ = buf_.to(opts.device(), opts.dtype().toScalarType());
  }
  stamp_ = ParameterStamp(*net_);
  past_folding_ = net_->past_vsn->fold();
  future_folding_ = net_->future_vsn->fold();
  ctx_ = net_->static_context(torch::full({1}, static_id, opts.dtype(torch::kLong)));
  static_id_ = static_id;

  const auto& o = net_->options;
  auto p = std::make_shared<Prepared>();
  p->lstm_gate = gan_of(net_->lstm_gate);
  p->attention_gate = gan_of(net_->attention_gate);
  p->output_gate = gan_of(net_->output_gate);
  p->enrichment = grn_of(net_->enrichment);
  p->positionwise = grn_of(net_->positionwise);
  const auto& att = net_->attention;
  p->query = lin_of(att->query, 1.0 / std::sqrt(static_cast<double>(att->d_k)));
  p->key = lin_of(att->key);
  p->value = lin_of(att->value, 1.0 / static_cast<double>(att->heads));  // the head average
  p->out = lin_of(att->out);
  p->output = lin_of(net_->output);
  p->past_selection_bias = net_->past_vsn->selection_bias(past_folding_, ctx_.selection);
  p->future_selection_bias = net_->future_vsn->selection_bias(future_folding_, ctx_.selection);
  p->enrichment_bias =
      torch::addmm(p->enrichment.fc2.b, ctx_.enrichment, p->enrichment.context_wt).squeeze(0);
  const int64_t layers = o.lstm_layers();
  p->h0 = std::make_tuple(ctx_.hidden.unsqueeze(0).repeat({layers, 1, 1}),
                          ctx_.cell.unsqueeze(0).repeat({layers, 1, 1}));
  p->mask = tft_causal_mask(window_, o.horizon(), opts.device());
  prepared_ = std::move(p);

  const int64_t n = filled(), W = window_, P = o.past_features();
  if (n == 0) return;
  const int64_t first = bars_ - n;
  auto raw = buf_.narrow(0, first % W, n).narrow(1, 0, P);
  auto sel = net_->past_vsn->forward_rows(raw, prepared_->past_selection_bias, past_folding_);
  auto slots = torch::arange(first, bars_, opts.dtype(torch::kLong)) % W;
  auto both = torch::cat({slots, slots + W});
  buf_.narrow(1, P, sel.size(1)).index_copy_(0, both, torch::cat({sel, sel}));
}

torch::Tensor TftStream::push(const torch::Tensor& past_t, const torch::Tensor& future,
                              int64_t static_id, ChunkRunner* runner) {
  FOXHUNT_CHECK(!net_->is_training(), "tft",
                "stream: expected the network in eval mode (dropout off); call net->eval() first");
  c10::InferenceMode guard;
  const auto& o = net_->options;
  const auto& w = net_->output->weight;
  check_stream_input("tft", "stream past", past_t, {o.past_features()}, w.device());
  check_stream_input("tft", "stream future", future, {o.horizon(), o.future_features()},
                     w.device());
  FOXHUNT_CHECK(static_id >= 0 && static_id < o.static_categories(), "tft",
                "stream static_id: expected a value in [0, ", o.static_categories(), "), got ",
                static_id);
  if (static_id != static_id_ || stamp_.changed()) refresh(static_id);
  const auto& p = *prepared_;

  const int64_t W = window_, P = o.past_features(), H = o.hidden(), K = o.horizon();
  const int64_t slot = bars_ % W;
  const auto dtype = w.scalar_type();
  ChunkRunner* const threads = w.device().is_cpu() ? runner : nullptr;  // tensor ops: CPU only
  auto raw = past_t.to(dtype).reshape({1, P});
  // The new bar's VSN and the encoder over the window's older rows are independent: two chunks
  // (the second core, when idle, takes the encoder); the encoder then steps over the new row.
  const int64_t n = std::min(bars_ + 1, W), L = n + K;  // the window after this bar
  const auto old_sel = buf_.narrow(0, (bars_ + 1 - n) % W, n - 1).narrow(1, P, H);
  torch::Tensor sel, enc_old;
  LstmState state = p.h0;
  run_chunks(threads, n > 1 ? 2 : 1, [&](int64_t chunk) {
    c10::InferenceMode chunk_guard;
    if (chunk == 0) {
      sel = net_->past_vsn->forward_rows(raw, p.past_selection_bias, past_folding_,
                                         threads);  // [1, H]
    } else {
      std::tie(enc_old, state) = run_lstm(*net_->encoder, old_sel.unsqueeze(0), p.h0);
    }
  });
  buf_.view({2, W, P + H}).select(1, slot).copy_(torch::cat({raw, sel}, 1).expand({2, P + H}));
  ++bars_;

  // The window-dependent stages of forward_selected at batch 1, on rows [positions, H].
  auto past_sel = buf_.narrow(0, (bars_ - n) % W, n).narrow(1, P, H);
  auto [enc_new, enc_state] = run_lstm(*net_->encoder, sel.unsqueeze(0), state);
  auto enc_out = n > 1 ? torch::cat({enc_old, enc_new}, 1) : enc_new;

  // Every stage up to the attention is row by row but the decoder's LSTM, so the decoder's rows
  // (the future VSN, the decoder, then the gate, the enrichment and the attention projections)
  // and the encoder's rows (the gate, the enrichment, the keys and values) are two independent
  // chunks: on a ChunkRunner the second core takes one. Each chunk's ops are the same on any
  // thread. Tensor ops only on the CPU (a chunk on a worker has its own thread-local state).
  const int64_t heads = net_->attention->heads, dk = net_->attention->d_k;
  torch::Tensor phi_dec, theta_dec, q, k_dec, v_dec, k_enc, v_enc;
  run_chunks(threads, 2, [&](int64_t chunk) {
    c10::InferenceMode chunk_guard;
    if (chunk == 0) {
      auto future_sel = net_->future_vsn->forward_rows(future.to(dtype), p.future_selection_bias,
                                                       future_folding_);  // [K, H]
      auto dec_out = std::get<0>(run_lstm(*net_->decoder, future_sel.unsqueeze(0), enc_state));
      phi_dec = apply(p.lstm_gate, dec_out.squeeze(0), future_sel);
      theta_dec = apply(p.enrichment, phi_dec, p.enrichment_bias);
      q = apply(p.query, theta_dec);
      k_dec = apply(p.key, theta_dec);
      v_dec = apply(p.value, theta_dec);
    } else {
      auto phi_enc = apply(p.lstm_gate, enc_out.squeeze(0), past_sel);
      auto theta_enc = apply(p.enrichment, phi_enc, p.enrichment_bias);
      k_enc = apply(p.key, theta_enc);
      v_enc = apply(p.value, theta_enc);
    }
  });

  // Interpretable attention: per-head scores, head-averaged weights, one shared value.
  auto qh = q.view({K, heads, dk}).transpose(0, 1);                                 // [h, K, dk]
  auto kh = torch::cat({k_enc, k_dec}, 0).view({L, heads, dk}).permute({1, 2, 0});  // [h, dk, L]
  auto scores = torch::bmm(qh, kh);                                                 // [h, K, L]
  scores.masked_fill_(n == W ? p.mask : tft_causal_mask(n, K, scores.device()),
                      -std::numeric_limits<double>::infinity());
  // mean over heads of w_h v = (sum_h w_h) (v / heads); the 1 / heads is in p.value.
  auto att =
      torch::mm(torch::softmax(scores, -1).sum(0), torch::cat({v_enc, v_dec}, 0));  // [K, dk]
  auto delta = apply(p.attention_gate, apply(p.out, att), theta_dec);
  auto psi = apply(p.positionwise, delta, p.positionwise.fc2.b);
  return apply(p.output, apply(p.output_gate, psi, phi_dec));  // [K, Q]
}

// ---- many instruments (serving/desk.h) ---------------------------------------------------------

namespace {

void check_ids(const TftOptions& o, const torch::Tensor& static_id, int64_t n,
               const torch::Device& device) {
  check_input("tft", "static_id", static_id, {n}, torch::kLong, device);
  const int64_t lo = static_id.min().item<int64_t>(), hi = static_id.max().item<int64_t>();
  FOXHUNT_CHECK(lo >= 0 && hi < o.static_categories(), "tft", "static_id: expected values in [0, ",
                o.static_categories(), "), got ", lo < 0 ? lo : hi);
}

}  // namespace

torch::Tensor TftNetImpl::encode_past_rows(const torch::Tensor& rows,
                                           const torch::Tensor& static_id) {
  const auto device = module_device(*this);
  check_float_input("tft", "rows", rows, {-1, options.past_features()}, device);
  check_ids(options, static_id, rows.size(0), device);
  c10::InferenceMode guard;
  const auto ctx = static_context(static_id);
  const auto x = rows.to(output->weight.scalar_type()).unsqueeze(1);
  return past_vsn->forward(x, ctx.selection).output.squeeze(1);
}

torch::Tensor TftNetImpl::forward_cached(const torch::Tensor& past_selected,
                                         const torch::Tensor& future,
                                         const torch::Tensor& static_id) {
  const auto device = module_device(*this);
  check_float_input("tft", "past_selected", past_selected, {-1, -1, options.hidden()}, device);
  const int64_t n = past_selected.size(0);
  check_float_input("tft", "future", future, {n, options.horizon(), options.future_features()},
                    device);
  check_ids(options, static_id, n, device);
  c10::InferenceMode guard;
  const auto dtype = output->weight.scalar_type();
  const auto ctx = static_context(static_id);
  const auto fut = future_vsn->forward(future.to(dtype), ctx.selection).output;
  return forward_selected(past_selected.to(dtype), fut, ctx).prediction;
}

}  // namespace foxhunt::models
