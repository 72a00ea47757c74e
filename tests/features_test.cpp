#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numbers>
#include <set>

#include "foxhunt/core/error.h"
#include "foxhunt/core/random.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/features.h"

namespace foxhunt::data {
namespace {

class FeaturesTest : public ::testing::Test {
 protected:
  static BarSeries series(int64_t bars, uint64_t seed) {
    return generate_synthetic({.bars = bars, .seed = seed});
  }
  static int64_t column(const std::string& name) {
    const auto& names = observed_feature_names();
    auto it = std::find(names.begin(), names.end(), name);
    EXPECT_NE(it, names.end()) << name;
    return it - names.begin();
  }
};

TEST_F(FeaturesTest, ExactCountsAndUniqueNames) {
  EXPECT_EQ(observed_feature_names().size(), static_cast<size_t>(kObservedFeatures));
  EXPECT_EQ(past_feature_names().size(), 225u);
  EXPECT_EQ(calendar_feature_names().size(), 4u);
  EXPECT_EQ(compact_feature_names().size(), 32u);
  EXPECT_EQ(compact_feature_columns().size(), 32u);
  EXPECT_EQ(rl_state_names().size(), 256u);
  EXPECT_EQ(kRlStateDim, 256);
  const auto rl = rl_state_names();
  EXPECT_EQ(std::set<std::string>(rl.begin(), rl.end()).size(), rl.size()) << "duplicate names";
  EXPECT_EQ(rl[254], "position");
  EXPECT_EQ(rl[255], "unrealized_pnl");
  for (int64_t c : compact_feature_columns()) EXPECT_LT(c, kPastBankFeatures);  // subset of TFT
}

TEST_F(FeaturesTest, MatrixShapeAndFiniteValues) {
  const auto s = series(600, 1);
  const Matrix m = compute_observed_features(s);
  EXPECT_EQ(m.rows, 600);
  EXPECT_EQ(m.cols, 250);
  ASSERT_EQ(m.data.size(), 600u * 250u);
  for (float v : m.data) ASSERT_TRUE(std::isfinite(v));
  // Features are not degenerate after the warm-up: most columns vary.
  int varying = 0;
  for (int64_t c = 0; c < m.cols; ++c) {
    float lo = m.at(kFeatureWarmup, c), hi = lo;
    for (int64_t t = kFeatureWarmup; t < m.rows; ++t) {
      lo = std::min(lo, m.at(t, c));
      hi = std::max(hi, m.at(t, c));
    }
    varying += hi > lo;
  }
  EXPECT_GE(varying, 245);
}

TEST_F(FeaturesTest, KnownValuesMatchHandComputation) {
  const auto s = series(400, 2);
  const Matrix m = compute_observed_features(s);
  const auto c = s.closes();
  const int64_t t = 300;
  EXPECT_NEAR(m.at(t, column("ret_lag_0")), std::log(c[t] / c[t - 1]), 1e-7);
  EXPECT_NEAR(m.at(t, column("ret_lag_3")), std::log(c[t - 3] / c[t - 4]), 1e-7);
  EXPECT_NEAR(m.at(t, column("logret_20")), std::log(c[t] / c[t - 20]), 1e-6);
  double ss = 0;
  for (int64_t i = t - 4; i <= t; ++i) ss += std::pow(std::log(c[i] / c[i - 1]), 2);
  EXPECT_NEAR(m.at(t, column("rv_5")), std::sqrt(ss / 5), 1e-7);
  const Bar& b = s.bars[t];
  EXPECT_NEAR(m.at(t, column("hl_lag_0")), std::log(b.high / b.low), 1e-7);
  double lsum = 0;
  for (int64_t i = t - 9; i <= t; ++i) lsum += std::log(c[i]);
  EXPECT_NEAR(m.at(t, column("dist_sma_10")), std::log(c[t]) - lsum / 10, 1e-6);
  double g = 0, l = 0;
  for (int64_t i = t - 13; i <= t; ++i) {
    const double r = std::log(c[i] / c[i - 1]);
    (r > 0 ? g : l) += std::abs(r);
  }
  EXPECT_NEAR(m.at(t, column("rsi_14")), 2 * g / (g + l) - 1, 1e-6);
}

TEST_F(FeaturesTest, NoLookAheadLaterBarsChangeNothingAtOrBefore) {
  const auto base = series(700, 3);
  const Matrix m0 = compute_observed_features(base);
  for (int64_t t : {0L, 1L, 255L, 400L, 698L}) {
    auto changed = base;
    Rng rng(static_cast<uint64_t>(t) + 17);
    for (size_t i = static_cast<size_t>(t) + 1; i < changed.bars.size(); ++i) {
      Bar& b = changed.bars[i];
      const double f = std::exp(0.05 * rng.normal());
      b.open *= f;
      b.close *= std::exp(0.05 * rng.normal()) * f;
      b.high = std::max(b.open, b.close) * 1.01;
      b.low = std::min(b.open, b.close) * 0.99;
      b.volume = b.volume * 3 + 50;
    }
    ASSERT_NO_THROW(validate_bars(changed));
    const Matrix m1 = compute_observed_features(changed);
    for (int64_t r = 0; r <= t; ++r)
      for (int64_t c = 0; c < m0.cols; ++c)
        ASSERT_EQ(m0.at(r, c), m1.at(r, c))
            << "feature " << observed_feature_names()[c] << " at bar " << r
            << " changed when bars after " << t << " changed";
    // The perturbation is real: the next row differs.
    int diff = 0;
    for (int64_t c = 0; c < m0.cols; ++c) diff += m0.at(t + 1, c) != m1.at(t + 1, c);
    EXPECT_GT(diff, 50) << "bar " << t + 1;
  }
}

TEST_F(FeaturesTest, CalendarFeaturesForKnownTimestamps) {
  // 2024-01-01 00:00:00 UTC was a Monday (day 0).
  auto f = calendar_features(1704067200);
  EXPECT_NEAR(f[0], 0.0, 1e-6);
  EXPECT_NEAR(f[1], 1.0, 1e-6);
  EXPECT_NEAR(f[2], 0.0, 1e-6);
  EXPECT_NEAR(f[3], 1.0, 1e-6);
  // Wednesday 2024-01-03 06:00 UTC: quarter day, day 2 of 7.
  f = calendar_features(1704067200 + 2 * 86400 + 6 * 3600);
  EXPECT_NEAR(f[0], 1.0, 1e-6);
  EXPECT_NEAR(f[1], 0.0, 1e-6);
  EXPECT_NEAR(f[2], std::sin(2 * std::numbers::pi * 2 / 7), 1e-6);
  EXPECT_NEAR(f[3], std::cos(2 * std::numbers::pi * 2 / 7), 1e-6);
  // Sunday 18:00 UTC: three quarters of the day, day 6.
  f = calendar_features(1704067200 + 6 * 86400 + 18 * 3600);
  EXPECT_NEAR(f[0], -1.0, 1e-6);
  EXPECT_NEAR(f[2], std::sin(2 * std::numbers::pi * 6 / 7), 1e-6);
  // Before 1970: 1969-12-31 12:00 UTC was a Wednesday noon.
  f = calendar_features(-43200);
  EXPECT_NEAR(f[1], -1.0, 1e-6);
  EXPECT_NEAR(f[3], std::cos(2 * std::numbers::pi * 2 / 7), 1e-6);

  const auto s = series(10, 1);
  const Matrix cal = compute_calendar_features(s);
  ASSERT_EQ(cal.rows, 10);
  ASSERT_EQ(cal.cols, 4);
  const auto f9 = calendar_features(s.bars[9].timestamp);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(cal.at(9, k), f9[k]);
}

TEST_F(FeaturesTest, CloseOnlySeriesGivesFiniteFeatures) {
  auto s = series(400, 4);
  for (Bar& b : s.bars) b.open = b.high = b.low = b.close;
  s.close_only = true;
  const Matrix m = compute_observed_features(s);
  for (float v : m.data) ASSERT_TRUE(std::isfinite(v));
  EXPECT_EQ(m.at(300, column("hl_lag_0")), 0.0f);
  EXPECT_EQ(m.at(300, column("parkinson_20")), 0.0f);
}

TEST_F(FeaturesTest, NormalizerStandardisesFittedRowsAndHandlesZeroVariance) {
  Matrix m(100, 3);
  for (int64_t r = 0; r < 100; ++r) {
    m.at(r, 0) = static_cast<float>(r);
    m.at(r, 1) = 5.0f;  // constant column
    m.at(r, 2) = static_cast<float>(r % 2 ? 1e-3 : -1e-3);
  }
  const auto nz = Normalizer::fit(m, 0, 100);
  EXPECT_NEAR(nz.mean[0], 49.5, 1e-9);
  EXPECT_NEAR(nz.stddev[0], std::sqrt((100.0 * 100 - 1) / 12), 1e-6);
  EXPECT_EQ(nz.stddev[1], 1.0);
  const Matrix out = nz.apply(m);
  double mean0 = 0, var0 = 0;
  for (int64_t r = 0; r < 100; ++r) mean0 += out.at(r, 0) / 100.0;
  for (int64_t r = 0; r < 100; ++r) var0 += std::pow(out.at(r, 0) - mean0, 2) / 100.0;
  EXPECT_NEAR(mean0, 0.0, 1e-5);
  EXPECT_NEAR(var0, 1.0, 1e-4);
  for (int64_t r = 0; r < 100; ++r) EXPECT_EQ(out.at(r, 1), 0.0f);
  EXPECT_NEAR(out.at(1, 2), 1.0, 1e-4);

  // Fitted on a sub-range only: rows outside it do not matter, and get clipped when extreme.
  Matrix big = m;
  big.at(99, 0) = 1e9f;
  const auto part = Normalizer::fit(big, 0, 50);
  EXPECT_NEAR(part.mean[0], 24.5, 1e-9);
  EXPECT_EQ(part.apply(big).at(99, 0), 10.0f);
  EXPECT_THROW(Normalizer::fit(m, 10, 10), InputError);
  Matrix wrong(2, 4);
  EXPECT_THROW(nz.apply(wrong), InputError);
}

TEST_F(FeaturesTest, NormalizerJsonRoundTrip) {
  Matrix m(10, 2);
  for (int64_t r = 0; r < 10; ++r) m.at(r, 0) = static_cast<float>(r * r), m.at(r, 1) = 1;
  const auto nz = Normalizer::fit(m, 0, 10, 4.0);
  const nlohmann::json j = nz;
  EXPECT_EQ(j["std"].size(), 2u);
  const auto back = j.get<Normalizer>();
  EXPECT_EQ(back.mean, nz.mean);
  EXPECT_EQ(back.stddev, nz.stddev);
  EXPECT_EQ(back.clip, 4.0);
  const auto again = nlohmann::json::parse(j.dump()).get<Normalizer>();
  EXPECT_EQ(again.mean, nz.mean);
  EXPECT_EQ(again.stddev, nz.stddev);

  nlohmann::json bad = j;
  bad["std"][1] = 0.0;
  EXPECT_THROW(bad.get<Normalizer>(), InputError);
  bad = j;
  bad["mean"].push_back(1.0);
  EXPECT_THROW(bad.get<Normalizer>(), InputError);
  EXPECT_THROW(nlohmann::json::object().get<Normalizer>(), InputError);
}

TEST_F(FeaturesTest, SelectColumnsPicksMamba2Subset) {
  const auto s = series(300, 5);
  const Matrix m = compute_observed_features(s);
  const Matrix sub = m.select_columns(compact_feature_columns());
  ASSERT_EQ(sub.cols, 32);
  EXPECT_EQ(sub.at(280, 0), m.at(280, column("ret_lag_0")));
  EXPECT_EQ(sub.at(280, 31), m.at(280, column(compact_feature_names()[31])));
  EXPECT_THROW(m.select_columns({250}), InputError);
}

}  // namespace
}  // namespace foxhunt::data
