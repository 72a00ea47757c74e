#pragma once
/// \file tft.h
/// Temporal Fusion Transformer (Lim et al. 2021), FP32: quantile forecasts for `horizon` bars from
/// a window of past-observed reals, known-future reals and one categorical static input.
///
/// Data flow (B batch, T window, K horizon, H hidden):
///   static_id -> Embedding -> single-variable GRN -> 4 GRNs -> c_s, c_h, c_c, c_e
///   past [B,T,P] -> VSN(c_s) -> LSTM encoder (state0 = c_h, c_c) --.
///   future [B,K,F] -> VSN(c_s) -> LSTM decoder (encoder state) -----+-> gated skip + LayerNorm =
///   phi phi -> static enrichment GRN(c_e) = theta -> interpretable attention (queries: decoder
///   steps)
///   -> GateAddNorm(., theta_dec) -> position-wise GRN -> GateAddNorm(., phi_dec)
///   -> Linear(H -> Q) shared by every horizon step -> [B, K, Q].
///
/// Causality: every layer after the LSTMs is position-wise except the attention, whose mask lets
/// decoder step t attend to all T encoder steps and to decoder steps 0..t *including itself*
/// (key position j is visible to query t iff j <= T + t). So known-future input at step k can only
/// move forecasts at steps >= k.

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "foxhunt/models/derived_cache.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/streaming.h"

namespace foxhunt::models {

/// Options of the Temporal Fusion Transformer.
/// Example: `TftOptions().past_features(8).hidden(16).window(30)` for a small test model.
struct TftOptions {
  /// Real-valued past-observed inputs per bar.
  TORCH_ARG(int64_t, past_features) = 225;
  /// Real-valued known-future inputs per bar (e.g. calendar sin/cos).
  TORCH_ARG(int64_t, future_features) = 4;
  /// Cardinality of the one categorical static input (instrument id in [0, static_categories)).
  TORCH_ARG(int64_t, static_categories) = 16;
  /// Model width H (embeddings, GRNs, LSTMs, attention).
  TORCH_ARG(int64_t, hidden) = 32;
  /// Attention heads; must divide hidden (d_k = hidden / heads).
  TORCH_ARG(int64_t, heads) = 4;
  /// Layers of both the encoder and the decoder LSTM.
  TORCH_ARG(int64_t, lstm_layers) = 2;
  /// Dropout before every GLU, on attention weights and between LSTM layers (train mode only).
  TORCH_ARG(double, dropout) = 0.1;
  /// Default encoder length (used for example batches; any length >= 1 is accepted at run time).
  TORCH_ARG(int64_t, window) = 60;
  /// Decoder length: forecast steps (the future input must have exactly this many steps).
  TORCH_ARG(int64_t, horizon) = 5;
  /// Quantile levels in (0, 1), one output per level.
  TORCH_ARG(std::vector<double>, quantiles) = std::vector<double>{0.1, 0.5, 0.9};
  /// Width of the per-variable embedding Linear(1 -> real_embedding) of every real input.
  TORCH_ARG(int64_t, real_embedding) = 8;
};

/// Options as JSON (all fields).
nlohmann::json to_json(const TftOptions& o);
/// Options from JSON: missing keys take defaults, unknown keys and wrong types are InputErrors.
TftOptions tft_options_from_json(const nlohmann::json& j);
/// The I/O contract of a model built with `o` (inputs, outputs, window, horizon); a pure
/// function of the options, like the closed-form sizes.
IoSpec io_spec(const TftOptions& o);
/// Throws InputError unless the options describe a buildable model.
void validate(const TftOptions& o);
/// Closed-form parameter count (807,564 for the defaults); overflow-checked.
int64_t parameter_count(const TftOptions& o);

// ---- building blocks --------------------------------------------------------------------------

/// Gated linear unit: GLU(x) = (W5 x + b5) * sigmoid(W4 x + b4), one Linear(in, 2 out) holding
/// the value half then the gate half; dropout on its input.
class GluImpl : public torch::nn::Cloneable<GluImpl> {
 public:
  /// `in` -> `out` features, `dropout` applied to the input in train mode.
  GluImpl(int64_t in, int64_t out, double dropout);
  /// (Re)creates the layer (LibTorch's Cloneable contract).
  void reset() override;
  /// [..., in] -> [..., out].
  torch::Tensor forward(const torch::Tensor& x);

