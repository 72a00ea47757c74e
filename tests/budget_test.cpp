// Budget validator: measured footprints against targets, the device budget and the headroom;
// CLI exit codes (0 pass, 1 fail, 2 bad input) and JSON-only output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "foxhunt/core/file_io.h"
#include "foxhunt/core/units.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/tft_int8.h"
#include "foxhunt/plan/budget.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using foxhunt::kMiB;

class BudgetTest : public testing::SeededTest {};

TEST_F(BudgetTest, DefaultProfilePassesWithMeasuredRows) {
  const std::uint64_t live0 = memory::live_bytes();
  const auto rep = plan::validate_budget(plan::BudgetOptions{});
  EXPECT_EQ(memory::live_bytes(), live0);
  EXPECT_TRUE(rep.ok) << rep.table();
  EXPECT_EQ(rep.budget_bytes, memory::find_profile("rtx3050ti-4gb").usable_bytes());
  ASSERT_EQ(rep.rows.size(), models::model_names().size());
  std::uint64_t total = 0;
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const auto& r = rep.rows[i];
    SCOPED_TRACE(r.model);
    EXPECT_EQ(r.model, models::model_names()[i]);
    auto m = models::make_model(r.model);
    EXPECT_EQ(r.footprint.parameter_bytes, static_cast<std::uint64_t>(m->parameter_bytes()));
    ASSERT_EQ(r.footprint.runs.size(), 2u);
    EXPECT_EQ(r.footprint.runs[1].batch, 64);
    EXPECT_GT(r.footprint.runs[1].activation_bytes, r.footprint.runs[0].activation_bytes);
    EXPECT_EQ(r.memory_bytes, r.footprint.parameter_bytes + r.footprint.buffer_bytes +
                                  r.footprint.runs[1].activation_bytes);
    EXPECT_EQ(r.target_bytes, plan::default_targets().at(r.model));
    EXPECT_NEAR(r.pct_of_target, 100.0 * r.memory_bytes / r.target_bytes, 1e-9);
    EXPECT_EQ(r.status, "PASS");
    total += r.memory_bytes;
  }
  EXPECT_EQ(rep.total_bytes, total);
  EXPECT_EQ(rep.headroom_bytes, static_cast<std::int64_t>(rep.budget_bytes - total));
  EXPECT_TRUE(rep.headroom_ok);
  const std::string table = rep.table();
  for (const char* col :
       {"model", "memory", "target", "% budget", "% target", "status", "total", "headroom"})
    EXPECT_NE(table.find(col), std::string::npos) << col;
}

TEST_F(BudgetTest, OverTargetOverBudgetAndHeadroomFail) {
  plan::BudgetOptions o;
  o.targets["ppo"] = 1000;  // 1000 bytes: ppo's parameters alone are ~323 KiB
  auto rep = plan::validate_budget(o);
  EXPECT_FALSE(rep.ok);
  for (const auto& r : rep.rows) {
    EXPECT_EQ(r.ok, r.model != "ppo") << r.model;
    if (r.model == "ppo") {
      EXPECT_EQ(r.status, "FAIL: over target");
    }
  }
  EXPECT_TRUE(rep.headroom_ok);

  plan::BudgetOptions tiny;
  tiny.budget = memory::Budget::of_bytes(100 * 1024);
  rep = plan::validate_budget(tiny);
  EXPECT_FALSE(rep.ok);
  EXPECT_FALSE(rep.total_within_budget);
  EXPECT_FALSE(rep.headroom_ok);
  EXPECT_LT(rep.headroom_bytes, 0);
  for (const auto& r : rep.rows) EXPECT_EQ(r.within_budget, r.memory_bytes <= 100 * 1024);

  plan::BudgetOptions greedy;
  greedy.headroom_bytes = 1ull << 40;
  rep = plan::validate_budget(greedy);
  EXPECT_FALSE(rep.ok);
  EXPECT_FALSE(rep.headroom_ok);
  EXPECT_TRUE(rep.total_within_budget);
}

TEST_F(BudgetTest, CudaTargetsDifferOnlyWhereNoFusedKernelRuns) {
  const Device cuda = Device::cuda(0);
  const auto cpu_t = plan::default_targets();
  const auto gpu_t = plan::default_targets(cuda);
  ASSERT_EQ(cpu_t.size(), gpu_t.size());
  for (const auto& [name, bytes] : cpu_t)
    if (name == "mamba2")
      EXPECT_EQ(gpu_t.at(name), 31 * kMiB);
    else
      EXPECT_EQ(gpu_t.at(name), bytes) << name;
  EXPECT_EQ(cpu_t.at("mamba2"), 11 * kMiB);
}

