#pragma once
/// \file precision.h
/// Models at a precision (models/precision.h). Every catalog model (models/catalog.h) has fp32;
/// the quantized forms are registered here, one entry each (today: the INT8 TFT,
/// quant/tft_int8.h). Code above quant/ asks these functions instead of comparing model or
/// precision names.
#include <nlohmann/json.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "foxhunt/models/precision.h"

namespace foxhunt::models {
class Model;
}

namespace foxhunt::quant {

/// The precisions `model` can be built at, kFp32 first; InputError for an unknown model.
std::vector<models::Precision> precisions(const std::string& model);

/// True when `model` (a catalog name) exists at `precision`.
bool has_precision(const std::string& model, models::Precision precision);

/// The catalog models that have `precision`, in canonical order (kInt8 -> {"tft"}).
std::vector<std::string> models_with_precision(models::Precision precision);

/// `model` at `precision` from options JSON (null: defaults). InputError naming `component`,
/// the model and its precisions when it has no such precision ("[component] precision of 'dqn':
/// expected fp32, got 'int8'").
std::unique_ptr<models::Model> make_model_at(const std::string& model, models::Precision precision,
                                             const nlohmann::json& options, const char* component);

/// The quantized forms for messages: "the int8 tft" (joined with " and ").
std::string quantized_forms_text();

/// Parameter bytes per precision of `model` at its default options: {"fp32": {"parameter_bytes":
/// N}, "int8": {...}} (keys: models::to_string; the quantized forms add their own breakdown).
nlohmann::json precision_bytes(const std::string& model);


}  // namespace foxhunt::quant
