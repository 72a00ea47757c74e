// Tests of foxhunt/core/stats.h against hand-computed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/core/stats.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using foxhunt::testing::kNaN;

/// Runs `f` and checks that it throws an InputError whose message contains `needle`.
template <typename F>
void expect_stats_error(F&& f, const std::string& needle) {
  foxhunt::testing::expect_input_error(f, "stats", {needle});
}

std::vector<double> one_to(int n) {
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 1.0);
  return v;
}

TEST(Stats, PercentileInterpolatesBetweenClosestRanks) {
  // {1,2,3,4}: rank h = 3p/100. p50 -> h=1.5 -> 2.5; p90 -> h=2.7 -> 3 + 0.7 = 3.7.
  const std::vector<double> v = {4, 1, 3, 2};  // unsorted on purpose
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_NEAR(percentile(v, 90), 3.7, 1e-12);
  EXPECT_NEAR(percentile(v, 25), 1.75, 1e-12);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4.0);
  // 1..1000: h = 999p/100. p99 -> 989.01 -> 990.01; p99.9 -> 998.001 -> 999.001.
  const auto big = one_to(1000);
  EXPECT_NEAR(percentile(big, 99), 990.01, 1e-9);
  EXPECT_NEAR(percentile(big, 99.9), 999.001, 1e-9);
  EXPECT_NEAR(percentile(big, 50), 500.5, 1e-9);
  EXPECT_DOUBLE_EQ(percentile({7.0}, 37), 7.0);
  // Equal infinite neighbours stay infinite instead of becoming NaN.
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(percentile({1.0, inf, inf}, 90), inf);
}

TEST(Stats, PercentileRejectsBadInput) {
  expect_stats_error([] { percentile({}, 50); }, "expected at least one value");
  expect_stats_error([] { percentile({1, 2}, -0.1); }, "expected a percentile p in [0, 100], got");
  expect_stats_error([] { percentile({1, 2}, 100.5); }, "got 100.5");
  expect_stats_error([] { percentile({1, 2}, kNaN); }, "got nan");
  expect_stats_error([] { percentile({1, kNaN, 2}, 50); }, "NaN at index 1 of 3");
}

TEST(Stats, SummarizeLatencies) {
  const LatencySummary s = summarize_latencies(one_to(1000));
  EXPECT_EQ(s.count, 1000u);
  EXPECT_DOUBLE_EQ(s.mean, 500.5);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 1000.0);
  EXPECT_NEAR(s.p50, 500.5, 1e-9);
  EXPECT_NEAR(s.p90, 900.1, 1e-9);
  EXPECT_NEAR(s.p99, 990.01, 1e-9);
  EXPECT_NEAR(s.p999, 999.001, 1e-9);
  const nlohmann::json j = to_json(s);
  for (const char* key : {"count", "mean", "min", "p50", "p90", "p99", "p99_9", "max"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.size(), 8u);
  EXPECT_EQ(j["count"].get<size_t>(), 1000u);
  EXPECT_NEAR(j["p99_9"].get<double>(), 999.001, 1e-9);
  expect_stats_error([] { summarize_latencies({}); }, "expected at least one latency sample");
  expect_stats_error([] { summarize_latencies({1, kNaN}); }, "NaN at index 1 of 2");
}

