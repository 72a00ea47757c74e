#include "foxhunt/data/forecast_eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/core/random.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

/// Runs `fn`, expecting an InputError from "forecast_eval" whose message contains every part.
template <typename Fn>
void expect_input_error(Fn fn, const std::vector<std::string>& parts) {
  foxhunt::testing::expect_input_error(fn, "forecast_eval", parts);
}

const std::vector<double> kTaus = {0.1, 0.5, 0.9};

/// Forecast rows sigma_i * Phi^-1(tau_k): the true quantiles of N(0, sigma_i^2).
QuantileMatrix gaussian_quantiles(const std::vector<double>& sigma,
                                  const std::vector<double>& taus) {
  QuantileMatrix q(sigma.size(), std::vector<double>(taus.size()));
  for (size_t i = 0; i < sigma.size(); ++i)
    for (size_t k = 0; k < taus.size(); ++k) q[i][k] = sigma[i] * inverse_normal_cdf(taus[k]);
  return q;
}

/// Heteroscedastic data: y_i = sigma_i * N(0, 1), sigma switching between 0.5 and 2 in regimes
/// of 200-600 points.
struct RegimeData {
  std::vector<double> past, y, sigma_y;
};
RegimeData regime_data(size_t num_past, size_t n, uint64_t seed) {
  Rng rng(seed);
  RegimeData d;
  double sigma = 0.5;
  size_t left = 0;
  for (size_t i = 0; i < num_past + n; ++i) {
    if (left == 0) {
      sigma = sigma == 0.5 ? 2.0 : 0.5;
      left = 200 + static_cast<size_t>(rng.uniform_int(401));
    }
    --left;
    const double v = sigma * rng.normal();
    if (i < num_past) {
      d.past.push_back(v);
    } else {
      d.y.push_back(v);
      d.sigma_y.push_back(sigma);
    }
  }
  return d;
}

TEST(ForecastEval, PinballByHand) {
  // y above q at tau 0.9: 0.9 * (3 - 1) = 1.8; below: (0.9 - 1) * (-1 - 1) = 0.2.
  EXPECT_DOUBLE_EQ(pinball(3, 1, 0.9), 1.8);
  EXPECT_DOUBLE_EQ(pinball(-1, 1, 0.9), 0.2);
  // At tau 0.1 the weights swap: 0.1 * 2 = 0.2 above, 0.9 * 2 = 1.8 below.
  EXPECT_DOUBLE_EQ(pinball(3, 1, 0.1), 0.2);
  EXPECT_DOUBLE_EQ(pinball(-1, 1, 0.1), 1.8);
  // The median's loss is half the absolute error; an exact forecast costs nothing.
  EXPECT_DOUBLE_EQ(pinball(-2.5, 1.5, 0.5), 2.0);
  EXPECT_EQ(pinball(2, 2, 0.3), 0.0);
}

