#include "foxhunt/train/fused_adam.h"

#include <cmath>
#include <cstdint>

#include "foxhunt/models/derived_cache.h"
#include "foxhunt/models/fused_kernels.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
// Vectorised for three x86-64 levels (not under TSan: foxhunt/core/simd.h says why; the file is
// compiled with -fno-math-errno: see CMakeLists.txt).
#define FOXHUNT_ADAM_KERNEL \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define FOXHUNT_ADAM_KERNEL
#endif

namespace foxhunt::train {

namespace {

// The update of torch::optim::Adam (non-amsgrad), element by element in the same order:
// g += wd p; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
// p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
FOXHUNT_ADAM_KERNEL
void adam_kernel(float* __restrict p, const float* __restrict g, float* __restrict m,
                 float* __restrict v, int64_t n, float b1, float b2, float wd, float eps,
                 float step_size, float inv_sqrt_bc2) {
  const float c1 = 1.0f - b1, c2 = 1.0f - b2;
  for (int64_t i = 0; i < n; ++i) {
    const float gi = wd != 0.0f ? g[i] + wd * p[i] : g[i];
    const float mi = m[i] * b1 + c1 * gi;
    const float vi = v[i] * b2 + c2 * gi * gi;
    m[i] = mi;
    v[i] = vi;
    p[i] -= step_size * (mi / (std::sqrt(vi) * inv_sqrt_bc2 + eps));
  }
}

bool fusable(const torch::Tensor& p) {
  const auto& g = p.grad();
  return models::fused_cpu_kernels() && p.device().is_cpu() && p.scalar_type() == torch::kFloat &&
         p.is_contiguous() && g.defined() && g.device().is_cpu() &&
         g.scalar_type() == torch::kFloat && g.is_contiguous() && !g.is_sparse();
}

}  // namespace

torch::Tensor FusedAdam::step(LossClosure closure) {
  for (const auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    if (o.amsgrad()) return torch::optim::Adam::step(closure);
    for (const auto& p : group.params())
      if (p.grad().defined() && !fusable(p)) return torch::optim::Adam::step(closure);
  }
  torch::NoGradGuard no_grad;
  torch::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups_) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    const double b1 = std::get<0>(o.betas()), b2 = std::get<1>(o.betas());
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto it = state_.find(p.unsafeGetTensorImpl());
      if (it == state_.end()) {
        auto s = std::make_unique<torch::optim::AdamParamState>();
        s->step(0);
        s->exp_avg(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, torch::MemoryFormat::Preserve));
        it = state_.emplace(p.unsafeGetTensorImpl(), std::move(s)).first;
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*it->second);
      s.step(s.step() + 1);
      const double bc1 = 1.0 - std::pow(b1, static_cast<double>(s.step()));
      const double bc2 = 1.0 - std::pow(b2, static_cast<double>(s.step()));
      auto& m = s.exp_avg();
      auto& v = s.exp_avg_sq();
      TORCH_CHECK(m.is_contiguous() && v.is_contiguous() && m.numel() == p.numel(),
                  "FusedAdam: state of another shape or layout than its parameter");
      adam_kernel(p.mutable_data_ptr<float>(), p.grad().const_data_ptr<float>(),
                  m.mutable_data_ptr<float>(), v.mutable_data_ptr<float>(), p.numel(),
                  static_cast<float>(b1), static_cast<float>(b2),
                  static_cast<float>(o.weight_decay()), static_cast<float>(o.eps()),
                  static_cast<float>(o.lr() / bc1), static_cast<float>(1.0 / std::sqrt(bc2)));
      models::mark_written(p);  // written through its pointer: no op bumped the version
    }
  }
  return loss;
}

}  // namespace foxhunt::train
