// TftStream (tft.h): the TFT served one bar at a time, split from tft.cpp; the helpers it shares
// with the window forward are in tft_internal.h.
#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/models/parallel.h"
#include "foxhunt/models/tft.h"
#include "fused_path.h"
#include "tft_internal.h"
#include "tft_kernels.h"
#include "tft_row_kernels.h"

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

// The raw-float forms of the layers above, for the CPU fp32 push (tft_row_kernels.h); their
// pointers are into the Prepared tensors.
kernels::RowLinear row_of(const Lin& l) {
  return {l.wt.data_ptr<float>(), l.b.defined() ? l.b.data_ptr<float>() : nullptr, l.wt.size(0),
          l.wt.size(1)};
}

kernels::RowGan row_of(const Gan& g) {
  return {row_of(g.glu), g.ln_w.data_ptr<float>(), g.ln_b.data_ptr<float>(),
          static_cast<float>(g.eps)};
}

kernels::RowGrn row_of(const Grn& g) {
  kernels::RowGrn r{row_of(g.fc2), row_of(g.fc1), {}, row_of(g.gan)};
  if (g.skip.wt.defined()) r.skip = row_of(g.skip);
  return r;
}

// Whether every tensor the row kernels would read is contiguous CPU fp32.
bool rows_apply(const std::vector<torch::Tensor>& ts) {
  for (const auto& t : ts)
    if (t.defined() &&
        !(t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous()))
      return false;
  return true;
}

// The tensors a layer's row form reads, appended to `out` (for rows_apply).
void append_tensors(std::vector<torch::Tensor>& out, const Lin& l) {
  out.insert(out.end(), {l.wt, l.b});
}

void append_tensors(std::vector<torch::Tensor>& out, const Gan& g) {
  append_tensors(out, g.glu);
  out.insert(out.end(), {g.ln_w, g.ln_b});
}

void append_tensors(std::vector<torch::Tensor>& out, const Grn& g) {
  for (const Lin* l : {&g.fc2, &g.fc1, &g.skip}) append_tensors(out, *l);
  append_tensors(out, g.gan);
}

// An LSTM's weights for rows_lstm (kept alive in `keep`); nullopt when it has projections or
// runs both ways.
std::optional<kernels::RowLstm> row_lstm_of(torch::nn::LSTMImpl& m,
                                            std::vector<torch::Tensor>& keep) {
  const auto& o = m.options;
  if (o.proj_size() != 0 || o.bidirectional()) return std::nullopt;
  const auto params = m.named_parameters(/*recurse=*/false);
  kernels::RowLstm r;
  r.hidden = o.hidden_size();
  for (int64_t l = 0; l < o.num_layers(); ++l) {
    const auto suffix = "_l" + std::to_string(l);
    const auto* w_ih = params.find("weight_ih" + suffix);
    const auto* w_hh = params.find("weight_hh" + suffix);
    const auto* b_ih = params.find("bias_ih" + suffix);
    const auto* b_hh = params.find("bias_hh" + suffix);
    if (w_ih == nullptr || w_hh == nullptr) return std::nullopt;
    auto ih = w_ih->t().contiguous();
    auto hh = w_hh->t().contiguous();
    torch::Tensor b;
    if (b_ih != nullptr && b_hh != nullptr) b = (*b_ih + *b_hh).contiguous();
    if (!rows_apply({ih, hh, b})) return std::nullopt;
    keep.insert(keep.end(), {ih, hh, b});
    r.ih.push_back({ih.data_ptr<float>(), b.defined() ? b.data_ptr<float>() : nullptr, ih.size(0),
                    ih.size(1)});
    r.hh_t.push_back(hh.data_ptr<float>());
  }
  return r;
}

}  // namespace

// The layers as raw floats (CPU fp32 networks only).
struct TftStreamRows {
  kernels::RowLstm encoder, decoder;
  kernels::RowGan lstm_gate, attention_gate, output_gate;
  kernels::RowGrn enrichment, positionwise;
  kernels::RowLinear query, key, value, out, output;
  std::vector<torch::Tensor> keep;  // the transposed LSTM weights
  std::vector<float> h0;            // [2, layers, H]: c_h, then c_c, per layer
};

