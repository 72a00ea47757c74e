// Footprint: exact fixed tags (parameters, buffers, gradients, optimizer state) against the closed
// forms of ARCHITECTURE.md ("Memory accounting") for every model and optimizer, measured
// activations, inference footprint.
#include <array>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/footprint.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using plan::OptimizerKind;

// Closed-form bytes computed here, independently of footprint.cpp, from a fresh module.
struct ClosedForm {
  std::uint64_t parameters = 0;
  std::uint64_t trainable = 0;
  std::uint64_t buffers = 0;
};

// [out, in] of every matrix parameter (the Linear weights) of `name`'s default model.
std::vector<std::array<int64_t, 2>> fp_model_weights(const std::string& name) {
  auto m = models::make_model(name, nlohmann::json::object());
  std::vector<std::array<int64_t, 2>> out;
  for (const auto& p : m->module().parameters())
    if (p.dim() == 2) out.push_back({p.size(0), p.size(1)});
  return out;
}

ClosedForm closed_form(const std::string& name) {
  auto m = models::make_model(name);
  ClosedForm c;
  for (const auto& p : m->module().parameters()) {
    const auto bytes = static_cast<std::uint64_t>(p.numel()) * p.element_size();
    c.parameters += bytes;
    if (p.requires_grad()) c.trainable += bytes;
  }
  for (const auto& b : m->module().buffers())
    c.buffers += static_cast<std::uint64_t>(b.numel()) * b.element_size();
  return c;
}

std::uint64_t expected_state(OptimizerKind k, std::uint64_t trainable) {
  switch (k) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      return 2 * trainable;  // exp_avg + exp_avg_sq; C++ keeps `step` as an int64_t, no tensor
    case OptimizerKind::kSgdMomentum:
      return trainable;  // momentum_buffer
    case OptimizerKind::kSgd:
      return 0;
  }
  return 0;
}

class FootprintTest : public testing::SeededTest {};

TEST_F(FootprintTest, FixedTagsEqualClosedFormsForEveryModelAndOptimizer) {
  for (const auto& name : models::model_names()) {
    const ClosedForm c = closed_form(name);
    ASSERT_GT(c.trainable, 0u) << name;
    for (auto k : {OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kSgd,
                   OptimizerKind::kSgdMomentum}) {
      SCOPED_TRACE(name + " " + plan::to_string(k));
      const std::uint64_t live0 = memory::live_bytes();
      plan::TrainConfig cfg;
      cfg.step = plan::StepKind::kSynthetic;  // every optimizer: the stand-in step
      cfg.optimizer = k;
      cfg.batch = 2;
      const auto fp = plan::measure_training_footprint(name, cfg);
      EXPECT_EQ(fp.parameter_bytes, c.parameters);
      EXPECT_EQ(fp.buffer_bytes, c.buffers);
      // The construction scope holds exactly the module's tensors.
      EXPECT_EQ(fp.construction_live_bytes, c.parameters + c.buffers);
      // Measured .grad bytes: exactly the trainable parameters.
      EXPECT_EQ(fp.gradient_bytes, c.trainable);
      EXPECT_EQ(fp.optimizer_bytes, expected_state(k, c.trainable));
      // Nothing else stays resident after a real step.
      EXPECT_EQ(fp.fixed_bytes,
                c.parameters + c.buffers + c.trainable + expected_state(k, c.trainable));
      EXPECT_EQ(fp.leaked_bytes, 0u);
      EXPECT_TRUE(fp.matches_closed_form());
      EXPECT_GT(fp.activation_bytes, 0u);
      EXPECT_EQ(fp.peak_bytes, fp.fixed_bytes + std::max(fp.activation_bytes, fp.step_bytes));
      // Everything is freed with the model.
      EXPECT_EQ(memory::live_bytes(), live0);
    }
  }
}

