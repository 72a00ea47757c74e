#pragma once
// Internal to src/plan: the training steps (the trainer's own, or the synthetic stand-in) shared
// by the footprint probes and the planner's verification, so that what is measured is exactly
// what is verified under the cap.

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "foxhunt/dist/gradient_sync.h"
#include "foxhunt/memory/device_memory.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/memory/tags.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/footprint.h"
#include "foxhunt/train/trainer_step.h"

namespace foxhunt::plan::detail {

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

/// The synthetic stand-in step (StepKind::kSynthetic): prepare() = zero_grad(set_to_none =
/// false), batch = example_batch(b), loss = model.loss(batch), backward; apply() =
/// optimizer.step(), with the batch alive until the step is over (as in a training loop, where
/// the batch variable outlives optimizer.step()).
class SyntheticStep final : public train::TrainerStep {
 public:
  SyntheticStep(const std::string& name, const TrainConfig& config,
                const nlohmann::json& model_options)
      : config_(config), device_(models::to_torch(config.device)) {
    model_ = models::make_model(name, model_options);
    model_->to(device_);
    model_->module().train();
    seq_ = effective_seq_len(*model_, config.seq_len);
    optimizer_ = make_optimizer(config.optimizer, trainable_parameters(*model_), config.lr);
  }
  models::Model& model() override { return *model_; }
  void prepare(std::int64_t batch) override {
    optimizer_->zero_grad(/*set_to_none=*/false);
    batch_ = model_->example_batch(batch, seq_, device_, config_.seed);
    loss_ = model_->loss(batch_);
    loss_.backward();
  }
  void apply() override {
    optimizer_->step();
    batch_ = models::Batch();  // batch and loss outlive the step, as in a training loop
    loss_ = torch::Tensor();
  }
  std::uint64_t external_bytes() const override { return 0; }
  std::uint64_t expected_state_bytes() const override { return 0; }
  std::string describe() const override {
    return "synthetic: example_batch + Model::loss + " + to_string(config_.optimizer);
  }

 private:
  TrainConfig config_;
  torch::Device device_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::int64_t seq_ = 0;
  models::Batch batch_;
  torch::Tensor loss_;
};

/// Builds the step `config.step` names for `name` (the caller's scope tags its construction).
/// StepKind::kTrainer requires adam: the trainers' optimizer.
inline std::unique_ptr<train::TrainerStep> make_step(const std::string& name,
                                                     const TrainConfig& config,
                                                     const nlohmann::json& model_options) {
  if (config.step == StepKind::kSynthetic)
    return std::make_unique<SyntheticStep>(name, config, model_options);
  FOXHUNT_CHECK(config.optimizer == OptimizerKind::kAdam, "planner", "optimizer ",
                to_string(config.optimizer),
                ": the trainer step uses the trainers' optimizer (adam); measure another "
                "optimizer with the synthetic step (step synthetic)");
  train::TrainerStepSpec spec;
  spec.model = name;
  spec.model_options = model_options.is_null() ? nlohmann::json::object() : model_options;
  spec.trainer_options = config.trainer_options;
  spec.env = config.env;
  spec.seq_len = config.seq_len;
  spec.seed = config.seed;
  spec.device = config.device;
  return train::make_trainer_step(spec);
}

/// What one measured step gave.
struct StepMeasure {
  std::uint64_t live_before = 0;            ///< live bytes at the start (fixed tags resident)
  std::uint64_t forward_backward_peak = 0;  ///< peak of prepare() beyond live_before (>= 0)
  std::uint64_t step_peak = 0;  ///< peak of apply() (optimizer.step()) beyond live_before (>= 0)
  std::uint64_t peak = 0;       ///< the absolute peak of live bytes over the step
};

/// a - b, or 0 when b > a (a phase can end below where the step started: set_to_none frees the
/// gradients, a parameter without a gradient this step keeps none).
inline std::uint64_t beyond(std::uint64_t a, std::uint64_t b) {
  return a > b ? a - b : 0;
}

/// Runs one step at `batch`: prepare() tagged `<name>/<prepare_tag>` (kActivations in the
/// steady state, kGradients on the first step, which creates the .grad tensors), apply()
/// tagged `<name>/optimizer`. Resets the ledger's peak twice (process-wide).
inline StepMeasure measured_step(train::TrainerStep& step, const std::string& name,
                                 std::int64_t batch, memory::Tag prepare_tag,
                                 const memory::MemoryDevice& dev = {}) {
  StepMeasure m;
  m.live_before = memory::device_live_bytes(dev);
  memory::device_reset_peak(dev);
  {
    memory::MemoryScope s(memory::tag_scope(name, prepare_tag));
    step.prepare(batch);
  }
  const std::uint64_t p1 = memory::device_peak_bytes(dev);
  m.forward_backward_peak = beyond(p1, m.live_before);
  memory::device_reset_peak(dev);
  {
    memory::MemoryScope opt(memory::tag_scope(name, memory::Tag::kOptimizer));
    step.apply();
  }
  const std::uint64_t p2 = memory::device_peak_bytes(dev);
  m.step_peak = beyond(p2, m.live_before);
  m.peak = std::max(p1, p2);
  return m;
}

/// Bytes of the .grad tensors of `m` (how gradients are counted on CUDA, which has no scopes).
inline std::uint64_t gradient_tensor_bytes(models::Model& m) {
  std::uint64_t n = 0;
  for (const auto& p : m.module().parameters()) n += tensor_bytes(p.grad());
  return n;
}

/// Bytes and elements of the inputs of one sample of `m`'s example batch.
inline std::pair<std::uint64_t, std::int64_t> sample_inputs(const models::Model& m,
                                                            std::int64_t seq, std::uint64_t seed) {
  const models::Batch b = m.example_batch(1, seq, torch::kCPU, seed);
  std::uint64_t bytes = 0;
  std::int64_t elements = 0;
  for (const auto& t : b.inputs) {
    bytes += tensor_bytes(t);
    elements += t.numel();
  }
  return {bytes, elements};
}

/// The gradient all-reduce buckets one data-parallel rank holds (null for world_size 1), built
/// under the scope `scope`/comm_buckets without a communicator: the planner measures their
/// bytes, exactly as the trainer allocates them.
inline std::unique_ptr<dist::GradientSync> make_comm_buckets(models::Model& m,
                                                             const TrainConfig& config,
                                                             const std::string& scope) {
  if (config.world_size <= 1) return nullptr;
  memory::MemoryScope s(scope);
  return std::make_unique<dist::GradientSync>(trainable_parameters(m), nullptr,
                                              dist::bucket_bytes(config.bucket_mib));
}

}  // namespace foxhunt::plan::detail