  int64_t in, out;                      ///< feature sizes
  double dropout_p;                     ///< input dropout probability
  torch::nn::Dropout dropout{nullptr};  ///< on the input
  torch::nn::Linear fc{nullptr};        ///< [value | gate], Xavier-uniform init, zero bias
};
TORCH_MODULE(Glu);

/// GateAddNorm(x, skip) = LayerNorm(GLU(x) + skip).
class GateAddNormImpl : public torch::nn::Cloneable<GateAddNormImpl> {
 public:
  /// GLU `in` -> `out`; `skip` must have `out` features.
  GateAddNormImpl(int64_t in, int64_t out, double dropout);
  /// (Re)creates the layers.
  void reset() override;
  /// [..., in], [..., out] -> [..., out].
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& skip);

  int64_t in, out;                     ///< GLU input / output features
  double dropout_p;                    ///< GLU input dropout
  Glu glu{nullptr};                    ///< in -> out
  torch::nn::LayerNorm norm{nullptr};  ///< over `out` features
};
TORCH_MODULE(GateAddNorm);

/// Options of a gated residual network.
struct GatedResidualNetworkOptions {
  GatedResidualNetworkOptions(int64_t in, int64_t hidden, int64_t out)
      : in_(in), hidden_(hidden), out_(out) {}
  /// Input features of `a`.
  TORCH_ARG(int64_t, in);
  /// Width of the two inner layers (eta2, eta1).
  TORCH_ARG(int64_t, hidden);
  /// Output features; when != in the skip path is a Linear(in -> out) projection.
  TORCH_ARG(int64_t, out);
  /// Features of the optional static context c (0 = no context input).
  TORCH_ARG(int64_t, context) = 0;
  /// Dropout before the GLU.
  TORCH_ARG(double, dropout) = 0.0;
};

/// Closed-form parameter count of one GRN.
int64_t parameter_count(const GatedResidualNetworkOptions& o);

/// GRN(a, c): eta2 = ELU(W2 a + b2 + W3 c) (W3 without bias); eta1 = W1 eta2 + b1;
/// out = GateAddNorm(eta1, skip = a, or Linear(a) when in != out).
/// Init: Kaiming-normal (fan_in) for fc2/fc1/skip, Xavier-uniform for the GLU and context, zero
/// bias.
class GatedResidualNetworkImpl : public torch::nn::Cloneable<GatedResidualNetworkImpl> {
 public:
  /// Builds and initialises the GRN.
  explicit GatedResidualNetworkImpl(GatedResidualNetworkOptions options);
  /// (Re)creates every layer from `options` (LibTorch's Cloneable contract).
  void reset() override;
  /// `a` [..., in] (rank 2 or 3); `context` [batch, context] or undefined. For rank-3 `a`
  /// ([batch, time, in]) the context is broadcast over time. Returns [..., out].
  torch::Tensor forward(const torch::Tensor& a, const torch::Tensor& context = {});
  /// The same GRN when fc2(a) and the skip term were computed elsewhere (the VSN folds its
  /// embedding into them): `fc2_a` [..., hidden], `skip` [..., out].
  torch::Tensor forward_projected(const torch::Tensor& fc2_a, const torch::Tensor& skip,
                                  const torch::Tensor& context = {});
  /// True when the skip path is a projection (in != out).
  bool has_skip_projection() const { return !skip.is_empty(); }

