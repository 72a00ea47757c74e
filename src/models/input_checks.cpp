#include "foxhunt/models/input_checks.h"

#include <sstream>

#include "foxhunt/core/error.h"
#include "foxhunt/models/lean.h"

namespace foxhunt::models {

void check_input_count(const std::string& component, const IoSpec& spec, const Batch& batch) {
  if (batch.inputs.size() == spec.inputs.size()) return;
  std::string names;
  for (const auto& i : spec.inputs) names += (names.empty() ? "" : ", ") + i.name;
  throw InputError(component, ::foxhunt::detail::cat("expected ", spec.inputs.size(), " input(s) (",
                                                     names, "), got ", batch.inputs.size()));
}

std::string shape_str(const std::vector<int64_t>& sizes) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) os << ", ";
    if (sizes[i] < 0)
      os << "*";
    else
      os << sizes[i];
  }
  os << "]";
  return os.str();
}

namespace {

void check_common(const std::string& component, const std::string& name, const torch::Tensor& t,
                  const std::vector<int64_t>& expected, const torch::Device& device) {
  FOXHUNT_CHECK(t.defined(), component, name, ": expected a tensor of shape ", shape_str(expected),
                ", got an undefined tensor");
  const auto got = t.sizes().vec();
  FOXHUNT_CHECK(t.dim() == static_cast<int64_t>(expected.size()), component, name,
                ": expected rank ", expected.size(), " with shape ", shape_str(expected),
                ", got rank ", t.dim(), " with shape ", shape_str(got));
  for (size_t i = 0; i < expected.size(); ++i) {
    FOXHUNT_CHECK(expected[i] < 0 || expected[i] == got[i], component, name, ": expected shape ",
                  shape_str(expected), ", got ", shape_str(got), " (dimension ", i, ")");
  }
  FOXHUNT_CHECK(t.device() == device, component, name, ": expected device ", device.str(), ", got ",
                t.device().str());
}

}  // namespace

namespace {
thread_local bool t_host_validated = false;

// The finite scan syncs with a CUDA device: skipped for device tensors a caller scanned on the
// host (HostValidatedInputs).
bool scan_values(const torch::Tensor& t) {
  return t.numel() > 0 && (t.device().is_cpu() || !t_host_validated);
}
}  // namespace

HostValidatedInputs::HostValidatedInputs() : previous_(t_host_validated) {
  t_host_validated = true;
}
HostValidatedInputs::~HostValidatedInputs() {
  t_host_validated = previous_;
}
bool HostValidatedInputs::active() {
  return t_host_validated;
}

void check_input(const std::string& component, const std::string& name, const torch::Tensor& t,
                 const std::vector<int64_t>& expected, torch::ScalarType dtype,
                 const torch::Device& device) {
  check_common(component, name, t, expected, device);
  FOXHUNT_CHECK(t.scalar_type() == dtype, component, name, ": expected dtype ",
                c10::toString(dtype), ", got ", c10::toString(t.scalar_type()));
  if (t.is_floating_point() && scan_values(t)) {
    FOXHUNT_CHECK(tensor_all_finite(t), component, name,
                  ": expected finite values, got NaN or Inf (",
                  (~torch::isfinite(t)).sum().item<int64_t>(), " of ", t.numel(), " values)");
  }
}

void check_float_input(const std::string& component, const std::string& name,
                       const torch::Tensor& t, const std::vector<int64_t>& expected,
                       const torch::Device& device) {
  check_common(component, name, t, expected, device);
  FOXHUNT_CHECK(t.is_floating_point(), component, name,
                ": expected a floating dtype (float32 or float64), got ",
                c10::toString(t.scalar_type()));
  if (scan_values(t)) {
    FOXHUNT_CHECK(tensor_all_finite(t), component, name,
                  ": expected finite values, got NaN or Inf (",
                  (~torch::isfinite(t)).sum().item<int64_t>(), " of ", t.numel(), " values)");
  }
}

}  // namespace foxhunt::models
