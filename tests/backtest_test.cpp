#include "foxhunt/data/backtest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/core/random.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

constexpr double kTol = 1e-12;

/// Runs `fn`, expecting an InputError from "backtest" whose message contains every part.
template <typename Fn>
void expect_input_error(Fn fn, const std::vector<std::string>& parts) {
  foxhunt::testing::expect_input_error(fn, "backtest", parts);
}

/// Closes whose close-to-close returns are `returns`, starting at 100.
std::vector<double> closes_from_returns(const std::vector<double>& returns) {
  std::vector<double> c = {100.0};
  for (double r : returns) c.push_back(c.back() * (1.0 + r));
  return c;
}

TEST(Backtest, HandMadePath) {
  // closes 100, 110, 99, 99, 108.9; positions 1, 1, 0, -1, 0; cost 10 bps = 0.001 per unit.
  // Price returns: +10%, -10%, 0%, +10%.
  // r1 = 1 * 0.1 - 0.001 * |1 - 0|    =  0.099   (entering the first position costs)
  // r2 = 1 * -0.1 - 0.001 * |1 - 1|   = -0.1
  // r3 = 0 * 0 - 0.001 * |0 - 1|      = -0.001  (closing the long)
  // r4 = -1 * 0.1 - 0.001 * |-1 - 0|  = -0.101  (the short loses on the rally)
  // p4 = 0 has no next bar: it earns and costs nothing.
  // Equity: 1, 1.099, 1.099 * 0.9 = 0.9891, 0.9891 * 0.999 = 0.9881109,
  //         0.9881109 * 0.899 = 0.8883116991.
  // Peak stays 1.099 from bar 1: drawdown 0, 0, -0.1, 0.9881109 / 1.099 - 1 = -0.1009,
  //         0.8883116991 / 1.099 - 1 = 0.9 * 0.999 * 0.899 - 1 = -0.1917091.
  // Max drawdown -0.1917091, under water over bars 2, 3, 4: duration 3.
  // Turnover |1-0| + |1-1| + |0-1| + |-1-0| = 3; total cost 3 * 0.001 = 0.003.
  // Bars held with a position: r1 (win), r2 (loss), r4 (loss): hit rate 1/3; exposure 3/4.
  const std::vector<double> closes = {100, 110, 99, 99, 108.9};
  const std::vector<double> positions = {1, 1, 0, -1, 0};
  const BacktestResult r = run_backtest(closes, positions, {.cost_bps = 10, .periods_per_year = 4});

  const std::vector<double> returns = {0.099, -0.1, -0.001, -0.101};
  const std::vector<double> equity = {1, 1.099, 0.9891, 0.9881109, 0.8883116991};
  const std::vector<double> drawdown = {0, 0, -0.1, -0.1009, -0.1917091};
  ASSERT_EQ(r.returns.size(), 4u);
  ASSERT_EQ(r.equity.size(), 5u);
  ASSERT_EQ(r.drawdown.size(), 5u);
  for (size_t i = 0; i < returns.size(); ++i) EXPECT_NEAR(r.returns[i], returns[i], kTol) << i;
  for (size_t i = 0; i < equity.size(); ++i) EXPECT_NEAR(r.equity[i], equity[i], kTol) << i;
  for (size_t i = 0; i < drawdown.size(); ++i) EXPECT_NEAR(r.drawdown[i], drawdown[i], kTol) << i;
  EXPECT_EQ(r.equity[0], 1.0);
  EXPECT_NEAR(r.total_return, 0.8883116991 - 1.0, kTol);
  // ppy = N = 4: one "year" of bars, so the annualised return is the total return.
  EXPECT_NEAR(r.annualized_return, r.total_return, kTol);
  EXPECT_NEAR(r.max_drawdown, -0.1917091, kTol);
  EXPECT_EQ(r.max_drawdown_duration_bars, 3);
  EXPECT_NEAR(r.turnover, 3.0, kTol);
  EXPECT_NEAR(r.turnover_per_year, 3.0, kTol);  // 3 / 4 bars * 4 bars per year
  EXPECT_NEAR(r.total_cost, 0.003, kTol);
  EXPECT_NEAR(r.hit_rate, 1.0 / 3.0, kTol);
  EXPECT_NEAR(r.exposure, 0.75, kTol);
  EXPECT_EQ(r.bars, 5);
  // Sample stdev of the four returns: mean = -0.10300 / 4 = -0.02575;
  // deviations 0.12475, -0.07425, 0.02475, -0.07525;
  // squares 0.0155625625, 0.0055130625, 0.0006125625, 0.0056625625, sum 0.02735075;
  // variance 0.02735075 / 3 = 0.00911691666..., vol = sqrt(that) * sqrt(4).
  const double sd = std::sqrt(0.02735075 / 3.0);
  EXPECT_NEAR(r.volatility, sd * 2.0, kTol);
  EXPECT_NEAR(r.sharpe, -0.02575 / sd * 2.0, kTol);
  // Downside: (0.1^2 + 0.001^2 + 0.101^2) / 4 = (0.01 + 0.000001 + 0.010201) / 4 = 0.0050505.
  EXPECT_NEAR(r.sortino, -0.02575 / std::sqrt(0.0050505) * 2.0, kTol);
}