  GatedResidualNetworkOptions options;  ///< sizes and dropout
  torch::nn::Linear fc2{nullptr};       ///< W2: in -> hidden
  torch::nn::Linear context{nullptr};   ///< W3: context -> hidden, no bias (empty when no context)
  torch::nn::Linear fc1{nullptr};       ///< W1: hidden -> hidden
  GateAddNorm gate_norm{nullptr};       ///< hidden -> out
  torch::nn::Linear skip{nullptr};      ///< in -> out (empty when in == out)
};
TORCH_MODULE(GatedResidualNetwork);

/// Options of a variable selection network over real-valued variables.
struct VariableSelectionNetworkOptions {
  VariableSelectionNetworkOptions(int64_t variables, int64_t embedding, int64_t hidden)
      : variables_(variables), embedding_(embedding), hidden_(hidden) {}
  /// Number of real-valued input variables V.
  TORCH_ARG(int64_t, variables);
  /// Per-variable embedding width E (Linear(1 -> E)).
  TORCH_ARG(int64_t, embedding);
  /// Output width H (and width of every GRN inside).
  TORCH_ARG(int64_t, hidden);
  /// Static context width for the selection weights (0 = none).
  TORCH_ARG(int64_t, context) = 0;
  /// Dropout before every GLU.
  TORCH_ARG(double, dropout) = 0.0;
};

/// Closed-form parameter count of one VSN.
int64_t parameter_count(const VariableSelectionNetworkOptions& o);

/// Output of a variable selection network.
struct VsnOutput {
  torch::Tensor output;   ///< [batch, time, hidden]: selection-weighted sum of variable GRNs
  torch::Tensor weights;  ///< [batch, time, variables]: softmax selection weights (sum to 1)
};

/// The input-independent part of a VSN pass: every layer that consumes the embeddings linearly,
/// folded with the embedding into an affine map of the raw values (see
/// VariableSelectionNetworkImpl). A function of the weights only, so it can be computed once and
/// reused for many inputs (streaming) while the weights stay unchanged.
namespace kernels {
struct Bf16VsnPack;  // the BF16 kernel's packed per-variable weights (models/, private)
}  // namespace kernels

struct VsnFolding {
  torch::Tensor fc2_slope, fc2_offset;      ///< [V, 1, Hi] per-variable GRN fc2 of the embedding
  torch::Tensor skip_slope, skip_offset;    ///< [V, 1, H] per-variable GRN skip of the embedding
  torch::Tensor sel_fc2, sel_fc2_offset;    ///< [V, H], [H] selection GRN fc2 (undefined if V == 1)
  torch::Tensor sel_skip, sel_skip_offset;  ///< [V, V], [V] selection GRN skip (if projected)
  torch::Tensor sel_fc1_t, sel_glu_t;  ///< selection GRN fc1 and GLU weights transposed, for addmm
};

