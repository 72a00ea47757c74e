#pragma once
/// \file tft_int8.h
/// The INT8 Temporal Fusion Transformer: post-training quantization (PTQ), quantization-aware
/// training (QAT) and the converted model that serves through the same runtime as FP32.
///
/// What is int8 (the layout, `int8_tft_layout`): every affine layer of the network.
///   - every Linear of the GRNs, gates, attention projections and the output head;
///   - both LSTMs, each layer as two int8 layers: the input projection (all steps at once, with
///     b_ih + b_hh folded into its bias) and the recurrent projection (each step);
///   - the batched per-variable GRN weights of both variable selection networks ([V, in, out],
///     one scale per variable: each variable's matrices are tiny (8 x 8 and 8 x 64 by default),
///     and a scale per output column would add 4 bytes per 8 codes);
///   - the selection GRN's first layer and skip projection, folded with the per-variable
///     embeddings into maps of the raw values first (the same exact algebra the FP32 VSN uses
///     at run time, models/tft.h), then quantized.
/// Weights are symmetric int8 per output channel (zero point 0, codes in [-127, 127]; per
/// variable for the batched layers);
/// activations are symmetric int8 with a static scale per layer (per variable for the batched
/// layers) fixed by calibration (PTQ) or by the frozen QAT observers: y = (s_x s_w) (qx . qw) + b.
/// What stays fp32, and why: LayerNorm gains/shifts (elementwise, O(width)), the static
/// embedding table (a lookup, static_categories x hidden), the folded per-variable affine maps
/// of the raw value (elementwise on a scalar input: no product to quantize), biases, and the
/// activation-by-activation products of attention (scores, softmax, weighted values).
///
/// Kernels (measured in bench/quant_bench.cpp, figures in ARCHITECTURE.md): 2-D layers run
/// int8 x int8 -> int32 in `at::_int_mm` (a fused scalar kernel for few rows on the CPU, where
/// ATen's per-op dispatch costs more than the arithmetic); the batched per-variable layers, whose
/// inner width is min(real_embedding, hidden) = 8 by default, multiply the same integer codes on
/// the fp32 matmul unit: products of codes are integers and their sums stay below 2^24 for
/// inner widths <= 1040 (checked), so the result is exactly the int32 accumulation.
/// At inference on the CPU (fp32 inputs, fused_cpu_kernels() on) two fused kernels run
/// instead of layer-by-layer ops, with the same integer sums: each VSN's per-variable GRNs,
/// quantization, selection weighting and all, in one pass over 16 positions at a time (the
/// FP32 model's VSN kernel on codes; its GLU products on AVX512-VNNI where the CPU has it), and
/// each LSTM layer's recurrence.
///
/// PTQ, QAT and the converted model share one functional forward (`tft_quant_forward`) over an
/// `TftQuantOps`, so the float pass that calibrates, the fake-quantized pass that trains and the
/// int8 pass that serves are the same network by construction (tested against TftNet).

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/models/adapter.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/quant/quantize.h"

