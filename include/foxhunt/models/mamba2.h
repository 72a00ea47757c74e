#pragma once
/// \file mamba2.h
/// Mamba-2 (SSD, Dao & Gu 2024) quantile forecaster over bar features.
///
/// The model embeds each bar (Linear input_dim -> d_model), runs `n_layers` pre-norm Mamba-2
/// blocks, applies a final RMSNorm and a quantile head at the last position:
/// x [batch, seq_len, input_dim] -> [batch, horizon, Q].
/// The state-space scan is the chunked SSD algorithm (`ssd_chunked`); `ssd_sequential` is the
/// plain recurrence it must match. A streaming path (`prefill` + `step`) advances one bar in O(1)
/// with a state carried over the whole history; `Mamba2Stream` gives per bar exactly what
/// `forward` computes on that bar's window.
/// The reference math is `ssd_sequential` below (the plain recurrence, Dao & Gu 2024).

#include <torch/torch.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "foxhunt/models/model.h"
#include "foxhunt/models/streaming.h"

namespace foxhunt::models {

/// Options of the Mamba-2 forecaster.
/// Example: `Mamba2Options().input_dim(8).d_model(32).n_layers(1).window(64)`.
struct Mamba2Options {
  /// Features per bar (last dimension of the input).
  TORCH_ARG(int64_t, input_dim) = 32;
  /// Model width D (embedding and residual stream).
  TORCH_ARG(int64_t, d_model) = 64;
  /// SSM state size N per head.
  TORCH_ARG(int64_t, d_state) = 16;
  /// Number of Mamba-2 blocks.
  TORCH_ARG(int64_t, n_layers) = 2;
  /// Inner expansion: d_inner = expand * d_model.
  TORCH_ARG(int64_t, expand) = 2;
  /// Head dimension P; heads H = d_inner / headdim (8 for the defaults).
  TORCH_ARG(int64_t, headdim) = 16;
  /// Groups G sharing B and C (H must be divisible by G).
  TORCH_ARG(int64_t, ngroups) = 1;
  /// Kernel width of the depthwise causal convolution.
  TORCH_ARG(int64_t, d_conv) = 4;
  /// Chunk length Q of the chunked SSD scan.
  TORCH_ARG(int64_t, chunk_size) = 16;
  /// Default sequence length (bars of history) used by the registry.
  TORCH_ARG(int64_t, window) = 32;
  /// Number of future steps forecast.
  TORCH_ARG(int64_t, horizon) = 1;
  /// Quantile levels in (0, 1) predicted per step.
  TORCH_ARG(std::vector<double>, quantiles) = std::vector<double>{0.1, 0.5, 0.9};

