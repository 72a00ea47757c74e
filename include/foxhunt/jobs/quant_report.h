#pragma once
/// \file quant_report.h
/// The INT8 TFT memory benchmark (`foxhunt bench-memory`): the reference system's five INT8
/// memory checks, measured with the ledger on 3-D inputs [batch, window, features], and the QAT
/// training bytes per tag. Every figure is a ledger measurement, next to the closed form it is
/// checked against.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/models/tft.h"

namespace foxhunt::jobs {

/// What the INT8 memory benchmark runs.
struct Int8MemoryOptions {
  models::TftOptions model;                ///< the TFT (default: the full-size model)
  int64_t inferences = 10000;              ///< batch-1 INT8 inferences of the leak check
  int64_t calibration_batches = 4;         ///< PTQ calibration batches of `big_batch` windows
  int64_t big_batch = 64;                  ///< the large inference batch
  uint64_t seed = 1;                       ///< weights and inputs
  int64_t int8_threshold_bytes = 1 << 20;  ///< check 2: the INT8 model's resident bytes cap
  int64_t qat_batch = 16;                  ///< QAT step batch for the training-bytes report
};

/// Check 1, "fp32_baseline": the FP32 model's bytes (passed: resident = parameter bytes and a
/// positive inference peak).
struct Fp32BaselineCheck {
  bool passed = false;
  int64_t parameter_bytes = 0;                 ///< 4 x parameters
  int64_t resident_bytes = 0;                  ///< ledger bytes of the built model
  int64_t peak_inference_bytes_batch1 = 0;     ///< peak of one batch-1 forward
  int64_t peak_inference_bytes_big_batch = 0;  ///< at big_batch ("..._batch<N>")
};

/// Check 2, "int8_under_threshold": the INT8 model's resident bytes equal the layout's closed
/// form and stay under the threshold.
struct Int8UnderThresholdCheck {
  bool passed = false;
  int64_t resident_bytes = 0;     ///< ledger bytes of the loaded INT8 model
  int64_t closed_form_bytes = 0;  ///< models::Int8TftLayout::total_bytes
  int64_t threshold_bytes = 0;    ///< Int8MemoryOptions::int8_threshold_bytes
};

/// fp32 and int8 bytes of one figure.
struct Fp32Int8Bytes {
  int64_t fp32 = 0;
  int64_t int8 = 0;
};

/// Check 3, "int8_smaller_than_fp32": codes <= 0.3x the fp32 bytes of the same weights,
/// resident <= 0.35x, the layout below its fp32 form, and the serving footprint (resident +
/// peak inference) below FP32's at both batches.
struct Int8SmallerCheck {
  bool passed = false;
  int64_t code_bytes = 0;                            ///< int8 codes
  int64_t scale_bytes = 0;                           ///< their scales
  int64_t fp32_weight_bytes_of_the_same_layers = 0;  ///< 4 x code_bytes
  double weight_ratio = 0;                           ///< (codes + scales) / fp32 weights
  double resident_ratio_to_fp32_model = 0;           ///< INT8 resident / FP32 resident
  double ratio_to_the_same_layout_in_fp32 = 0;       ///< layout total / its fp32 form
  int64_t peak_inference_bytes_batch1 = 0;           ///< INT8 peak at batch 1
  int64_t peak_inference_bytes_big_batch = 0;        ///< at big_batch ("..._batch<N>")
  Fp32Int8Bytes serving_bytes_batch1;                ///< resident + peak at batch 1
  Fp32Int8Bytes serving_bytes_big_batch;             ///< at big_batch ("..._batch<N>")
};

/// Check 4, "int8_3d_inference": [batch, window, features] windows in, [batch, horizon, Q] out
/// at batch 1 and big_batch, and a 2-D window refused as an input error.
struct Int8InferenceCheck {
  bool passed = false;
  std::vector<int64_t> input_batch1, output_batch1;        ///< shapes at batch 1
  std::vector<int64_t> input_big_batch, output_big_batch;  ///< at big_batch ("..._batch<N>")
  std::string two_d_window_error;                          ///< the refusal ("" if none)
};

/// Check 5, "int8_no_leak": ledger live bytes back at the baseline exactly after the inferences.
struct Int8NoLeakCheck {
  bool passed = false;
  int64_t inferences = 0;                        ///< batch-1 INT8 inferences run
  int64_t baseline_live_bytes = 0;               ///< live bytes before
  int64_t after_live_bytes = 0;                  ///< and after
  int64_t leaked_bytes = 0;                      ///< after - baseline
  int64_t max_retained_between_calls_bytes = 0;  ///< worst sampled between calls
};

/// QAT training bytes per tag for one step.
struct QatTrainingBytes {
  int64_t fp32_master_weights = 0;           ///< the fp32 weights
  int64_t gradients = 0;                     ///< bytes the backward left (activations freed)
  int64_t gradient_tensors = 0;              ///< 4 x numel of the gradients
  int64_t optimizer_adam = 0;                ///< Adam's state
  int64_t observers = 0;                     ///< the activation observers
  int64_t forward_peak_fake_quant = 0;       ///< the fake-quantized forward's peak
  int64_t forward_peak_fp32 = 0;             ///< the FP32 forward's peak
  int64_t fake_quant_overhead = 0;           ///< their difference
  int64_t saved_activations_fake_quant = 0;  ///< activations saved for the backward
};

/// The QAT report (tft_qat_memory).
struct QatMemoryReport {
  int64_t batch = 0;                  ///< the QAT step's batch
  QatTrainingBytes training_bytes;    ///< per tag
  int64_t big_batch = 0;              ///< names the converted model's big-batch peak
  int64_t converted_resident = 0;     ///< the converted INT8 model's resident bytes (closed form)
  int64_t converted_peak_batch1 = 0;  ///< its inference peak at batch 1
  int64_t converted_peak_big_batch = 0;  ///< at big_batch ("peak_batch<N>")
};

/// {batch, training_bytes: {...}, converted_inference_bytes: {resident, peak_batch1,
/// peak_batch<N>}}.
nlohmann::json to_json(const QatMemoryReport& r);

/// The INT8 memory checks (tft_int8_memory_checks), with the QAT report when one was added.
struct Int8MemoryReport {
  int64_t big_batch = 0;            ///< the large batch: names the "..._batch<N>" figures
  models::TftOptions model;         ///< the TFT measured
  Fp32BaselineCheck fp32_baseline;  ///< check 1
  Int8UnderThresholdCheck int8_under_threshold;  ///< check 2
  Int8SmallerCheck int8_smaller_than_fp32;       ///< check 3
  Int8InferenceCheck int8_3d_inference;          ///< check 4
  Int8NoLeakCheck int8_no_leak;                  ///< check 5
  int64_t int8_fp32_bytes = 0;           ///< the INT8 layout's fp32 bytes (scales, biases, tensors)
  uint64_t declared_external_bytes = 0;  ///< ledger's declared external bytes (not in the ledger)
  std::optional<QatMemoryReport> qat;    ///< tft_qat_memory, when added ("qat")

