#include "foxhunt/models/checkpoint.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <sstream>

#include "foxhunt/core/header_fields.h"
#include "foxhunt/models/catalog.h"

namespace foxhunt::models {

std::string module_to_bytes(torch::nn::Module& m) {
  return archive_to_bytes(m);
}

namespace {

std::string tensor_text(const torch::Tensor& t) {
  return fmt::format("{} [{}]", c10::toString(t.scalar_type()), fmt::join(t.sizes(), ", "));
}

// The first tensor `archive` stores under a name of `m` (its parameters and buffers, then its
// children's, as Module::load reads them) with another element type or shape than `m` holds.
// Names the archive lacks are left to Module::load (it refuses them).
std::optional<WeightMismatch> find_mismatch(const torch::nn::Module& m,
                                            torch::serialize::InputArchive& archive,
                                            const std::string& prefix) {
  const auto check = [&](const std::string& key, const torch::Tensor& held, bool is_buffer,
                         const char* what) -> std::optional<WeightMismatch> {
    torch::Tensor stored;
    if (!archive.try_read(key, stored, is_buffer) || !stored.defined()) return std::nullopt;
    const bool dtype = stored.scalar_type() != held.scalar_type();
    if (!dtype && stored.sizes() == held.sizes()) return std::nullopt;
    return WeightMismatch{dtype, fmt::format("{} '{}{}': stored {}, the model holds {}", what,
                                             prefix, key, tensor_text(stored), tensor_text(held))};
  };
  for (const auto& p : m.named_parameters(/*recurse=*/false))
    if (auto bad = check(p.key(), p.value(), false, "parameter")) return bad;
  for (const auto& b : m.named_buffers(/*recurse=*/false))
    if (auto bad = check(b.key(), b.value(), true, "buffer")) return bad;
  for (const auto& c : m.named_children()) {
    if (!c.value()->is_serializable()) continue;
    torch::serialize::InputArchive child;
    if (!archive.try_read(c.key(), child)) continue;
    if (auto bad = find_mismatch(*c.value(), child, prefix + c.key() + ".")) return bad;
  }
  return std::nullopt;
}

}  // namespace

void module_from_bytes(torch::nn::Module& m, const std::string& bytes, const std::string& source,
                       const std::function<void(const WeightMismatch&)>& on_mismatch) {
  std::optional<WeightMismatch> mismatch;
  try {
    std::istringstream is(bytes);
    torch::serialize::InputArchive archive;
    const torch::Device device = module_device(m);
    archive.load_from(is, device);
    mismatch = find_mismatch(m, archive, "");
    if (!mismatch) {
      m.load(archive);
      // Loading gives each parameter new storage (InputArchive set_s it), which breaks the single
      // flat weight buffer cuDNN's RNNs need (built by `to`): without this every LSTM call on
      // CUDA re-packs its weights (and warns). A move to the same device rebuilds it.
      if (device.is_cuda()) m.to(device);
    }
  } catch (const c10::Error& e) {
    throw InputError("checkpoint", "'" + source + "': weights do not match the model (" +
                                       std::string(e.what_without_backtrace()) + ")");
  }
  if (!mismatch) return;
  if (on_mismatch) on_mismatch(*mismatch);
  throw InputError("checkpoint",
                   "'" + source + "': weights do not match the model (" + mismatch->text + ")");
}

std::unique_ptr<Model> model_from_options(
    const std::string& name, const nlohmann::json& options, std::size_t blob_bytes,
    int bytes_per_parameter, const std::string& component, const std::string& source,
    const std::function<std::unique_ptr<Model>(const nlohmann::json&)>& make) {
  const auto refuse = [&](const std::string& why) {
    throw InputError(component, fmt::format("'{}': field 'options': {}", source, why));
  };
  if (!options.is_object()) refuse("expected a JSON object, got " + short_json(options));
  try {
    const auto count = catalog_entry(name, component.c_str()).parameter_count;
    if (count && bytes_per_parameter > 0) {
      const int64_t n = count(options);
      int64_t bytes = 0;
      if (__builtin_mul_overflow(n, int64_t{bytes_per_parameter}, &bytes) ||
          bytes > static_cast<int64_t>(blob_bytes))
        refuse(fmt::format(
            "the options describe a '{}' model of {} parameters, more than the file's {} bytes of "
            "weights hold",
            name, n, blob_bytes));
    }
    return make(options);
  } catch (const InputError& e) {
    if (e.message().rfind(fmt::format("'{}': field", source), 0) == 0) throw;  // already named
    refuse(e.what());
  }
  return nullptr;  // not reached: refuse throws
}

Container model_container(Model& model, const nlohmann::json& extra) {
  Container c;
  c.header = {{"kind", "model"},
              {"model", model.name()},
              {"options", model.options_json()},
              {"foxhunt_version", FOXHUNT_VERSION},
              {"extra", extra}};
  c.blobs["module"] = module_to_bytes(model.module());
  return c;
}

std::unique_ptr<Model> model_from_container(const Container& c, const std::string& source,
                                            const torch::Device& device,
                                            const std::string& expected_model) {
  const HeaderFields h(c.header, "checkpoint", source);
  const std::string name = h.text("model");
  if (!in_catalog(name))
    h.refuse_because("model", fmt::format("unknown model '{}'; this build knows {}", name,
                                          joined_model_names()));
  FOXHUNT_CHECK(expected_model.empty() || name == expected_model, "checkpoint", "'", source,
                "': field 'model': expected a '", expected_model, "' checkpoint, got '", name, "'");
  auto it = c.blobs.find("module");
  FOXHUNT_CHECK(it != c.blobs.end(), "checkpoint", "'", source, "': no 'module' blob");
  auto model =
      model_from_options(name, h.at("options"), it->second.size(), sizeof(float), "checkpoint",
                         source, [&](const nlohmann::json& o) { return make_model(name, o); });
  model->to(device);
  module_from_bytes(model->module(), it->second, source);
  return model;
}

void save_model(Model& model, const std::string& path, const nlohmann::json& extra) {
  write_container(path, model_container(model, extra));
}

std::unique_ptr<Model> load_model(const std::string& path, const torch::Device& device,
                                  const std::string& expected_model) {
  return model_from_container(read_container(path), path, device, expected_model);
}

}  // namespace foxhunt::models