 public:  // TORCH_ARG leaves the members private
  /// d_inner = expand * d_model.
  int64_t d_inner() const { return expand_ * d_model_; }
  /// Number of heads H = d_inner / headdim.
  int64_t nheads() const { return d_inner() / headdim_; }
  /// Channels of the depthwise convolution: d_inner + 2 * ngroups * d_state (x, B and C).
  int64_t conv_dim() const { return d_inner() + 2 * ngroups_ * d_state_; }
};

/// Options as JSON (every field).
nlohmann::json to_json(const Mamba2Options& o);
/// Options from JSON: missing keys keep their defaults, unknown keys or bad types throw
/// InputError. The result is validated (see `validate`).
Mamba2Options mamba2_options_from_json(const nlohmann::json& j);
/// The I/O contract of a model built with `o` (inputs, outputs, window, horizon); a pure
/// function of the options, like the closed-form sizes.
IoSpec io_spec(const Mamba2Options& o);
/// Mamba-2's deterministic synthetic batch (Model::example_batch): x ~ N(0, 1)
/// [batch, seq_len (0: the window), input_dim] and a target [batch, horizon].
Batch example_batch_of(const Mamba2Options& o, int64_t batch, int64_t seq_len,
                       const torch::Device& device, uint64_t seed);
/// Throws InputError unless all sizes are positive, d_inner is divisible by headdim, the heads
/// by ngroups, and the quantiles lie in (0, 1), strictly increasing.
void validate(const Mamba2Options& o);
/// Closed-form parameter count (58,675 for the defaults).
int64_t parameter_count(const Mamba2Options& o);

// ---- SSD scan -----------------------------------------------------------------------------

/// Output of an SSD scan.
struct SsdResult {
  torch::Tensor y;            ///< [b, L, H, P]
  torch::Tensor final_state;  ///< [b, H, P, N], the state after the last position
};

/// Stable segment sum over the last dimension T: S[..., i, j] = sum_{k=j+1..i} a[..., k] for
/// i >= j (0 on the diagonal) and -inf above it. Built with a strictly-lower mask then a
/// cumulative sum, so no large partial sums are subtracted. Returns [..., T, T].
torch::Tensor segsum(const torch::Tensor& a);

/// Chunked SSD scan (the matrix form of the Mamba-2 recurrence).
/// X [b, L, H, P] (input already multiplied by delta), A [b, L, H] (log-decay, already multiplied
/// by delta, normally <= 0), B and C [b, L, G, N] (head h uses group h / (H / G)),
/// `initial_state` [b, H, P, N] or undefined for zeros. L need not be a multiple of
/// `chunk_size`: the tail is zero-padded (zero decay exponent, zero input), which leaves Y and the
/// final state unchanged. Works in the dtype of the inputs (all must share it).
SsdResult ssd_chunked(const torch::Tensor& X, const torch::Tensor& A, const torch::Tensor& B,
                      const torch::Tensor& C, int64_t chunk_size,
                      const torch::Tensor& initial_state = {});

/// Reference recurrence, one position at a time:
/// h_t = exp(A_t) h_{t-1} + X_t (x) B_t, y_t = h_t . C_t. Same shapes and conventions as
/// `ssd_chunked`; O(L) sequential steps, for tests.
SsdResult ssd_sequential(const torch::Tensor& X, const torch::Tensor& A, const torch::Tensor& B,
                         const torch::Tensor& C, const torch::Tensor& initial_state = {});

// ---- streaming state ----------------------------------------------------------------------

/// Recurrent state of one Mamba-2 layer.
struct Mamba2LayerState {
  torch::Tensor
      conv_state;  ///< [b, conv_dim, d_conv]: the last d_conv pre-conv xBC rows, oldest first
  torch::Tensor ssm_state;  ///< [b, H, P, N]
};

/// Recurrent state of the whole network (one entry per layer).
struct Mamba2State {
  std::vector<Mamba2LayerState> layers;  ///< index = layer
  /// Batch size held by the state (0 when empty).
  int64_t batch() const { return layers.empty() ? 0 : layers.front().ssm_state.size(0); }
};

// ---- modules ------------------------------------------------------------------------------

/// RMSNorm without bias: x * rsqrt(mean(x^2) + eps) * weight over the last dimension.
class Mamba2RMSNormImpl : public torch::nn::Cloneable<Mamba2RMSNormImpl> {
 public:
  /// `dim` features, epsilon `eps`.
  explicit Mamba2RMSNormImpl(int64_t dim = 1, double eps = 1e-5);
  void reset() override;
  /// Normalises the last dimension (computed in at least fp32).
  torch::Tensor forward(const torch::Tensor& x);

  int64_t dim;
  double eps;
  torch::Tensor weight;
};
TORCH_MODULE(Mamba2RMSNorm);

/// The Mamba-2 mixer: in_proj -> [z | xBC | dt], causal depthwise conv + SiLU on xBC, SSD scan
/// with D skip, gated RMSNorm with SiLU(z), out_proj. [b, L, d_model] -> [b, L, d_model].
class Mamba2MixerImpl : public torch::nn::Cloneable<Mamba2MixerImpl> {
 public:
  explicit Mamba2MixerImpl(Mamba2Options options = {});
  /// Builds every parameter from the options with the Mamba-2 init (dt_bias from the inverse
  /// softplus of dt ~ exp(U[ln 1e-3, ln 1e-1]), A_log = ln U[1, 16], D = 1, norm weight 1).
  void reset() override;
  /// Validates `u` ([b, L, d_model], finite, module dtype and device) and runs the mixer.
  torch::Tensor forward(const torch::Tensor& u);
  /// The mixer without input validation (callers validate once at the network boundary).
  /// When `state_out` is non-null it receives the recurrent state after the last position.
  torch::Tensor apply(const torch::Tensor& u, Mamba2LayerState* state_out = nullptr);
  /// One position without validation: `u_t` [b, d_model], `state` advanced in place.
  torch::Tensor apply_step(const torch::Tensor& u_t, Mamba2LayerState& state);
  /// A zero state for `batch` sequences (equivalent to an empty history).
  Mamba2LayerState zero_state(int64_t batch) const;

