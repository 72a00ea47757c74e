// The decision rule's weights fitted on validation bars (serving/rule_fit.h): the search finds
// the grid's best, shrinks toward equal weights, reads only the validation bars, and its
// figures agree with a backtest of the same decisions.
#include "foxhunt/serving/rule_fit.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "foxhunt/core/error.h"
#include "foxhunt/data/backtest.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/catalog.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt::serving {
namespace {

// The first `n` bars of the real S&P 500 file.
data::BarSeries sp500(size_t n) {
  auto s = data::load_bars_csv(foxhunt::testing::sp500_csv());
  s.bars.resize(n);
  return s;
}

// Untrained, seeded bundles with the series' normaliser: deterministic, different signals.
std::vector<Bundle> seeded_bundles(const data::BarSeries& series) {
  return foxhunt::testing::untrained_bundles(data::MarketDataset(series), 31);
}

class RuleFitTest : public foxhunt::testing::SeededTest {};

TEST_F(RuleFitTest, FindsTheGridsBestAndShrinksTowardEqualWeights) {
  const auto series = sp500(1300);
  const auto bundles = seeded_bundles(series);
  const int64_t first = series.bars[900].timestamp, last = series.bars[1299].timestamp;
  // The models' search alone (the baselines and the deflation: rule_fit_baselines_test.cpp).
  const RuleFitOptions models_only{.baselines = false};
  const auto fit = fit_decision_rule(bundles, series, first, last, {}, models_only);
  EXPECT_EQ(fit.chosen, "models");
  EXPECT_EQ(fit.bars, 400);
  EXPECT_EQ(fit.first_timestamp, first);
  EXPECT_EQ(fit.last_timestamp, last);
  EXPECT_EQ(fit.candidates, 286);  // compositions of 10 units into 4 models
  // The grid holds equal-ish weights and each model alone: the best is at least as good.
  EXPECT_GE(fit.sharpe_best, fit.sharpe_equal - 1e-12);
  for (const auto& [m, s] : fit.sharpe_alone) EXPECT_GE(fit.sharpe_best, s - 1e-12) << m;
  // w = 0.5 w* + 0.5 / 4 where that does no harm on the fitted bars, else w* itself; scaled so
  // that equal weights are 1.
  double sum = 0;
  for (const auto& [m, w] : fit.weights) {
    const double expected =
        fit.shrinkage_kept ? 0.5 * fit.best_weights.at(m) + 0.5 * 0.25 : fit.best_weights.at(m);
    EXPECT_NEAR(w, 4 * expected, 1e-12) << m;
    EXPECT_EQ(fit.rule.weights.at(m), w);
    sum += w;
  }
  EXPECT_NEAR(sum, 4.0, 1e-12);
  EXPECT_GE(fit.sharpe_fitted, fit.sharpe_best - 1e-12);
  // Shrinkage 1 is equal weights (where they do no harm); 0 is the best vector itself.
  auto equal_only = models_only;
  equal_only.shrinkage = 1.0;
  const auto equal = fit_decision_rule(bundles, series, first, last, {}, equal_only);
  for (const auto& [m, w] : equal.weights)
    EXPECT_NEAR(w, equal.shrinkage_kept ? 1.0 : 4 * equal.best_weights.at(m), 1e-12) << m;
  if (equal.shrinkage_kept) {
    EXPECT_NEAR(equal.sharpe_fitted, equal.sharpe_shrunk, 1e-12);
  }
  auto unshrunk = models_only;
  unshrunk.shrinkage = 0.0;
  const auto raw = fit_decision_rule(bundles, series, first, last, {}, unshrunk);
  EXPECT_NEAR(raw.sharpe_fitted, raw.sharpe_best, 1e-12);
  // The figures travel with the rule.
  EXPECT_EQ(fit.rule.fit["bars"], 400);
  EXPECT_EQ(fit.rule.fit["candidates"], 286);
  EXPECT_TRUE(fit.rule.fit.contains("objective"));
  EXPECT_EQ(nlohmann::json(fit.rule).get<DecisionRule>().weights, fit.rule.weights);
}

TEST_F(RuleFitTest, AForecasterAlonesFigureIsItsBacktest) {
  // A forecaster's signal does not depend on the position held, so its "alone" Sharpe in the fit
  // must equal a backtest of an ensemble that serves it alone over the same bars.
  const auto series = sp500(1200);
  const auto bundles = seeded_bundles(series);
  const int64_t first = series.bars[850].timestamp, last = series.bars[1199].timestamp;
  const auto fit = fit_decision_rule(bundles, series, first, last, {}, {.cost_bps = 2.0});
  for (const std::string model : {"mamba2", "tft"}) {
    DecisionRule alone;
    for (auto& [m, w] : alone.weights) w = m == model ? 1.0 : 0.0;
    alone.cost_bps = 2.0;
    Ensemble e(bundles, alone);
    std::vector<double> closes, positions;
    for (const auto& bar : series.bars) {
      const auto d = e.on_bar(bar);
      if (bar.timestamp < first) continue;
      closes.push_back(bar.close);
      positions.push_back(d.decision);
    }
    const auto bt = data::run_backtest(closes, positions,
                                       {.cost_bps = 2.0, .periods_per_year = fit.periods_per_year});
    EXPECT_NEAR(fit.sharpe_alone.at(model), bt.sharpe, 1e-9) << model;
    EXPECT_NEAR(fit.exposure_alone.at(model), bt.exposure, 1e-12) << model;
  }
}

// The serving runtime applies the no-trade band as the backtests and the fit do: the positions
// an Ensemble takes are data::apply_no_trade_band of its combined targets, starting flat.
TEST_F(RuleFitTest, TheServedBandIsTheBacktestsBand) {
  const auto series = sp500(700);
  const auto bundles = seeded_bundles(series);
  DecisionRule rule;
  rule.vol_target_weight = 1.0;  // a target that moves a little every bar
  rule.band = 0.2;
  Ensemble e(bundles, rule);
  std::vector<double> targets, served, closes;
  for (const auto& bar : series.bars) {
    const auto d = e.on_bar(bar);
    targets.push_back(d.target);
    served.push_back(d.decision);
    closes.push_back(bar.close);
  }
  EXPECT_EQ(served, data::apply_no_trade_band(targets, 0.2));
  EXPECT_NE(served, targets);  // the band bit
  EXPECT_LT(data::run_backtest(closes, served).turnover,
            data::run_backtest(closes, targets).turnover);
}

TEST_F(RuleFitTest, ReadsOnlyTheValidationBars) {
  const auto series = sp500(1200);
  const auto bundles = seeded_bundles(series);
  const int64_t first = series.bars[900].timestamp, last = series.bars[1100].timestamp;
  const auto fit = fit_decision_rule(bundles, series, first, last);
  // Bars after the range (the bars a backtest would score) change nothing.
  auto later = series;
  for (size_t i = 1101; i < later.bars.size(); ++i) {
    later.bars[i].close *= 1.5;
    later.bars[i].high *= 1.5;
    later.bars[i].low *= 1.5;
    later.bars[i].open *= 1.5;
  }
  const auto same = fit_decision_rule(bundles, later, first, last);
  EXPECT_EQ(same.weights, fit.weights);
  EXPECT_EQ(same.sharpe_best, fit.sharpe_best);
  // Bad input is named.
  EXPECT_THROW(fit_decision_rule(bundles, series, last, first), InputError);
  EXPECT_THROW(fit_decision_rule(bundles, series, first, last, {}, {.grid_step = 0.3}), InputError);
  EXPECT_THROW(fit_decision_rule(bundles, series, first, last, {}, {.shrinkage = 2}), InputError);
  try {
    // Ten bars: too few to fit on.
    fit_decision_rule(bundles, series, series.bars[1190].timestamp, series.bars[1199].timestamp);
    ADD_FAILURE() << "ten bars were enough";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 20 validation bars"), std::string::npos)
        << e.what();
  }
}

// A fit over several instruments pools their bar returns: the same series twice gives twice the
// bars, the same ranking of weight vectors (so the same weights) and a Sharpe ratio scaled by
// the constant sqrt((2 n - 1) / (2 (n - 1))) that doubling the sample of n returns moves it by
// (the same mean, a sample variance over 2n - 1 instead of n - 1 degrees of freedom).
TEST_F(RuleFitTest, SegmentsOfAPanelArePooled) {
  const auto series = sp500(1300);
  const auto bundles = seeded_bundles(series);
  const int64_t first = series.bars[900].timestamp, last = series.bars[1299].timestamp;
  const auto one = fit_decision_rule(bundles, series, first, last, {}, {.shrinkage = 0.0});
  const RuleFitSegment seg{bundles, &series, first, last};
  const auto two = fit_decision_rule(std::vector<RuleFitSegment>{seg, seg}, {}, {.shrinkage = 0.0});
  EXPECT_EQ(two.bars, 2 * one.bars);
  EXPECT_EQ(two.best_weights, one.best_weights);
  const double n = static_cast<double>(one.bars - 1);  // bar returns per segment
  const double ratio = std::sqrt((2.0 * n - 1.0) / (2.0 * (n - 1.0)));
  EXPECT_NEAR(two.sharpe_equal, one.sharpe_equal * ratio, 1e-9);
  EXPECT_NEAR(two.sharpe_best, one.sharpe_best * ratio, 1e-9);
  // A later segment on its own bars counts: halving the second one's range changes the fit.
  RuleFitSegment half = seg;
  half.first = series.bars[1100].timestamp;
  const auto mixed =
      fit_decision_rule(std::vector<RuleFitSegment>{seg, half}, {}, {.shrinkage = 0.0});
  EXPECT_EQ(mixed.bars, one.bars + 200);
  EXPECT_THROW(fit_decision_rule(std::vector<RuleFitSegment>{}), InputError);
}

}  // namespace
}  // namespace foxhunt::serving