namespace foxhunt::models {

/// One int8 layer of the TFT: a Linear(in -> out) (`variables` 0) or `variables` batched
/// per-variable layers [V, in, out].
struct Int8TftLayer {
  std::string name;       ///< TftNet path, e.g. "past_vsn.selection.fc1", "encoder.hh1"
  int64_t variables = 0;  ///< 0: one 2-D layer; V: batched per-variable layers
  int64_t in = 0;         ///< input features
  int64_t out = 0;        ///< output features
  bool bias = true;       ///< has an fp32 bias
  /// int8 code bytes: in * out (times V).
  int64_t code_bytes() const;
  /// fp32 bytes beside the codes: scales (s_x s_w per output, or per variable; s_x per layer
  /// or variable) and the bias.
  int64_t fp32_bytes() const;
  /// Bytes of the same layer in fp32 (weights and bias), for the ratio.
  int64_t float_bytes() const;
};

/// One tensor of the INT8 model that stays fp32.
struct Fp32TftTensor {
  std::string name;            ///< e.g. "lstm_gate.norm.weight", "past_vsn.fc2_slope"
  std::vector<int64_t> shape;  ///< its sizes
  std::string kind;            ///< "layer_norm", "embedding" or "folded_embedding_map"
  int64_t bytes() const;       ///< 4 x elements
};

/// The full layout of the INT8 TFT for options `o`: a pure function of the options (the closed
/// form the converted model's bytes are tested against).
struct Int8TftLayout {
  std::vector<Int8TftLayer> layers;  ///< in forward order
  std::vector<Fp32TftTensor> fp32;   ///< tensors that stay fp32
  int64_t code_bytes() const;        ///< all int8 codes
  int64_t layer_fp32_bytes() const;  ///< scales and biases of the int8 layers
  int64_t scale_bytes() const;       ///< the scales alone (s_x s_w and s_x)
  int64_t other_fp32_bytes() const;  ///< the fp32 tensors
  int64_t total_bytes() const;       ///< everything resident
  /// fp32 bytes of the quantized layers' weights and biases (what the codes replace).
  int64_t quantized_float_bytes() const;
  /// The same network stored in fp32 with this (folded) layout: the like-for-like baseline.
  int64_t float_layout_bytes() const { return quantized_float_bytes() + other_fp32_bytes(); }
  /// The layer called `name` (InputError when absent).
  const Int8TftLayer& layer(const std::string& name) const;
};
Int8TftLayout int8_tft_layout(const TftOptions& o);

/// Bytes per precision for `o` as JSON: {"fp32": {"parameter_bytes"}, "int8": {"parameter_bytes",
/// "int8_bytes", "fp32_bytes", "float_layout_bytes"}}.
nlohmann::json tft_precision_bytes(const TftOptions& o);

/// The operations `tft_quant_forward` needs: each affine layer by name, and the fp32 tensors.
class TftQuantOps {
 public:
  virtual ~TftQuantOps() = default;
  /// Layer `name`: [..., in] -> [..., out] (2-D) or [V, N, in] -> [V, N, out] (batched).
  virtual torch::Tensor layer(const std::string& name, const torch::Tensor& x) = 0;
  /// True when the network has layer `name`.
  virtual bool has_layer(const std::string& name) const = 0;
  /// The fp32 tensor `name` (see Fp32TftTensor).
  virtual const torch::Tensor& tensor(const std::string& name) = 0;
  /// The recurrence of one LSTM layer: `gx` [B, T, 4H] the input projection (with both biases),
  /// `hh` the recurrent layer's name, state (h, c) [B, H]. Returns the outputs [B, T, H] and
  /// the final (h, c). The default runs `layer(hh, h)` and the gates step by step.
  virtual std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> lstm_layer(
      const std::string& hh, const torch::Tensor& gx, torch::Tensor h, torch::Tensor c);
  /// VSN `vsn`'s per-variable GRNs weighted by the selection `weights`, at inference: sum over v
  /// of weights[n, v] * GRN_v(x[n, v]) for x and weights [N, V], as [N, H]. An undefined tensor
  /// (the default) runs them layer by layer instead.
  virtual torch::Tensor weighted_variable_grns(const std::string& vsn, const torch::Tensor& x,
                                               const torch::Tensor& weights) {
    (void)vsn, (void)x, (void)weights;
    return {};
  }
};

/// The TFT forward (models/tft.h) written once over `ops`: [batch, horizon, Q]. `training`
/// enables the network's dropouts (QAT). No input validation (callers validate).
torch::Tensor tft_quant_forward(TftQuantOps& ops, const TftOptions& o, const torch::Tensor& past,
                                const torch::Tensor& future, const torch::Tensor& static_id,
                                bool training);

/// The FP32 network run through `tft_quant_forward` in the layout's form (folded VSN maps,
/// fused LSTM biases, the LSTM as an explicit recurrence): equal to `net.forward` to rounding.
/// The calibration pass; exposed to test that the shared forward is the TFT.
torch::Tensor tft_layout_forward(TftNetImpl& net, const torch::Tensor& past,
                                 const torch::Tensor& future, const torch::Tensor& static_id);

/// Static activation scales per int8 layer: [1] for 2-D layers, [V] for batched ones.
using InputScales = std::map<std::string, torch::Tensor>;

/// PTQ calibration: runs the FP32 network (eval, no grad) over calibration windows and observes
/// every int8 layer's input: a histogram per 2-D layer (scale from the L2-optimal clip, or a
/// percentile) and the per-variable max |x| of the batched layers.
class TftCalibrator {
 public:
  /// `percentile` 0 = L2-optimal clip; otherwise that percentile of |x| (e.g. 99.99).
  explicit TftCalibrator(TftNet net, double percentile = 0.0);
  /// Observes one batch of windows (validated like TftNet::forward).
  void observe(const torch::Tensor& past, const torch::Tensor& future,
               const torch::Tensor& static_id);
  /// Windows observed so far.
  int64_t windows() const { return windows_; }
  /// The scales from what was observed (InputError before any batch).
  InputScales scales() const;

 private:
  TftNet net_;
  double percentile_;
  int64_t windows_ = 0;
  std::map<std::string, quant::HistogramObserver> hist_;
  std::map<std::string, torch::Tensor> absmax_;
};

/// Options of quantization-aware training.
struct QatOptions {
  /// Training forward passes during which the activation observers move (a moving average,
  /// once per forward, of the largest |x| each layer saw in it); after that they are frozen and
  /// the scales stay fixed.
  TORCH_ARG(int64_t, observer_steps) = 200;
  /// Moving-average momentum of the activation observers.
  TORCH_ARG(double, momentum) = 0.01;
};

/// Quantization-aware TFT: the FP32 network (its parameters train) run with fake quantization
/// on every int8 layer: weights fake-quantized per output channel from their current range,
/// inputs with the layer's observed scale; straight-through gradients (zero outside the clamp
/// range). A `Model` (name "tft"), so the forecast trainer fine-tunes it as is.
class QatTftModel final : public ForecasterAdapter<TftNet> {
 public:
  /// Wraps `net` (shared: the trained weights are the net's). With `initial` scales (e.g. PTQ
  /// calibration) the observers start there instead of at the first batch.
  explicit QatTftModel(TftNet net, QatOptions options = {}, InputScales initial = {});
  Precision precision() const override { return Precision::kInt8Qat; }
  std::vector<torch::Tensor> forward(const Batch& batch) override;
  Batch example_batch(int64_t batch, int64_t seq_len, const torch::Device& device,
                      uint64_t seed) const override;

