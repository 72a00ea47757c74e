// The RL policies train, and `train all` fits its rule, under the cost model that scores them
// (data/cost_model.h): the trading env charges each step what run_backtest charges for the same
// position change; train all's rule fit takes the job's costs; `train` takes the backtest's cost
// flags and records them in the bundle.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/file_io.h"
#include "foxhunt/data/backtest.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/trading_env.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/rule_fit.h"
#include "foxhunt/serving/serving.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using foxhunt::testing::TempDir;

// Every term of the cost model at work: flat, a fixed spread, fees per notional and per
// contract, and impact at a notional large enough to matter.
data::CostModel every_cost_term() {
  return {.spread_bps = 3.0,
          .fee_bps = 0.7,
          .fee_per_contract = 1.25,
          .contract_multiplier = 50,
          .notional = 2e7,
          .impact_k = 0.8,
          .window = 5};
}

// Actions 0 / 1 / 2 (sell / hold / buy) over `steps` steps: flips, exits, holds and re-entries.
int64_t costs_path_action(int64_t step) {
  static const int64_t kPattern[] = {2, 2, 0, 1, 1, 2, 0, 0, 2, 1, 0, 2, 2, 2, 1};
  return kPattern[step % 15];
}

// Runs the env from its first bar to the end (sequential, one episode) along the path; returns
// each step's position and cost.
void run_costs_path(data::TradingEnv& env, std::vector<double>& positions,
                    std::vector<double>& costs) {
  env.reset(0);
  for (int64_t k = 0; !env.done(); ++k) {
    const auto s = env.step(costs_path_action(k));
    positions.push_back(s.position);
    costs.push_back(s.cost);
  }
}

// The backtest options that charge what an env under `o` charges.
data::BacktestOptions backtest_options(const data::TradingEnvOptions& o) {
  data::BacktestOptions bo;
  bo.cost_bps = o.cost_bps;
  bo.costs = o.costs;
  return bo;
}

// The backtest of `positions` over `closes` (with `in`) under the env's options `o`, after
// checking that it charges each bar what `env` charged for it (`costs`, run_costs_path) and the
// env's total: a bar's backtest cost is its gross return minus its net return.
data::BacktestResult expect_backtest_charges_env_costs(const data::TradingEnv& env,
                                                       const data::TradingEnvOptions& o,
                                                       const std::vector<double>& costs,
                                                       const std::vector<double>& closes,
                                                       const std::vector<double>& positions,
                                                       const data::MarketCostInputs& in) {
  auto bt = data::run_backtest(closes, positions, backtest_options(o), in);
  std::vector<double> charged;
  for (size_t t = 0; t < bt.returns.size(); ++t)
    charged.push_back(positions[t] * (closes[t + 1] / closes[t] - 1.0) - bt.returns[t]);
  for (size_t t = 0; t < costs.size(); ++t) EXPECT_NEAR(costs[t], charged[t], 1e-12) << t;
  EXPECT_NEAR(env.total_cost(), bt.total_cost, 1e-12);
  return bt;
}

