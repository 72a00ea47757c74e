// Batch planner: the fit predicts the verified peak, the plan trains under the cap and is tight
// (twice the batch does not fit), SGD plans at least the Adam batch, and a budget too small for
// batch 1 fails with the largest tag named. Budgets are sized per model from a quick unverified
// fit so that the chosen batches stay around 16-32 samples (fast on 2 cores).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/planner.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using plan::OptimizerKind;

// The synthetic training step of footprint.h (StepKind::kSynthetic), written out here independently
// of the library: build, Adam/SGD, then two steps of zero_grad(set_to_none=false), loss, backward,
// step. Returns true when it completes under a cap of live + budget, false on
// foxhunt::OutOfMemoryError.
bool trains_under_cap(const std::string& name, OptimizerKind kind, std::int64_t seq_len,
                      std::int64_t batch, std::uint64_t budget) {
  const std::uint64_t base = memory::live_bytes();
  bool ok = true;
  {
    memory::LimitGuard cap(base + budget);
    try {
      memory::translate_oom([&] {
        torch::manual_seed(42);
        auto m = models::make_model(name);
        m->module().train();
        std::vector<torch::Tensor> params;
        for (const auto& p : m->module().parameters())
          if (p.requires_grad()) params.push_back(p);
        std::unique_ptr<torch::optim::Optimizer> opt;
        if (kind == OptimizerKind::kAdam)
          opt = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-3));
        else
          opt = std::make_unique<torch::optim::SGD>(params, torch::optim::SGDOptions(1e-3));
        for (int i = 0; i < 2; ++i) {
          opt->zero_grad(false);
          auto b = m->example_batch(batch, seq_len, torch::kCPU, 42);
          auto loss = m->loss(b);
          loss.backward();
          opt->step();
        }
      });
    } catch (const OutOfMemoryError&) {
      ok = false;
    }
  }
  EXPECT_EQ(memory::get_limit(), 0u) << "the cap must be restored";
  EXPECT_EQ(memory::live_bytes(), base) << "everything must be freed after " << name << " batch "
                                        << batch << " budget " << budget << " ok " << ok;
  return ok;
}

// Window lengths to test: the default and a shorter one for sequence models; two values that
// must be ignored for models without a time axis.
std::vector<std::int64_t> seq_lens_for(const std::string& name) {
  auto m = models::make_model(name);
  if (m->default_seq_len() == 0) return {0, 16};
  return {0, std::max<std::int64_t>(8, m->default_seq_len() / 2)};
}

// A budget where the unverified prediction allows ~24 samples with margin 0.
std::uint64_t budget_for(const std::string& name, std::int64_t seq_len, OptimizerKind kind) {
  plan::PlanOptions o;
  o.model = name;
  o.train.step = plan::StepKind::kSynthetic;  // the step trains_under_cap writes out
  o.train.optimizer = kind;
  o.train.seq_len = seq_len;
  o.budget = memory::Budget::of_bytes(std::uint64_t{1} << 34);
  o.verify = false;
  const auto r = plan::plan_batch(o);
  EXPECT_GT(r.fit_c, 0.0) << name;
  // At 24 samples the step line can still be above the forward+backward line: take the larger.
  return std::max(r.predict(24), static_cast<std::uint64_t>(r.fit_a + 24.0 * r.fit_c));
}

class PlannerTest : public testing::SeededTest {};

// One instance per registered model (every registry name), so each runs as its own ctest case.
class PlannerModelTest : public PlannerTest, public ::testing::WithParamInterface<std::string> {};