  /// Training forwards seen by the observers so far.
  int64_t observed_steps() const { return steps_; }
  /// True once the observers stopped moving.
  bool frozen() const { return steps_ >= options_.observer_steps(); }
  /// Stops the observers now.
  void freeze() { steps_ = std::max(steps_, options_.observer_steps()); }
  /// The current activation scales (what conversion uses).
  InputScales scales() const;
  /// Bytes the observers hold (ranges per layer), for the QAT memory report.
  int64_t observer_bytes() const;
  /// The network.
  const TftNet& net() const { return net_; }

 private:
  QatOptions options_;
  int64_t steps_ = 0;
  std::map<std::string, torch::Tensor> absmax_;  // moving-average max |x| ([1] or [V])
};

/// The converted INT8 network: buffers only (int8 codes, fp32 scales, biases and the fp32
/// tensors of the layout), no parameters. Inference only.
class Int8TftImpl : public torch::nn::Module {
 public:
  /// Zero-filled buffers of the layout of `o` (to be loaded from a bundle).
  explicit Int8TftImpl(TftOptions o);
  /// Validates the inputs like TftNet::forward and returns the forecasts [batch, horizon, Q].
  torch::Tensor forward(const torch::Tensor& past, const torch::Tensor& future,
                        const torch::Tensor& static_id);
  /// Converts `net` with activation `scales` (from TftCalibrator or QatTftModel): every layer
  /// of the layout, weights symmetric per output channel.
  static std::shared_ptr<Int8TftImpl> convert(TftNetImpl& net, const InputScales& scales);

  /// Per-layer error of the int8 layers on one batch: each layer's input recorded from the FP32
  /// network, then the layer in fp32 and in int8 on it. One row per layer, in layout order.
  std::vector<quant::LayerError> layer_errors(TftNetImpl& net, const torch::Tensor& past,
                                              const torch::Tensor& future,
                                              const torch::Tensor& static_id);

  TftOptions options;    ///< the FP32 network's options
  Int8TftLayout layout;  ///< what the buffers hold

  /// One int8 layer's buffers.
  struct Layer {
    torch::Tensor codes;        ///< int8: [in, out] (2-D) or [V, in, out]
    torch::Tensor scale;        ///< fp32 s_x s_w: [out] or [V, 1, 1]
    torch::Tensor input_scale;  ///< fp32 s_x: [1] or [V, 1, 1]
    torch::Tensor bias;         ///< fp32 [out] or [V, 1, out]; undefined without bias
  };
  /// Layer `name`'s buffers.
  const Layer& layer(const std::string& name) const;
  /// True when the layout has layer `name`.
  bool has_layer(const std::string& name) const { return layers_.count(name) == 1; }
  /// The fp32 tensor `name`.
  const torch::Tensor& tensor(const std::string& name) const;

 private:
  std::map<std::string, Layer> layers_;
  std::map<std::string, torch::Tensor> tensors_;
};
TORCH_MODULE(Int8Tft);

/// Runs one int8 layer on `x` (what Int8Tft's forward calls): exposed for tests and benches.
torch::Tensor int8_layer_forward(const Int8TftImpl::Layer& l, bool batched, const torch::Tensor& x);

/// Registry-style adapter of the INT8 TFT: name "tft", precision "int8", the FP32 options as
/// its options, inputs and spec identical to the FP32 TFT. `loss` is the pinball loss (no
/// gradient: nothing trains).
std::unique_ptr<Model> make_int8_tft_model(const nlohmann::json& options);
/// Wraps a converted network.
std::unique_ptr<Model> int8_tft_model(Int8Tft net);

/// tft_precision_bytes at the TFT options JSON `options` (the catalog form's bytes).
nlohmann::json int8_tft_bytes(const nlohmann::json& options);

/// The INT8 TFT's quantize hook (the catalog form's `quantize`, precisions.h): PTQ calibration of
/// `fp32` (an FP32 TFT, InputError otherwise) on the request's windows, for QAT a QatTftModel
/// over its network fine-tuned by `request.fine_tune`, then Int8TftImpl::convert and the layer
/// errors on `request.error_batch`.
QuantizeResult quantize_int8_tft(Model& fp32, const QuantizeRequest& request);

}  // namespace foxhunt::models
