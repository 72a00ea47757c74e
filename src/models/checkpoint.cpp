#include "foxhunt/models/checkpoint.h"

#include <sstream>

namespace foxhunt::models {

std::string module_to_bytes(torch::nn::Module& m) {
  return archive_to_bytes(m);
}

void module_from_bytes(torch::nn::Module& m, const std::string& bytes, const std::string& source) {
  try {
    std::istringstream is(bytes);
    torch::serialize::InputArchive archive;
    const torch::Device device = module_device(m);
    archive.load_from(is, device);
    m.load(archive);
    // Loading gives each parameter new storage (InputArchive set_s it), which breaks the single
    // flat weight buffer cuDNN's RNNs need (built by `to`): without this every LSTM call on CUDA
    // re-packs its weights (and warns). A move to the same device rebuilds it.
    if (device.is_cuda()) m.to(device);
  } catch (const c10::Error& e) {
    throw InputError("checkpoint", "'" + source + "': weights do not match the model (" +
                                       std::string(e.what_without_backtrace()) + ")");
  }
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
  const auto& h = c.header;
  FOXHUNT_CHECK(h.contains("model") && h["model"].is_string() && h.contains("options"),
                "checkpoint", "'", source, "': header lacks 'model' or 'options'");
  const std::string name = h["model"].get<std::string>();
  FOXHUNT_CHECK(expected_model.empty() || name == expected_model, "checkpoint", "'", source,
                "': expected a '", expected_model, "' checkpoint, got '", name, "'");
  auto it = c.blobs.find("module");
  FOXHUNT_CHECK(it != c.blobs.end(), "checkpoint", "'", source, "': no 'module' blob");
  auto model = make_model(name, h["options"]);
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