TEST_F(FootprintTest, ActivationsArePositiveAndGrowWithBatch) {
  for (const auto& name : models::model_names()) {
    SCOPED_TRACE(name);
    plan::TrainConfig synthetic;
    synthetic.step = plan::StepKind::kSynthetic;  // keeps the batch alive through the step
    plan::TrainingProbe probe(name, synthetic);
    const auto b1 = probe.probe(1);
    const auto b4 = probe.probe(4);
    const auto b16 = probe.probe(16);
    const std::uint64_t input16 = probe.footprint().input_bytes;
    EXPECT_GT(b1.activation_bytes, 0u);
    EXPECT_GT(b4.activation_bytes, b1.activation_bytes);
    EXPECT_GT(b16.activation_bytes, b4.activation_bytes);
    // The inputs alone are part of the activations.
    EXPECT_GE(b16.activation_bytes, input16);
    // During optimizer.step() only the batch (alive, as in a training loop) grows with b: at
    // least the 12 more samples of inputs, and less than the forward+backward growth.
    EXPECT_GE(b16.step_bytes - b4.step_bytes, input16 / 16 * 12);
    EXPECT_LT(b16.step_bytes - b4.step_bytes, b16.activation_bytes - b4.activation_bytes);
    // Repeating a probe is deterministic.
    EXPECT_EQ(probe.probe(4).activation_bytes, b4.activation_bytes);
  }
}

TEST_F(FootprintTest, TagsAreAttributedToModelScopes) {
  const auto before = memory::scope_stats("dqn/optimizer").alloc_count;
  plan::TrainConfig cfg;
  cfg.batch = 3;
  const auto fp = plan::measure_training_footprint("dqn", cfg);
  EXPECT_GT(memory::scope_stats("dqn/optimizer").alloc_count, before);
  const auto j = fp.to_json();
  EXPECT_EQ(j["tags"]["dqn/optimizer"], fp.optimizer_bytes);
  EXPECT_EQ(j["tags"]["dqn/gradients"], fp.gradient_bytes);
  EXPECT_EQ(j["tags"]["dqn/activations"], fp.activation_bytes);
  EXPECT_TRUE(j["matches_closed_form"].get<bool>());
  EXPECT_EQ(j["config"]["optimizer"], "adam");
  // dqn has no time axis: the window is ignored.
  EXPECT_EQ(fp.seq_len, 0);
}

TEST_F(FootprintTest, SequenceModelsUseTheAskedWindow) {
  for (const auto& name : models::model_names()) {
    auto m = models::make_model(name);
    if (m->default_seq_len() == 0) continue;
    SCOPED_TRACE(name);
    plan::TrainConfig shorter;
    shorter.batch = 2;
    shorter.seq_len = std::max<std::int64_t>(4, m->default_seq_len() / 2);
    plan::TrainConfig dflt = shorter;
    dflt.seq_len = 0;
    const auto a = plan::measure_training_footprint(name, shorter);
    const auto b = plan::measure_training_footprint(name, dflt);
    EXPECT_EQ(a.seq_len, shorter.seq_len);
    EXPECT_EQ(b.seq_len, m->default_seq_len());
    EXPECT_LT(a.input_bytes, b.input_bytes);
    EXPECT_LT(a.activation_bytes, b.activation_bytes);
    EXPECT_EQ(a.fixed_bytes, b.fixed_bytes);
  }
}