TEST(TradingEnvCostsTest, EachStepCostsWhatTheBacktestChargesForTheSamePath) {
  const size_t n = 40;
  std::vector<double> closes, volumes, spreads;
  for (size_t t = 0; t < n; ++t) {
    closes.push_back(100.0 * std::exp(0.01 * std::sin(0.7 * static_cast<double>(t)) +
                                      0.001 * static_cast<double>(t)));
    volumes.push_back(1000.0 + 300.0 * std::cos(1.3 * static_cast<double>(t)));
    // Quotes on some bars; NaN (unknown) elsewhere: the fixed spread_bps applies there.
    spreads.push_back(t % 3 == 0 ? 4e-4 + 1e-5 * static_cast<double>(t) : foxhunt::testing::kNaN);
  }
  data::MarketCostInputs in;
  in.volumes = volumes;
  in.spreads = spreads;
  in.past_returns = {0.002, -0.004, 0.003};
  data::TradingEnvOptions o;
  o.cost_bps = 0.5;
  o.costs = every_cost_term();
  o.episode_length = 0;  // one episode over every bar
  o.random_start = false;
  data::TradingEnv env(data::Matrix(static_cast<int64_t>(n), 3), closes,
                       data::BarRange{0, static_cast<int64_t>(n)}, o, in);
  std::vector<double> positions, costs;
  run_costs_path(env, positions, costs);
  ASSERT_EQ(positions.size(), n - 1);
  positions.push_back(positions.back());  // the last bar's position is never charged

  const auto bt = expect_backtest_charges_env_costs(env, o, costs, closes, positions, in);
  // Every term is charged, so a step that left one out would differ.
  EXPECT_GT(bt.cost_flat, 0.0);
  EXPECT_GT(bt.cost_spread, 0.0);
  EXPECT_GT(bt.cost_fees, 0.0);
  EXPECT_GT(bt.cost_impact, 1e-4 * bt.total_cost);

  // Buy-and-hold's entry is charged by the same model: the backtest of always long.
  const auto hold =
      data::run_backtest(closes, data::buy_and_hold_positions(n), backtest_options(o), in);
  EXPECT_NEAR(env.compare_to_buy_and_hold().buy_and_hold_log_return,
              std::log(closes.back() / closes.front()) - hold.total_cost, 1e-12);
}

// Over a dataset's split the env records the inputs as the backtest records them for its scored
// bars: the split's volumes and the log returns of every bar before it.
TEST(TradingEnvCostsTest, AnEnvOverASplitChargesWhatABacktestOfTheSplitCharges) {
  const data::MarketDataset ds(data::generate_synthetic({.bars = 1500, .seed = 11}));
  data::TradingEnvOptions o;
  o.cost_bps = 0.25;
  o.costs = every_cost_term();
  o.costs.window = 20;
  o.episode_length = 0;
  o.random_start = false;
  data::TradingEnv env(ds, data::Split::kValidation, o);
  std::vector<double> positions, costs;
  run_costs_path(env, positions, costs);
  positions.push_back(positions.back());

  const auto& range = ds.splits().validation;
  const auto& bars = ds.series().bars;
  std::vector<double> closes;
  data::MarketCostInputs in;
  for (int64_t t = 0; t < range.end; ++t) {
    const auto& b = bars[static_cast<size_t>(t)];
    if (t >= range.begin) {
      closes.push_back(b.close);
      in.volumes.push_back(b.volume);
    } else if (t > 0) {
      in.past_returns.push_back(std::log(b.close / bars[static_cast<size_t>(t) - 1].close));
    }
  }
  ASSERT_EQ(positions.size(), closes.size());
  ASSERT_GT(in.past_returns.size(), 20u);
  const auto bt = expect_backtest_charges_env_costs(env, o, costs, closes, positions, in);
  EXPECT_GT(bt.cost_spread, 0.0);
  EXPECT_GT(bt.cost_fees, 0.0);
  EXPECT_GT(bt.cost_impact, 0.0);
}

// With only cost_bps (the default cost model) a step costs cost_bps * 1e-4 * |change| to the
// last bit, volumes or not: the environments trained before the cost model are unchanged.
TEST(TradingEnvCostsTest, OnlyCostBpsIsTheFlatCostToTheLastBit) {
  const data::MarketDataset ds(data::generate_synthetic({.bars = 1500, .seed = 12}));
  data::TradingEnvOptions o;
  o.cost_bps = 1.7;
  o.episode_length = 0;
  o.random_start = false;
  data::TradingEnv env(ds, data::Split::kValidation, o);
  env.reset(0);
  int previous = 0;
  for (int64_t k = 0; !env.done(); ++k) {
    const auto s = env.step(costs_path_action(k));
    EXPECT_EQ(s.cost, o.cost_bps * 1e-4 * std::abs(s.position - previous)) << k;
    previous = s.position;
  }
}

