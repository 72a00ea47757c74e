#pragma once
/// \file tags.h
/// The memory tags (ARCHITECTURE.md, "Memory accounting"): what a ledger scope `<owner>/<tag>`
/// counts. One enum instead of free strings, so a misspelt tag is a compile error. Torch-free.
#include <string>

#include "foxhunt/core/strings.h"

namespace foxhunt::memory {

/// A tag of the tagged footprint.
enum class Tag {
  kParameters,   ///< the module's construction: parameters and buffers
  kGradients,    ///< the .grad tensors (created by the first backward)
  kOptimizer,    ///< optimizer state (and an optimizer step's temporaries while it runs)
  kActivations,  ///< forward + backward beyond the fixed tags
  kCommBuckets,  ///< data parallelism's flat gradient buckets (dist/gradient_sync.h)
};

/// The tag's name in scopes, reports and JSON: "parameters", "gradients", "optimizer",
/// "activations", "comm_buckets".
constexpr const char* tag_name(Tag t) {
  return enum_name(t, {"parameters", "gradients", "optimizer", "activations", "comm_buckets"});
}

/// The scope of `owner`'s tag: "<owner>/<tag>" ("tft/optimizer").
inline std::string tag_scope(const std::string& owner, Tag t) {
  return owner + "/" + tag_name(t);
}

}  // namespace foxhunt::memory