TEST(ForecastEval, QRiskAndCoverageByHand) {
  // y = 2, -1, 4; levels 0.5 and 0.9; rows (1, 3), (1, 0), (1, 3) (the second one crossed).
  // tau 0.5: |2-1|/2 + |-1-1|/2 + |4-1|/2 = 0.5 + 1 + 1.5 = 3; mean 1.
  // tau 0.9: y - q = -1, -1, 1: 0.1 + 0.1 + 0.9 = 1.1; mean 1.1 / 3.
  // sum |y| = 7: q-risk 2 * 3 / 7 = 6/7 and 2 * 1.1 / 7 = 2.2/7.
  // Coverage of [q0, q1]: 2 in [1, 3] yes; -1 in [1, 0] no; 4 in [1, 3] no: 1/3. Nominal 0.4.
  const std::vector<double> y = {2, -1, 4};
  const QuantileMatrix q = {{1, 3}, {1, 0}, {1, 3}};
  const QuantileScores s = score_quantiles(y, q, {0.5, 0.9});
  ASSERT_EQ(s.pinball.size(), 2u);
  EXPECT_NEAR(s.pinball[0], 1.0, 1e-15);
  EXPECT_NEAR(s.pinball[1], 1.1 / 3, 1e-15);
  EXPECT_NEAR(s.mean_pinball, (1.0 + 1.1 / 3) / 2, 1e-15);
  EXPECT_NEAR(s.q_risk[0], 6.0 / 7, 1e-15);
  EXPECT_NEAR(s.q_risk[1], 2.2 / 7, 1e-15);
  EXPECT_NEAR(s.coverage, 1.0 / 3, 1e-15);
  EXPECT_NEAR(s.nominal_coverage, 0.4, 1e-15);
  EXPECT_EQ(s.n, 3u);
  const std::vector<double> per_point = pointwise_pinball(y, q, {0.5, 0.9});
  EXPECT_NEAR(per_point[0], (0.5 + 0.1) / 2, 1e-15);
  EXPECT_NEAR(per_point[2], (1.5 + 0.9) / 2, 1e-15);

  const nlohmann::json j = to_json(s);
  for (const char* key :
       {"taus", "pinball", "mean_pinball", "q_risk", "coverage", "nominal_coverage", "n"})
    EXPECT_TRUE(j.contains(key)) << key;
  // All-zero outcomes: q-risk is undefined (NaN, written as null in JSON text).
  const QuantileScores z = score_quantiles({0, 0}, {{1}, {1}}, {0.5});
  EXPECT_TRUE(std::isnan(z.q_risk[0]));
  EXPECT_EQ(to_json(z)["q_risk"].dump(), "[null]");
}

TEST(ForecastEval, InverseNormalCdf) {
  EXPECT_NEAR(inverse_normal_cdf(0.1), -1.2815515655446004, 1e-13);
  EXPECT_NEAR(inverse_normal_cdf(0.9), 1.2815515655446004, 1e-13);
  EXPECT_EQ(inverse_normal_cdf(0.5), 0.0);
  EXPECT_NEAR(inverse_normal_cdf(0.975), 1.959963984540054, 1e-13);
  EXPECT_NEAR(inverse_normal_cdf(0.025), -1.959963984540054, 1e-13);
  EXPECT_NEAR(inverse_normal_cdf(0.99), 2.3263478740408408, 1e-13);
  EXPECT_NEAR(inverse_normal_cdf(0.001), -3.090232306167813, 1e-12);  // lower-tail branch
  EXPECT_NEAR(inverse_normal_cdf(1e-10), -6.361340902404056, 1e-10);
  // Round trip through the CDF across both branches and the mirrored half.
  for (double p = 0.0005; p < 1.0; p += 0.0123) {
    const double x = inverse_normal_cdf(p);
    EXPECT_NEAR(0.5 * std::erfc(-x / std::sqrt(2.0)), p, 1e-15 + 1e-14 * p) << p;
  }
  expect_input_error([] { inverse_normal_cdf(0.0); }, {"(0, 1)", "got 0"});
  expect_input_error([] { inverse_normal_cdf(1.0); }, {"(0, 1)"});
  expect_input_error([] { inverse_normal_cdf(NAN); }, {"nan"});
}

TEST(ForecastEval, EmpiricalQuantileIsType7) {
  const std::vector<double> x = {-2, 3, 5};
  EXPECT_DOUBLE_EQ(empirical_quantile(x, 0.0), -2);
  EXPECT_DOUBLE_EQ(empirical_quantile(x, 0.25), 0.5);  // h = 0.5: -2 + 0.5 * 5
  EXPECT_DOUBLE_EQ(empirical_quantile(x, 0.5), 3);
  EXPECT_DOUBLE_EQ(empirical_quantile(x, 0.75), 4);  // h = 1.5: 3 + 0.5 * 2
  EXPECT_DOUBLE_EQ(empirical_quantile(x, 1.0), 5);
  EXPECT_DOUBLE_EQ(empirical_quantile({7}, 0.3), 7);
}