TEST_P(PlannerModelTest, FitPredictsVerifiedPeakAndPlanIsTight) {
  const std::string name = GetParam();
  const bool has_time = models::make_model(name)->default_seq_len() > 0;
  for (const auto seq : seq_lens_for(name)) {
    for (const bool pow2 : {false, true}) {
      SCOPED_TRACE(name + " seq_len=" + std::to_string(seq) + (pow2 ? " pow2" : ""));
      const std::uint64_t budget = budget_for(name, seq, OptimizerKind::kAdam);
      plan::PlanOptions o;
      o.model = name;
      o.train.step = plan::StepKind::kSynthetic;
      o.train.seq_len = seq;
      o.budget = memory::Budget::of_bytes(budget);
      o.margin = 0.0;
      o.pow2 = pow2;
      const auto r = plan::plan_batch(o);
      ASSERT_TRUE(r.verified);
      EXPECT_EQ(r.has_time_axis, has_time);
      if (!has_time) {
        EXPECT_EQ(r.seq_len, 0) << "the window must be ignored";
      }
      if (has_time && seq > 0) {
        EXPECT_EQ(r.seq_len, seq);
      }
      EXPECT_GE(r.chosen_batch, 8);
      if (pow2) {
        EXPECT_EQ(r.chosen_batch & (r.chosen_batch - 1), 0);
      }
      // The fitted prediction is within 10% of the verified peak.
      EXPECT_LE(std::abs(r.predicted_error_pct()), 10.0)
          << "predicted " << r.predicted_peak_bytes << " verified " << r.verified_peak_bytes;
      EXPECT_LE(r.verified_peak_bytes, budget);
      EXPECT_LE(r.predicted_peak_bytes, budget);
      // The chosen batch trains under the cap (independent step), twice the batch does not:
      // the plan is tight, not timid.
      EXPECT_TRUE(trains_under_cap(name, OptimizerKind::kAdam, seq, r.chosen_batch, budget));
      EXPECT_FALSE(trains_under_cap(name, OptimizerKind::kAdam, seq, 2 * r.chosen_batch, budget));
      // The library's own verification agrees.
      EXPECT_FALSE(plan::verify_batch(name, r.train, 2 * r.chosen_batch, budget).ok);
    }
  }
}

TEST_P(PlannerModelTest, SgdAllowsAtLeastTheAdamBatch) {
  const std::string name = GetParam();
  const std::uint64_t budget = budget_for(name, 0, OptimizerKind::kAdam);
  plan::PlanOptions o;
  o.model = name;
  o.train.step = plan::StepKind::kSynthetic;  // other optimizers than adam: the stand-in step
  o.budget = memory::Budget::of_bytes(budget);
  o.margin = 0.0;
  const auto adam = plan::plan_batch(o);
  o.train.optimizer = OptimizerKind::kSgd;
  const auto sgd = plan::plan_batch(o);
  ASSERT_TRUE(adam.verified && sgd.verified);
  EXPECT_GE(sgd.chosen_batch, adam.chosen_batch);
  EXPECT_LT(sgd.fixed.fixed_bytes, adam.fixed.fixed_bytes);
  EXPECT_EQ(sgd.fixed.optimizer_bytes, 0u);
  EXPECT_TRUE(trains_under_cap(name, OptimizerKind::kSgd, 0, sgd.chosen_batch, budget));
}

INSTANTIATE_TEST_SUITE_P(Registry, PlannerModelTest, ::testing::ValuesIn(models::model_names()),
                         [](const auto& info) { return info.param; });

TEST_F(PlannerTest, MaxBatchClampIsReported) {
  plan::PlanOptions o;
  o.model = "dqn";
  o.budget = memory::Budget::of_bytes(64ull << 20);    // 64 MiB: far more than 100 dqn samples need
  o.train.trainer_options = {{"buffer_size", 10000}};  // a 20.6 MB replay buffer of it
  o.max_batch = 100;
  const auto r = plan::plan_batch(o);
  EXPECT_EQ(r.chosen_batch, 100);
  EXPECT_EQ(r.limited_by, "max-batch clamp");
  EXPECT_GT(r.budget_batch, 100);
  EXPECT_NE(r.report().find("max_batch 100 stops it"), std::string::npos) << r.report();
  o.pow2 = true;
  const auto p = plan::plan_batch(o);
  EXPECT_EQ(p.chosen_batch, 64);
  EXPECT_EQ(p.limited_by, "power-of-two rounding");
}

TEST_F(PlannerTest, BudgetTooSmallForBatchOneNamesTheLargestTag) {
  for (const auto& name : models::model_names()) {
    SCOPED_TRACE(name);
    plan::PlanOptions o;
    o.model = name;
    o.budget = memory::Budget::of_bytes(10 * 1024);
    plan::TrainConfig cfg;
    cfg.batch = 1;
    const auto fp = plan::measure_training_footprint(name, cfg);
    try {
      plan::plan_batch(o);
      FAIL() << "expected a PlanError";
    } catch (const plan::PlanError& e) {
      EXPECT_EQ(e.tag().rfind(name + "/", 0), 0u) << e.tag();
      // The largest tag is at least every fixed tag measured independently.
      EXPECT_GE(e.tag_bytes(), fp.parameter_bytes);
      EXPECT_GE(e.tag_bytes(), fp.optimizer_bytes);
      EXPECT_GT(e.tag_bytes(), o.budget.bytes / 2);
      EXPECT_GT(e.requested(), o.budget.bytes);
      const std::string what = e.what();
      EXPECT_NE(what.find(e.tag()), std::string::npos) << what;
      EXPECT_NE(what.find(std::to_string(e.tag_bytes()) + " B"), std::string::npos) << what;
    }
  }
  EXPECT_EQ(memory::get_limit(), 0u);
}