// Up to its cap the recorder is summarize_latencies itself; past it the percentiles come from
// its histogram, within 1 / 512 relative of the sorted sample at the percentile's lower rank,
// with count, mean, min and max still exact.
TEST(Stats, LatencyRecorderIsExactUpToItsCapThenWithinAHistogramBucket) {
  std::vector<double> xs;
  uint64_t state = 12345;
  for (int i = 0; i < 20000; ++i) {  // a heavy right tail over ~4 decades, and a few zeros
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(state >> 11) / 9007199254740992.0;
    xs.push_back(i % 997 == 0 ? 0.0 : 50.0 * std::exp(4.0 * u * u * u));
  }
  LatencyRecorder small(xs.size());  // never past its cap
  for (double x : xs) small.add(x);
  EXPECT_TRUE(small.exact());
  const auto want = summarize_latencies(xs);
  const auto got = small.summary();
  EXPECT_EQ(got.count, want.count);
  for (auto f :
       {&LatencySummary::mean, &LatencySummary::min, &LatencySummary::p50, &LatencySummary::p90,
        &LatencySummary::p99, &LatencySummary::p999, &LatencySummary::max})
    EXPECT_EQ(got.*f, want.*f);

  LatencyRecorder binned(100);
  for (double x : xs) binned.add(x);
  EXPECT_FALSE(binned.exact());
  const auto b = binned.summary();
  EXPECT_EQ(b.count, xs.size());
  EXPECT_NEAR(b.mean, want.mean, 1e-12 * want.mean);
  EXPECT_EQ(b.min, want.min);
  EXPECT_EQ(b.max, want.max);
  auto sorted = xs;
  std::sort(sorted.begin(), sorted.end());
  const auto lower_rank = [&](double p) {
    return sorted[static_cast<size_t>(std::floor(static_cast<double>(xs.size() - 1) * p / 100.0))];
  };
  for (auto [f, p] : {std::pair{&LatencySummary::p50, 50.0},
                      {&LatencySummary::p90, 90.0},
                      {&LatencySummary::p99, 99.0},
                      {&LatencySummary::p999, 99.9}}) {
    const double ref = lower_rank(p);
    EXPECT_NEAR(b.*f, ref, ref / 512.0) << "p" << p;
  }
  // One sample past the cap moves into the histogram as well.
  LatencyRecorder edge(3);
  for (double x : {5.0, 1.0, 3.0, 2.0}) edge.add(x);
  EXPECT_FALSE(edge.exact());
  EXPECT_NEAR(edge.summary().p50, 2.0, 2.0 / 512.0);
  EXPECT_EQ(edge.summary().count, 4u);
}

TEST(Stats, LatencyRecorderRejectsBadSamples) {
  LatencyRecorder r;
  expect_stats_error([&] { r.summary(); }, "expected at least one latency sample");
  expect_stats_error([&] { r.add(kNaN); }, "expected a latency >= 0, got nan (sample 0)");
  r.add(1.0);
  expect_stats_error([&] { r.add(-2.0); }, "got -2 (sample 1)");
  EXPECT_EQ(r.count(), 1u);
}

TEST(Stats, LeastSquaresExactLine) {
  // y = 3x - 2 through large x offsets (byte-count scale) to exercise the centred sums.
  std::vector<double> x, y;
  for (int i = 0; i < 50; ++i) {
    x.push_back(1e9 + 1000.0 * i);
    y.push_back(3.0 * x.back() - 2.0);
  }
  const LinearFit f = least_squares(x, y);
  EXPECT_EQ(f.n, 50u);
  EXPECT_NEAR(f.slope, 3.0, 1e-9);
  EXPECT_NEAR(f.intercept, -2.0, 1e-2);  // y ~ 3e9, so 1e-2 is ~1e-12 relative
  EXPECT_DOUBLE_EQ(f.r2, 1.0);
  const LinearFit small = least_squares({0, 1, 2, 3}, {1, 3, 5, 7});
  EXPECT_NEAR(small.slope, 2.0, 1e-12);
  EXPECT_NEAR(small.intercept, 1.0, 1e-12);
  EXPECT_NEAR(small.r2, 1.0, 1e-12);
  const nlohmann::json j = to_json(small);
  EXPECT_NEAR(j["slope"].get<double>(), 2.0, 1e-12);
  EXPECT_EQ(j["n"].get<size_t>(), 4u);
}

TEST(Stats, LeastSquaresNoisyAndConstant) {
  // Hand-computed: x = 0..4, y = {1, 2, 2, 4, 6}: mean x 2, mean y 3, Sxx 10, Sxy 12 ->
  // slope 1.2, intercept 0.6; SStot 16, SSres = 16 - 1.2 * 12 = 1.6 -> r2 0.9.
  const LinearFit f = least_squares({0, 1, 2, 3, 4}, {1, 2, 2, 4, 6});
  EXPECT_NEAR(f.slope, 1.2, 1e-12);
  EXPECT_NEAR(f.intercept, 0.6, 1e-12);
  EXPECT_NEAR(f.r2, 0.9, 1e-12);
  // Constant y: the flat line fits exactly, r2 = 1 by the documented rule (0.1 has no exact
  // mean, which is why the constant case is handled apart).
  const LinearFit flat = least_squares({1, 2, 3}, {0.1, 0.1, 0.1});
  EXPECT_DOUBLE_EQ(flat.slope, 0.0);
  EXPECT_DOUBLE_EQ(flat.intercept, 0.1);
  EXPECT_DOUBLE_EQ(flat.r2, 1.0);
  // Pure noise around a line has r2 well under 1 but within [0, 1].
  const LinearFit noise = least_squares({0, 1, 2, 3, 4, 5}, {1, -1, 1, -1, 1, -1});
  EXPECT_GE(noise.r2, 0.0);
  EXPECT_LT(noise.r2, 0.2);
}

