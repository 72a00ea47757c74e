#include "foxhunt/models/precisions.h"

#include "foxhunt/core/error.h"
#include "foxhunt/core/strings.h"
#include "foxhunt/models/bf16.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"

namespace foxhunt::models {
namespace {

// The component of the registry's own messages (it was quant/'s before the forms moved into
// the catalog; the messages stay as they were).
constexpr const char* kPrecisionsComponent = "quant";

const QuantizedForm* find_form(const CatalogEntry& entry, Precision precision) {
  for (const auto& f : entry.quantized_forms)
    if (f.precision == precision) return &f;
  return nullptr;
}

const QuantizedForm* find_form(const std::string& model, Precision precision) {
  for (const auto& e : catalog())
    if (e.name == model) return find_form(e, precision);
  return nullptr;
}

}  // namespace

const char* to_string(QuantizeMethod method) {
  switch (method) {
    case QuantizeMethod::kPtq:
      return "ptq";
    case QuantizeMethod::kQat:
      return "qat";
  }
  return "?";
}

QuantizeMethod parse_quantize_method(std::string_view text, const char* component) {
  for (const auto m : {QuantizeMethod::kPtq, QuantizeMethod::kQat})
    if (text == to_string(m)) return m;
  throw InputError(component, "method: expected ptq or qat, got '" + std::string(text) + "'");
}

std::vector<Precision> precisions(const std::string& model) {
  const auto& entry = catalog_entry(model, kPrecisionsComponent);
  std::vector<Precision> p = {Precision::kFp32};
  for (const auto& f : entry.quantized_forms) p.push_back(f.precision);
  return p;
}

bool has_precision(const std::string& model, Precision precision) {
  if (!in_catalog(model)) return false;
  return precision == Precision::kFp32 || find_form(model, precision) != nullptr;
}

std::vector<std::string> models_with_precision(Precision precision) {
  std::vector<std::string> out;
  for (const auto& e : catalog())
    if (precision == Precision::kFp32 || find_form(e, precision) != nullptr) out.push_back(e.name);
  return out;
}

const QuantizedForm& quantized_form(const std::string& model, Precision precision,
                                    const char* component) {
  const auto* f = find_form(catalog_entry(model, component), precision);
  FOXHUNT_CHECK(f != nullptr, component, "'", model, "' has no ", precision,
                " form; the models with one: ", join(models_with_precision(precision), ", "));
  return *f;
}

std::unique_ptr<Model> make_model_at(const std::string& model, Precision precision,
                                     const nlohmann::json& options, const char* component) {
  const nlohmann::json o = options.is_null() ? nlohmann::json::object() : options;
  if (precision == Precision::kFp32) return make_model(model, o);
  const auto* f = find_form(model, precision);
  FOXHUNT_CHECK(f != nullptr, component, "precision of '", model, "': expected ",
                precisions_text(precisions(model), " or "), ", got '", precision, "'");
  return f->make(o);
}

void check_precision_runs_on(Precision precision, const torch::Device& device,
                             const char* component) {
  if (precision == Precision::kBf16) check_bf16_device(device, component);
}

std::string quantized_forms_text() {
  std::string out;
  for (const auto& e : catalog())
    for (const auto& f : e.quantized_forms)
      out +=
          (out.empty() ? "the " : " and the ") + std::string(to_string(f.precision)) + " " + e.name;
  return out;
}

nlohmann::json precision_bytes(const std::string& model) {
  // Each form's table at the default options, merged: its own precision's row, and the fp32 row
  // and anything else it adds where no earlier form gave them.
  nlohmann::json out = nlohmann::json::object();
  for (const auto& e : catalog()) {
    if (e.name != model) continue;
    for (const auto& f : e.quantized_forms) {
      if (!f.bytes) continue;
      const auto table = f.bytes(nlohmann::json::object());
      for (const auto& [key, value] : table.items())
        if (key == to_string(f.precision) || !out.contains(key)) out[key] = value;
    }
  }
  if (!out.contains(to_string(Precision::kFp32)))
    out[to_string(Precision::kFp32)] = {{"parameter_bytes", make_model(model)->parameter_bytes()}};
  return out;
}

}  // namespace foxhunt::models