TEST_F(PlannerTest, VerifyUnderCapRefusesAndRestores) {
  const std::uint64_t live0 = memory::live_bytes();
  plan::TrainConfig cfg;
  const auto a = plan::verify_batch("ppo", cfg, 4096, 1 << 20);
  EXPECT_FALSE(a.ok);
  EXPECT_NE(a.error.find("out of memory"), std::string::npos) << a.error;
  EXPECT_LE(a.peak_bytes, std::uint64_t{1} << 20);
  EXPECT_EQ(memory::get_limit(), 0u);
  EXPECT_EQ(memory::live_bytes(), live0);
  // The same model trains fine afterwards.
  const auto ok = plan::verify_batch("ppo", cfg, 4, 64 << 20);
  EXPECT_TRUE(ok.ok) << ok.error;
  EXPECT_GT(ok.peak_bytes, 0u);
}

TEST_F(PlannerTest, BadOptionsAreInputErrors) {
  plan::PlanOptions o;
  o.budget = memory::Budget::of_bytes(1 << 20);
  o.margin = 1.0;
  EXPECT_THROW(plan::plan_batch(o), InputError);
  o.margin = 0.1;
  o.min_batch = 0;
  EXPECT_THROW(plan::plan_batch(o), InputError);
  o.min_batch = 8;
  o.max_batch = 4;
  EXPECT_THROW(plan::plan_batch(o), InputError);
  o.max_batch = 16;
  o.probe_batches = {4, 4};
  EXPECT_THROW(plan::plan_batch(o), InputError);
  o.probe_batches = {1, 2};
  o.budget = memory::Budget::of_bytes(0);
  EXPECT_THROW(plan::plan_batch(o), InputError);
}

TEST(PlannerCliTest, TinyBudgetExits1NamingTheTag) {
  auto r = testing::run_cli("plan dqn --budget-mib 0.01");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("does not fit"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("largest tag dqn/"), std::string::npos) << r.err;
  auto j = testing::run_cli("plan dqn --budget-mib 0.01 --json");
  EXPECT_EQ(j.exit_code, 1);
  const auto doc = nlohmann::json::parse(j.out);
  EXPECT_FALSE(doc["ok"].get<bool>());
  EXPECT_EQ(doc["tag"].get<std::string>().rfind("dqn/", 0), 0u);
  EXPECT_GT(doc["tag_bytes"].get<std::uint64_t>(), 0u);
}

TEST(PlannerCliTest, JsonPlanOnSmallBudget) {
  const auto j = testing::run_cli_json(
      "plan ppo --budget-mib 8 --step synthetic --optimizer sgd-momentum --pow2 --json", 0);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_TRUE(j["verified"].get<bool>());
  EXPECT_EQ(j["optimizer"], "sgd-momentum");
  const auto b = j["chosen_batch"].get<std::int64_t>();
  EXPECT_GT(b, 0);
  EXPECT_EQ(b & (b - 1), 0);
  EXPECT_LE(j["verified_peak_bytes"].get<std::uint64_t>(), 8u << 20);
  EXPECT_EQ(j["fixed"]["optimizer_bytes"], j["fixed"]["trainable_parameter_bytes"]);
}

TEST(PlannerCliTest, DefaultProfileSaysTheClampStopsDqn) {
  // On a 4 GB card the small dqn would take hundreds of thousands of samples: the clamp decides.
  auto r = testing::run_cli("plan dqn");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("rtx3050ti-4gb"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("chosen batch: 65536 (limited by max-batch clamp"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("max_batch 65536 stops it"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verified (real steps, cap)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("seq-len ignored"), std::string::npos) << r.out;
}

TEST(PlannerCliTest, BadArgumentsExit2) {
  for (const char* args : {"nosuchmodel --budget-mib 4", "dqn --optimizer rmsprop",
                           "dqn --budget-mib -1", "dqn --budget-mib 4 --device-profile t4-16gb",
                           "dqn --device-profile nosuchcard", "dqn --margin 1.5 --budget-mib 4"})
    EXPECT_EQ(testing::run_cli(std::string("plan ") + args).exit_code, 2) << args;
}

}  // namespace
}  // namespace foxhunt