TEST(Stats, LineSumsMatchLeastSquares) {
  // The running sums give least_squares' line on the same points (the hand-computed 1.2, 0.6).
  LineSums s;
  EXPECT_EQ(s.spread(), 0.0);
  const std::vector<double> x = {0, 1, 2, 3, 4}, y = {1, 2, 2, 4, 6};
  for (size_t i = 0; i < x.size(); ++i) s.add(x[i], y[i]);
  EXPECT_EQ(s.n, 5.0);
  EXPECT_GT(s.spread(), 0.0);
  EXPECT_NEAR(s.slope(), least_squares(x, y).slope, 1e-12);
  EXPECT_NEAR(s.intercept(s.slope()), least_squares(x, y).intercept, 1e-12);
  // The intercept of a given (clamped) slope goes through the mean point (2, 3).
  EXPECT_NEAR(s.intercept(1.0), 1.0, 1e-12);
  // One distinct x: no spread, the slope is undefined.
  LineSums same;
  same.add(2, 1);
  same.add(2, 5);
  EXPECT_EQ(same.spread(), 0.0);
}

TEST(Stats, LeastSquaresRejectsBadInput) {
  expect_stats_error([] { least_squares({1, 2, 3}, {1, 2}); }, "got 3 x values and 2 y values");
  expect_stats_error([] { least_squares({1}, {1}); }, "expected at least 2 points, got 1");
  expect_stats_error(
      [] {
        least_squares({2, 2, 2}, {1, 2, 3});
      },
      "expected at least two distinct x values, got all 3 equal to 2");
  expect_stats_error([] { least_squares({1, kNaN}, {1, 2}); }, "expected finite x");
  expect_stats_error([] { least_squares({1, 2}, {1, kNaN}); }, "expected finite y");
}

TEST(Stats, PoissonArrivalsHaveExponentialGaps) {
  const double rate = 1000.0;
  const auto t = poisson_arrivals(rate, 10.0, 42);  // ~10,000 arrivals
  ASSERT_GT(t.size(), 9000u);
  ASSERT_LT(t.size(), 11000u);
  std::vector<double> gaps;
  double prev = 0.0;
  for (double v : t) {
    ASSERT_GE(v, prev);  // non-decreasing from 0 (a zero gap needs a draw of exactly 1.0)
    ASSERT_LT(v, 10.0);
    gaps.push_back(v - prev);
    prev = v;
  }
  const double mean = std::accumulate(gaps.begin(), gaps.end(), 0.0) / gaps.size();
  double var = 0.0;
  for (double g : gaps) var += (g - mean) * (g - mean);
  var /= static_cast<double>(gaps.size() - 1);
  const double cv = std::sqrt(var) / mean;
  EXPECT_NEAR(mean, 1.0 / rate, 0.05 / rate);
  EXPECT_NEAR(cv, 1.0, 0.05);  // the exponential's coefficient of variation is 1
}