TEST(Backtest, SharpeAndSortinoByHand) {
  // Returns 0.01, -0.02, 0.03, 0.00: mean 0.005; deviations 0.005, -0.025, 0.025, -0.005;
  // squares 2.5e-5 + 6.25e-4 + 6.25e-4 + 2.5e-5 = 1.3e-3; sample variance 1.3e-3 / 3.
  // Sharpe = 0.005 / sqrt(1.3e-3 / 3) * sqrt(252) = 3.81300...
  // Downside: min(r, 0)^2 = 0, 4e-4, 0, 0; mean 1e-4; deviation 0.01.
  // Sortino = 0.005 / 0.01 * sqrt(252) = 0.5 * 15.874507866 = 7.937253933.
  const std::vector<double> rets = {0.01, -0.02, 0.03, 0.0};
  const double sharpe = 0.005 / std::sqrt(1.3e-3 / 3.0) * std::sqrt(252.0);
  EXPECT_NEAR(sharpe, 3.8130, 1e-4);  // the hand value above
  EXPECT_NEAR(sharpe_ratio(rets, 252), sharpe, 1e-12);
  EXPECT_NEAR(sortino_ratio(rets, 252), 0.5 * std::sqrt(252.0), 1e-12);
  EXPECT_NEAR(sortino_ratio(rets, 252), 7.937253933, 1e-9);

  // The same returns through a backtest (long all the time, no cost) give the same ratios, up to
  // the rounding of building the prices.
  const BacktestResult r =
      run_backtest(closes_from_returns(rets), buy_and_hold_positions(5), {.cost_bps = 0});
  EXPECT_NEAR(r.sharpe, sharpe, 1e-10);
  EXPECT_NEAR(r.sortino, 0.5 * std::sqrt(252.0), 1e-10);
  EXPECT_NEAR(r.volatility, std::sqrt(1.3e-3 / 3.0) * std::sqrt(252.0), 1e-12);

  // Without a losing bar the downside deviation is 0 and the Sortino ratio is defined as 0.
  EXPECT_EQ(sortino_ratio({0.01, 0.02, 0.0}, 252), 0.0);
  // Without variation (or with one return) the Sharpe ratio is 0.
  EXPECT_EQ(sharpe_ratio({0.01, 0.01, 0.01}, 252), 0.0);
  EXPECT_EQ(sharpe_ratio({0.01}, 252), 0.0);
  EXPECT_EQ(sortino_ratio({}, 252), 0.0);
}

