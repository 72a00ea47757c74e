#include "foxhunt/models/derived_cache.h"

namespace foxhunt::models {

void mark_written(const torch::Tensor& t) {
  if (t.defined() && !t.is_inference()) t.unsafeGetTensorImpl()->bump_version();
}

TensorFingerprint::TensorFingerprint(const std::vector<torch::Tensor>& tensors, Inference inference)
    : inference_(inference) {
  bool ok = true;
  entries_.reserve(tensors.size());
  for (const auto& t : tensors) {
    Entry e;
    if (t.defined() && t.has_storage()) {
      e.impl.emplace(t.getIntrusivePtr());
      e.storage.emplace(t.storage().getWeakStorageImpl());
      e.data = t.const_data_ptr();
      if (t.is_inference())
        ok = ok && inference == Inference::kIdentity;
      else
        e.version = t._version();
    } else if (t.defined()) {
      ok = false;  // no storage (e.g. an opaque tensor): nothing to compare
    }
    entries_.push_back(std::move(e));
  }
  valid_ = ok;
}

bool TensorFingerprint::matches(const std::vector<torch::Tensor>& tensors) const {
  if (!valid_ || tensors.size() != entries_.size()) return false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    const auto& e = entries_[i];
    if (!t.defined()) {
      if (e.impl) return false;
      continue;
    }
    if (!e.impl || !t.has_storage() || e.impl->_unsafe_get_target() != t.unsafeGetTensorImpl() ||
        e.storage->_unsafe_get_target() != t.storage().unsafeGetStorageImpl() ||
        e.data != t.const_data_ptr())
      return false;
    if (t.is_inference() ? inference_ != Inference::kIdentity : e.version != t._version())
      return false;
  }
  return true;
}

std::vector<torch::Tensor> module_state(const torch::nn::Module& m) {
  auto state = m.parameters(/*recurse=*/true);
  for (auto& b : m.buffers(/*recurse=*/true)) state.push_back(std::move(b));
  return state;
}

std::vector<torch::Tensor> with_gradients(std::vector<torch::Tensor> tensors) {
  const size_t n = tensors.size();
  tensors.reserve(2 * n);
  for (size_t i = 0; i < n; ++i)
    tensors.push_back(tensors[i].defined() ? tensors[i].grad() : torch::Tensor());
  return tensors;
}

}  // namespace foxhunt::models
