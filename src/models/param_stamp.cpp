#include "foxhunt/models/param_stamp.h"

namespace foxhunt::models {

namespace {
// Inference tensors (created under InferenceMode) have no version counter.
int64_t version_of(const torch::Tensor& t) {
  return t.is_inference() ? 0 : t._version();
}
}  // namespace

ParameterStamp::ParameterStamp(const torch::nn::Module& m) {
  tensors_ = m.parameters(/*recurse=*/true);
  for (auto& b : m.buffers(/*recurse=*/true)) tensors_.push_back(b);
  for (const auto& t : tensors_) {
    data_.push_back(t.defined() ? t.data_ptr() : nullptr);
    versions_.push_back(t.defined() ? version_of(t) : 0);
  }
}

bool ParameterStamp::changed() const {
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const auto& t = tensors_[i];
    const void* d = t.defined() ? t.data_ptr() : nullptr;
    if (d != data_[i] || (t.defined() && version_of(t) != versions_[i])) return true;
  }
  return false;
}

}  // namespace foxhunt::models