TEST(Backtest, BuyAndHoldEquityIsThePriceRatio) {
  // Powers of two: every ratio and product is exact in binary floating point.
  const std::vector<double> closes = {1, 2, 4, 2, 1, 8, 0.5};
  const BacktestResult r =
      run_backtest(closes, buy_and_hold_positions(closes.size()), {.cost_bps = 0});
  for (size_t t = 0; t < closes.size(); ++t) EXPECT_EQ(r.equity[t], closes[t] / closes[0]) << t;
  EXPECT_EQ(r.total_return, 0.5 - 1.0);
  EXPECT_EQ(r.turnover, 1.0);  // the one entry
  EXPECT_EQ(r.exposure, 1.0);
  EXPECT_EQ(r.max_drawdown, 0.5 / 8.0 - 1.0);

  // A random walk: equal up to rounding.
  Rng rng(7);
  std::vector<double> walk = {50.0};
  for (int i = 0; i < 1000; ++i) walk.push_back(walk.back() * std::exp(0.01 * rng.normal()));
  const BacktestResult w = run_backtest(walk, buy_and_hold_positions(walk.size()), {.cost_bps = 0});
  for (size_t t = 0; t < walk.size(); ++t)
    EXPECT_NEAR(w.equity[t], walk[t] / walk[0], 1e-12 * walk[t] / walk[0]) << t;
}

TEST(Backtest, FlatHasZeroReturnAndVolatility) {
  const std::vector<double> closes = {100, 120, 80, 95, 130};
  const BacktestResult r = run_backtest(closes, flat_positions(closes.size()), {.cost_bps = 5});
  for (double x : r.returns) EXPECT_EQ(x, 0.0);
  for (double e : r.equity) EXPECT_EQ(e, 1.0);
  EXPECT_EQ(r.total_return, 0.0);
  EXPECT_EQ(r.annualized_return, 0.0);
  EXPECT_EQ(r.volatility, 0.0);
  EXPECT_EQ(r.sharpe, 0.0);
  EXPECT_EQ(r.sortino, 0.0);
  EXPECT_EQ(r.max_drawdown, 0.0);
  EXPECT_EQ(r.max_drawdown_duration_bars, 0);
  EXPECT_EQ(r.turnover, 0.0);
  EXPECT_EQ(r.total_cost, 0.0);
  EXPECT_EQ(r.hit_rate, 0.0);  // no bar held a position
  EXPECT_EQ(r.exposure, 0.0);
}

TEST(Backtest, CostIsChargedOnTheFirstEntry) {
  // Flat prices: the only effect is the cost of entering at bar 0 (25 bps of 0.5 units).
  const std::vector<double> closes = {10, 10, 10};
  const BacktestResult r = run_backtest(closes, {0.5, 0.5, 0.5}, {.cost_bps = 25});
  EXPECT_NEAR(r.returns[0], -0.5 * 25e-4, kTol);
  EXPECT_EQ(r.returns[1], 0.0);
  EXPECT_NEAR(r.total_cost, 0.5 * 25e-4, kTol);
  EXPECT_NEAR(r.turnover, 0.5, kTol);
  EXPECT_NEAR(r.equity[2], 1.0 - 0.5 * 25e-4, kTol);
  EXPECT_EQ(r.hit_rate, 0.0);  // the one non-zero-position bar lost the cost

  // A change on the last bar is never traded, so it costs nothing.
  const BacktestResult last = run_backtest(closes, {0, 0, 1}, {.cost_bps = 25});
  EXPECT_EQ(last.total_cost, 0.0);
  EXPECT_EQ(last.turnover, 0.0);
  EXPECT_EQ(last.equity.back(), 1.0);
}

TEST(Backtest, RuinIsAbsorbing) {
  // Short into a 150% rally: r1 = -1.5, equity would be -0.5; it stops at 0 and stays there.
  const BacktestResult r = run_backtest({100, 250, 100, 50}, {-1, -1, -1, 0}, {.cost_bps = 0});
  EXPECT_NEAR(r.returns[0], -1.5, kTol);
  EXPECT_EQ(r.equity[1], 0.0);
  EXPECT_EQ(r.equity[2], 0.0);
  EXPECT_EQ(r.equity[3], 0.0);
  EXPECT_EQ(r.total_return, -1.0);
  EXPECT_EQ(r.annualized_return, -1.0);
  EXPECT_EQ(r.max_drawdown, -1.0);
  EXPECT_EQ(r.max_drawdown_duration_bars, 3);
}

