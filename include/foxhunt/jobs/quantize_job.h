#pragma once
/// \file quantize_job.h
/// `foxhunt quantize`: an FP32 bundle in, a bundle at another precision out, for a model whose
/// catalog entry has a form at that precision (models/precisions.h): INT8 (the TFT) by
/// post-training quantization (calibration on training windows) or quantization-aware
/// fine-tuning (PTQ scales first, then fake-quantized training with the forecast trainer); BF16
/// (the TFT and Mamba-2, models/bf16.h) by a cast. Through the form's quantize hook, with the
/// test loss of both models and the per-layer errors (INT8) measured on the bundle's data.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/core/device.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/quant/quantize.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::jobs {

/// What `foxhunt quantize` does.
struct QuantizeJob {
  std::string bundle;  ///< the FP32 bundle (of a model with a form at `precision`)
  std::string out;     ///< the bundle to write (atomically)
  /// The precision to convert to: a quantized form's (int8, bf16), not fp32.
  models::Precision precision = models::Precision::kInt8;
  std::string method = "ptq";    ///< "ptq" or "qat" (a bf16 form takes ptq: a cast)
  int64_t calib = 256;           ///< calibration windows from the training split
  double percentile = 0.0;       ///< activation clip: 0 = L2-optimal, else this percentile of |x|
  int64_t epochs = 3;            ///< QAT fine-tuning epochs
  double learning_rate = 1e-4;   ///< QAT learning rate (a tenth of training's)
  int64_t observer_steps = 200;  ///< QAT steps before the activation observers freeze
  int64_t batch = 64;            ///< windows per batch (calibration, QAT, evaluation)
  std::string data;              ///< bars CSV ("" = the file or synthetic series of the bundle)
  uint64_t seed = 0;             ///< QAT batches and dropout
  /// Accuracy bound: the converted model's test loss may exceed the FP32 one by at most this
  /// many percent
  /// (QuantizeSummary::within_bound; `foxhunt quantize` exits 1 beyond it, validate's bound too).
  double max_loss_delta_pct = 5.0;
  Device device;                                              ///< where calibration and QAT run
  train::ProgressMode progress = train::ProgressMode::kAuto;  ///< QAT progress on stderr
};

/// How a quantized bundle was made: stored in its training record as "quantization", and the top
/// level of QuantizeSummary's JSON. The bundle's header records its precision; the "int8_"
/// names are those of the first form (a bf16 run stores its loss there too).
struct QuantizationRecord {
  std::string method;               ///< "ptq" or "qat"
  std::string source_bundle;        ///< the FP32 bundle
  int64_t calibration_windows = 0;  ///< windows the PTQ calibration observed
  std::string activation_clip;      ///< "l2_optimal" or "percentile"
  double fp32_test_loss = 0;        ///< the FP32 bundle's test quantile loss
  double int8_test_loss = 0;        ///< the converted model's (INT8 or BF16)
  double loss_delta_pct = 0;        ///< 100 (converted - fp32) / fp32
};

/// The QAT fine-tuning of a "qat" run.
struct QatFineTuning {
  int64_t epochs = 0;          ///< epochs trained
  int64_t steps = 0;           ///< optimizer steps
  double seconds = 0;          ///< wall time
  double best_val_loss = 0;    ///< best validation loss (fake-quantized)
  int64_t observer_steps = 0;  ///< steps the activation observers moved
  double learning_rate = 0;    ///< as given
};

/// What `foxhunt quantize` did.
struct QuantizeSummary {
  QuantizationRecord quantization;                         ///< method, losses (flat in the JSON)
  models::Precision precision = models::Precision::kInt8;  ///< what the bundle written holds
  std::string out;                                         ///< the bundle written
  /// Bytes per precision of the network (the form's bytes at the bundle's options: {"fp32":
  /// {...}, "int8": {parameter_bytes, int8_bytes, fp32_bytes, ratio_to_fp32, ...}} or "bf16":
  /// {parameter_bytes, bf16_bytes, fp32_bytes, ratio_to_fp32}), as `foxhunt models` reports them.
  nlohmann::json precisions;
  int64_t fp32_resident_bytes = 0;   ///< parameters + buffers of the FP32 model
  int64_t int8_resident_bytes = 0;   ///< of the converted model (INT8 or BF16)
  std::optional<QatFineTuning> qat;  ///< the fine-tuning ("qat" runs; null otherwise)
  /// Per-layer error on one test batch (QuantizeResult::layer_errors).
  std::vector<quant::LayerError> layer_errors;
  double seconds = 0;               ///< wall time of the job
  double max_loss_delta_pct = 5.0;  ///< the job's accuracy bound
  /// The verdict: loss_delta_pct is finite and <= max_loss_delta_pct (the bundle is written
  /// either way; a caller decides what a miss means).
  bool within_bound = false;
};

/// The --json form: the quantization record's keys, precision, out, precisions, resident_bytes
/// {fp32, <precision>}, qat (null for PTQ), layer_errors, seconds and bound {max_loss_delta_pct,
/// ok}.
nlohmann::json to_json(const QuantizeSummary& s);

/// Runs the job; returns the summary (bytes per precision, test losses, loss_delta_pct,
/// per-layer errors, the bundle written). InputError for a bundle that is not FP32 or is of a
/// model without a form at the job's precision (naming the models with one), bars that differ
/// from the bundle's fingerprint, or bad options (fp32 as the precision; qat for bf16).
QuantizeSummary run_quantize_job(const QuantizeJob& job);

/// Human-readable summary of run_quantize_job's result.
std::string format_quantize_summary(const QuantizeSummary& summary);

}  // namespace foxhunt::jobs
