// The Probabilistic and Deflated Sharpe Ratios (data/sharpe_stats.h) against the papers' worked
// example and values computed by hand, the streamed volatility-targeted long (data/vol_target.h)
// against the backtests' batch positions, and the backtest's psr column.
//
// Independent figures: Python 3 with statistics.NormalDist (no scipy), the formulas typed from
// the papers:
//   sr0 = sqrt(v) * ((1 - g) * inv_cdf(1 - 1/n) + g * inv_cdf(1 - 1/(n e)))
//   psr = cdf((sr - sr_star) * sqrt(t - 1) / sqrt(1 - skew * sr + (kurt - 1) / 4 * sr^2))
#include "foxhunt/data/sharpe_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "foxhunt/data/backtest.h"
#include "foxhunt/data/vol_target.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

// Bailey & López de Prado (2014), "The Deflated Sharpe Ratio", section "A numerical example": a
// strategy of annualised Sharpe 2.5 over 5 years of daily returns (T = 1,250, 250 a year),
// skewness -3, kurtosis 10, chosen among N = 100 trials whose annualised Sharpe ratios have
// variance 1/2. Published: E[max SR] = 0.1132 per day (non-annualised) and DSR = 0.9004.
// Python (above): sr0 = 0.11317200186513214, dsr = 0.9003968344493904.
TEST(SharpeStats, DeflatedSharpeRatioOfThePapersExample) {
  const SharpeSample s{2.5 / std::sqrt(250.0), 1250, -3.0, 10.0};
  const SharpeTrials t{100, 0.5 / 250.0};  // annualised variance 1/2 in per-day units
  EXPECT_NEAR(expected_max_sharpe(t), 0.11317200186513214, 1e-12);
  EXPECT_NEAR(expected_max_sharpe(t), 0.1132, 5e-5);  // the published figure
  EXPECT_NEAR(deflated_sharpe_ratio(s, t), 0.9003968344493904, 1e-10);
  EXPECT_NEAR(deflated_sharpe_ratio(s, t), 0.9004, 5e-5);  // the published figure
  // Annualised, the hurdle is 1.789 (Python: 0.11317200186513214 * sqrt(250)).
  EXPECT_NEAR(expected_max_sharpe(t) * std::sqrt(250.0), 1.7894064662732077, 1e-10);
  // Against 0 instead of the search's hurdle the same track record is near certain (Python:
  // 0.9999968595078976): the deflation is what moves it.
  EXPECT_NEAR(probabilistic_sharpe_ratio(s), 0.9999968595078976, 1e-12);
}

// PSR (Bailey & López de Prado 2012) at values computed by hand in Python: SR 0.1 per bar over
// 100 bars, skewness -0.5, kurtosis 5, benchmark 0.05: cdf(0.05 * sqrt(99) / sqrt(1 + 0.05 +
// 0.01)) = 0.6855261906727255. For normal returns (skew 0, kurt 3) it is Lo's (2002)
// cdf(SR sqrt(n - 1) / sqrt(1 + SR^2 / 2)). Negative skew and fat tails lower it.
TEST(SharpeStats, ProbabilisticSharpeRatioByHand) {
  EXPECT_NEAR(probabilistic_sharpe_ratio({0.1, 100, -0.5, 5.0}, 0.05), 0.6855261906727255, 1e-12);
  const double sr = 0.08;
  EXPECT_NEAR(probabilistic_sharpe_ratio({sr, 250, 0.0, 3.0}),
              normal_cdf(sr * std::sqrt(249.0) / std::sqrt(1.0 + sr * sr / 2.0)), 1e-14);
  EXPECT_LT(probabilistic_sharpe_ratio({sr, 250, -1.0, 3.0}),
            probabilistic_sharpe_ratio({sr, 250, 0.0, 3.0}));
  EXPECT_LT(probabilistic_sharpe_ratio({sr, 250, 0.0, 9.0}),
            probabilistic_sharpe_ratio({sr, 250, 0.0, 3.0}));
  // At the benchmark: one half; with one observation nothing is known.
  EXPECT_DOUBLE_EQ(probabilistic_sharpe_ratio({0.05, 100, 0.0, 3.0}, 0.05), 0.5);
  EXPECT_DOUBLE_EQ(probabilistic_sharpe_ratio({0.3, 1, 0.0, 3.0}), 0.5);
  EXPECT_NEAR(normal_cdf(1.959963984540054), 0.975, 1e-12);
}

