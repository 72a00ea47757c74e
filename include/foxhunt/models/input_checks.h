#pragma once
/// \file input_checks.h
/// The input validation every model runs before its forward pass: rank, sizes, dtype, device and
/// finite values of each tensor (errors name the component, the tensor and expected vs received),
/// the input count of a batch, and the scope that skips the device-side finite scan of inputs the
/// caller already scanned on the host.

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "foxhunt/models/batch.h"
#include "foxhunt/models/spec.h"

namespace foxhunt::models {

/// Input validation helper shared by all models: checks rank, sizes (-1 = any), dtype, device and
/// (for floating tensors) that every value is finite. Names the component, the tensor, and the
/// expected vs received values in the error.
void check_input(const std::string& component, const std::string& tensor_name,
                 const torch::Tensor& t, const std::vector<int64_t>& expected_sizes,
                 torch::ScalarType dtype, const torch::Device& device);

/// While alive on this thread, the input checks skip the finite-value scan of tensors that are
/// not on the CPU, because the caller scanned the values on the host before copying them (the
/// serving runtime does): serving on CUDA then never waits for the device in an input check.
/// Rank, sizes, dtype and device are still checked, and CPU tensors are always scanned.
class HostValidatedInputs {
 public:
  HostValidatedInputs();
  ~HostValidatedInputs();
  HostValidatedInputs(const HostValidatedInputs&) = delete;  // a scope, not a value
  /// True while a scope is alive on this thread.
  static bool active();

 private:
  bool previous_;
};

/// Same as check_input, but the dtype may be any floating type.
void check_float_input(const std::string& component, const std::string& tensor_name,
                       const torch::Tensor& t, const std::vector<int64_t>& expected_sizes,
                       const torch::Device& device);

/// Throws InputError unless `batch` holds exactly the inputs of `spec` (names them).
void check_input_count(const std::string& component, const IoSpec& spec, const Batch& batch);

/// Formats sizes as "[a, b, c]" (-1 printed as "*").
std::string shape_str(const std::vector<int64_t>& sizes);

}  // namespace foxhunt::models