/// Variable selection network for V real-valued variables. Each variable v is embedded with its
/// own Linear(1 -> E) and transformed by its own GRN(E -> H) whose inner width is min(E, H) (as
/// in pytorch-forecasting: the GRN of an 8-wide embedding does not need 32-wide inner layers, and
/// with hundreds of variables this is most of the model's compute); the selection weights are
/// softmax(GRN(concat of embeddings, context)) with V outputs. A single variable skips the
/// weighting (weight 1, no selection GRN).
///
/// Performance: the V per-variable embeddings and GRNs are stored as batched tensors of shape
/// [V, in, out] and run with one bmm per layer over all variables. Because each input is a
/// scalar, the embedding is affine in it, so the first layer of every GRN that consumes
/// embeddings (fc2 and the skip projection) is folded with the embedding into one affine map of
/// the raw value; that is exact algebra (same parameters, same gradients), not an approximation.
class VariableSelectionNetworkImpl : public torch::nn::Cloneable<VariableSelectionNetworkImpl> {
 public:
  /// Builds and initialises the VSN.
  explicit VariableSelectionNetworkImpl(VariableSelectionNetworkOptions options);
  /// (Re)creates every parameter from `options`.
  void reset() override;
  /// `x` [batch, time, V] float; `context` [batch, context] or undefined. With gradients off the
  /// folding comes from `folded()`.
  VsnOutput forward(const torch::Tensor& x, const torch::Tensor& context = {});
  /// The same pass with the input-independent folding precomputed by `fold()` (on these weights).
  VsnOutput forward(const torch::Tensor& x, const torch::Tensor& context,
                    const VsnFolding& folding);
  /// The folded embedding layers of the current weights (what `forward` computes first).
  VsnFolding fold() const;
  /// `fold()` kept while the parameters are unchanged (DerivedCache: computed afresh, and not
  /// kept, with gradients on). On the default past VSN a fold reads the 1.6 MB selection skip
  /// matrix twice and was ~40% of a batch-1 TFT forward.
  std::shared_ptr<const VsnFolding> folded() const;
  /// The selection GRN's fc2 bias with its context term for one sample's context `c`
  /// [1, context] (or undefined: none) added: [hidden]. For `forward_rows`.
  torch::Tensor selection_bias(const VsnFolding& folding, const torch::Tensor& c) const;
  /// Inference on the rows of one sample, no dropout and no selection weights returned (the
  /// streaming path): `x` [N, V] -> output [N, hidden], equal to `forward(x[None], c).output[0]`
  /// when `selection_bias` comes from `selection_bias(folding, c)`. No input validation.
  /// A single CPU float32 row runs its per-variable GRNs in chunks of variables on `runner`
  /// (null: in order on the caller), bit for bit the same output on any number of threads.
  torch::Tensor forward_rows(const torch::Tensor& x, const torch::Tensor& selection_bias,
                             const VsnFolding& folding, ChunkRunner* runner = nullptr);
  /// The per-variable embeddings [batch, time, V, E] (what the selection GRN sees, flattened).
  torch::Tensor embed(const torch::Tensor& x) const;
  /// Inner width of each per-variable GRN: min(E, H).
  int64_t inner() const { return std::min(options.embedding(), options.hidden()); }

  VariableSelectionNetworkOptions options;  ///< sizes and dropout
  // Per-variable parameters, stacked over the variable axis (matmul layout [V, in, out]).
  torch::Tensor emb_weight;   ///< [V, 1, E]  Linear(1 -> E) weights
  torch::Tensor emb_bias;     ///< [V, E]
  torch::Tensor fc2_weight;   ///< [V, E, Hi]  GRN W2 (Hi = inner())
  torch::Tensor fc2_bias;     ///< [V, Hi]
  torch::Tensor fc1_weight;   ///< [V, Hi, Hi] GRN W1
  torch::Tensor fc1_bias;     ///< [V, Hi]
  torch::Tensor glu_weight;   ///< [V, Hi, 2H] GLU [value | gate]
  torch::Tensor glu_bias;     ///< [V, 2H]
  torch::Tensor norm_weight;  ///< [V, H] LayerNorm gain
  torch::Tensor norm_bias;    ///< [V, H] LayerNorm shift
  torch::Tensor skip_weight;  ///< [V, E, H] skip projection (undefined when E == H)
  torch::Tensor skip_bias;    ///< [V, H]    (undefined when E == H)
  /// GRN(V*E -> H -> V, context) producing selection logits (empty when V == 1).
  GatedResidualNetwork selection{nullptr};

 private:
  /// The V per-variable GRNs on `xv` [V, N, 1]. Returns [V, N, H].
  torch::Tensor variable_grns(const torch::Tensor& xv, const VsnFolding& in);
  /// sum_v w[n, v] GRN_v(x[n, v]) for x, w [N, V] on the BF16 kernel (the BF16 TFT's per-variable
  /// weights, bf16.h), from this module's own folding packed once (bf16_cache_).
  torch::Tensor bf16_weighted_grns(const torch::Tensor& x, const torch::Tensor& w) const;
  mutable DerivedCache<VsnFolding> fold_cache_;
  mutable DerivedCache<kernels::Bf16VsnPack> bf16_cache_;
};
TORCH_MODULE(VariableSelectionNetwork);