TEST(ForecastEval, CoverageOfTheTrueQuantilesOnNormalDraws) {
  Rng rng(2024);
  std::vector<double> y(20000);
  for (double& v : y) v = rng.normal();
  const QuantileMatrix q(y.size(), {-1.2816, 0.0, 1.2816});
  const QuantileScores s = score_quantiles(y, q, kTaus);
  EXPECT_NEAR(s.coverage, 0.8, 0.01);
  EXPECT_NEAR(s.nominal_coverage, 0.8, 1e-12);

  std::vector<double> past(500);
  for (double& v : past) v = rng.normal();
  const ForecastEvaluation ev = evaluate_forecast(past, y, q, kTaus, 1, {.resamples = 50});
  ASSERT_TRUE(ev.coverage_p10_p90.has_value());
  EXPECT_NEAR(*ev.coverage_p10_p90, 0.8, 0.01);
  ASSERT_EQ(ev.calibration.size(), 3u);
  for (size_t k = 0; k < kTaus.size(); ++k) {
    EXPECT_EQ(ev.calibration[k].first, kTaus[k]);
    EXPECT_NEAR(ev.calibration[k].second, kTaus[k], 0.01) << kTaus[k];
  }
  ASSERT_EQ(ev.central_coverage.size(), 1u);  // the pair (0.1, 0.9); 0.5 pairs with itself
  EXPECT_NEAR(ev.central_coverage[0].first, 0.8, 1e-12);
  EXPECT_EQ(ev.central_coverage[0].second, *ev.coverage_p10_p90);
}

// past = 1, 5; y = 3, -2, 4, 0; window 3; levels 0.25, 0.5, 0.75.
// Forecast of y_0 from {1, 5}:      type-7 quantiles 2, 3, 4.
// Forecast of y_1 from {1, 5, 3}:   sorted 1, 3, 5 -> 2, 3, 4.
// Forecast of y_2 from {5, 3, -2}:  sorted -2, 3, 5 -> 0.5, 3, 4.
// Forecast of y_3 from {3, -2, 4}:  sorted -2, 3, 4 -> 0.5, 3, 3.5.
const std::vector<double> kPast = {1, 5};
const std::vector<double> kY = {3, -2, 4, 0};
const std::vector<double> kQuartiles = {0.25, 0.5, 0.75};

