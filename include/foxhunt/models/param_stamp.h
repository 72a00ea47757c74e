#pragma once
/// \file param_stamp.h
/// A cheap fingerprint of a module's weights, for caches that hold values computed from them.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace foxhunt::models {

/// A fingerprint of a module's parameters and buffers: for each tensor, its data pointer and
/// version counter. In-place updates (optimizer steps, checkpoint loads) bump the version and
/// device or dtype moves replace the storage, so `changed()` reports both. Streaming caches use
/// it to notice that the weights behind their cached per-bar values moved.
class ParameterStamp {
 public:
  /// An empty stamp (`changed()` is false).
  ParameterStamp() = default;
  /// Records the current state of every parameter and buffer of `m` (recursively).
  explicit ParameterStamp(const torch::nn::Module& m);
  /// True when any recorded tensor was modified in place or re-allocated since the stamp was
  /// taken. Cheap: no allocation, no tensor operation.
  bool changed() const;

 private:
  std::vector<torch::Tensor> tensors_;  // the recorded tensors (shared handles)
  std::vector<const void*> data_;       // data pointer of each at stamp time
  std::vector<int64_t> versions_;       // version counter of each at stamp time
};

}  // namespace foxhunt::models
