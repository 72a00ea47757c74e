#pragma once
/// \file quantize_job.h
/// `foxhunt quantize`: an FP32 TFT bundle in, an INT8 TFT bundle out (quant/tft_int8.h), by
/// post-training quantization (calibration on training windows) or quantization-aware
/// fine-tuning (PTQ scales first, then fake-quantized training with the forecast trainer),
/// with the test loss of both models and the per-layer errors measured on the bundle's data.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "foxhunt/core/device.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::jobs {

/// What `foxhunt quantize` does.
struct QuantizeJob {
  std::string bundle;            ///< the FP32 TFT bundle
  std::string out;               ///< the INT8 bundle to write (atomically)
  std::string method = "ptq";    ///< "ptq" or "qat"
  int64_t calib = 256;           ///< calibration windows from the training split
  double percentile = 0.0;       ///< activation clip: 0 = L2-optimal, else this percentile of |x|
  int64_t epochs = 3;            ///< QAT fine-tuning epochs
  double learning_rate = 1e-4;   ///< QAT learning rate (a tenth of training's)
  int64_t observer_steps = 200;  ///< QAT steps before the activation observers freeze
  int64_t batch = 64;            ///< windows per batch (calibration, QAT, evaluation)
  std::string data;              ///< bars CSV ("" = the file or synthetic series of the bundle)
  uint64_t seed = 0;             ///< QAT batches and dropout
  Device device;                 ///< where calibration and QAT run
  train::ProgressMode progress = train::ProgressMode::kAuto;  ///< QAT progress on stderr
};

/// Runs the job; returns the summary (bytes per precision, test losses, loss_delta_pct,
/// per-layer errors, the bundle written). InputError for a bundle that is not an FP32 TFT,
/// bars that differ from the bundle's fingerprint, or bad options.
nlohmann::json run_quantize_job(const QuantizeJob& job);

/// Human-readable summary of run_quantize_job's result.
std::string format_quantize_summary(const nlohmann::json& summary);

}  // namespace foxhunt::jobs
