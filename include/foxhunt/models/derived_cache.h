#pragma once
// A value derived from a module's tensors for inference (weights folded, transposed or packed),
// kept until one of those tensors changes.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace foxhunt::models {

/// Marks `t` as written for every DerivedCache over it. LibTorch's in-place ops do this
/// themselves (they bump the version counter, under NoGradGuard too); code that writes a
/// parameter through a raw pointer (FusedAdam, a collective into the parameter's memory) must
/// call it. No-op for inference tensors and undefined tensors.
void mark_written(const torch::Tensor& t);

/// What identifies the current contents of a list of tensors: each one's TensorImpl, storage,
/// data pointer and version counter. The TensorImpl and StorageImpl are held by weak references,
/// so their addresses cannot be reused by other tensors while the fingerprint lives.
class TensorFingerprint {
 public:
  /// Inference tensors carry no version counter: an in-place write to one cannot be seen.
  enum class Inference {
    kInvalid,   ///< a list with one has no fingerprint (`valid()` false, never matches)
    kIdentity,  ///< compared by identity only (for caches that accept that blind spot)
  };
  TensorFingerprint() = default;
  /// The fingerprint of `tensors` (undefined tensors take part as empty entries).
  explicit TensorFingerprint(const std::vector<torch::Tensor>& tensors,
                             Inference inference = Inference::kInvalid);
  /// False when a tensor had no version counter under Inference::kInvalid.
  bool valid() const { return valid_; }
  /// True when `tensors` still has this fingerprint (false for an invalid one).
  bool matches(const std::vector<torch::Tensor>& tensors) const;

 private:
  struct Entry {
    // Empty for an undefined tensor.
    std::optional<c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>> impl;
    std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;
    const void* data = nullptr;
    uint32_t version = 0;
  };
  std::vector<Entry> entries_;
  Inference inference_ = Inference::kInvalid;
  bool valid_ = false;
};

/// The tensors a module's derived values depend on: its parameters and buffers, recursively.
std::vector<torch::Tensor> module_state(const torch::nn::Module& m);

/// `tensors`, then each one's gradient (an undefined entry where it has none): the sources of a
/// cache over trainable weights. LibTorch's C++ SGD writes the weights without bumping their
/// version counters (measured on 2.15: Adam, AdamW, RMSprop and Adagrad bump them), but the
/// backward before a step changes the gradients (a new tensor, or an accumulation that bumps its
/// version), so such a step is seen too. The blind spot left: a second SGD step on the same
/// gradients with no backward between (call mark_written on the weights then).
std::vector<torch::Tensor> with_gradients(std::vector<torch::Tensor> tensors);

/// A value of type T computed from `sources` and reused while they keep their fingerprint.
/// Only used with gradients off (a derived value computed under autograd must stay in the
/// graph): with GradMode on, or a source without a version counter, `get` computes afresh and
/// keeps nothing. Thread-safe; the value is shared, never modified after it is made.
template <class T>
class DerivedCache {
 public:
  /// The value for `sources`, from the cache or from `make()` (then cached).
  template <class Make>
  std::shared_ptr<const T> get(const std::vector<torch::Tensor>& sources, Make&& make) {
    if (torch::GradMode::is_enabled()) return std::make_shared<const T>(make());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (value_ && fingerprint_.matches(sources)) return value_;
    }
    TensorFingerprint fp(sources);
    auto value = std::make_shared<const T>(make());
    if (fp.valid()) {
      std::lock_guard<std::mutex> lock(mutex_);
      fingerprint_ = std::move(fp);
      value_ = value;
    }
    return value;
  }
  /// Drops the cached value (its memory is freed once no caller holds it).
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    value_.reset();
    fingerprint_ = TensorFingerprint();
  }
  /// True when a value is cached.
  bool holds() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return value_ != nullptr;
  }

  DerivedCache() = default;
  // A copied module computes its own values (its tensors are others).
  DerivedCache(const DerivedCache&) {}
  DerivedCache& operator=(const DerivedCache&) {
    clear();
    return *this;
  }

 private:
  mutable std::mutex mutex_;
  TensorFingerprint fingerprint_;
  std::shared_ptr<const T> value_;
};

}  // namespace foxhunt::models
