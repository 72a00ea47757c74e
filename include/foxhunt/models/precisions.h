#pragma once
/// \file precisions.h
/// Models at a precision. Every catalog model (catalog.h) has fp32; its catalog entry lists its
/// quantized forms (`CatalogEntry::quantized_forms`: the INT8 TFT of models/tft_int8.h, the BF16
/// TFT and Mamba-2 of models/bf16.h):
/// how to build one from options, its bytes, and the quantize hook that turns a trained fp32
/// model into it. Code above models/ asks these functions, and runs the hook with a
/// `QuantizeRequest`, instead of comparing model or precision names or casting to a model type.
///
/// Example (what `foxhunt quantize` does, jobs/quantize_job.cpp):
///   const auto& form = models::quantized_form(bundle.name(), models::Precision::kInt8,
///   "quantize"); models::QuantizeRequest r; r.calibration_windows = 256; r.calibration_batches =
///   source.train_batches(); r.calibration_batch = [&](int64_t i) { return source.train_batch(0,
///   i); }; r.error_batch = source.test_batch(0); auto q = form.quantize(*bundle.model, r);  //
///   q.model: the int8 model
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "foxhunt/models/batch.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/quant/quantize.h"

namespace foxhunt::models {

class Model;

/// How a quantize hook sets the activation scales.
enum class QuantizeMethod {
  kPtq,  ///< "ptq": post-training quantization, scales from the calibration windows
  kQat,  ///< "qat": calibration, then fake-quantized fine-tuning (QuantizeRequest::fine_tune)
};

/// "ptq" or "qat".
const char* to_string(QuantizeMethod method);
/// Parses "ptq" or "qat"; InputError "[component] method: expected ptq or qat, got '...'".
QuantizeMethod parse_quantize_method(std::string_view text, const char* component);

/// What a quantize hook (QuantizedForm::quantize) is asked to do.
struct QuantizeRequest {
  QuantizeMethod method = QuantizeMethod::kPtq;  ///< PTQ or QAT
  double percentile = 0.0;  ///< activation clip: 0 = L2-optimal, else this percentile of |x|
  /// Calibration: at most this many windows, taken in order from the batches below (the last
  /// batch cut to what is still wanted).
  int64_t calibration_windows = 256;
  int64_t calibration_batches = 0;  ///< how many batches calibration_batch gives
  /// Calibration batch `index` (0 <= index < calibration_batches), on the model's device.
  std::function<Batch(int64_t index)> calibration_batch;
  /// QAT: training forwards during which the activation observers move, then they freeze.
  int64_t observer_steps = 200;
  /// QAT: trains `qat_model` (a fake-quantized Model, precision kInt8Qat, whose parameters are
  /// the fp32 model's) in place. The caller supplies it (the trainers live above models/); it
  /// throws to abandon the run. Required for kQat.
  std::function<void(Model& qat_model)> fine_tune;
  /// The batch each int8 layer's error against its fp32 layer is measured on.
  Batch error_batch;
};

/// What a quantize hook returns.
struct QuantizeResult {
  std::unique_ptr<Model> model;                 ///< the quantized model (inference only)
  int64_t calibration_windows = 0;              ///< windows the calibration observed
  std::vector<quant::LayerError> layer_errors;  ///< per int8 layer on error_batch, in order
  int64_t observer_steps = 0;                   ///< QAT: forwards the observers moved (PTQ: 0)
};

/// The precisions `model` can be built at, kFp32 first; InputError for an unknown model.
std::vector<Precision> precisions(const std::string& model);

/// True when `model` (a catalog name) exists at `precision`.
bool has_precision(const std::string& model, Precision precision);

/// The catalog models that have `precision`, in canonical order (kInt8 -> {"tft"}).
std::vector<std::string> models_with_precision(Precision precision);

/// The quantized form of `model` at `precision` (not kFp32). InputError naming `component`, the
/// model and the models that have such a form otherwise ("[quantize] 'dqn' has no int8 form;
/// the models with one: tft").
const QuantizedForm& quantized_form(const std::string& model, Precision precision,
                                    const char* component);

/// `model` at `precision` from options JSON (null: defaults). InputError naming `component`,
/// the model and its precisions when it has no such precision ("[component] precision of 'dqn':
/// expected fp32, got 'int8'").
std::unique_ptr<Model> make_model_at(const std::string& model, Precision precision,
                                     const nlohmann::json& options, const char* component);

/// Throws InputError naming `component` when `device` cannot run models at `precision` (bf16 on
/// a CPU without BF16 arithmetic: models/bf16.h's check_bf16_device); other precisions and
/// devices pass. A loader calls it so that a model it returns is one that runs where it loaded.
void check_precision_runs_on(Precision precision, const torch::Device& device,
                             const char* component);

/// The quantized forms for messages: "the int8 tft" (joined with " and ").
std::string quantized_forms_text();

/// Parameter bytes per precision of `model` at its default options: {"fp32": {"parameter_bytes":
/// N}, "int8": {...}, "bf16": {...}} (keys: to_string(Precision); each quantized form's bytes
/// hook gives its own row with its breakdown).
nlohmann::json precision_bytes(const std::string& model);

}  // namespace foxhunt::models