TEST_F(BudgetTest, TargetsJsonIsValidated) {
  const auto base = plan::default_targets();
  auto t = plan::targets_from_json(nlohmann::json::parse(R"({"targets_mib": {"ppo": 12.5}})"), "t",
                                   base);
  EXPECT_EQ(t.at("ppo"), static_cast<std::uint64_t>(12.5 * kMiB));
  EXPECT_EQ(t.at("dqn"), 1 * kMiB);
  t = plan::targets_from_json(nlohmann::json::parse(R"({"targets_bytes": {"dqn": 4096}})"), "t",
                              base);
  EXPECT_EQ(t.at("dqn"), 4096u);
  for (const char* bad :
       {R"([1, 2])", R"({"targets_mib": {"dqn": 1}, "targets_bytes": {}})", R"({})",
        R"({"targets": {"dqn": 1}})", R"({"targets_mib": [1]})", R"({"targets_mib": {"lstm": 1}})",
        R"({"targets_mib": {"dqn": "1"}})", R"({"targets_mib": {"dqn": 0}})",
        R"({"targets_mib": {"dqn": -3}})", R"({"targets_bytes": {"dqn": 0.2}})"}) {
    SCOPED_TRACE(bad);
    try {
      plan::targets_from_json(nlohmann::json::parse(bad), "file.json", base);
      ADD_FAILURE() << "expected an InputError";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("file.json"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(plan::load_targets("/nonexistent/targets.json"), InputError);
}

TEST(BudgetCliTest, DefaultProfileExits0WithJsonOnly) {
  auto r = testing::run_cli("budget --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);  // the whole stdout is one JSON document
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["models"].size(), models::model_names().size());
  EXPECT_EQ(j["headroom_required_bytes"], 500 * kMiB);
  EXPECT_TRUE(j["headroom_ok"].get<bool>());
  // The CPU ledger measures uncapped; the GPU-only tags are not measured there.
  EXPECT_EQ(j["device"], "cpu");
  EXPECT_EQ(j["enforced_cap_bytes"], 0);
  EXPECT_FALSE(j["device_overheads"]["measured"].get<bool>());
  EXPECT_EQ(j["device_overheads"]["profile_reserve_bytes"],
            memory::find_profile("rtx3050ti-4gb").reserve_bytes);
  for (const auto& m : j["models"]) EXPECT_EQ(m["footprint"]["device"], "cpu");
  auto text = testing::run_cli("budget");
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("budget: PASS"), std::string::npos) << text.out;
}

TEST(BudgetCliTest, TinyBudgetExits1AndMarksModels) {
  const auto j = testing::run_cli_json("budget --budget-mib 0.1 --json", 1);
  EXPECT_FALSE(j["ok"].get<bool>());
  EXPECT_FALSE(j["total_within_budget"].get<bool>());
  int failing = 0;
  for (const auto& m : j["models"]) {
    if (!m["ok"].get<bool>()) {
      ++failing;
      EXPECT_NE(m["status"].get<std::string>().find("over budget"), std::string::npos);
    }
  }
  EXPECT_GT(failing, 0);
}

TEST(BudgetCliTest, TinyTargetExits1MarkingThatModel) {
  testing::TempDir dir;
  const auto path = dir.file("targets.json");
  write_file_atomic(path, R"({"targets_mib": {"dqn": 0.001}})");
  auto r = testing::run_cli("budget --json --targets " + path);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["ok"].get<bool>());
  for (const auto& m : j["models"]) {
    const bool is_dqn = m["model"] == "dqn";
    EXPECT_EQ(m["ok"].get<bool>(), !is_dqn) << m.dump();
    if (is_dqn) {
      EXPECT_EQ(m["status"], "FAIL: over target");
    }
  }
  EXPECT_TRUE(j["headroom_ok"].get<bool>());
}

TEST(BudgetCliTest, BadInputExits2) {
  testing::TempDir dir;
  const auto bad_json = dir.file("bad.json");
  write_file_atomic(bad_json, "{\"targets_mib\": ");
  auto r = testing::run_cli("budget --json --targets " + bad_json);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("bad.json"), std::string::npos) << r.err;
  const auto unknown = dir.file("unknown.json");
  write_file_atomic(unknown, R"({"targets_mib": {"gpt": 10}})");
  r = testing::run_cli("budget --targets " + unknown);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("gpt"), std::string::npos) << r.err;
  for (const std::string& args :
       {"--targets " + dir.file("missing.json"), std::string("--budget-mib -5"),
        std::string("--headroom-mib -1"), std::string("--device-profile nosuchcard"),
        std::string("--serving-batch 0"), std::string("--device gpu")})
    EXPECT_EQ(testing::run_cli("budget " + args).exit_code, 2) << args;
}