  Mamba2Options options;
  torch::nn::Linear in_proj{nullptr};
  torch::nn::Conv1d conv1d{nullptr};
  torch::Tensor dt_bias;      ///< [H]
  torch::Tensor A_log;        ///< [H]
  torch::Tensor D;            ///< [H]
  torch::Tensor norm_weight;  ///< [d_inner], weight of the gated RMSNorm
  torch::nn::Linear out_proj{nullptr};

 private:
  torch::Tensor gated_norm(const torch::Tensor& y, const torch::Tensor& z) const;
};
TORCH_MODULE(Mamba2Mixer);

/// Pre-norm residual block: u + mixer(RMSNorm(u)).
class Mamba2BlockImpl : public torch::nn::Cloneable<Mamba2BlockImpl> {
 public:
  explicit Mamba2BlockImpl(Mamba2Options options = {});
  void reset() override;
  /// Validates `u` ([b, L, d_model]) and runs the block.
  torch::Tensor forward(const torch::Tensor& u);
  /// The block without validation; fills `state_out` when non-null (see Mamba2MixerImpl::apply).
  torch::Tensor apply(const torch::Tensor& u, Mamba2LayerState* state_out = nullptr);
  /// One position without validation: `u_t` [b, d_model].
  torch::Tensor apply_step(const torch::Tensor& u_t, Mamba2LayerState& state);

  Mamba2Options options;
  Mamba2RMSNorm norm{nullptr};
  Mamba2Mixer mixer{nullptr};
};
TORCH_MODULE(Mamba2Block);

/// The Mamba-2 quantile forecaster. All public entry points validate their inputs: rank, sizes,
/// finite values, device, and a float dtype equal to the module's (float32 or float64).
class Mamba2NetImpl : public torch::nn::Cloneable<Mamba2NetImpl> {
 public:
  explicit Mamba2NetImpl(Mamba2Options options = {});
  void reset() override;
  /// x [batch, seq_len >= 1, input_dim] -> quantile forecast at the last position
  /// [batch, horizon, Q].
  torch::Tensor forward(const torch::Tensor& x);
  /// The head applied at every position: x [batch, L, input_dim] -> [batch, L, horizon, Q];
  /// position t only depends on bars 0..t (causal), so [:, t] is forward(x[:, :t+1]).
  torch::Tensor forward_sequence(const torch::Tensor& x);
  /// Runs the history x [batch, T >= 1, input_dim] with the chunked scan and returns the output
  /// at its last position ([batch, horizon, Q]) and the state to continue with `step`.
  std::pair<torch::Tensor, Mamba2State> prefill(const torch::Tensor& x);
  /// Advances `state` by one bar x_t [batch, input_dim] in O(1) (no re-scan of the history) and
  /// returns the forecast at that bar [batch, horizon, Q]. The state must come from `prefill` or
  /// `zero_state` of this network with the same batch size.
  torch::Tensor step(Mamba2State& state, const torch::Tensor& x_t);
  /// The state of an empty history: stepping from it equals `forward` on the stepped bars.
  Mamba2State zero_state(int64_t batch) const;
  /// Parameters that a trainer should exclude from weight decay (A_log, D, dt_bias of every
  /// layer), as in the reference implementation.
  std::vector<torch::Tensor> no_weight_decay_parameters();

  Mamba2Options options;
  torch::nn::Linear embed{nullptr};
  torch::nn::ModuleList blocks{nullptr};
  Mamba2RMSNorm norm_f{nullptr};
  torch::nn::Linear head{nullptr};

