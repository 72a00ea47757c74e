#include "foxhunt/models/streaming.h"

#include <cmath>

#include "foxhunt/models/model.h"

namespace foxhunt::models {

ParameterStamp::ParameterStamp(const torch::nn::Module& m)
    : tensors_(module_state(m)), fingerprint_(tensors_, TensorFingerprint::Inference::kIdentity) {}

bool ParameterStamp::changed() const {
  return !tensors_.empty() && !fingerprint_.matches(tensors_);
}

namespace {

template <typename T>
bool all_finite_cpu(const torch::Tensor& t) {
  const T* p = t.const_data_ptr<T>();
  bool ok = true;
  for (int64_t i = 0, n = t.numel(); i < n; ++i) ok &= std::isfinite(p[i]);
  return ok;
}

}  // namespace

void check_stream_input(const std::string& component, const std::string& name,
                        const torch::Tensor& t, const std::vector<int64_t>& expected,
                        const torch::Device& device) {
  const bool fast = t.defined() && t.device().is_cpu() && device.is_cpu() && t.is_contiguous() &&
                    (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kDouble);
  if (!fast) return check_float_input(component, name, t, expected, device);
  bool shape_ok = t.dim() == static_cast<int64_t>(expected.size());
  for (size_t i = 0; shape_ok && i < expected.size(); ++i)
    shape_ok = expected[i] < 0 || expected[i] == t.size(static_cast<int64_t>(i));
  const bool finite =
      t.scalar_type() == torch::kFloat ? all_finite_cpu<float>(t) : all_finite_cpu<double>(t);
  // Any failure: the batch check reports it with its usual message.
  if (!shape_ok || !finite) check_float_input(component, name, t, expected, device);
}

}  // namespace foxhunt::models
