#pragma once
// When the fused CPU inference kernels apply (private to models/).
#include <torch/torch.h>

#include "foxhunt/models/fused_kernels.h"

namespace foxhunt::models {

/// Whether `t` can feed a fused CPU inference kernel: no autograd recording, float32 on the CPU,
/// contiguous. Everything else runs LibTorch ops, which the tests compare the kernels against.
inline bool fused_cpu_float(const torch::Tensor& t) {
  return fused_cpu_kernels() && !torch::GradMode::is_enabled() && t.defined() &&
         t.device().is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
}

}  // namespace foxhunt::models