TEST(ForecastEval, RollingQuantilesByHand) {
  const QuantileMatrix q = baseline_rolling_quantiles(kPast, kY, kQuartiles, 3);
  const QuantileMatrix expected = {{2, 3, 4}, {2, 3, 4}, {0.5, 3, 4}, {0.5, 3, 3.5}};
  ASSERT_EQ(q.size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(q[i][k], expected[i][k]) << i << "," << k;

  // Re-centred at the rolling median (3 throughout).
  const QuantileMatrix z = baseline_zero_median(kPast, kY, kQuartiles, 3);
  const QuantileMatrix zexp = {{-1, 0, 1}, {-1, 0, 1}, {-2.5, 0, 1}, {-2.5, 0, 0.5}};
  for (size_t i = 0; i < 4; ++i)
    for (size_t k = 0; k < 3; ++k) EXPECT_DOUBLE_EQ(z[i][k], zexp[i][k]) << i << "," << k;

  // Unconditional: the quantiles of {1, 5} for every point.
  const QuantileMatrix u = baseline_unconditional(kPast, 4, kQuartiles);
  ASSERT_EQ(u.size(), 4u);
  for (const auto& row : u) EXPECT_EQ(row, (std::vector<double>{2, 3, 4}));

  // A window longer than the history uses all of it: y_3 from {1, 5, 3, -2, 4}.
  const QuantileMatrix wide = baseline_rolling_quantiles(kPast, kY, {0.5}, 100);
  EXPECT_DOUBLE_EQ(wide[3][0], 3);
  EXPECT_DOUBLE_EQ(wide[1][0], 3);  // {1, 5, 3}
  EXPECT_DOUBLE_EQ(wide[2][0], 2);  // {1, 5, 3, -2}: h = 1.5 between 1 and 3
}

TEST(ForecastEval, GaussianBaselineByHand) {
  // Forecast of y_0 from {1, 5}: mean 3, sample variance (4 + 4) / 1 = 8, sigma = 2 sqrt 2.
  // Forecast of y_3 from {3, -2, 4}: mean 5/3, squares (16 + 121 + 49) / 9 = 186/9, / 2 = 31/3.
  const QuantileMatrix g = baseline_gaussian_vol(kPast, kY, kTaus, 3);
  const double z = inverse_normal_cdf(0.9);
  EXPECT_NEAR(g[0][2], 2 * std::sqrt(2.0) * z, 1e-12);
  EXPECT_NEAR(g[0][0], -2 * std::sqrt(2.0) * z, 1e-12);
  EXPECT_EQ(g[0][1], 0.0);
  EXPECT_NEAR(g[3][2], std::sqrt(31.0 / 3) * z, 1e-12);

  // Known sigma: on N(0, 3^2) draws the 60-bar sigma estimate is close to 3 and the P10-P90
  // band covers close to 80%.
  Rng rng(5);
  std::vector<double> past(60), y(20000);
  for (double& v : past) v = 3 * rng.normal();
  for (double& v : y) v = 3 * rng.normal();
  const QuantileMatrix q = baseline_gaussian_vol(past, y, kTaus, 60);
  double mean_sigma = 0;
  for (const auto& row : q) mean_sigma += row[2] / z;
  mean_sigma /= static_cast<double>(q.size());
  EXPECT_NEAR(mean_sigma, 3.0, 0.06);
  EXPECT_NEAR(score_quantiles(y, q, kTaus).coverage, 0.8, 0.015);
}

TEST(ForecastEval, BaselinesNeverSeeTheValueTheyForecast) {
  Rng rng(9);
  std::vector<double> past(30), y(40);
  for (double& v : past) v = rng.normal();
  for (double& v : y) v = rng.normal();
  const size_t i = 17;
  std::vector<double> changed = y;
  changed[i] += 100.0;
  using Fn = QuantileMatrix (*)(const std::vector<double>&, const std::vector<double>&,
                                const std::vector<double>&, size_t);
  for (const Fn fn :
       {Fn(baseline_rolling_quantiles), Fn(baseline_zero_median), Fn(baseline_gaussian_vol)}) {
    const QuantileMatrix a = fn(past, y, kTaus, 10);
    const QuantileMatrix b = fn(past, changed, kTaus, 10);
    for (size_t j = 0; j <= i; ++j) EXPECT_EQ(a[j], b[j]) << "forecast " << j;
    EXPECT_NE(a[i + 1], b[i + 1]);    // y_i is in the past of forecast i + 1
    EXPECT_EQ(a[i + 11], b[i + 11]);  // and has left the 10-point window again
  }
}

TEST(ForecastEval, PerfectForecasterBeatsTheBaselinesOnRegimeSwitches) {
  const RegimeData d = regime_data(1000, 10000, 77);
  const QuantileMatrix truth = gaussian_quantiles(d.sigma_y, kTaus);
  const ForecastEvaluation ev = evaluate_forecast(d.past, d.y, truth, kTaus, 3);
  ASSERT_EQ(ev.baselines.size(), 5u);
  ASSERT_EQ(ev.skills.size(), 5u);
  for (const SkillResult& s : ev.skills) {
    EXPECT_GT(s.skill, 0.0) << s.baseline;
    EXPECT_LE(s.skill_lo, s.skill) << s.baseline;
    EXPECT_GE(s.skill_hi, s.skill) << s.baseline;
  }
  // The short-window volatility baseline adapts fastest to a regime switch.
  EXPECT_EQ(ev.best_baseline, "gaussian_vol_w20");
  EXPECT_GT(ev.skill_vs_best, 0.0);
  EXPECT_LE(ev.skill_vs_best_lo, ev.skill_vs_best);
  EXPECT_GE(ev.skill_vs_best_hi, ev.skill_vs_best);
  EXPECT_TRUE(ev.beats_best_baseline);
  EXPECT_TRUE(ev.significantly_beats_best);
  EXPECT_NEAR(*ev.coverage_p10_p90, 0.8, 0.015);

  const nlohmann::json j = to_json(ev);
  for (const char* key : {"model", "baselines", "skills", "best_baseline", "skill", "skill_lo",
                          "skill_hi", "beats_best_baseline", "coverage_p10_p90", "calibration"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["baselines"].size(), 5u);
  EXPECT_TRUE(j["baselines"].contains("rolling_quantiles_w250"));
  EXPECT_TRUE(j["baselines"].contains("zero_median_w250"));
  EXPECT_TRUE(j["baselines"].contains("gaussian_vol_w60"));
  EXPECT_TRUE(j["baselines"].contains("unconditional"));
  EXPECT_EQ(j["best_baseline"], "gaussian_vol_w20");
  EXPECT_EQ(j["calibration"].size(), 3u);
  EXPECT_TRUE(j["calibration"][0].contains("observed_below"));
  EXPECT_EQ(j["calibration"][2]["tau"].get<double>(), 0.9);
}

TEST(ForecastEval, ZeroQuantilesLoseToTheBaselines) {
  const RegimeData d = regime_data(1000, 5000, 78);
  const QuantileMatrix zeros(d.y.size(), std::vector<double>(kTaus.size(), 0.0));
  const ForecastEvaluation ev = evaluate_forecast(d.past, d.y, zeros, kTaus, 3, {.resamples = 200});
  EXPECT_LT(ev.skill_vs_best, 0.0);
  EXPECT_LT(ev.skill_vs_best_hi, 0.0);
  EXPECT_FALSE(ev.beats_best_baseline);
  EXPECT_FALSE(ev.significantly_beats_best);
  EXPECT_FALSE(to_json(ev)["beats_best_baseline"].get<bool>());
  // The zero band covers nothing (only exact zeros would count).
  EXPECT_LT(*ev.coverage_p10_p90, 0.001);
}

TEST(ForecastEval, BootstrapIsDeterministicForASeed) {
  const RegimeData d = regime_data(300, 2000, 79);
  const QuantileMatrix truth = gaussian_quantiles(d.sigma_y, kTaus);
  const QuantileMatrix base = baseline_gaussian_vol(d.past, d.y, kTaus, 20);
  const SkillResult a = skill_vs(d.y, truth, base, kTaus, "g20", 42, 300, 20);
  const SkillResult b = skill_vs(d.y, truth, base, kTaus, "g20", 42, 300, 20);
  const SkillResult c = skill_vs(d.y, truth, base, kTaus, "g20", 43, 300, 20);
  EXPECT_EQ(a.skill_lo, b.skill_lo);
  EXPECT_EQ(a.skill_hi, b.skill_hi);
  EXPECT_NE(a.skill_lo, c.skill_lo);
  // The point estimate does not depend on the seed: 1 - model loss / baseline loss.
  EXPECT_EQ(a.skill, c.skill);
  EXPECT_DOUBLE_EQ(a.skill, 1.0 - a.model_loss / a.baseline_loss);
  EXPECT_DOUBLE_EQ(a.model_loss, score_quantiles(d.y, truth, kTaus).mean_pinball);
  EXPECT_EQ(a.baseline, "g20");
  EXPECT_LT(a.skill_lo, a.skill_hi);
  const nlohmann::json j = to_json(a);
  for (const char* key :
       {"baseline", "model_loss", "baseline_loss", "skill", "skill_lo", "skill_hi"})
    EXPECT_TRUE(j.contains(key)) << key;
  // A model scored against itself has skill 0 on every resample.
  const SkillResult self = skill_vs(d.y, base, base, kTaus, "self", 1, 50, 7);
  EXPECT_EQ(self.skill, 0.0);
  EXPECT_EQ(self.skill_lo, 0.0);
  EXPECT_EQ(self.skill_hi, 0.0);
}

TEST(ForecastEval, CoverageP10P90IsAbsentWithoutThoseLevels) {
  const RegimeData d = regime_data(100, 200, 80);
  const QuantileMatrix q = gaussian_quantiles(d.sigma_y, {0.05, 0.5, 0.95});
  const ForecastEvaluation ev =
      evaluate_forecast(d.past, d.y, q, {0.05, 0.5, 0.95}, 1, {.resamples = 20});
  EXPECT_FALSE(ev.coverage_p10_p90.has_value());
  EXPECT_TRUE(to_json(ev)["coverage_p10_p90"].is_null());
  ASSERT_EQ(ev.central_coverage.size(), 1u);
  EXPECT_NEAR(ev.central_coverage[0].first, 0.9, 1e-12);
}

TEST(ForecastEval, RejectsBadInput) {
  const std::vector<double> y = {0.1, -0.2, 0.3};
  const QuantileMatrix q(3, {-1, 0, 1});
  expect_input_error([&] { score_quantiles({}, {}, kTaus); }, {"y", "at least one"});
  expect_input_error(
      [&] {
        score_quantiles(y, QuantileMatrix(2, {-1, 0, 1}), kTaus);
      },
      {"expected 3 rows", "got 2"});
  expect_input_error(
      [&] {
        score_quantiles(y, {{-1, 0, 1}, {-1, 0}, {-1, 0, 1}}, kTaus);
      },
      {"row 1", "expected 3 quantiles", "got 2"});
  expect_input_error(
      [&] {
        score_quantiles(y, q, {0.5, 0.1, 0.9});
      },
      {"taus[1]", "strictly increasing"});
  expect_input_error([&] { score_quantiles(y, q, {0.1, 0.5, 1.0}); }, {"taus[2]", "(0, 1)"});
  expect_input_error([&] { score_quantiles(y, q, {0.0, 0.5, 0.9}); }, {"taus[0]"});
  expect_input_error([&] { score_quantiles(y, q, {}); }, {"taus", "at least one"});
  expect_input_error([&] { score_quantiles({0.1, NAN, 0.3}, q, kTaus); }, {"y[1]", "finite"});
  expect_input_error(
      [&] {
        score_quantiles(y, {{-1, 0, 1}, {-1, 0, 1}, {-1, INFINITY, 1}}, kTaus);
      },
      {"q[2][1]", "finite", "inf"});
  expect_input_error([&] { baseline_rolling_quantiles({}, y, kTaus, 5); }, {"past value"});
  expect_input_error([&] { baseline_rolling_quantiles({1.0}, y, kTaus, 0); }, {"window >= 1"});
  expect_input_error([&] { baseline_gaussian_vol({1.0}, y, kTaus, 20); },
                     {"at least 2 past values", "got 1"});
  expect_input_error([&] { baseline_gaussian_vol({1.0, 2.0}, y, kTaus, 1); }, {"window >= 2"});
  expect_input_error([&] { baseline_gaussian_vol({1.0, NAN}, y, kTaus, 5); }, {"past[1]"});
  expect_input_error([&] { baseline_unconditional({}, 3, kTaus); }, {"past value"});
  expect_input_error([&] { skill_vs(y, q, q, kTaus, "b", 1, 0); }, {"resamples >= 1"});
  expect_input_error([&] { skill_vs(y, q, q, kTaus, "b", 1, 10, 0); }, {"block length >= 1"});
  expect_input_error(
      [&] {
        skill_vs(y, q, QuantileMatrix(1, {0, 0, 0}), kTaus, "naive", 1);
      },
      {"naive", "expected 3 rows"});
  expect_input_error([&] { evaluate_forecast({1.0}, y, q, kTaus, 1); }, {"at least 2 past values"});
  expect_input_error(
      [&] {
        evaluate_forecast({1.0, 2.0}, y, q, kTaus, 1, {.vol_windows = {20, 20}});
      },
      {"distinct windows", "20"});
}

}  // namespace
}  // namespace foxhunt::data
