#pragma once
/// \file checkpoint.h
/// Model checkpoints: weights + options + format version in one container file (core/container.h),
/// written atomically. Loading builds a fresh model and returns it only when everything loaded.

#include <torch/torch.h>

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
/// Loads parameters and buffers from bytes produced by module_to_bytes into `m`.
/// Throws InputError("[checkpoint] ...") naming `source` when the archive does not match.
void module_from_bytes(torch::nn::Module& m, const std::string& bytes, const std::string& source);

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
