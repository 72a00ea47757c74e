#pragma once
/// \file torch_device.h
/// The torch::Device of a parsed foxhunt::Device (checked against the devices LibTorch sees) and
/// of a module's weights.

#include <torch/torch.h>

#include "foxhunt/core/device.h"

namespace foxhunt::models {

/// Device of the first parameter of a module (CPU when it has none).
torch::Device module_device(const torch::nn::Module& m);

/// The torch::Device of a parsed device value (a plain "cuda" stays the current CUDA device).
torch::Device to_torch(const Device& d);

}  // namespace foxhunt::models
