// The typed train summaries' JSON (summary.json, `train --json`): the keys each kind of run
// writes, null for what is missing or non-finite, integers kept integers, and the text form.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "foxhunt/jobs/train_summary.h"

namespace foxhunt::jobs {
namespace {

std::set<std::string> keys(const nlohmann::json& j) {
  std::set<std::string> k;
  for (const auto& [key, value] : j.items()) k.insert(key);
  return k;
}

TrainSummary rl_summary() {
  TrainSummary s;
  s.model = "dqn";
  s.env = "cartpole";
  s.steps = s.total_steps = 1000;
  s.episodes = 17;
  s.completed = true;
  s.seconds = 2.5;
  s.checkpoint = "out/dqn/checkpoint.ckpt";
  s.metrics_file = "out/dqn/metrics.jsonl";
  s.metrics = {{"return_mean", 21.5}};
  s.options = {{"batch_size", 64}};
  return s;
}

TEST(TrainSummaryTest, RlKeysAndTypes) {
  auto s = rl_summary();
  s.eval = PolicyEvaluation{.episodes = 5, .mean_return = 20.0, .min_return = 9, .max_return = 31};
  const auto j = to_json(s);
  const std::set<std::string> want = {
      "model",        "env",          "steps",      "total_steps",       "episodes",
      "completed",    "interrupted",  "seconds",    "checkpoint",        "metrics",
      "metrics_file", "resumed_from", "options",    "world_size",        "resumed_world_size",
      "bundle",       "eval",         "memory_cap", "enforced_cap_bytes"};
  EXPECT_EQ(keys(j), want);  // no compact_defaults for RL, no data on CartPole
  EXPECT_TRUE(j["steps"].is_number_integer());
  EXPECT_TRUE(j["seconds"].is_number_float());
  EXPECT_TRUE(j["resumed_from"].is_null());
  EXPECT_TRUE(j["resumed_world_size"].is_null());
  EXPECT_TRUE(j["bundle"].is_null());
  EXPECT_TRUE(j["memory_cap"].is_null());
  EXPECT_TRUE(j["enforced_cap_bytes"].is_null());
  EXPECT_EQ(j["eval"]["policy"], "greedy");
  EXPECT_TRUE(j["eval"]["episodes"].is_number_integer());
  EXPECT_EQ(j["eval"]["mean_return"].get<double>(), 20.0);
  const auto text = format_train_summary(s);
  EXPECT_NE(text.find("dqn on cartpole: 1000/1000 steps, 17 episodes"), std::string::npos) << text;
  EXPECT_NE(text.find("greedy evaluation: mean return 20 over 5 episodes"), std::string::npos);
}

TEST(TrainSummaryTest, ForecasterCapPlanAndDistributed) {
  TrainSummary s = rl_summary();
  s.model = "tft";
  s.env = "market";
  const auto bare = to_json(s);
  ASSERT_TRUE(bare.contains("compact_defaults"));  // forecasters always say
  EXPECT_TRUE(bare["compact_defaults"].is_null());
  s.compact_defaults.emplace().reason = "700 training bars < 5000";
  MarketDataInfo d;
  d.source = "bars.csv";
  d.bars = 1000;
  d.train = {0, 700};
  d.target_vol_selection_loss = std::map<std::string, double>{{"none", 0.5}, {"rv_20", NAN}};
  s.data = d;
  auto& plan = s.batch_plan.emplace();
  plan.chosen_batch = 128;
  plan.budget_bytes = 4096;
  auto& cap = s.memory_cap.emplace();
  cap.enforced_cap_bytes = 5000;
  cap.enforced_on = "cpu";
  cap.run_peak_bytes = 4000;
  s.world_size = 2;
  s.distributed = {{"world_size", 2}, {"last_weight_check", {{"identical", true}}}};
  s.samples_per_s_all_ranks = 100.0;
  ForecastTestEvaluation e;
  e.windows = 140;
  e.loss = 0.5;
  e.baseline_loss = NAN;
  s.eval = e;
  s.bundle = "out/tft/bundle.fhb";
  const auto j = to_json(s);
  EXPECT_EQ(j["compact_defaults"]["reason"], "700 training bars < 5000");
  EXPECT_EQ(j["data"]["train"], nlohmann::json({0, 700}));
  EXPECT_TRUE(j["data"]["target_vol_selection_loss"]["rv_20"].is_null());
  EXPECT_EQ(j["batch_plan"]["chosen_batch"].get<int64_t>(), 128);
  // A capped run's plan carries the cap and the run's peak.
  EXPECT_EQ(j["batch_plan"]["enforced_cap_bytes"].get<uint64_t>(), 5000u);
  EXPECT_EQ(j["batch_plan"]["enforced_on"], "cpu");
  EXPECT_EQ(j["batch_plan"]["run_peak_bytes"].get<uint64_t>(), 4000u);
  EXPECT_EQ(j["enforced_cap_bytes"].get<uint64_t>(), 5000u);
  EXPECT_EQ(j["memory_cap"]["enforced_on"], "cpu");
  EXPECT_EQ(j["weight_checksum"], nlohmann::json({{"identical", true}}));
  EXPECT_EQ(j["samples_per_s_all_ranks"].get<double>(), 100.0);
  EXPECT_EQ(j["eval"]["split"], "test");
  EXPECT_EQ(j["eval"]["loss"].get<double>(), 0.5);
  EXPECT_TRUE(j["eval"]["baseline_loss"].is_null());  // NaN
  EXPECT_TRUE(j["eval"]["skill"].is_null());
  EXPECT_TRUE(j["eval"]["next_bar"].is_null());
  EXPECT_EQ(j["bundle"], "out/tft/bundle.fhb");
  const auto text = format_train_summary(s);
  EXPECT_NE(text.find("tft on market"), std::string::npos) << text;
  EXPECT_NE(text.find("test loss 0.5 vs unconditional baseline nan over 140 windows"),
            std::string::npos)
      << text;
}

TEST(TrainSummaryTest, TrainAll) {
  TrainAllSummary all;
  all.out = "out/ensemble";
  all.models["dqn"] = rl_summary();
  all.bundles = {"out/ensemble/dqn/bundle.fhb"};
  all.interrupted = true;
  const auto j = to_json(all);
  EXPECT_EQ(keys(j), (std::set<std::string>{"out", "models", "bundles", "interrupted", "complete",
                                            "rule", "rule_fit"}));
  EXPECT_EQ(j["models"]["dqn"], to_json(all.models["dqn"]));
  EXPECT_EQ(j["bundles"], nlohmann::json({"out/ensemble/dqn/bundle.fhb"}));
  EXPECT_FALSE(j["complete"].get<bool>());
  EXPECT_NE(format_train_summary(all).find("bundles (1) in out/ensemble\n"), std::string::npos);
  // The fitted rule's line and weights; a failed fit says the built-in rule applies.
  all.rule = "out/ensemble/rule.json";
  all.rule_fit = {{"bars", 186},
                  {"sharpe_equal", 0.5},
                  {"sharpe_best", 1.25},
                  {"sharpe_fitted", 0.75},
                  {"weights", {{"dqn", 1.7}, {"tft", 0.3}}},
                  {"cost_bps", 1.5},
                  {"costs", {{"spread_bps", 2.0}, {"fee_bps", 0.25}, {"fee_per_contract", 0.0}}}};
  const auto text = format_train_summary(all);
  // The costs the rule was fitted at, every term by its name.
  EXPECT_NE(text.find("  costs: cost_bps 1.5, fee_bps 0.25, fee_per_contract 0, spread_bps 2 "
                      "(backtest at the same costs)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("weights fitted on 186 validation bars (Sharpe after costs: equal 0.50, "
                      "best 1.25, written 0.75"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  weights: dqn 1.70 tft 0.30\n"), std::string::npos) << text;
  all.rule.clear();
  all.rule_fit = {{"error", "too few bars"}};
  EXPECT_NE(format_train_summary(all).find("not fitted (too few bars); the built-in rule applies"),
            std::string::npos);
}

}  // namespace
}  // namespace foxhunt::jobs
