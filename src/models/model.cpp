#include "foxhunt/models/model.h"

#include "foxhunt/models/catalog.h"
#include "foxhunt/models/streaming.h"

namespace foxhunt::models {

std::unique_ptr<Model> make_model(const std::string& name, const nlohmann::json& options) {
  const auto& entry = catalog_entry(name, "models");
  return entry.make(options.is_null() ? nlohmann::json::object() : options);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& e : catalog()) names.push_back(e.name);
  return names;
}

torch::Tensor ServingModel::encode_rows(const torch::Tensor&, const torch::Tensor&) {
  throw InputError(name(), "encode_rows: this model has no cached per-bar stage (cached_width 0)");
}

std::unique_ptr<ModelStream> ServingModel::make_stream(int64_t) {
  return nullptr;
}

torch::Tensor ServingModel::forward_cached(const Batch&) {
  throw InputError(name(), "forward_cached: this model has no cached per-bar stage");
}

int64_t ServingModel::parameter_count() {
  int64_t n = 0;
  for (const auto& p : module().parameters()) n += p.numel();
  return n;
}

int64_t ServingModel::parameter_bytes() {
  int64_t n = 0;
  for (const auto& p : module().parameters())
    n += p.numel() * static_cast<int64_t>(p.element_size());
  return n;
}

int64_t ServingModel::buffer_bytes() {
  int64_t n = 0;
  for (const auto& b : module().buffers()) n += b.numel() * static_cast<int64_t>(b.element_size());
  return n;
}

}  // namespace foxhunt::models