// `n` daily bars of +-1% returns; three models of noise and one right 70% of the time about the
// next bar's sign (signal +-0.8, flipping often): an edge that only trades well when trading is
// cheap. The volatility-targeted long holds 0.5.
serving::RuleFitBars costs_planted_bars(int n) {
  const auto u = [](int t, int k) {
    const double x = std::sin(t * 12.9898 + k * 78.233) * 43758.5453;
    return x - std::floor(x);
  };
  const std::vector<std::string> models = {"dqn", "ppo", "mamba2", "tft"};
  serving::RuleFitBars r;
  std::vector<double> g;
  for (int t = 0; t < n; ++t) g.push_back(0.01 * (2 * u(t, 0) - 1));
  double close = 100.0;
  for (int t = 0; t < n; ++t) {
    if (t > 0) close *= 1.0 + g[static_cast<size_t>(t)];
    r.closes.push_back(close);
    r.timestamps.push_back(1'600'000'000 + int64_t{86400} * t);
    r.vol_target.push_back(0.5);
    std::vector<serving::ModelSignal> row;
    for (size_t i = 0; i < models.size(); ++i) {
      serving::ModelSignal s;
      s.model = models[i];
      s.ready = true;
      s.signal = 2 * u(t, static_cast<int>(i) + 1) - 1;
      if (i + 1 == models.size()) {
        const double next = t + 1 < n ? g[static_cast<size_t>(t) + 1] : 0.0;
        s.signal = (next >= 0 ? 0.8 : -0.8) * (u(t, 9) < 0.7 ? 1 : -1);
      }
      row.push_back(s);
    }
    r.signals.push_back(row);
  }
  return r;
}

TEST(TrainAllCostsTest, TheRuleFitTakesTheJobsCostModel) {
  jobs::TrainJob job;
  EXPECT_EQ(jobs::train_all_rule_fit_options(job).cost_bps, serving::RuleFitOptions{}.cost_bps);
  job.trading_env.cost_bps = 4.5;
  job.trading_env.costs = every_cost_term();
  const auto o = jobs::train_all_rule_fit_options(job);
  EXPECT_EQ(o.cost_bps, 4.5);
  EXPECT_EQ(data::to_json(o.costs), data::to_json(every_cost_term()));
  // The rest are the fit's defaults.
  EXPECT_EQ(o.bands, serving::RuleFitOptions{}.bands);
  EXPECT_EQ(o.dsr_threshold, serving::RuleFitOptions{}.dsr_threshold);
}

// The same train all fit with high costs trades less than with none: at zero cost the planted
// edge is taken (it flips often); at 100 bp + half a 20 bp spread it is not worth its trades.
TEST(TrainAllCostsTest, HighCostsFitARuleThatTradesLess) {
  const std::vector<serving::RuleFitBars> bars{costs_planted_bars(1000)};
  jobs::TrainJob free_job;
  free_job.trading_env.cost_bps = 0.0;
  jobs::TrainJob costly_job;
  costly_job.trading_env.cost_bps = 100.0;
  costly_job.trading_env.costs.spread_bps = 20.0;
  const auto cheap =
      serving::fit_decision_rule(bars, {}, jobs::train_all_rule_fit_options(free_job));
  const auto costly =
      serving::fit_decision_rule(bars, {}, jobs::train_all_rule_fit_options(costly_job));
  EXPECT_EQ(cheap.chosen.rfind("models", 0), 0u) << cheap.chosen << ": " << cheap.reason;
  EXPECT_GT(cheap.turnover_per_year, 0.0);
  EXPECT_LT(costly.turnover_per_year, cheap.turnover_per_year)
      << costly.chosen << ": " << costly.reason;
  // rule.json's fit records the costs it was fitted after; the rule's hurdle is their linear part.
  EXPECT_EQ(costly.rule.fit.at("cost_bps"), 100.0);
  EXPECT_EQ(costly.rule.fit.at("costs").at("spread_bps"), 20.0);
  EXPECT_EQ(costly.rule.cost_bps, 110.0);
  EXPECT_EQ(cheap.rule.fit.at("cost_bps"), 0.0);
}

// fit_ensemble_rule (train all's fit, and validate's) fits with the options it is given and
// writes them into rule.json.
TEST(TrainAllCostsTest, FitEnsembleRuleWritesTheCostsItFittedAfter) {
  TempDir dir;
  const auto series = data::generate_synthetic({.bars = 900, .seed = 13});
  const auto csv = dir.file("bars.csv");
  data::write_bars_csv(csv, series);
  const data::MarketDataset ds(series);
  const std::string out = dir.file("ens");
  const serving::BundleDirectory bd(out);
  for (const auto& b : foxhunt::testing::untrained_bundles(ds, 21)) {
    std::filesystem::create_directories(bd.model_dir(b.name()));
    serving::save_bundle(b, bd.bundle_path(b.name()));
  }
  jobs::TrainJob job;
  job.trading_env.cost_bps = 2.0;
  job.trading_env.costs = {.spread_bps = 6.0, .fee_bps = 0.5, .notional = 1e6};
  const auto fit = jobs::fit_ensemble_rule(out, csv, jobs::train_all_rule_fit_options(job));
  ASSERT_FALSE(fit.contains("error")) << fit.dump();
  EXPECT_EQ(fit.at("cost_bps"), 2.0);
  EXPECT_EQ(fit.at("costs"), data::to_json(job.trading_env.costs));
  const auto rule = nlohmann::json::parse(read_file(bd.rule_path()));
  EXPECT_EQ(rule.at("fit").at("costs").at("notional"), 1e6);
  EXPECT_EQ(rule.at("cost_bps"), 2.0 + 3.0 + 0.5);  // the hurdle: flat + half spread + fee
  // Without options: the defaults (cost_bps 1, no cost terms), as before.
  const auto plain = jobs::fit_ensemble_rule(out, csv);
  ASSERT_FALSE(plain.contains("error")) << plain.dump();
  EXPECT_EQ(plain.at("cost_bps"), 1.0);
  EXPECT_EQ(plain.at("costs"), data::to_json(data::CostModel{}));
}

// `train` takes the backtest's cost flags (train all too: the same subcommand), the policy's
// trading env charges them, and the bundle records them.
TEST(TrainCostFlagsTest, TrainTakesTheBacktestsCostFlagsAndTheBundleRecordsThem) {
  using foxhunt::testing::run_cli;
  TempDir dir;
  const auto csv = dir.file("bars.csv");
  data::write_bars_csv(csv, data::generate_synthetic({.bars = 700, .seed = 3}));
  const auto r = run_cli("train dqn --env trading --data " + csv +
                         " --steps 300 --eval-episodes 0 --cost-bps 2 --spread-bps 4 --fee-bps 0.5 "
                         "--fee-per-contract 0.01 --contract-multiplier 50 --notional 1e6 "
                         "--impact-k 0.7 --json --progress off --out " +
                         dir.file("t"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto b = serving::load_bundle(dir.file("t"));
  EXPECT_EQ(b.trading_env.cost_bps, 2.0);
  const data::CostModel expected{.spread_bps = 4,
                                 .fee_bps = 0.5,
                                 .fee_per_contract = 0.01,
                                 .contract_multiplier = 50,
                                 .notional = 1e6,
                                 .impact_k = 0.7};
  EXPECT_EQ(data::to_json(b.trading_env.costs), data::to_json(expected));

  // train all parses them (here it stops at the short file, before any model), refuses a
  // negative term and the older --env-cost-bps beside --cost-bps.
  const auto short_csv = dir.file("short.csv");
  data::write_bars_csv(short_csv, data::generate_synthetic({.bars = 200, .seed = 3}));
  const auto all = run_cli("train all --data " + short_csv +
                           " --cost-bps 3 --spread-bps 2 --notional 1e6 --progress off --out " +
                           dir.file("ens"));
  EXPECT_EQ(all.exit_code, 2) << all.err;
  EXPECT_NE(all.err.find("need more than warmup"), std::string::npos) << all.err;
  const auto negative = run_cli("train all --spread-bps=-1 --progress off");
  EXPECT_EQ(negative.exit_code, 2);
  EXPECT_NE(negative.err.find("--spread-bps"), std::string::npos) << negative.err;
  EXPECT_EQ(run_cli("train all --cost-bps 1 --env-cost-bps 2 --progress off").exit_code, 2);
}

}  // namespace
}  // namespace foxhunt
