#pragma once
// Internal to src/memory: the canonical training step shared by the footprint probes and the
// planner's verification, so that what is measured is exactly what is verified under the cap.

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "foxhunt/dist/gradient_sync.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/footprint.h"

namespace foxhunt::plan::detail {

using namespace ::foxhunt::memory;  // ledger counters and scopes

/// numel x element size (0 for an undefined tensor).
inline std::uint64_t tensor_bytes(const torch::Tensor& t) {
  return t.defined() ? static_cast<std::uint64_t>(t.numel()) * t.element_size() : 0;
}

/// The window a model really uses: its default for 0, and 0 for models without a time axis.
inline std::int64_t effective_seq_len(const models::Model& m, std::int64_t asked) {
  if (m.default_seq_len() == 0) return 0;
  return asked == 0 ? m.default_seq_len() : asked;
}

/// The trainable (requires_grad) parameters of a model.
inline std::vector<torch::Tensor> trainable_parameters(models::Model& m) {
  std::vector<torch::Tensor> out;
  for (const auto& p : m.module().parameters())
    if (p.requires_grad()) out.push_back(p);
  return out;
}

/// A LibTorch optimizer of the given kind over `params` (SGD momentum 0.9, AdamW decay 1e-2).
inline std::unique_ptr<torch::optim::Optimizer> make_optimizer(OptimizerKind kind,
                                                               std::vector<torch::Tensor> params,
                                                               double lr) {
  switch (kind) {
    case OptimizerKind::kAdam:
      return std::make_unique<torch::optim::Adam>(std::move(params), torch::optim::AdamOptions(lr));
    case OptimizerKind::kAdamW:
      return std::make_unique<torch::optim::AdamW>(std::move(params),
                                                   torch::optim::AdamWOptions(lr));
    case OptimizerKind::kSgd:
      return std::make_unique<torch::optim::SGD>(std::move(params), torch::optim::SGDOptions(lr));
    case OptimizerKind::kSgdMomentum:
      return std::make_unique<torch::optim::SGD>(std::move(params),
                                                 torch::optim::SGDOptions(lr).momentum(0.9));
  }
  FOXHUNT_INTERNAL_ASSERT(false, "unknown OptimizerKind ", static_cast<int>(kind));
  return nullptr;
}

/// What one canonical step measured.
struct StepMeasure {
  std::uint64_t live_before = 0;            ///< live bytes at the start (fixed tags resident)
  std::uint64_t forward_backward_peak = 0;  ///< peak of batch+forward+backward beyond live_before
  std::uint64_t step_peak = 0;      ///< peak of optimizer.step() beyond live_before (batch alive)
  std::uint64_t input_bytes = 0;    ///< bytes of the batch's inputs
  std::int64_t input_elements = 0;  ///< elements of the batch's inputs
};

/// The canonical training step (footprint.h): zero_grad(set_to_none = false), batch, loss,
/// backward, optimizer.step(), with the batch alive until the step is over (as in a training
/// loop, where the batch variable outlives optimizer.step()). Batch creation and forward are
/// tagged `<name>/activations`, the backward `<name>/<backward_tag>` ("activations" in the
/// steady state, "gradients" on the first step, which creates the .grad tensors), the step
/// `<name>/optimizer`. Resets the ledger's peak twice (process-wide).
inline StepMeasure canonical_step(models::Model& model, torch::optim::Optimizer& optimizer,
                                  const std::string& name, std::int64_t batch, std::int64_t seq_len,
                                  std::uint64_t seed, const char* backward_tag) {
  StepMeasure m;
  optimizer.zero_grad(/*set_to_none=*/false);
  m.live_before = live_bytes();
  reset_peak();
  models::Batch b;
  torch::Tensor loss;
  {
    MemoryScope act(name + "/activations");
    b = model.example_batch(batch, seq_len, torch::kCPU, seed);
    for (const auto& t : b.inputs) {
      m.input_bytes += tensor_bytes(t);
      m.input_elements += t.numel();
    }
    loss = model.loss(b);
  }
  {
    MemoryScope back(name + "/" + backward_tag);
    loss.backward();
  }
  m.forward_backward_peak = peak_bytes() - m.live_before;
  reset_peak();
  {
    MemoryScope opt(name + "/optimizer");
    optimizer.step();
  }
  m.step_peak = peak_bytes() - m.live_before;
  return m;
}

/// The gradient all-reduce buckets one data-parallel rank holds (null for world_size 1), built
/// under the scope `scope`/comm_buckets without a communicator: the planner measures their
/// bytes, exactly as the trainer allocates them.
inline std::unique_ptr<dist::GradientSync> make_comm_buckets(models::Model& m,
                                                             const TrainConfig& config,
                                                             const std::string& scope) {
  if (config.world_size <= 1) return nullptr;
  MemoryScope s(scope);
  return std::make_unique<dist::GradientSync>(trainable_parameters(m), nullptr,
                                              dist::bucket_bytes(config.bucket_mib));
}

}  // namespace foxhunt::plan::detail