TEST_F(FootprintTest, InferenceFootprintIsParametersPlusPeakActivations) {
  for (const auto& name : models::model_names()) {
    SCOPED_TRACE(name);
    const ClosedForm c = closed_form(name);
    const std::uint64_t live0 = memory::live_bytes();
    const auto fp = plan::measure_inference_footprint(name, {1, 32});
    EXPECT_EQ(memory::live_bytes(), live0);
    EXPECT_EQ(fp.parameter_bytes, c.parameters);
    EXPECT_EQ(fp.buffer_bytes, c.buffers);
    EXPECT_EQ(fp.construction_live_bytes, c.parameters + c.buffers);
    ASSERT_EQ(fp.runs.size(), 2u);
    EXPECT_EQ(fp.runs[0].batch, 1);
    EXPECT_EQ(fp.runs[1].batch, 32);
    EXPECT_GT(fp.runs[0].activation_bytes, 0u);
    EXPECT_GT(fp.runs[1].activation_bytes, fp.runs[0].activation_bytes);
    EXPECT_GE(fp.runs[1].activation_bytes, fp.runs[1].input_bytes);
    EXPECT_EQ(fp.runs[1].input_bytes, 32 * fp.runs[0].input_bytes);
    for (const auto& r : fp.runs)
      EXPECT_EQ(r.total_bytes, c.parameters + c.buffers + fp.derived_bytes + r.activation_bytes);
    // What serving keeps beyond the weights: the MLPs' transposed weights, each layer's
    // [in, out rounded up to 16 lanes] in float32 (lean.h); the TFT's folded selection layers.
    if (name == "dqn" || name == "ppo") {
      std::uint64_t transposed = 0;
      for (const auto& p : fp_model_weights(name))
        transposed += static_cast<std::uint64_t>(p[1] * ((p[0] + 15) / 16 * 16)) * sizeof(float);
      EXPECT_EQ(fp.derived_bytes, transposed);
    } else if (name == "tft") {
      EXPECT_GT(fp.derived_bytes, 0u);
    }
    EXPECT_EQ(fp.peak_total_bytes(), fp.runs[1].total_bytes);
    // Inference keeps no graph: far less than the training step at the same batch.
    plan::TrainConfig cfg;
    cfg.batch = 32;
    cfg.step = plan::StepKind::kSynthetic;
    cfg.optimizer = OptimizerKind::kSgd;
    const auto train = plan::measure_training_footprint(name, cfg);
    EXPECT_LT(fp.runs[1].activation_bytes, train.activation_bytes);
  }
}

TEST_F(FootprintTest, BadConfigsAreInputErrors) {
  EXPECT_THROW(plan::parse_optimizer("rmsprop"), InputError);
  for (const char* n : {"adam", "adamw", "sgd", "sgd-momentum"})
    EXPECT_EQ(plan::to_string(plan::parse_optimizer(n)), n);
  plan::TrainConfig cfg;
  cfg.batch = 0;
  EXPECT_THROW(plan::measure_training_footprint("dqn", cfg), InputError);
  cfg.batch = 1;
  cfg.seq_len = -1;
  EXPECT_THROW(plan::measure_training_footprint("dqn", cfg), InputError);
  EXPECT_THROW(plan::measure_training_footprint("nosuchmodel", plan::TrainConfig{}), InputError);
  EXPECT_THROW(plan::measure_inference_footprint("dqn", {}), InputError);
  EXPECT_THROW(plan::measure_inference_footprint("dqn", {0}), InputError);
}

TEST(TrainingFootprintTest, DataParallelRanksAlsoHoldTheAllReduceBuckets) {
  // A rank of a data-parallel run keeps one flat copy of the trainable parameters for the
  // gradient all-reduce (dist/gradient_sync.h): measured under M/comm_buckets, in the fixed bytes.
  plan::TrainConfig one;
  one.batch = 2;
  plan::TrainConfig two = one;
  two.world_size = 2;
  const auto a = plan::measure_training_footprint("ppo", one);
  const auto b = plan::measure_training_footprint("ppo", two);
  EXPECT_EQ(a.comm_bucket_bytes, 0u);
  // One flat copy of the trainable parameters and the float32 sample-weight element.
  EXPECT_EQ(b.comm_bucket_bytes, b.trainable_parameter_bytes + 4);
  EXPECT_EQ(b.expected_comm_bucket_bytes, b.trainable_parameter_bytes + 4);
  EXPECT_EQ(b.fixed_bytes, a.fixed_bytes + b.comm_bucket_bytes);
  EXPECT_EQ(b.leaked_bytes, 0u);
  EXPECT_TRUE(b.matches_closed_form());
  EXPECT_EQ(b.to_json()["tags"]["ppo/comm_buckets"], b.comm_bucket_bytes);
  EXPECT_EQ(b.to_json()["config"]["world_size"], 2);
  two.world_size = 0;
  EXPECT_THROW(plan::measure_training_footprint("ppo", two), InputError);
}

}  // namespace
}  // namespace foxhunt