/// Output of the interpretable attention.
struct AttentionOutput {
  torch::Tensor output;   ///< [batch, queries, hidden]
  torch::Tensor weights;  ///< [batch, queries, keys], averaged over heads (rows sum to 1)
};

/// Interpretable multi-head attention: per-head query and key projections (d_k = hidden/heads),
/// one value projection shared by all heads, head outputs averaged, then W_H: d_k -> hidden.
/// Attention weights are dropped out in train mode; the returned weights are before dropout.
class InterpretableMultiHeadAttentionImpl
    : public torch::nn::Cloneable<InterpretableMultiHeadAttentionImpl> {
 public:
  /// `hidden` model width, `heads` (must divide hidden), `dropout` on attention weights.
  InterpretableMultiHeadAttentionImpl(int64_t hidden, int64_t heads, double dropout);
  /// (Re)creates the projections.
  void reset() override;
  /// `q` [batch, Lq, hidden], `kv` [batch, Lk, hidden]; `mask` [Lq, Lk] bool, true = hidden key
  /// (undefined = none). Every query must see at least one key.
  AttentionOutput forward(const torch::Tensor& q, const torch::Tensor& kv,
                          const torch::Tensor& mask = {});

  int64_t hidden, heads, d_k;        ///< d_k = hidden / heads
  double dropout_p;                  ///< attention-weight dropout (train mode)
  torch::nn::Linear query{nullptr};  ///< hidden -> heads * d_k (one d_k block per head)
  torch::nn::Linear key{nullptr};    ///< hidden -> heads * d_k (one d_k block per head)
  torch::nn::Linear value{nullptr};  ///< hidden -> d_k, shared by all heads
  torch::nn::Linear out{nullptr};    ///< W_H: d_k -> hidden
};
TORCH_MODULE(InterpretableMultiHeadAttention);

/// The causal decoder mask for `window` encoder and `horizon` decoder steps: [horizon,
/// window + horizon] bool, true where decoder step t may NOT look (key j > window + t).
torch::Tensor tft_causal_mask(int64_t window, int64_t horizon, const torch::Device& device);

// ---- the model --------------------------------------------------------------------------------

/// Full output of one forward pass (for interpretability and tests).
struct TftOutput {
  torch::Tensor prediction;      ///< [batch, horizon, Q] quantile forecasts
  torch::Tensor attention;       ///< [batch, horizon, window + horizon], head-averaged
  torch::Tensor past_weights;    ///< [batch, window, past_features] past VSN weights
  torch::Tensor future_weights;  ///< [batch, horizon, future_features] future VSN weights
};

/// The four static contexts of a batch (each [batch, hidden]); functions of static_id only.
struct TftStaticContext {
  torch::Tensor selection;   ///< c_s: context of both variable selection networks
  torch::Tensor hidden;      ///< c_h: initial LSTM hidden state (every layer)
  torch::Tensor cell;        ///< c_c: initial LSTM cell state (every layer)
  torch::Tensor enrichment;  ///< c_e: context of the static enrichment GRN
};

/// The Temporal Fusion Transformer network.
class TftNetImpl : public torch::nn::Cloneable<TftNetImpl> {
 public:
  /// Builds the network; throws InputError for invalid options.
  explicit TftNetImpl(TftOptions options = {});
  /// (Re)creates every sub-module from `options`.
  void reset() override;
  /// Validates the inputs and returns the forecasts [batch, horizon, Q].
  /// `past` [batch, window>=1, past_features] float, `future` [batch, horizon, future_features]
  /// float, `static_id` [batch] int64 in [0, static_categories).
  torch::Tensor forward(const torch::Tensor& past, const torch::Tensor& future,
                        const torch::Tensor& static_id);
  /// Same as forward, plus attention and variable-selection weights.
  TftOutput forward_with_details(const torch::Tensor& past, const torch::Tensor& future,
                                 const torch::Tensor& static_id);

