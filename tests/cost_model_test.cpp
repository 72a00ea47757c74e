// The cost model a desk recognises (data/cost_model.h) in the backtest arithmetic: each term
// worked out by hand on a bar or two, the capacity formula, the defaults that leave the flat
// cost alone, and the no-trade band.
#include "foxhunt/data/cost_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/data/backtest.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

constexpr double kTol = 1e-15;

TEST(CostModel, SpreadAndFeesByHand) {
  // closes 100, 110, 110; one trade: 0 -> 1 at the first close, held over both bars.
  // Per unit traded: flat 1 bp = 1e-4; half the 10 bp spread = 5e-4; fee 2 bp = 2e-4 plus
  // 0.5 per contract of 100 * 10 = 1,000 of notional = 5e-4: 13e-4 in all.
  // r1 = 1 * 0.1 - 13e-4 = 0.0987; r2 = 0 (no move, no trade).
  const std::vector<double> closes = {100, 110, 110}, positions = {1, 1, 1};
  const BacktestOptions o{
      .cost_bps = 1,
      .periods_per_year = 252,
      .costs = {
          .spread_bps = 10, .fee_bps = 2, .fee_per_contract = 0.5, .contract_multiplier = 10}};
  const auto r = run_backtest(closes, positions, o);
  ASSERT_EQ(r.returns.size(), 2u);
  EXPECT_NEAR(r.returns[0], 0.0987, kTol);
  EXPECT_EQ(r.returns[1], 0.0);
  EXPECT_NEAR(r.cost_flat, 1e-4, kTol);
  EXPECT_NEAR(r.cost_spread, 5e-4, kTol);
  EXPECT_NEAR(r.cost_fees, 7e-4, kTol);
  EXPECT_EQ(r.cost_impact, 0.0);
  EXPECT_NEAR(r.total_cost, 13e-4, kTol);
  EXPECT_NEAR(r.gross_return, 0.1, kTol);
  EXPECT_FALSE(r.capacity.has_value());  // no volume: no impact to measure
  // Quotes per bar replace the fixed spread where given: 20 bp at the trade, half paid.
  MarketCostInputs quotes;
  quotes.spreads = {0.002, std::nan(""), std::nan("")};
  const auto q = run_backtest(closes, positions, o, quotes);
  EXPECT_NEAR(q.cost_spread, 1e-3, kTol);
  EXPECT_NEAR(q.returns[0], 0.1 - (1e-4 + 1e-3 + 7e-4), kTol);
  // The JSON carries the parts and the model.
  const auto j = to_json(q);
  for (const char* key : {"cost_flat", "cost_spread", "cost_fees", "cost_impact", "gross_return",
                          "capacity", "cost_model", "psr"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["cost_model"]["fee_per_contract"], 0.5);
  EXPECT_TRUE(j["capacity"].is_null());
}

TEST(CostModel, SquareRootImpactAndCapacityByHand) {
  // Past log returns +1%, -1% (window 2): sigma = 0.01 * sqrt(2). One trade, 0 -> 0.5, at the
  // close 100 with 1,000 contracts per bar, multiplier 10, notional 1e6: q = 0.5e6 / (100 * 10)
  // = 500 contracts, participation 0.5. Impact per unit = k sigma sqrt(0.5) = 0.5 * 0.01 = 0.005;
  // cost 0.5 * 0.005 = 0.0025. r1 = 0.5 * 0.01 - 0.0025 = 0.0025.
  const std::vector<double> closes = {100, 101, 101}, positions = {0.5, 0.5, 0.5};
  MarketCostInputs market;
  market.volumes = {1000, 1000, 1000};
  market.past_returns = {0.01, -0.01};
  BacktestOptions o{
      .cost_bps = 0,
      .periods_per_year = 252,
      .costs = {.contract_multiplier = 10, .notional = 1e6, .impact_k = 0.5, .window = 2}};
  const auto r = run_backtest(closes, positions, o, market);
  EXPECT_NEAR(r.returns[0], 0.0025, 1e-12);
  EXPECT_NEAR(r.cost_impact, 0.0025, 1e-12);
  EXPECT_NEAR(r.total_cost, 0.0025, 1e-12);
  // Capacity: the edge before impact E = 0.5 * 0.01 = 0.005; I = k sigma x^1.5 / sqrt(c m ADV)
  // = 0.5 * 0.01 sqrt(2) * 0.5^1.5 / 1000 = 2.5e-6; N* = (E / I)^2 = 2000^2 = 4e6.
  ASSERT_TRUE(r.capacity.has_value());
  EXPECT_NEAR(*r.capacity, 4e6, 1e-3);
  // It does not depend on the notional charged, and at N* the impact eats the edge exactly.
  o.costs.notional = 0;
  const auto free = run_backtest(closes, positions, o, market);
  EXPECT_EQ(free.cost_impact, 0.0);
  EXPECT_NEAR(*free.capacity, 4e6, 1e-3);
  o.costs.notional = 4e6;
  EXPECT_NEAR(run_backtest(closes, positions, o, market).total_return, 0.0, 1e-12);
  // The formula itself: 0 when there is no edge; unknown without impact.
  EXPECT_NEAR(*capacity_notional(0.005, 2.5e-6), 4e6, 1e-3);
  EXPECT_EQ(*capacity_notional(-0.001, 2.5e-6), 0.0);
  EXPECT_FALSE(capacity_notional(0.005, 0.0).has_value());
}

TEST(CostModel, TheImpactsWindowsTrailTheTrade) {
  // closes 100, 110, 99 (no earlier returns), volumes 100, 300, 500, window 2, k 1.
  // sigma: fewer than 2 returns are known at bars 0 and 1: the first window's, the standard
  // deviation of log 1.1 and log 0.9, |log 1.1 - log 0.9| / sqrt(2); at bar 2 the same two.
  // ADV: 100 (one bar), (100 + 300) / 2, (300 + 500) / 2.
  const CostModel m{.notional = 1, .impact_k = 1, .window = 2};
  MarketCostInputs in;
  in.volumes = {100, 300, 500};
  const auto rates = bar_cost_rates(0, m, {100, 110, 99}, in);
  const double sigma = std::abs(std::log(1.1) - std::log(0.9)) / std::sqrt(2.0);
  ASSERT_EQ(rates.size(), 3u);
  EXPECT_NEAR(rates[0].impact, sigma / std::sqrt(100.0 * 100.0), 1e-15);
  EXPECT_NEAR(rates[1].impact, sigma / std::sqrt(110.0 * 200.0), 1e-15);
  EXPECT_NEAR(rates[2].impact, sigma / std::sqrt(99.0 * 400.0), 1e-15);
  // No volume, no impact.
  for (const auto& r : bar_cost_rates(0, m, {100, 110, 99})) EXPECT_EQ(r.impact, 0.0);
  // Bad terms are named.
  foxhunt::testing::expect_input_error([&] { check_cost_model(1, {.contract_multiplier = 0}); },
                                       "costs", {"contract_multiplier", "0"});
  foxhunt::testing::expect_input_error([&] { check_cost_model(1, {.spread_bps = -1}); }, "costs",
                                       {"spread_bps", "-1"});
  in.volumes = {1, 2};
  foxhunt::testing::expect_input_error(
      [&] {
        bar_cost_rates(0, m, {100, 110, 99}, in);
      },
      "costs", {"volumes", "3", "2"});
}

TEST(CostModel, TheDefaultsAreTheFlatCost) {
  // Without a cost model the backtest charges cost_bps per unit of position change, bit for bit.
  const std::vector<double> closes = {100, 103, 101, 104, 104.5};
  const std::vector<double> positions = {0.3, -0.7, 1.0, 0.2, 0.0};
  const auto r = run_backtest(closes, positions, {.cost_bps = 7, .periods_per_year = 252});
  double prev = 0;
  for (size_t t = 0; t + 1 < closes.size(); ++t) {
    const double expected =
        positions[t] * (closes[t + 1] / closes[t] - 1.0) - 7 / 1e4 * std::abs(positions[t] - prev);
    EXPECT_EQ(r.returns[t], expected) << t;
    prev = positions[t];
  }
  EXPECT_EQ(r.cost_impact, 0.0);
  EXPECT_EQ(r.cost_spread + r.cost_fees, 0.0);
  EXPECT_NEAR(r.cost_flat, r.total_cost, 1e-15);
}

TEST(NoTradeBand, SmallTargetMovesDoNotTrade) {
  // Band 0.1: 0 -> 0.5 trades; 0.55, 0.45 and 0.6 are within 0.1 of the 0.5 held; 0.2 trades;
  // 0.25 does not.
  const std::vector<double> targets = {0.5, 0.55, 0.45, 0.6, 0.2, 0.25};
  const auto held = apply_no_trade_band(targets, 0.1);
  const std::vector<double> expected = {0.5, 0.5, 0.5, 0.5, 0.2, 0.2};
  EXPECT_EQ(held, expected);
  EXPECT_EQ(apply_no_trade_band(targets, 0.0), targets);  // band 0 trades every change
  EXPECT_EQ(apply_no_trade_band(0.3, 0.0, 0.3), 0.0);     // a move of exactly the band: none
  // Turnover of the traded bars (the last position is not traded): 1.2 without the band, 0.8
  // with it.
  const std::vector<double> closes = {100, 101, 102, 101, 100, 99};
  EXPECT_NEAR(run_backtest(closes, targets).turnover, 1.2, 1e-12);
  EXPECT_NEAR(run_backtest(closes, held).turnover, 0.8, 1e-12);
}

}  // namespace
}  // namespace foxhunt::data
