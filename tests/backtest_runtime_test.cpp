// foxhunt backtest (serving/backtest.h): held-out bars only, no look-ahead, every strategy and
// forecaster scored, the report, the CLI's refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <sstream>

#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/harness/reports.h"
#include "foxhunt/harness/validate.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/backtest.h"
#include "foxhunt/serving/bundle.h"
#include "test_util.h"

namespace foxhunt::serving {
using namespace foxhunt::harness;
namespace {

using foxhunt::testing::input_error;
using foxhunt::testing::TempDir;

constexpr int64_t kTrainBars = 400;

data::BarSeries series(int64_t bars) {
  data::SyntheticOptions o;
  o.bars = bars;
  o.seed = 7;
  return data::generate_synthetic(o);
}

// Four untrained default models whose fingerprint says they were trained on the first
// kTrainBars bars of `s`.
std::vector<Bundle> bundles_for(const data::BarSeries& s) {
  data::BarSeries train = s;
  train.bars.resize(kTrainBars);
  data::MarketDataset ds(train);
  torch::manual_seed(3);
  std::vector<Bundle> out;
  for (const auto& name : models::model_names()) {
    Bundle b;
    b.model = std::shared_ptr<models::Model>(models::make_model(name));
    b.normalizer = ds.normalizer();
    b.data = fingerprint(train);
    out.push_back(b);
  }
  return out;
}

TEST(BacktestRun, ScoresOnlyBarsAfterTheTrainingData) {
  const auto s = series(800);
  std::ostringstream log;
  BacktestJob job;
  const auto run = run_backtest_on(bundles_for(s), s, job, log);
  EXPECT_EQ(run.skipped_training_bars, kTrainBars);
  EXPECT_EQ(run.warmup_bars, kTrainBars);  // every model is ready long before bar 400
  EXPECT_EQ(static_cast<int64_t>(run.closes.size()), 800 - kTrainBars);
  EXPECT_GT(run.first_timestamp, run.training_end);
  EXPECT_EQ(run.training_end, s.bars[kTrainBars - 1].timestamp);
  EXPECT_NE(log.str().find("warmed the state up"), std::string::npos);
  // Buy-and-hold is the price ratio less the entry cost (1 bp on the first bar).
  const auto& bh = run.results.at("buy_and_hold");
  const auto& c = run.closes;
  EXPECT_NEAR(bh.total_return, (c[1] / c[0] - 1e-4) * (c.back() / c[1]) - 1.0, 1e-12);
  const auto j = run.to_json();
  for (const char* strategy :
       {"ensemble", "dqn", "ppo", "mamba2", "tft", "buy_and_hold", "flat", "random"})
    for (const char* key : {"sharpe", "max_drawdown", "sortino", "turnover", "hit_rate"})
      EXPECT_TRUE(j.at("strategies").at(strategy).contains(key)) << strategy << " " << key;
  for (const char* f : {"mamba2", "tft"}) {
    const auto& e = j.at("forecasters").at(f);
    EXPECT_TRUE(e.at("skill").is_number()) << f;
    EXPECT_TRUE(e.at("coverage_p10_p90").is_number()) << f;
    EXPECT_EQ(e.at("points").get<size_t>(), run.closes.size() - 1);
  }
  EXPECT_EQ(j.at("strategies").at("flat").at("total_return").get<double>(), 0.0);
  // The forecasters take positions from their whole distribution (the median alone is ~0), and
  // a model without any position is listed as idle with its reason, and only then.
  for (const char* f : {"mamba2", "tft"}) EXPECT_GT(run.results.at(f).exposure, 0.0) << f;
  for (const char* m : {"dqn", "ppo", "mamba2", "tft"}) {
    const bool idle = run.results.at(m).exposure == 0.0;
    EXPECT_EQ(j.at("idle").contains(m), idle) << m;
    EXPECT_GT(j.at("strategies").at(m).at("max_abs_signal").get<double>(), 0.0) << m;
  }
  // The new baseline and statistics are in the JSON of every strategy.
  for (const char* key : {"sharpe_lo", "sharpe_hi", "prob_beats_buy_and_hold",
                          "break_even_cost_bps", "mean_return_per_bar", "sharpe_per_bar"})
    EXPECT_TRUE(j.at("strategies").at("vol_target").contains(key)) << key;
  EXPECT_TRUE(j.at("strategies").at("buy_and_hold").at("prob_beats_buy_and_hold").is_null());
  EXPECT_LE(j.at("strategies").at("ensemble").at("sharpe_lo").get<double>(),
            j.at("strategies").at("ensemble").at("sharpe").get<double>());
}

TEST(BacktestRun, NoLookAheadChangingLaterBarsChangesNoEarlierDecision) {
  const auto s = series(700);
  const auto bundles = bundles_for(s);
  std::ostringstream log;
  BacktestJob job;
  const auto a = run_backtest_on(bundles, s, job, log);
  auto changed = s;
  const size_t t = 560;  // bars after t get another path
  for (size_t i = t + 1; i < changed.bars.size(); ++i) {
    auto& b = changed.bars[i];
    const double f = 1.0 + 0.02 * std::sin(0.7 * static_cast<double>(i));
    b.open *= f;
    b.high *= f * 1.01;
    b.low *= f * 0.99;
    b.close *= f;
  }
  const auto b = run_backtest_on(bundles, changed, job, log);
  ASSERT_EQ(a.timestamps, b.timestamps);
  const int64_t t_time = s.bars[t].timestamp;
  bool later_differs = false;
  for (const auto& name : a.order) {
    const auto& pa = a.positions.at(name);
    const auto& pb = b.positions.at(name);
    for (size_t k = 0; k < pa.size(); ++k) {
      if (a.timestamps[k] <= t_time)
        ASSERT_EQ(pa[k], pb[k]) << name << " at scored bar " << k;
      else if (name != "buy_and_hold" && name != "flat" && name != "random")
        later_differs = later_differs || pa[k] != pb[k];
    }
  }
  for (const auto& [name, f] : a.forecasts)
    for (size_t k = 0; k < f.quantiles.size() && a.timestamps[k] <= t_time; ++k)
      ASSERT_EQ(f.quantiles[k], b.forecasts.at(name).quantiles[k]) << name << " bar " << k;
  EXPECT_TRUE(later_differs);  // the change did reach the models
}

TEST(BacktestRun, RefusesBarsInsideTheTrainingRange) {
  const auto s = series(700);
  const auto bundles = bundles_for(s);
  std::ostringstream log;
  BacktestJob job;
  job.from = std::to_string(s.bars[100].timestamp);
  EXPECT_NE(input_error([&] { run_backtest_on(bundles, s, job, log); }).find("inside the training"),
            std::string::npos);
  // Data that ends where training ended: nothing to score.
  auto only_training = s;
  only_training.bars.resize(kTrainBars);
  job.from.clear();
  EXPECT_NE(input_error([&] {
              run_backtest_on(bundles, only_training, job, log);
            }).find("after the training data"),
            std::string::npos);
  job.cost_bps = -1;
  EXPECT_NE(input_error([&] { run_backtest_on(bundles, s, job, log); }).find("cost_bps"),
            std::string::npos);
}

TEST(BacktestRun, ReportHoldsEveryPlot) {
  const auto s = series(650);
  std::ostringstream log;
  BacktestJob job;
  job.explain = true;
  const auto run = run_backtest_on(bundles_for(s), s, job, log);
  // The TFT explained every scored bar: selection weights sum to 1, attention over its window.
  ASSERT_EQ(run.explained_bars.size(), 1u);
  EXPECT_EQ(run.explained_bars.at("tft"), static_cast<int64_t>(run.closes.size()));
  const auto mean = run.explanation_mean("tft");
  double sum = 0;
  for (double w : mean.past_weights) sum += w;
  EXPECT_NEAR(sum, 1.0, 1e-5);
  EXPECT_EQ(mean.attention.size(), 60u);
  EXPECT_EQ(run.to_json()["explain"]["tft"]["past"].size(), 15u);
  HtmlReport page("backtest");
  add_backtest_sections(page, run);
  TempDir dir;
  const auto html = read_file(write_report(page, dir.file("r"), run.to_json(), "backtest.json"));
  for (const char* plot : {"Equity curves", "Drawdown", "Positions (exposure)", "forecast fan",
                           "calibration", "PIT histogram", "variable-selection weight",
                           "average attention", "95% interval", "break-even bps"})
    EXPECT_NE(html.find(plot), std::string::npos) << plot;
  size_t svgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  // Equity, drawdown, positions; a fan, a calibration and a PIT histogram per forecaster; the
  // TFT's variable importance and attention profile.
  EXPECT_EQ(svgs, 3u + 3u * 2u + 2u);
  EXPECT_NE(read_file(dir.file("r/report.md")).find("| strategy"), std::string::npos);
  const int rendered =
      foxhunt::testing::render_in_chromium(dir.file("r/report.html"), dir.file("r.png"));
  if (rendered == -1) GTEST_SKIP() << "chromium or python3 not installed: render not checked";
  EXPECT_EQ(rendered, 0) << "the backtest report rendered blank or failed in headless Chromium";
}

TEST(BacktestRun, CliRefusesMissingBundles) {
  TempDir dir;
  data::write_bars_csv(dir.file("bars.csv"), series(500));
  const auto r = foxhunt::testing::run_cli("backtest --bundles " + dir.file("none") + " --data " +
                                           dir.file("bars.csv"));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("dqn"), std::string::npos) << r.err;
}

TEST(BacktestRun, ValidateFailsWhenAForecasterIsWorseThanItsNaiveBaseline) {
  // Bundles whose forecasters have zeroed weights (every quantile 0): the backtest step of
  // `foxhunt validate` must fail on them.
  const auto s = series(700);
  auto bundles = bundles_for(s);
  TempDir dir;
  for (auto& b : bundles) {
    if (b.name() == "mamba2" || b.name() == "tft") {
      torch::NoGradGuard no_grad;
      for (auto& p : b.model->module().parameters()) p.zero_();
    }
    std::filesystem::create_directories(dir.path() / b.name());
    save_bundle(b, (dir.path() / b.name() / kBundleFile).string());
  }
  data::write_bars_csv(dir.file("all_bars.csv"), s);
  ValidateOptions o;
  o.out_dir = dir.path().string();
  StepResult r;
  std::ostringstream log;
  validate_backtest_step(o, r, log);
  EXPECT_FALSE(r.ok) << r.summary;
  EXPECT_NE(r.summary.find("WORSE than the best naive baseline"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("tft"), std::string::npos) << r.summary;
  EXPECT_LT(r.details.at("forecasters").at("tft").at("skill").get<double>(), 0.0);

  // `foxhunt backtest` has the same verdict: exit 1 naming the forecaster, the output and the
  // report written first; --gate none reports without failing.
  const std::string cmd =
      "backtest --bundles " + dir.path().string() + " --data " + dir.file("all_bars.csv");
  const auto failed = foxhunt::testing::run_cli(cmd + " --json --report " + dir.file("report"));
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_NE(failed.err.find("verdict FAIL"), std::string::npos) << failed.err;
  EXPECT_NE(failed.err.find("tft: skill"), std::string::npos) << failed.err;
  const auto j = nlohmann::json::parse(failed.out);
  EXPECT_FALSE(j.at("verdict").at("ok").get<bool>());
  EXPECT_EQ(j.at("verdict").at("gate"), "forecasters");
  EXPECT_TRUE(std::filesystem::exists(dir.file("report") + "/backtest.json"));
  const auto reported = foxhunt::testing::run_cli(cmd + " --gate none");
  EXPECT_EQ(reported.exit_code, 0) << reported.err;
  EXPECT_EQ(foxhunt::testing::run_cli(cmd + " --gate sometimes").exit_code, 2);
  EXPECT_TRUE(j.at("warnings").empty());  // the default rule: no rule file to disagree with

  // A rule file fitted for other costs than the backtest charges is named, not silently used.
  DecisionRule fitted;
  fitted.cost_bps = 5.0;
  fitted.fit = {{"cost_bps", 5.0}, {"costs", data::to_json(data::CostModel{})}};
  save_decision_rule(fitted, dir.file("rule.json"));
  const auto other = foxhunt::testing::run_cli(cmd + " --gate none --json --cost-bps 1");
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_NE(other.err.find("warning: the decision rule was fitted at other costs than this "
                           "backtest charges (cost_bps: fitted 5, charged 1)"),
            std::string::npos)
      << other.err;
  EXPECT_EQ(nlohmann::json::parse(other.out).at("warnings").size(), 1u);
  const auto same = foxhunt::testing::run_cli(cmd + " --gate none --json --cost-bps 5");
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(same.err.find("decision rule"), std::string::npos) << same.err;
  EXPECT_TRUE(nlohmann::json::parse(same.out).at("warnings").empty());
}

TEST(BacktestRun, ARuleFittedForOtherCostsIsWarnedOf) {
  DecisionRule rule;
  BacktestJob job;
  job.cost_bps = 1.0;
  job.costs.spread_bps = 2.0;
  job.costs.fee_bps = 0.5;
  rule.cost_bps = 9.0;
  EXPECT_EQ(rule_cost_warning(rule, job), "");  // set by hand (no fit): nothing to compare
  // A fit records its cost model: every term is compared, each difference named.
  rule.fit = {{"cost_bps", 1.0}, {"costs", data::to_json(job.costs)}};
  EXPECT_EQ(rule_cost_warning(rule, job), "");
  data::CostModel other = job.costs;
  other.spread_bps = 0.0;
  other.notional = 1e6;
  rule.fit["costs"] = data::to_json(other);
  const auto w = rule_cost_warning(rule, job);
  EXPECT_NE(w.find("(notional: fitted 1e+06, charged 0; spread_bps: fitted 0, charged 2)"),
            std::string::npos)
      << w;
  // An older fit without its cost model: the linear cost per unit traded.
  rule.fit = {{"bars", 100}};
  rule.cost_bps = 2.5;  // 1 + 2 / 2 + 0.5
  EXPECT_EQ(rule_cost_warning(rule, job), "");
  rule.cost_bps = 1.0;
  EXPECT_NE(rule_cost_warning(rule, job).find("linear cost per unit traded, bps: fitted 1, "
                                              "charged 2.5"),
            std::string::npos);
}

TEST(BacktestRun, GateFailuresNameEachForecasterWorseThanItsBaseline) {
  BacktestRun run;
  run.forecasts["tft"].evaluation.beats_best_baseline = false;
  run.forecasts["tft"].evaluation.skill_vs_best = -0.012;
  run.forecasts["tft"].evaluation.best_baseline = "rolling_quantiles_w250";
  run.forecasts["mamba2"].evaluation.beats_best_baseline = true;
  const auto f = forecaster_gate_failures(run);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0], "tft: skill -1.20% vs rolling_quantiles_w250");
  run.forecasts["tft"].evaluation.beats_best_baseline = true;
  EXPECT_TRUE(forecaster_gate_failures(run).empty());
}

}  // namespace
}  // namespace foxhunt::serving
