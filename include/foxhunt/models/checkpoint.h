#pragma once
/// \file checkpoint.h
/// Model checkpoints: weights + options + format version in one container file (core/container.h),
/// written atomically. Loading builds a fresh model and returns it only when everything loaded.

#include <torch/torch.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "foxhunt/core/container.h"
#include "foxhunt/models/model.h"

namespace foxhunt::models {

/// Serialises anything with `save(torch::serialize::OutputArchive&)` (a module, an optimizer)
/// to bytes.
template <typename T>
std::string archive_to_bytes(T& object) {
  torch::serialize::OutputArchive archive;
  object.save(archive);
  std::ostringstream os;
  archive.save_to(os);
  return os.str();
}

/// Serialises a module's parameters and buffers to bytes (torch archive).
std::string module_to_bytes(torch::nn::Module& m);
/// A tensor stored in a module archive that is not the one the module holds under its name.
struct WeightMismatch {
  bool dtype = false;  ///< the element types differ (else the shapes do)
  /// "parameter 'blocks.0.fc.weight': stored Float [8, 4], the model holds BFloat16 [8, 4]"
  std::string text;
};

/// Loads parameters and buffers from bytes produced by module_to_bytes into `m`.
/// Throws InputError("[checkpoint] ...") naming `source` when the archive does not match: a
/// tensor missing, or stored with another element type or shape than `m` holds (checked before
/// anything is loaded: torch's loader would take the stored bytes as they are, reinterpreting
/// FP32 weights as BF16 ones). `on_mismatch`, when given, is called with the first such tensor
/// first (a bundle loader throws its own error naming the header field that described `m`).
void module_from_bytes(torch::nn::Module& m, const std::string& bytes, const std::string& source,
                       const std::function<void(const WeightMismatch&)>& on_mismatch = nullptr);

/// Model `name` (a catalog name) built from the options field of the header of file `source`,
/// weights not loaded: InputError naming `component`, the file and field 'options' for options
/// its schema refuses and for options that describe more parameters than the `blob_bytes` of
/// weights the file holds can store at `bytes_per_parameter` (4 for fp32; 0 skips the check: a
/// quantized form's folded layout has no fp32 count), checked in closed form
/// (CatalogEntry::parameter_count) before anything is allocated, so a header cannot make the loader
/// allocate what no file holds. `make` builds the model from the options.
std::unique_ptr<Model> model_from_options(
    const std::string& name, const nlohmann::json& options, std::size_t blob_bytes,
    int bytes_per_parameter, const std::string& component, const std::string& source,
    const std::function<std::unique_ptr<Model>(const nlohmann::json&)>& make);

/// Builds the container of a model checkpoint (header: kind "model", model name, options; blob
/// "module"). `extra` is stored under header["extra"].
Container model_container(Model& model, const nlohmann::json& extra = nlohmann::json::object());
/// Rebuilds a model from a container. `expected_model` (when not empty) must match.
std::unique_ptr<Model> model_from_container(const Container& c, const std::string& source,
                                            const torch::Device& device,
                                            const std::string& expected_model = "");

/// Saves a model checkpoint atomically.
void save_model(Model& model, const std::string& path,
                const nlohmann::json& extra = nlohmann::json::object());
/// Loads a model checkpoint onto `device`. Throws InputError for truncated, corrupted, wrong-model
/// or wrong-version files; nothing is returned half-loaded.
std::unique_ptr<Model> load_model(const std::string& path,
                                  const torch::Device& device = torch::kCPU,
                                  const std::string& expected_model = "");

}  // namespace foxhunt::models