 private:
  Mamba2BlockImpl& block(size_t i) const;
  torch::Tensor hidden(const torch::Tensor& x, Mamba2State* state_out);
  torch::Tensor head_out(const torch::Tensor& h);
  void check_x(const char* name, const torch::Tensor& x, std::vector<int64_t> sizes) const;
};
TORCH_MODULE(Mamba2Net);

// ---- per-instrument streaming ----------------------------------------------------------------

/// Streaming forecasts for one instrument: `push` takes one new bar and returns what
/// `net->forward` computes for the last `window` bars (fewer during warm-up: all bars so far).
///
/// Why the window is rebuilt, not carried: the model is trained on fixed windows that start
/// from a zero state, with the convolution zero-padded at the window start. A state carried from
/// the beginning of history (`prefill` + `step`) forecasts with unlimited memory, which is not
/// what the model computes for the window. The window start moves on every bar, which changes
/// every scan state of layer 1 in the window and hence every input of layer 2, so no exact O(1)
/// update exists. Rebuilding with `step` would cost window x layers sequential steps (thousands
/// of tiny ops, slower than `forward`), so the window is rebuilt with batched ops instead.
///
/// What is cached (exact, because it is position-wise): for each bar of the window its raw input
/// row and everything layer 1 computes before the convolution: the embedding (layer 1's
/// residual input) and its in-projection (z, pre-conv xBC, dt). Per new bar the stream computes
/// that row, then one batched pass over the window: layer 1's convolution (zero-padded at the
/// window start) and its scan as one masked quadratic SSD block at every position, every middle
/// layer in full, and the last layer only at the last position (its scan output there is a
/// single decay-weighted sum over the window). On CPU in fp32 each layer's pass is the fused
/// mixer kernel (`forward`'s), reading layer 1's rows straight from the cache. Derived weights
/// (transposes, -exp(A_log), RMSNorm weights folded into the next projection) are prepared once.
/// The result equals `forward` to rounding (below 1e-6 absolute in fp32 in the tests).
///
/// The cache holds values computed with the weights at the time each bar arrived; when the
/// module's parameters change (optimizer step, checkpoint load, device or dtype move) the next
/// `push` notices it (`ParameterStamp`) and recomputes the derived weights and the cache from
/// the raw rows. Each stream owns its buffers, so several streams (instruments) can share one
/// network. `push` runs under `c10::InferenceMode`; the returned tensor is an inference tensor.
class Mamba2Stream {
 public:
  /// A stream over `net` (shared, not copied) forecasting from the last `window` bars;
  /// `window` 0 means `net->options.window()` (any length >= 1 works: `forward` accepts any).
  /// Throws InputError for a negative window.
  explicit Mamba2Stream(Mamba2Net net, int64_t window = 0);
  /// Appends bar `x_t` [input_dim] (finite, the module's dtype and device) and returns the
  /// forecast [horizon, Q] equal to `net->forward` over the last min(bars(), window()) bars at
  /// batch 1. The network must be in eval mode.
  torch::Tensor push(const torch::Tensor& x_t);
  /// Forgets every bar (the next push starts a new history).
  void reset();
  /// Bars of history each forecast uses once warmed up.
  int64_t window() const { return window_; }
  /// Bars pushed since construction or the last `reset`.
  int64_t bars() const { return bars_; }
  /// Bars the next forecast's window holds: min(bars(), window()).
  int64_t filled() const { return std::min(bars_, window_); }
  /// The network the stream runs.
  const Mamba2Net& net() const { return net_; }

 private:
  /// Weights of one layer in the form the stream uses (refreshed when the parameters change).
  struct LayerWeights {
    torch::Tensor in_t;               ///< [D, 2 di + C + H] in_proj^T, pre-norm weight folded in
    std::vector<torch::Tensor> taps;  ///< d_conv x [C] conv taps, oldest first
    torch::Tensor conv_b;             ///< [C]
    torch::Tensor dt_bias;            ///< [H]
    torch::Tensor A;                  ///< [H] -exp(A_log)
    torch::Tensor D;                  ///< [H, 1]
    torch::Tensor out_t;              ///< [di, D] out_proj^T, gated-norm weight folded in
  };

  void allocate();
  void prepare();
  torch::Tensor bar_rows(const torch::Tensor& x);
  void rebuild_cache();

  Mamba2Net net_;
  int64_t window_ = 0;
  int64_t bars_ = 0;
  int64_t width_ = 0;  // features of one cached row
  // [2 * window, width]: bar b lives in rows b % window and b % window + window, so the last n
  // bars are always one contiguous block of rows.
  torch::Tensor buf_;
  torch::Tensor not_lower_, upper_, strict_upper_;  // [window, window] masks (bool, bool, dtype)
  std::vector<LayerWeights> layers_;
  torch::Tensor embed_t_, embed_b_;  // [input_dim, D], [D]
  torch::Tensor head_t_, head_b_;    // [D, horizon * Q] (final norm weight folded in), [h * Q]
  ParameterStamp stamp_;
};

/// Registry adapter ("mamba2"): inputs {x [batch, seq_len, input_dim]}, target [batch, horizon],
/// outputs {[batch, horizon, Q]}, loss = quantile (pinball) loss.
std::unique_ptr<Model> make_mamba2_model(const nlohmann::json& options);

}  // namespace foxhunt::models