struct TftStream::Prepared {
  Gan lstm_gate, attention_gate, output_gate;
  Grn enrichment, positionwise;
  Lin query, key, value, out, output;  // query scaled by 1 / sqrt(d_k), value by 1 / heads
  // Per static id:
  torch::Tensor past_selection_bias, future_selection_bias;  // VSN selection fc2 bias + W3 c_s
  torch::Tensor enrichment_bias;                             // fc2 bias + W3 c_e
  std::tuple<torch::Tensor, torch::Tensor> h0;  // (c_h, c_c) repeated over the LSTM layers
  torch::Tensor mask;                           // [horizon, window + horizon] causal mask
  std::optional<TftStreamRows> rows;            // set on CPU fp32: push_rows runs
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
  prepare_rows(*p);
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

// The row kernels' forms of `p`'s layers, when every tensor they read is CPU fp32.
void TftStream::prepare_rows(Prepared& p) {
  std::vector<torch::Tensor> used = {p.enrichment_bias, std::get<0>(p.h0), std::get<1>(p.h0)};
  for (const Gan* g : {&p.lstm_gate, &p.attention_gate, &p.output_gate}) append_tensors(used, *g);
  for (const Grn* g : {&p.enrichment, &p.positionwise}) append_tensors(used, *g);
  for (const Lin* l : {&p.query, &p.key, &p.value, &p.out, &p.output}) append_tensors(used, *l);
  if (!rows_apply(used)) return;
  TftStreamRows r;
  auto enc = row_lstm_of(*net_->encoder, r.keep);
  auto dec = row_lstm_of(*net_->decoder, r.keep);
  if (!enc || !dec) return;
  r.encoder = std::move(*enc);
  r.decoder = std::move(*dec);
  r.lstm_gate = row_of(p.lstm_gate);
  r.attention_gate = row_of(p.attention_gate);
  r.output_gate = row_of(p.output_gate);
  r.enrichment = row_of(p.enrichment);
  r.positionwise = row_of(p.positionwise);
  r.query = row_of(p.query);
  r.key = row_of(p.key);
  r.value = row_of(p.value);
  r.out = row_of(p.out);
  r.output = row_of(p.output);
  const auto h0 = torch::stack({std::get<0>(p.h0), std::get<1>(p.h0)}).contiguous();
  r.h0.assign(h0.data_ptr<float>(), h0.data_ptr<float>() + h0.numel());
  p.rows = std::move(r);
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

  ChunkRunner* const threads = w.device().is_cpu() ? runner : nullptr;  // tensor ops: CPU only
  if (p.rows && fused_cpu_kernels()) return push_rows(past_t, future, threads);
  const int64_t W = window_, P = o.past_features(), H = o.hidden(), K = o.horizon();
  const int64_t slot = bars_ % W;
  const auto dtype = w.scalar_type();
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

// push on the CPU in fp32: the same stages and chunks as push's tensor ops, on raw floats through
// the row kernels (tft_row_kernels.h). One work tensor holds every intermediate.
torch::Tensor TftStream::push_rows(const torch::Tensor& past_t, const torch::Tensor& future,
                                   ChunkRunner* threads) {
  const auto& p = *prepared_;
  const auto& r = *p.rows;
  const auto& o = net_->options;
  const int64_t W = window_, P = o.past_features(), H = o.hidden(), K = o.horizon();
  const int64_t layers = o.lstm_layers(), ld = P + H, S = layers * H;
  const int64_t heads = net_->attention->heads, dk = net_->attention->d_k;
  const int64_t d = r.query.out, dv = r.value.out, Q = r.output.out;
  const int64_t n = std::min(bars_ + 1, W), L = n + K;
  const auto raw = past_t.to(torch::kFloat).contiguous().reshape({1, P});

  // The work areas: [encoder state h, c | decoder state | encoder rows | theta [L, H] |
  // keys [L, d] | values [L, dv] | phi_dec, queries | scratch of chunk 0 | of chunk 1 | tail].
  const int64_t scratch0 = kernels::rows_lstm_scratch(r.decoder, K) + K * H +
                           kernels::rows_gan_scratch(r.lstm_gate, K) +
                           kernels::rows_grn_scratch(r.enrichment, K);
  const int64_t scratch1 = kernels::rows_lstm_scratch(r.encoder, n) + n * H +
                           kernels::rows_gan_scratch(r.lstm_gate, n) +
                           kernels::rows_grn_scratch(r.enrichment, n);
  const int64_t tail = 2 * L + K * (dv + 4 * H) +
                       std::max({kernels::rows_gan_scratch(r.attention_gate, K),
                                 kernels::rows_gan_scratch(r.output_gate, K),
                                 kernels::rows_grn_scratch(r.positionwise, K)});
  auto work =
      torch::empty({4 * S + n * H + L * (H + d + dv) + K * (H + d) + scratch0 + scratch1 + tail},
                   torch::TensorOptions().dtype(torch::kFloat));
  float* enc_h = work.data_ptr<float>();
  float* enc_c = enc_h + S;
  float* dec_h = enc_c + S;
  float* dec_c = dec_h + S;
  float* enc_out = dec_c + S;
  float* theta = enc_out + n * H;
  float* keys = theta + L * H;
  float* values = keys + L * d;
  float* phi_dec = values + L * dv;
  float* queries = phi_dec + K * H;
  float* scr0 = queries + K * d;
  float* scr1 = scr0 + scratch0;
  float* scr_tail = scr1 + scratch1;
  std::copy(r.h0.begin(), r.h0.begin() + S, enc_h);
  std::copy(r.h0.begin() + S, r.h0.end(), enc_c);

  // The new bar's VSN and the encoder over the window's older rows (two chunks, as in push).
  float* const buf = buf_.data_ptr<float>();
  const float* old_rows = buf + ((bars_ + 1 - n) % W) * ld + P;
  torch::Tensor sel;
  run_chunks(threads, n > 1 ? 2 : 1, [&](int64_t chunk) {
    c10::InferenceMode chunk_guard;
    if (chunk == 0) {
      sel = net_->past_vsn->forward_rows(raw, p.past_selection_bias, past_folding_, threads)
                .contiguous();  // [1, H]
    } else {
      kernels::rows_lstm(r.encoder, old_rows, ld, n - 1, enc_h, enc_c, enc_out, scr1);
    }
  });
  const int64_t slot = bars_ % W;
  for (float* row : {buf + slot * ld, buf + (slot + W) * ld}) {
    std::copy_n(raw.data_ptr<float>(), P, row);
    std::copy_n(sel.data_ptr<float>(), H, row + P);
  }
  ++bars_;
  const float* past_sel = buf + ((bars_ - n) % W) * ld + P;  // [n, H], row stride ld
  kernels::rows_lstm(r.encoder, sel.data_ptr<float>(), H, 1, enc_h, enc_c, enc_out + (n - 1) * H,
                     scr1);
  std::copy(enc_h, enc_h + 2 * S, dec_h);  // the decoder starts from the encoder's state

  // The decoder's rows and the encoder's rows up to the attention: two chunks, as in push.
  const float* enrichment_bias = p.enrichment_bias.data_ptr<float>();
  run_chunks(threads, 2, [&](int64_t chunk) {
    c10::InferenceMode chunk_guard;
    if (chunk == 0) {
      const auto fut = net_->future_vsn
                           ->forward_rows(future.to(torch::kFloat), p.future_selection_bias,
                                          future_folding_)
                           .contiguous();  // [K, H]
      float* dec_out = scr0;
      float* rest = dec_out + K * H;
      kernels::rows_lstm(r.decoder, fut.data_ptr<float>(), H, K, dec_h, dec_c, dec_out, rest);
      kernels::rows_gan(r.lstm_gate, dec_out, fut.data_ptr<float>(), H, K, phi_dec, rest);
      float* theta_dec = theta + n * H;
      kernels::rows_grn(r.enrichment, phi_dec, enrichment_bias, K, theta_dec, rest);
      kernels::rows_linear(r.query, theta_dec, H, K, queries);
      kernels::rows_linear(r.key, theta_dec, H, K, keys + n * d);
      kernels::rows_linear(r.value, theta_dec, H, K, values + n * dv);
    } else {
      float* phi_enc = scr1;
      float* rest = phi_enc + n * H;
      kernels::rows_gan(r.lstm_gate, enc_out, past_sel, ld, n, phi_enc, rest);
      kernels::rows_grn(r.enrichment, phi_enc, enrichment_bias, n, theta, rest);
      kernels::rows_linear(r.key, theta, H, n, keys);
      kernels::rows_linear(r.value, theta, H, n, values);
    }
  });

  // The attention, its gate, the position-wise GRN, the output gate and the quantile heads.
  float* att = scr_tail + 2 * L;
  float* att_out = att + K * dv;
  float* delta = att_out + K * H;
  float* psi = delta + K * H;
  float* gated = psi + K * H;
  float* rest = gated + K * H;
  kernels::rows_attention(queries, keys, values, K, L, heads, dk, dv, att, scr_tail);
  kernels::rows_linear(r.out, att, dv, K, att_out);
  kernels::rows_gan(r.attention_gate, att_out, theta + n * H, H, K, delta, rest);
  kernels::rows_grn(r.positionwise, delta, r.positionwise.fc2.b, K, psi, rest);
  kernels::rows_gan(r.output_gate, psi, phi_dec, H, K, gated, rest);
  auto y = torch::empty({K, Q}, work.options());
  kernels::rows_linear(r.output, gated, H, K, y.data_ptr<float>());
  return y;
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
