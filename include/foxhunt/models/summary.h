#pragma once
/// \file summary.h
/// Per-model size facts for `foxhunt models` and the validator.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace foxhunt::models {

/// Size facts of one model built with its default options.
struct ModelSummary {
  std::string name;
  int64_t parameters = 0;       ///< parameter count
  int64_t parameter_bytes = 0;  ///< fp32 parameter bytes (numel x 4)
  int64_t buffers = 0;          ///< buffer element count
  int64_t buffer_bytes = 0;     ///< buffer bytes
  int64_t seq_len = 0;          ///< default window (0: no time axis)
  std::vector<std::string> inputs;
  nlohmann::json options;
};

/// Builds each registered model with defaults and measures it.
std::vector<ModelSummary> describe_models();
nlohmann::json to_json(const ModelSummary& s);

}  // namespace foxhunt::models