TEST(Backtest, RejectsBadInput) {
  const std::vector<double> c = {100, 101, 102};
  const std::vector<double> p = {0, 1, 0};
  expect_input_error([&] { run_backtest(c, {0, 1}); }, {"2 positions", "3 closes"});
  expect_input_error([&] { run_backtest({100}, {1}); }, {"at least 2 closes", "got 1"});
  expect_input_error([&] { run_backtest({100, -5, 102}, p); }, {"closes[1]", "> 0", "-5"});
  expect_input_error([&] { run_backtest({100, 101, 0}, p); }, {"closes[2]"});
  expect_input_error([&] { run_backtest({NAN, 101, 102}, p); }, {"closes[0]", "nan"});
  expect_input_error([&] { run_backtest(c, {0, 1.5, 0}); }, {"positions[1]", "[-1, 1]", "1.5"});
  expect_input_error([&] { run_backtest(c, {0, 0, NAN}); }, {"positions[2]", "nan"});
  expect_input_error([&] { run_backtest(c, p, {.cost_bps = -1}); }, {"cost_bps", "-1"});
  expect_input_error([&] { run_backtest(c, p, {.cost_bps = 1, .periods_per_year = 0}); },
                     {"periods_per_year"});
}

TEST(Backtest, RandomPositionsAreSeeded) {
  const std::vector<double> a = random_positions(300, 11);
  EXPECT_EQ(a, random_positions(300, 11));
  EXPECT_NE(a, random_positions(300, 12));
  std::set<double> values(a.begin(), a.end());
  EXPECT_EQ(values, (std::set<double>{-1.0, 0.0, 1.0}));
  EXPECT_EQ(buy_and_hold_positions(3), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(flat_positions(2), (std::vector<double>{0, 0}));
}

TEST(Backtest, JsonHasTheMetricKeys) {
  const BacktestResult r = run_backtest({100, 110, 99, 99, 108.9}, {1, 1, 0, -1, 0});
  const nlohmann::json j = to_json(r);
  for (const char* key : {"total_return", "annualized_return", "volatility", "sharpe", "sortino",
                          "max_drawdown", "max_drawdown_duration_bars", "turnover",
                          "turnover_per_year", "hit_rate", "exposure", "total_cost", "bars"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_FALSE(j.contains("equity"));
  EXPECT_EQ(j["bars"].get<int64_t>(), 5);
  EXPECT_EQ(j["max_drawdown_duration_bars"].get<int64_t>(), 3);
  const nlohmann::json s = to_json(r, true);
  EXPECT_EQ(s["equity"].size(), 5u);
  EXPECT_EQ(s["returns"].size(), 4u);
  EXPECT_EQ(s["drawdown"].size(), 5u);
}

// Seeded i.i.d. normal bar returns with mean `mu` and stdev `sd`.
std::vector<double> normal_returns(size_t n, double mu, double sd, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> r(n);
  for (double& v : r) v = mu + sd * rng.normal();
  return r;
}

TEST(BacktestStatistics, SharpeIntervalCoversTheEstimateAndNarrowsWithData) {
  const double ppy = 252;
  const auto r = normal_returns(2000, 0.001, 0.01, 3);  // true annual Sharpe 0.1 * sqrt(252)
  const auto [lo, hi] = sharpe_interval(r, ppy);
  const double s = sharpe_ratio(r, ppy);
  EXPECT_LT(lo, s);
  EXPECT_GT(hi, s);
  // The standard error of an annualised Sharpe over N bars is about sqrt(ppy / N): the 95%
  // interval is about 4 of them wide.
  const double se = std::sqrt(ppy / 2000.0);
  EXPECT_NEAR(hi - lo, 3.92 * se, 1.0 * se);
  EXPECT_GT(lo, 0.0);  // a clearly positive drift is told apart from zero
  // Fewer bars, a wider interval; same seed, same interval; another seed, another draw.
  const std::vector<double> shorter(r.begin(), r.begin() + 200);
  const auto [slo, shi] = sharpe_interval(shorter, ppy);
  EXPECT_GT(shi - slo, 2.5 * (hi - lo));
  EXPECT_EQ(sharpe_interval(r, ppy), sharpe_interval(r, ppy));
  EXPECT_NE(sharpe_interval(r, ppy, {.seed = 7}).first, lo);
  EXPECT_EQ(sharpe_interval({0.01}, ppy), std::make_pair(0.0, 0.0));
  EXPECT_THROW(sharpe_interval(r, ppy, {.resamples = 0}), InputError);
  EXPECT_THROW(sharpe_interval(r, ppy, {.block = 0}), InputError);
  // run_backtest fills it.
  const auto res = run_backtest(closes_from_returns(r), std::vector<double>(2001, 1.0),
                                {.cost_bps = 0, .periods_per_year = ppy});
  EXPECT_NEAR(res.sharpe_lo, lo, 0.05);
  EXPECT_NEAR(res.sharpe_hi, hi, 0.05);
}

TEST(BacktestStatistics, ProbabilityOfBeatingTheReferenceIsPaired) {
  const auto ref = normal_returns(1000, 0.0002, 0.01, 4);
  std::vector<double> better = ref, same = ref, worse = ref;
  for (double& v : better) v += 0.002;  // the same noise plus a clear edge
  for (double& v : worse) v -= 0.002;
  EXPECT_EQ(prob_sharpe_beats(better, ref), 1.0);
  EXPECT_EQ(prob_sharpe_beats(worse, ref), 0.0);
  EXPECT_EQ(prob_sharpe_beats(same, ref), 0.0);  // strictly above: a tie never beats
  // A tiny edge on the same noise still wins every paired resample: pairing removes the noise.
  std::vector<double> tiny = ref;
  for (double& v : tiny) v += 1e-5;
  EXPECT_EQ(prob_sharpe_beats(tiny, ref), 1.0);
  // Independent noise with the same mean: near a coin flip.
  const auto other = normal_returns(1000, 0.0002, 0.01, 5);
  const double p = prob_sharpe_beats(other, ref);
  EXPECT_GT(p, 0.05);
  EXPECT_LT(p, 0.95);
  EXPECT_THROW(prob_sharpe_beats(ref, {0.1, 0.2}), InputError);
}

TEST(BacktestStatistics, BreakEvenCostEqualisesTheTotalReturns) {
  // Prices that alternate +1% / -1%: a strategy that knows the next move trades every bar.
  std::vector<double> closes = {100};
  std::vector<double> foresight;
  for (int t = 0; t < 200; ++t) {
    const double g = t % 2 == 0 ? 0.01 : -0.01;
    foresight.push_back(g > 0 ? 1.0 : -1.0);
    closes.push_back(closes.back() * (1 + g));
  }
  foresight.push_back(0.0);
  const auto hold = buy_and_hold_positions(closes.size());
  const auto be = break_even_cost_bps(closes, foresight, hold);
  ASSERT_TRUE(be.has_value());
  // Each bar earns 1% and pays 2 units of turnover; buy-and-hold ends at 0.9999^100: 50.25 bps.
  EXPECT_GT(*be, 49.5);
  EXPECT_LT(*be, 51.0);
  // At that cost both end with the same return (run_backtest's own arithmetic).
  const auto a = run_backtest(closes, foresight, {.cost_bps = *be});
  const auto b = run_backtest(closes, hold, {.cost_bps = *be});
  EXPECT_NEAR(a.total_return, b.total_return, 1e-6);
  // Below it the strategy leads, above it it trails.
  EXPECT_GT(run_backtest(closes, foresight, {.cost_bps = *be - 1}).total_return,
            run_backtest(closes, hold, {.cost_bps = *be - 1}).total_return);
  EXPECT_LT(run_backtest(closes, foresight, {.cost_bps = *be + 1}).total_return,
            run_backtest(closes, hold, {.cost_bps = *be + 1}).total_return);
  // Not better even without costs: 0. Buy-and-hold against itself: 0.
  auto wrong = foresight;
  for (double& p : wrong) p = -p;
  EXPECT_EQ(break_even_cost_bps(closes, wrong, hold), 0.0);
  EXPECT_EQ(break_even_cost_bps(closes, hold, hold), 0.0);
  // Skipping the first (down) bar and then holding trades as much as buy-and-hold and earns
  // more: it beats it at any cost.
  std::vector<double> late(closes.size(), 1.0);
  late[0] = 0.0;
  closes[1] = 99;  // the first move is down
  EXPECT_FALSE(break_even_cost_bps(closes, late, hold).has_value());
  EXPECT_THROW(break_even_cost_bps(closes, {1.0}, hold), InputError);

  // compare_to_reference fills the result and its JSON.
  auto res = run_backtest(closes, late);
  compare_to_reference(res, run_backtest(closes, hold), closes, late, hold);
  EXPECT_TRUE(res.beats_reference_at_any_cost);
  const auto j = to_json(res);
  EXPECT_TRUE(j["break_even_cost_bps"].is_null());
  EXPECT_TRUE(j["beats_buy_and_hold_at_any_cost"].get<bool>());
  EXPECT_TRUE(j["prob_beats_buy_and_hold"].is_number());
  EXPECT_TRUE(to_json(run_backtest(closes, hold))["prob_beats_buy_and_hold"].is_null());
}

TEST(BacktestStatistics, VolatilityTargetHoldsTheTargetWithoutLookAhead) {
  // Returns alternating +-1%: sample stdev ~1.0% per bar (slightly more with n - 1), ~16%/year.
  std::vector<double> past;
  for (int t = 0; t < 60; ++t) past.push_back(std::log(t % 2 == 0 ? 1.01 : 0.99));
  std::vector<double> closes = {100};
  for (int t = 0; t < 100; ++t) closes.push_back(closes.back() * (t % 2 == 0 ? 1.01 : 0.99));
  const auto p = volatility_target_positions(past, closes, 0.10, 252);
  ASSERT_EQ(p.size(), closes.size());
  for (double v : p) {
    EXPECT_NEAR(v, 0.10 / (0.01 * std::sqrt(252.0)), 0.01);  // ~0.63
    EXPECT_LE(v, 1.0);
  }
  // A target above the asset's volatility is capped at fully long.
  for (double v : volatility_target_positions(past, closes, 0.5, 252)) EXPECT_EQ(v, 1.0);
  // No look-ahead: a crash at the end moves only the positions from the crash on.
  auto crashed = closes;
  crashed.back() *= 0.5;
  const auto q = volatility_target_positions(past, crashed, 0.10, 252);
  for (size_t t = 0; t + 1 < closes.size(); ++t) EXPECT_EQ(q[t], p[t]) << t;
  EXPECT_LT(q.back(), 0.5 * p.back());
  // Without a history it waits for two returns.
  const auto fresh = volatility_target_positions({}, closes, 0.10, 252);
  EXPECT_EQ(fresh[0], 0.0);
  EXPECT_EQ(fresh[1], 0.0);
  EXPECT_GT(fresh[2], 0.0);
  EXPECT_THROW(volatility_target_positions(past, closes, 0.0, 252), InputError);
  EXPECT_THROW(volatility_target_positions(past, closes, 0.1, 252, 1), InputError);
}

TEST(BacktestStatistics, ShortWindowsSayTheyAreShortAndKeepPerBarFigures) {
  const auto r = normal_returns(100, 0.001, 0.01, 9);
  const auto closes = closes_from_returns(r);
  const std::vector<double> hold(closes.size(), 1.0);
  const auto minute = run_backtest(closes, hold, {.cost_bps = 0, .periods_per_year = 98280});
  EXPECT_TRUE(minute.short_window);
  const auto daily_year = run_backtest(closes, hold, {.cost_bps = 0, .periods_per_year = 50});
  EXPECT_FALSE(daily_year.short_window);
  // Per-bar figures do not depend on the annualisation.
  EXPECT_DOUBLE_EQ(minute.sharpe_per_bar, daily_year.sharpe_per_bar);
  EXPECT_NEAR(minute.sharpe, minute.sharpe_per_bar * std::sqrt(98280.0), 1e-9);
  double mean = 0;
  for (double v : minute.returns) mean += v / static_cast<double>(minute.returns.size());
  EXPECT_NEAR(minute.mean_return_per_bar, mean, 1e-15);
  EXPECT_TRUE(to_json(minute)["short_window"].get<bool>());
}

constexpr int64_t kDayMs = 86'400'000;
constexpr int64_t kHourMs = 3'600'000;

/// Midnight timestamps (ms) of an exchange-like calendar over `years` from 2018-01-01 (a Monday):
/// weekdays minus 9 holidays a year (a holiday on a weekend is observed on the next Monday).
std::vector<int64_t> business_days(int years, bool with_holidays) {
  const int64_t first_day = 17532;  // 2018-01-01 in days since 1970-01-01 (a Thursday)
  const std::set<int> holiday_doy = {0, 14, 49, 88, 147, 184, 245, 326, 358};
  std::vector<int64_t> ts;
  for (int y = 0; y < years; ++y) {
    const int64_t year_start = first_day + y * 365;  // no leap-year precision needed here
    std::set<int64_t> holidays;
    for (int doy : holiday_doy) {
      int64_t d = year_start + doy;
      while ((d + 4) % 7 == 0 || (d + 4) % 7 == 6) ++d;  // 0 = Sunday, 6 = Saturday
      holidays.insert(d);
    }
    for (int64_t d = year_start; d < year_start + 365; ++d) {
      const int64_t weekday = (d + 4) % 7;
      if (weekday == 0 || weekday == 6) continue;
      if (with_holidays && holidays.count(d)) continue;
      ts.push_back(d * kDayMs);
    }
  }
  return ts;
}

TEST(Backtest, InfersPeriodsPerYearFromALongSpan) {
  // Exchange calendar over 4 years: ~252 bars a year.
  const double ppy = infer_periods_per_year(business_days(4, true));
  EXPECT_NEAR(ppy, 252.0, 252.0 * 0.02) << ppy;
  // A pure Monday-Friday calendar has 365.25 * 5 / 7 = 260.9 weekdays a year: the rule counts
  // the bars that are there.
  EXPECT_NEAR(infer_periods_per_year(business_days(4, false)), 365.25 * 5 / 7, 1.0);
  // Hourly bars around the clock for 60 days: (n - 1) / span is exactly 24 * 365.25 = 8766.
  std::vector<int64_t> hourly;
  for (int64_t h = 0; h <= 60 * 24; ++h) hourly.push_back(1'700'000'000'000 + h * kHourMs);
  EXPECT_NEAR(infer_periods_per_year(hourly), 8766.0, 1e-9);
  // A bar series (timestamps in seconds) gives the same.
  BarSeries series;
  for (int64_t t : hourly) series.bars.push_back({.timestamp = t / 1000, .close = 1.0});
  EXPECT_NEAR(infer_periods_per_year(series), 8766.0, 1e-9);
}

TEST(Backtest, InfersPeriodsPerYearFromTheMedianSpacingOfAShortSpan) {
  // 10 days of hourly bars with a 12-hour outage: span < 30 days, so the median spacing (1 h)
  // decides: 365.25 * 24 = 8766. (The count rule would say fewer.)
  std::vector<int64_t> hourly;
  for (int64_t h = 0; h < 10 * 24; ++h) {
    if (h >= 100 && h < 112) continue;
    hourly.push_back(h * kHourMs);
  }
  EXPECT_NEAR(infer_periods_per_year(hourly), 8766.0, 1e-9);
  // Two timestamps a day apart: 365.25.
  EXPECT_NEAR(infer_periods_per_year({0, kDayMs}), 365.25, 1e-12);
  // An even number of gaps takes the mean of the two middle ones: gaps 1, 1, 3, 3 h -> 2 h.
  EXPECT_NEAR(infer_periods_per_year({0, kHourMs, 2 * kHourMs, 5 * kHourMs, 8 * kHourMs}),
              8766.0 / 2, 1e-9);

  // The calendar inference (data/calendar.h) names itself in its errors.
  foxhunt::testing::expect_input_error([] { infer_periods_per_year(std::vector<int64_t>{5}); },
                                       "calendar", {"at least 2 timestamps"});
  foxhunt::testing::expect_input_error(
      [] {
        infer_periods_per_year(std::vector<int64_t>{0, 10, 10});
      },
      "calendar", {"strictly increasing", "index 2"});
}

}  // namespace
}  // namespace foxhunt::data
