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
/// A CUDA device loads the CUDA plugin first (core/cuda_plugin.h); InputError naming why when
/// no usable device is found.
torch::Device to_torch(const Device& d);

/// Loads the CUDA plugin (once) and asks LibTorch whether a CUDA device is usable: what every
/// "is there a GPU" question asks, since LibTorch alone answers false until the plugin is loaded.
bool cuda_available();

/// The CUDA devices LibTorch sees (loads the plugin; 0 when there is none).
int cuda_device_count();

}  // namespace foxhunt::models