  /// The static covariate encoders on `static_id` [batch] int64 (no validation; `forward`
  /// validates). The first stage of `forward`.
  TftStaticContext static_context(const torch::Tensor& static_id);
  /// Everything after the variable selection networks (LSTMs, gated skip, enrichment, attention,
  /// output layers) on their outputs `past_selected` [batch, window, hidden] and
  /// `future_selected` [batch, horizon, hidden]: the last stage of `forward`, without input
  /// validation. Fills `prediction` and `attention` of the result.
  TftOutput forward_selected(const torch::Tensor& past_selected,
                             const torch::Tensor& future_selected, const TftStaticContext& ctx);

  /// The past VSN on single bars of N instruments (the stage a stream caches per bar): `rows`
  /// [N, past_features], `static_id` [N] int64 -> [N, hidden]. Validates the inputs; inference
  /// only (InferenceMode).
  torch::Tensor encode_past_rows(const torch::Tensor& rows, const torch::Tensor& static_id);
  /// `forward` on cached past VSN outputs `past_selected` [N, window, hidden] (encode_past_rows
  /// of each bar), `future` [N, horizon, future_features] and `static_id` [N]: equal to forward
  /// on the raw window to rounding (the VSN is position-wise). Validates the inputs.
  torch::Tensor forward_cached(const torch::Tensor& past_selected, const torch::Tensor& future,
                               const torch::Tensor& static_id);

  TftOptions options;                              ///< the configuration
  torch::nn::Embedding static_embedding{nullptr};  ///< static_categories -> hidden
  GatedResidualNetwork static_variable{nullptr};   ///< single static variable: GRN, no weighting
  GatedResidualNetwork static_context_selection{nullptr};   ///< c_s
  GatedResidualNetwork static_context_hidden{nullptr};      ///< c_h (LSTM h0)
  GatedResidualNetwork static_context_cell{nullptr};        ///< c_c (LSTM c0)
  GatedResidualNetwork static_context_enrichment{nullptr};  ///< c_e
  VariableSelectionNetwork past_vsn{nullptr};               ///< past_features reals, context c_s
  VariableSelectionNetwork future_vsn{nullptr};             ///< future_features reals, context c_s
  torch::nn::LSTM encoder{nullptr};          ///< over the window, state0 = (c_h, c_c)
  torch::nn::LSTM decoder{nullptr};          ///< over the horizon, state0 = encoder's final
  GateAddNorm lstm_gate{nullptr};            ///< phi = LN(GLU(lstm) + vsn)
  GatedResidualNetwork enrichment{nullptr};  ///< theta = GRN(phi, c_e)
  InterpretableMultiHeadAttention attention{nullptr};  ///< decoder queries, causal mask
  GateAddNorm attention_gate{nullptr};                 ///< LN(GLU(attn) + theta_dec)
  GatedResidualNetwork positionwise{nullptr};          ///< position-wise feed-forward GRN
  GateAddNorm output_gate{nullptr};                    ///< LN(GLU(.) + phi_dec)
  torch::nn::Linear output{nullptr};                   ///< hidden -> Q, shared by all horizon steps

 private:
  void validate_inputs(const torch::Tensor& past, const torch::Tensor& future,
                       const torch::Tensor& static_id);
};
TORCH_MODULE(TftNet);

// ---- per-instrument streaming ----------------------------------------------------------------

