#include "foxhunt/quant/precision.h"

#include "foxhunt/core/error.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/quant/tft_int8.h"

namespace foxhunt::quant {
namespace {

using models::Precision;

// One quantized form of a catalog model.
struct QuantizedForm {
  const char* model;
  Precision precision;
  std::unique_ptr<models::Model> (*make)(const nlohmann::json& options);
  nlohmann::json (*bytes)();  // every precision's bytes at default options
};

const std::vector<QuantizedForm>& forms() {
  static const std::vector<QuantizedForm> f = {
      {"tft", Precision::kInt8, &make_int8_tft_model,
       [] { return tft_precision_bytes(models::TftOptions()); }},
  };
  return f;
}

const QuantizedForm* find_form(const std::string& model, Precision precision) {
  for (const auto& f : forms())
    if (model == f.model && precision == f.precision) return &f;
  return nullptr;
}

}  // namespace

std::vector<Precision> precisions(const std::string& model) {
  models::catalog_entry(model, "quant");
  std::vector<Precision> p = {Precision::kFp32};
  for (const auto& f : forms())
    if (model == f.model) p.push_back(f.precision);
  return p;
}

bool has_precision(const std::string& model, Precision precision) {
  if (!models::in_catalog(model)) return false;
  return precision == Precision::kFp32 || find_form(model, precision) != nullptr;
}

std::vector<std::string> models_with_precision(Precision precision) {
  std::vector<std::string> out;
  for (const auto& e : models::catalog())
    if (has_precision(e.name, precision)) out.push_back(e.name);
  return out;
}

std::unique_ptr<models::Model> make_model_at(const std::string& model, Precision precision,
                                             const nlohmann::json& options, const char* component) {
  const nlohmann::json o = options.is_null() ? nlohmann::json::object() : options;
  if (precision == Precision::kFp32) return models::make_model(model, o);
  const auto* f = find_form(model, precision);
  FOXHUNT_CHECK(f != nullptr, component, "precision of '", model, "': expected ",
                models::precisions_text(precisions(model), " or "), ", got '", precision, "'");
  return f->make(o);
}

std::string quantized_forms_text() {
  std::string out;
  for (const auto& f : forms())
    out += (out.empty() ? "the " : " and the ") + std::string(models::to_string(f.precision)) +
           " " + f.model;
  return out;
}

nlohmann::json precision_bytes(const std::string& model) {
  for (const auto& f : forms())
    if (model == f.model) return f.bytes();
  return {{models::to_string(Precision::kFp32),
           {{"parameter_bytes", models::make_model(model)->parameter_bytes()}}}};
}

}  // namespace foxhunt::quant