TEST_F(BudgetTest, ThreeDeploymentViewsAreMeasuredAndCanFail) {
  plan::BudgetOptions o;
  o.headroom_bytes = 0;
  const auto rep = plan::validate_budget(o);
  ASSERT_EQ(rep.views.size(), 3u);
  EXPECT_EQ(rep.views[0].name, "serving");
  EXPECT_EQ(rep.views[1].name, "training");
  EXPECT_EQ(rep.views[2].name, "mixed");
  // All four resident at once: at least every model's weights, at most the sum of each model's
  // own peak (the forwards overlap, they do not add more than that).
  std::uint64_t weights = 0, largest_training = 0;
  for (const auto& r : rep.rows) {
    weights += r.footprint.parameter_bytes + r.footprint.buffer_bytes;
    largest_training = std::max(largest_training, r.training_peak_bytes);
    EXPECT_GT(r.training_peak_bytes, r.footprint.parameter_bytes) << r.model;
    EXPECT_GT(r.claimed_bytes, 0u) << r.model;
    EXPECT_NEAR(r.claimed_over_measured,
                static_cast<double>(r.claimed_bytes) / static_cast<double>(r.memory_bytes), 1e-9);
  }
  EXPECT_GT(rep.serving_concurrent_bytes, weights);
  EXPECT_LE(rep.serving_concurrent_bytes, rep.total_bytes + rep.total_bytes / 20);
  EXPECT_EQ(rep.views[0].bytes, rep.serving_concurrent_bytes);
  EXPECT_EQ(rep.views[1].bytes, largest_training);
  EXPECT_EQ(rep.views[2].bytes, rep.serving_concurrent_bytes + largest_training);
  EXPECT_TRUE(rep.ok);
  // A budget between the serving and the mixed peak: serving fits, mixed does not.
  o.budget = memory::Budget::of_bytes(rep.serving_concurrent_bytes + largest_training / 2);
  const auto tight = plan::validate_budget(o);
  ASSERT_EQ(tight.views.size(), 3u);
  EXPECT_FALSE(tight.views[2].ok);
  EXPECT_FALSE(tight.ok);
  EXPECT_NE(tight.table().find("view mixed"), std::string::npos);
  const auto j = tight.to_json();
  EXPECT_EQ(j.at("views").size(), 3u);
  EXPECT_EQ(j.at("reference_claims").at("total_bytes").get<std::uint64_t>(), 440 * kMiB);
}

TEST_F(BudgetTest, DefaultTargetsCanFail) {
  // Each default target is at most 4x what the model measures: a model that grows 4x fails.
  plan::BudgetOptions o;
  o.deployment_views = false;
  const auto rep = plan::validate_budget(o);
  for (const auto& r : rep.rows) {
    EXPECT_TRUE(r.within_target) << r.model;
    EXPECT_LE(r.target_bytes, 4 * r.memory_bytes) << r.model;
  }
}

}  // namespace
}  // namespace foxhunt

namespace foxhunt {
namespace {

// --precision tft=int8 measures the INT8 TFT: its resident bytes are the layout's closed form,
// far below the FP32 row; other models are unchanged; a precision a model lacks is an input error.
TEST(BudgetPrecisionTest, Int8TftIsMeasuredInItsLayout) {
  plan::BudgetOptions o;
  o.deployment_views = false;
  const auto fp32 = plan::validate_budget(o);
  o.precision = plan::parse_precisions("tft=int8");
  const auto int8 = plan::validate_budget(o);
  ASSERT_EQ(fp32.rows.size(), int8.rows.size());
  for (size_t i = 0; i < int8.rows.size(); ++i) {
    const auto& a = fp32.rows[i];
    const auto& b = int8.rows[i];
    SCOPED_TRACE(b.model);
    if (b.model != "tft") {
      EXPECT_EQ(b.precision, models::Precision::kFp32);
      EXPECT_EQ(a.footprint.parameter_bytes, b.footprint.parameter_bytes);
      continue;
    }
    EXPECT_EQ(b.precision, models::Precision::kInt8);
    EXPECT_EQ(b.footprint.parameter_bytes, 0u);
    EXPECT_EQ(
        b.footprint.buffer_bytes,
        static_cast<std::uint64_t>(models::int8_tft_layout(models::TftOptions()).total_bytes()));
    EXPECT_LT(b.footprint.buffer_bytes * 4, a.footprint.parameter_bytes);
    EXPECT_EQ(b.footprint.runs.size(), 2u);
  }
  EXPECT_EQ(int8.to_json()["precision"]["tft"], "int8");
  EXPECT_THROW(plan::parse_precisions("dqn=int8"), InputError);
  EXPECT_THROW(plan::parse_precisions("tft=int4"), InputError);
  EXPECT_THROW(plan::parse_precisions("tft"), InputError);
  EXPECT_THROW(plan::parse_precisions("nope=int8"), InputError);
  EXPECT_EQ(testing::run_cli("budget --precision tft=int4 --no-views").exit_code, 2);
}

}  // namespace
}  // namespace foxhunt