// Moments with the papers' (population) estimators; Python on the same 7 returns:
// mean / stdev(n - 1) = 0.20848420114464247, m3 / m2^1.5 = -0.4031556723130873,
// m4 / m2^2 = 2.1682530451678472.
TEST(SharpeStats, SampleMomentsByHand) {
  const std::vector<double> r = {0.01, -0.02, 0.015, 0.003, -0.007, 0.02, -0.001};
  const auto s = sharpe_sample(r);
  EXPECT_EQ(s.observations, 7);
  EXPECT_NEAR(s.sharpe, 0.20848420114464247, 1e-13);
  EXPECT_NEAR(s.skewness, -0.4031556723130873, 1e-13);
  EXPECT_NEAR(s.kurtosis, 2.1682530451678472, 1e-13);
  // The Sharpe ratio is the backtest's per-bar one.
  EXPECT_NEAR(s.sharpe * std::sqrt(252.0), sharpe_ratio(r, 252), 1e-13);
  // Without variation: Sharpe 0 and the normal moments.
  const auto flat = sharpe_sample({0.0, 0.0, 0.0});
  EXPECT_EQ(flat.sharpe, 0.0);
  EXPECT_EQ(flat.skewness, 0.0);
  EXPECT_EQ(flat.kurtosis, 3.0);
  EXPECT_NEAR(sample_variance({1.0, 2.0, 4.0}), 7.0 / 3.0, 1e-15);
}

// E[max] of N no-skill Sharpe ratios: 0 for one trial, growing with N; Python for N = 10, V = 1:
// 1.57459830134575.
TEST(SharpeStats, ExpectedMaximumGrowsWithTheTrials) {
  EXPECT_EQ(expected_max_sharpe({1, 1.0}), 0.0);
  EXPECT_NEAR(expected_max_sharpe({10, 1.0}), 1.57459830134575, 1e-12);
  EXPECT_LT(expected_max_sharpe({10, 1.0}), expected_max_sharpe({100, 1.0}));
  EXPECT_NEAR(expected_max_sharpe({10, 4.0}), 2 * 1.57459830134575, 1e-12);
  // A single trial deflates nothing: DSR = PSR(0).
  const SharpeSample s{0.1, 300, -0.2, 4.0};
  EXPECT_EQ(deflated_sharpe_ratio(s, {1, 0.5}), probabilistic_sharpe_ratio(s));
}

TEST(SharpeStats, BadInputIsNamed) {
  auto expect = [](auto fn, const char* part) {
    foxhunt::testing::expect_input_error(fn, "sharpe_stats", {part});
  };
  expect([] { sharpe_sample({}); }, "at least one return");
  expect([] { sharpe_sample({0.1, NAN}); }, "return 1");
  expect([] { probabilistic_sharpe_ratio({0.1, 0, 0.0, 3.0}); }, "at least 1 observation");
  expect([] { probabilistic_sharpe_ratio({0.1, 10, 0.0, 0.5}); }, "kurtosis");
  expect([] { expected_max_sharpe({0, 1.0}); }, "trials");
  expect([] { expected_max_sharpe({5, -1.0}); }, "sharpe_variance");
}

// The streamed baseline equals volatility_target_positions on the same closes (the warm-up's
// returns seeding the batch's window), bit for bit.
TEST(VolatilityTargetStream, EqualsTheBatchPositions) {
  std::vector<double> closes = {100.0};
  for (int t = 1; t < 300; ++t) {
    const double x = std::sin(t * 12.9898) * 43758.5453;
    closes.push_back(closes.back() * (1.0 + 0.02 * (x - std::floor(x) - 0.5)));
  }
  const size_t warm = 100;  // closes[0..warm] before the first scored bar
  std::vector<double> past;
  for (size_t t = 1; t <= warm; ++t) past.push_back(std::log(closes[t] / closes[t - 1]));
  const std::vector<double> scored(closes.begin() + warm, closes.end());
  const auto batch = volatility_target_positions(past, scored, 0.1, 252);
  VolatilityTargetStream stream;
  EXPECT_EQ(stream.position(0.1, 252), 0.0);  // nothing known yet: flat
  for (size_t t = 0; t < closes.size(); ++t) {
    stream.push(closes[t]);
    if (t < warm) continue;
    EXPECT_EQ(stream.position(0.1, 252), batch[t - warm]) << t;
  }
  EXPECT_EQ(stream.returns_seen(), 299);
  foxhunt::testing::expect_input_error([&] { stream.push(-1.0); }, "vol_target", {"close"});
  EXPECT_EQ(stream.returns_seen(), 299);  // unchanged
}

// Every backtest row carries its PSR against 0; dsr is null unless a search recorded its trials.
TEST(SharpeStats, BacktestReportsPsr) {
  std::vector<double> closes = {100.0}, positions;
  for (int t = 1; t < 120; ++t) {
    const double x = std::sin(t * 78.233) * 43758.5453;
    closes.push_back(closes.back() * (1.0 + 0.01 * (x - std::floor(x) - 0.45)));
  }
  for (size_t t = 0; t < closes.size(); ++t) positions.push_back(t % 3 == 0 ? 0.0 : 1.0);
  const auto r = run_backtest(closes, positions);
  EXPECT_NEAR(r.psr, probabilistic_sharpe_ratio(sharpe_sample(r.returns)), 1e-15);
  EXPECT_GT(r.psr, 0.0);
  EXPECT_LT(r.psr, 1.0);
  const auto j = to_json(r);
  EXPECT_EQ(j.at("psr").get<double>(), r.psr);
  EXPECT_TRUE(j.at("dsr").is_null());
  EXPECT_DOUBLE_EQ(run_backtest(closes, flat_positions(closes.size())).psr, 0.5);
}

}  // namespace
}  // namespace foxhunt::data