/// Streaming forecasts for one instrument: `push` takes one new bar of past features (plus the
/// known-future rows of the horizon and the static id) and returns what `net->forward` computes
/// for the last `window` bars. During warm-up (fewer than `window` bars) the forecast uses all
/// bars so far: the TFT accepts any encoder length, so this equals `forward` on that shorter
/// window rather than refusing.
///
/// What is cached, and why it is exact: the static contexts depend only on static_id, and the
/// past variable selection network (per-variable GRNs and selection weights, most of the
/// model's compute) is position-wise given the static context, so each bar's VSN output is
/// computed once, when the bar arrives, and kept in a ring buffer with the bar's raw row. The
/// VSN's input-independent folded weights (`VsnFolding`) are computed once too. Per new bar the
/// stream runs the VSN on that bar and on the horizon's known-future rows, then the stages that
/// depend on the window start (those of `TftNetImpl::forward_selected`: encoder LSTM from
/// (c_h, c_c) at the window start, decoder, gated skip, enrichment, attention over the window,
/// output layers), written for batch 1 on pre-transposed weights (on a CPU fp32 network as row
/// kernels on raw floats, elsewhere as 2-D LibTorch ops): the static
/// contexts' GRN terms are folded into biases per static id, the attention scale into the
/// query weights, and the head average is taken over the attention weights before the shared
/// value projection (exact algebra: the value projection is shared by all heads). The result equals
/// `forward` to rounding (below 1e-6 absolute in fp32 in the tests).
///
/// The cache is recomputed from the raw rows when static_id changes or when the module's
/// parameters change (`ParameterStamp`: optimizer steps, checkpoint loads, device or dtype
/// moves). Each stream owns its buffers, so several streams can share one network.
/// `push` runs under `c10::InferenceMode` and requires the network in eval mode (dropout off).
class TftStream {
 public:
  /// A stream over `net` (shared, not copied) with encoder length `window` (0 = the options'
  /// window).
  explicit TftStream(TftNet net, int64_t window = 0);
  /// Appends bar `past_t` [past_features] and returns the forecast [horizon, Q] equal to
  /// `net->forward` at batch 1 on the last min(bars(), window()) past rows, `future`
  /// [horizon, future_features] and `static_id` in [0, static_categories). Inputs are floating,
  /// finite and on the module's device; they are converted to the module's dtype like `forward`.
  /// Independent parts of the push run as chunks on `runner` (null: in order on the caller); the
  /// forecast is bit for bit the same on any number of threads.
  torch::Tensor push(const torch::Tensor& past_t, const torch::Tensor& future, int64_t static_id,
                     ChunkRunner* runner = nullptr);
  /// Forgets every bar.
  void reset();
  /// Encoder length each forecast uses once warmed up.
  int64_t window() const { return window_; }
  /// Bars pushed since construction or the last `reset`.
  int64_t bars() const { return bars_; }
  /// Bars the next forecast's window holds: min(bars(), window()).
  int64_t filled() const { return std::min(bars_, window_); }
  /// The network the stream runs.
  const TftNet& net() const { return net_; }

 private:
  void allocate();
  void refresh(int64_t static_id);
  struct Prepared;  // transposed weights, per-id biases, masks (tft_stream.cpp)
  void prepare_rows(Prepared& p);
  torch::Tensor push_rows(const torch::Tensor& past_t, const torch::Tensor& future,
                          ChunkRunner* threads);

  TftNet net_;
  int64_t window_ = 0;
  int64_t bars_ = 0;
  int64_t static_id_ = -1;  // id of ctx_ (-1: none yet)
  // [2 * window, past_features + hidden]: [raw row | past VSN output]; bar b in rows b % window
  // and b % window + window, so the window is one contiguous block of rows.
  torch::Tensor buf_;
  TftStaticContext ctx_;
  VsnFolding past_folding_, future_folding_;
  std::shared_ptr<Prepared> prepared_;
  ParameterStamp stamp_;
};

/// Throws InputError unless `past`, `future` and `static_id` are inputs of a TFT with options
/// `o` on `device` (what TftNet::forward checks; shared with the INT8 TFT).
void validate_tft_inputs(const TftOptions& o, const torch::Tensor& past,
                         const torch::Tensor& future, const torch::Tensor& static_id,
                         const torch::Device& device);
/// The TFT's deterministic synthetic batch (Model::example_batch), also used by the INT8 TFT.
Batch example_batch_of(const TftOptions& o, int64_t batch, int64_t seq_len,
                       const torch::Device& device, uint64_t seed);

/// Registry adapter: name "tft", inputs {past, future, static_id}, output {[batch, horizon, Q]},
/// loss = quantile (pinball) loss against a [batch, horizon] target.
std::unique_ptr<Model> make_tft_model(const nlohmann::json& options);

}  // namespace foxhunt::models