  /// All five checks passed.
  bool passed() const {
    return fp32_baseline.passed && int8_under_threshold.passed && int8_smaller_than_fp32.passed &&
           int8_3d_inference.passed && int8_no_leak.passed;
  }
};

/// {"checks": [{name, passed, ...figures}] in check order, "passed", "model", "fp32":
/// {resident_bytes, parameter_bytes}, "int8": {resident_bytes, code_bytes, fp32_bytes},
/// "not_in_ledger": {prepacked_weight_bytes, declared_external_bytes, note}} and "qat" when set.
nlohmann::json to_json(const Int8MemoryReport& r);

/// The five checks: (1) FP32 baseline bytes (parameters, resident,
/// peak inference at batch 1 and big_batch), (2) INT8 resident bytes under the threshold and
/// equal to the layout's closed form, (3) INT8 below FP32 (codes <= 0.3x the fp32 bytes of the
/// same weights, resident <= 0.35x), (4) INT8 inference over 3-D windows at batch 1 and
/// big_batch (and a 2-D window refused as an input error), (5) no leak: ledger live bytes back
/// at the baseline exactly after `inferences` INT8 inferences. Installs the ledger if needed.
Int8MemoryReport tft_int8_memory_checks(const Int8MemoryOptions& o);

/// QAT training bytes per tag (fp32 master weights, gradients, Adam state, observers, the
/// forward's activations with and without fake quantization) for one step at qat_batch, and
/// the converted model's inference bytes.
QatMemoryReport tft_qat_memory(const Int8MemoryOptions& o);

}  // namespace foxhunt::jobs
