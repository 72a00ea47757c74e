#pragma once
/// \file json_options.h
/// Helpers shared by the trainers' options_from_json functions.

#include <torch/torch.h>

#include <nlohmann/json.hpp>

namespace foxhunt::train {

/// Reads the optional "device" key of `j` ("cpu", "cuda", "cuda:N"); returns `fallback` when the
/// key is absent. Throws InputError("[component] option 'device': ...") for an unparsable value.
torch::Device device_option(const nlohmann::json& j, const char* component,
                            const torch::Device& fallback);

}  // namespace foxhunt::train