TEST(Stats, PoissonArrivalsAreSeeded) {
  const auto a = poisson_arrivals(200.0, 5.0, 7);
  const auto b = poisson_arrivals(200.0, 5.0, 7);
  const auto c = poisson_arrivals(200.0, 5.0, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  expect_stats_error([] { poisson_arrivals(0.0, 1.0, 1); }, "expected a finite rate > 0");
  expect_stats_error([] { poisson_arrivals(-3.0, 1.0, 1); }, "got -3");
  expect_stats_error([] { poisson_arrivals(kNaN, 1.0, 1); }, "expected a finite rate > 0");
  expect_stats_error([] { poisson_arrivals(1.0, 0.0, 1); }, "expected a finite duration > 0");
  expect_stats_error([] { poisson_arrivals(1.0, std::numeric_limits<double>::infinity(), 1); },
                     "expected a finite duration > 0");
  expect_stats_error([] { poisson_arrivals(1e9, 1e9, 1); }, "arrivals (rate * duration)");
}

TEST(Stats, HistogramCountsAndEdges) {
  const std::vector<double> v = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  const Histogram h = histogram(v, 5);
  ASSERT_EQ(h.edges.size(), 6u);
  ASSERT_EQ(h.counts.size(), 5u);
  EXPECT_FALSE(h.log_scale);
  EXPECT_DOUBLE_EQ(h.edges.front(), 0.0);
  EXPECT_DOUBLE_EQ(h.edges.back(), 10.0);
  // Bins [0,2) [2,4) [4,6) [6,8) [8,10]: the max (10) lands in the last bin.
  EXPECT_EQ(h.counts, (std::vector<uint64_t>{2, 2, 2, 2, 3}));
  const nlohmann::json j = to_json(h);
  EXPECT_EQ(j["counts"].size(), 5u);
  EXPECT_EQ(j["edges"].size(), 6u);
}

TEST(Stats, HistogramSumsToNAndKeepsTheMaxInTheLastBin) {
  std::vector<double> v;
  for (int i = 0; i < 997; ++i) v.push_back(std::sin(i * 0.37) * 50.0 + i * 0.01);
  for (int bins : {1, 3, 7, 64, 1000}) {
    const Histogram h = histogram(v, bins);
    uint64_t total = 0;
    for (uint64_t c : h.counts) total += c;
    EXPECT_EQ(total, v.size()) << bins;
    const double mx = *std::max_element(v.begin(), v.end());
    EXPECT_DOUBLE_EQ(h.edges.back(), mx);
    EXPECT_GE(h.counts.back(), 1u) << bins;
  }
  // All equal: the range is widened so the bins have a width; everything is counted.
  const Histogram same = histogram({3, 3, 3}, 4);
  EXPECT_LT(same.edges.front(), 3.0);
  EXPECT_GT(same.edges.back(), 3.0);
  EXPECT_EQ(same.counts[0] + same.counts[1] + same.counts[2] + same.counts[3], 3u);
}

TEST(Stats, HistogramLogScale) {
  const std::vector<double> v = {1, 10, 100, 1000, 10000};
  const Histogram h = histogram(v, 4, true);
  EXPECT_TRUE(h.log_scale);
  ASSERT_EQ(h.edges.size(), 5u);
  EXPECT_DOUBLE_EQ(h.edges.front(), 1.0);
  EXPECT_NEAR(h.edges[1], 10.0, 1e-9);
  EXPECT_NEAR(h.edges[2], 100.0, 1e-9);
  EXPECT_DOUBLE_EQ(h.edges.back(), 10000.0);
  uint64_t total = 0;
  for (uint64_t c : h.counts) total += c;
  EXPECT_EQ(total, 5u);
  EXPECT_EQ(h.counts.back(), 2u);  // 1000 (on an edge) and the max 10000
  // A value <= 0 cannot go on a log axis: linear bins, and the struct says so.
  const Histogram lin = histogram({0, 1, 10}, 2, true);
  EXPECT_FALSE(lin.log_scale);
}

TEST(Stats, HistogramRejectsBadInput) {
  expect_stats_error([] { histogram({}, 4); }, "expected at least one value");
  expect_stats_error([] { histogram({1, 2}, 0); }, "expected bins in [1, 1000000], got 0");
  expect_stats_error([] { histogram({1, kNaN}, 2); }, "expected finite values, got nan at index 1");
}

/// Samples every 1,000 inferences up to 20,000 with live = base + slope_per_inference * n.
void series(double base, double slope_per_inference, std::vector<double>& x,
            std::vector<double>& y) {
  x.clear();
  y.clear();
  for (int i = 0; i <= 20; ++i) {
    x.push_back(1000.0 * i);
    y.push_back(base + slope_per_inference * x.back());
  }
}

TEST(Stats, LeakVerdictFlatSeriesIsNoLeak) {
  std::vector<double> x, y;
  series(5e6, 0.0, x, y);
  const LeakVerdict v = leak_verdict(x, y, 5000000, 5000000, 16.0);
  EXPECT_TRUE(v.measured);
  EXPECT_EQ(v.samples, 21u);
  EXPECT_TRUE(v.exact_ok);
  EXPECT_EQ(v.residual_bytes, 0);
  EXPECT_DOUBLE_EQ(v.slope_bytes_per_1k, 0.0);
  EXPECT_DOUBLE_EQ(v.r2, 1.0);
  EXPECT_TRUE(v.trend_ok);
  EXPECT_FALSE(v.leak_detected);
  EXPECT_EQ(v.verdict, "no leak");
}

TEST(Stats, LeakVerdictTrendCatchesALeakReturnedAtTeardown) {
  std::vector<double> x, y;
  series(5e6, 0.064, x, y);  // 64 bytes per 1,000 inferences
  const LeakVerdict v = leak_verdict(x, y, 5000000, 5000000, 16.0);
  EXPECT_TRUE(v.measured);
  EXPECT_TRUE(v.exact_ok);
  EXPECT_NEAR(v.slope_bytes_per_1k, 64.0, 1e-6);
  EXPECT_NEAR(v.r2, 1.0, 1e-9);
  EXPECT_FALSE(v.trend_ok);
  EXPECT_TRUE(v.leak_detected);
  EXPECT_EQ(v.verdict, "leak: slope 64.0 B/1k > threshold 16.0 B/1k");
  // At the threshold itself the trend passes (slope <= threshold).
  EXPECT_FALSE(leak_verdict(x, y, 0, 0, 64.0 + 1e-6).leak_detected);
}

TEST(Stats, LeakVerdictResidualBytesAreALeak) {
  std::vector<double> x, y;
  series(5e6, 0.0, x, y);
  const LeakVerdict v = leak_verdict(x, y, 5000000, 5004096, 16.0);
  EXPECT_FALSE(v.exact_ok);
  EXPECT_TRUE(v.trend_ok);
  EXPECT_EQ(v.residual_bytes, 4096);
  EXPECT_TRUE(v.leak_detected);
  EXPECT_EQ(v.verdict, "leak: 4096 bytes not returned");
  // Both signals failing are both named.
  series(5e6, 0.064, x, y);
  EXPECT_EQ(leak_verdict(x, y, 0, 100, 16.0).verdict,
            "leak: 100 bytes not returned; leak: slope 64.0 B/1k > threshold 16.0 B/1k");
}

TEST(Stats, LeakVerdictUnmeasuredIsNeverNoLeak) {
  for (size_t n : {0u, 1u, 2u}) {
    const std::vector<double> x(n, 1.0), y(n, 100.0);
    const LeakVerdict v = leak_verdict(x, y, 100, 100, 16.0);
    EXPECT_FALSE(v.measured) << n;
    EXPECT_FALSE(v.trend_ok) << n;
    EXPECT_TRUE(v.exact_ok) << n;
    EXPECT_TRUE(v.leak_detected) << n;
    EXPECT_EQ(v.verdict, "not measured: fewer than 3 samples") << n;
  }
  // Three samples at one inference count cannot give a slope either.
  const LeakVerdict same = leak_verdict({5, 5, 5}, {1, 2, 3}, 0, 0, 16.0);
  EXPECT_FALSE(same.measured);
  EXPECT_TRUE(same.leak_detected);
  EXPECT_EQ(same.verdict, "not measured: all samples at one inference count");
  const nlohmann::json j = to_json(same);
  EXPECT_EQ(j["measured"], false);
  EXPECT_EQ(j["leak_detected"], true);
  EXPECT_EQ(j["verdict"], "not measured: all samples at one inference count");
}

TEST(Stats, LeakVerdictJsonAndBadInput) {
  std::vector<double> x, y;
  series(1e6, 0.032, x, y);
  const nlohmann::json j = to_json(leak_verdict(x, y, 10, 12, 16.0));
  for (const char* key : {"measured", "samples", "exact_ok", "residual_bytes", "slope_bytes_per_1k",
                          "r2", "threshold_bytes_per_1k", "trend_ok", "leak_detected", "verdict"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["residual_bytes"].get<int64_t>(), 2);
  EXPECT_NEAR(j["slope_bytes_per_1k"].get<double>(), 32.0, 1e-6);
  EXPECT_EQ(j["leak_detected"], true);
  expect_stats_error(
      [] {
        leak_verdict({1, 2, 3}, {1, 2}, 0, 0, 1.0);
      },
      "got 3 inference counts and 2 samples");
  expect_stats_error(
      [] {
        leak_verdict({1, 2, 3}, {1, kNaN, 2}, 0, 0, 1.0);
      },
      "expected finite live-bytes samples");
  expect_stats_error(
      [] {
        leak_verdict({1, 2, 3}, {1, 2, 3}, 0, 0, -1.0);
      },
      "expected a finite threshold >= 0");
}

}  // namespace
}  // namespace foxhunt
