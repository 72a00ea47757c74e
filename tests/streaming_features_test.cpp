#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/feature_table.h"
#include "foxhunt/data/features.h"
#include "foxhunt/data/streaming_features.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

// Relative difference |s - b| / max(|b|, floor). Bank values are plain numbers whose typical
// magnitudes run from ~1e-4 (one-bar returns, ranges) to ~1; below the floor the comparison
// becomes absolute (1e-6 * 1e-6 = 1e-12), since a value crossing zero (a mean return, an SMA
// distance) has no meaningful relative error.
constexpr double kRelFloor = 1e-6;
constexpr double kRelTolerance = 1e-6;

double rel_diff(float s, float b) {
  return std::abs(static_cast<double>(s) - static_cast<double>(b)) /
         std::max(std::abs(static_cast<double>(b)), kRelFloor);
}

/// "rv_20" -> "rv", "macd_signal_12_26_9" -> "macd_signal": the name without trailing numbers.
std::string family(const std::string& name) {
  std::string f = name;
  while (true) {
    const size_t u = f.rfind('_');
    if (u == std::string::npos || u + 1 == f.size() ||
        !std::all_of(f.begin() + static_cast<std::ptrdiff_t>(u) + 1, f.end(),
                     [](char c) { return c >= '0' && c <= '9'; }))
      return f;
    f.resize(u);
  }
}

class StreamingFeaturesTest : public ::testing::Test {
 protected:
  static BarSeries series(int64_t bars, uint64_t seed) {
    return generate_synthetic({.bars = bars, .seed = seed});
  }

  struct Comparison {
    double max_rel_warm = 0.0;   // rows >= kFeatureWarmup
    double max_rel_early = 0.0;  // rows < kFeatureWarmup
    int64_t identical = 0, total = 0;
    std::map<std::string, double> family_max;  // rows >= kFeatureWarmup
    std::string worst;                         // where max_rel_warm or max_rel_early was seen
  };

  /// Streams `s` and compares every row with compute_observed_features(s).
  static Comparison compare(const BarSeries& s) {
    const Matrix batch = compute_observed_features(s);
    const auto& names = observed_feature_names();
    Comparison cmp;
    double worst = -1.0;
    StreamingFeatures engine;
    for (int64_t t = 0; t < s.size(); ++t) {
      const auto row = engine.update(s.bars[static_cast<size_t>(t)]);
      EXPECT_EQ(row.size(), static_cast<size_t>(kObservedFeatures));
      for (int64_t c = 0; c < kObservedFeatures; ++c) {
        const float sv = row[static_cast<size_t>(c)], bv = batch.at(t, c);
        const double d = rel_diff(sv, bv);
        cmp.identical += sv == bv;
        ++cmp.total;
        if (t >= kFeatureWarmup) {
          cmp.max_rel_warm = std::max(cmp.max_rel_warm, d);
          double& fm = cmp.family_max[family(names[static_cast<size_t>(c)])];
          fm = std::max(fm, d);
        } else {
          cmp.max_rel_early = std::max(cmp.max_rel_early, d);
        }
        if (d > worst) {
          worst = d;
          std::ostringstream os;
          os << names[static_cast<size_t>(c)] << " at bar " << t << ": stream " << sv << ", batch "
             << bv;
          cmp.worst = os.str();
        }
      }
    }
    return cmp;
  }
};

// One vocabulary for train and serve: the names the batch bank builder gives its columns, the
// names of kFeatureTable and the names of the columns the streaming engine planned are one list,
// in one order, kObservedFeatures long; and both paths produce rows of that width.
TEST(FeatureTableTest, BatchBankAndStreamingEngineAreGeneratedFromTheTable) {
  std::vector<std::string> table;
  for (const FeatureSpec& f : kFeatureTable) table.push_back(feature_name(f));
  ASSERT_EQ(table.size(), static_cast<size_t>(kObservedFeatures));
  EXPECT_EQ(observed_feature_names(), table);
  EXPECT_EQ(StreamingFeatures::column_names(), table);
  EXPECT_EQ(past_feature_names(),
            std::vector<std::string>(table.begin(), table.begin() + kPastBankFeatures));
  // Anchors of the vocabulary: the first column, the last TFT column, the last RL lag.
  EXPECT_EQ(table.front(), "ret_lag_0");
  EXPECT_EQ(table[static_cast<size_t>(kPastBankFeatures) - 1], "jump_flag");
  EXPECT_EQ(table.back(), "rv_20_lag_5");
  // A name is its kind's pattern with the parameters written in.
  EXPECT_EQ(feature_name({FeatureKind::kMacdSignal, 12, 26, 9}), "macd_signal_12_26_9");
  EXPECT_EQ(feature_name({FeatureKind::kJumpFlag, 60}), "jump_flag");

  const auto s = generate_synthetic({.bars = 300, .seed = 1});
  EXPECT_EQ(compute_observed_features(s).cols, kObservedFeatures);
  StreamingFeatures engine;
  EXPECT_EQ(engine.update(s.bars[0]).size(), table.size());
}

TEST_F(StreamingFeaturesTest, MatchesBatchOnEveryBar) {
  const Comparison cmp = compare(series(10000, 7));
  EXPECT_LE(cmp.max_rel_warm, kRelTolerance) << "worst: " << cmp.worst;
  EXPECT_LE(cmp.max_rel_early, kRelTolerance) << "worst: " << cmp.worst;
  // The measured figures, for the record: per feature family (after warm-up), the families
  // that are not bit-identical to the batch.
  std::ostringstream families;
  int64_t exact = 0;
  for (const auto& [name, d] : cmp.family_max) {
    if (d == 0.0)
      ++exact;
    else
      families << " " << name << "=" << d;
  }
  std::cout << "[stream] max rel diff (floor " << kRelFloor << "): after warm-up "
            << cmp.max_rel_warm << ", warm-up rows " << cmp.max_rel_early << "; bit-identical "
            << cmp.identical << "/" << cmp.total << " values; worst " << cmp.worst << "\n"
            << "[stream] " << exact << "/" << cmp.family_max.size()
            << " families bit-identical after warm-up; others:" << families.str() << "\n";
}

TEST_F(StreamingFeaturesTest, MatchesBatchOnCloseOnlySeriesWithoutVolume) {
  // Zero ranges and zero volume exercise the exact-zero paths (0 sums, 0 variances).
  auto s = series(1500, 11);
  for (Bar& b : s.bars) b.open = b.high = b.low = b.close, b.volume = 0.0;
  s.close_only = true;
  const Comparison cmp = compare(s);
  EXPECT_LE(cmp.max_rel_warm, kRelTolerance) << "worst: " << cmp.worst;
  EXPECT_LE(cmp.max_rel_early, kRelTolerance) << "worst: " << cmp.worst;
}

// Train and serve must see the same features on real data: the S&P 500 daily closes (close
// only, no volume), every bar, warm-up included.
TEST_F(StreamingFeaturesTest, MatchesBatchOnTheSp500Closes) {
  const std::string csv = foxhunt::testing::sp500_csv();
  ASSERT_TRUE(std::filesystem::exists(csv))
      << csv << " is missing: scripts/setup.sh fetches it (the arch wheel's S&P 500 data)";
  const BarSeries s = load_bars_csv(csv);
  ASSERT_EQ(s.size(), 5031);
  const Comparison cmp = compare(s);
  EXPECT_LE(cmp.max_rel_warm, kRelTolerance) << "worst: " << cmp.worst;
  EXPECT_LE(cmp.max_rel_early, kRelTolerance) << "worst: " << cmp.worst;
  std::cout << "[stream] S&P 500: max rel diff " << cmp.max_rel_warm << " (warm), "
            << cmp.max_rel_early << " (warm-up rows); bit-identical " << cmp.identical << "/"
            << cmp.total << "\n";
}

// Flat windows (a halted instrument: one price, one volume, for longer than every lookback) are
// where a two-pass variance leaves a rounding residue; both paths must give exactly 0 there.
TEST_F(StreamingFeaturesTest, MatchesBatchThroughFlatStretches) {
  auto s = series(1500, 3);
  const double c = s.bars[400].close;
  for (size_t i = 400; i < 700; ++i) {
    Bar& b = s.bars[i];
    b.open = b.high = b.low = b.close = c;
    b.volume = 1000.0;
  }
  const Comparison cmp = compare(s);
  EXPECT_LE(cmp.max_rel_warm, kRelTolerance) << "worst: " << cmp.worst;
  EXPECT_LE(cmp.max_rel_early, kRelTolerance) << "worst: " << cmp.worst;
}

TEST_F(StreamingFeaturesTest, MatchesBatchAcrossPriceJumps) {
  // Large gaps dwarf the ordinary returns in the sliding sums; when they leave the window the
  // sums must not keep their rounding error.
  auto s = series(1500, 5);
  for (size_t i = 300; i < s.bars.size(); i += 257) {
    const double f = (i / 257) % 2 ? 1.25 : 0.8;
    for (size_t j = i; j < s.bars.size(); ++j) {
      Bar& b = s.bars[j];
      b.open *= f, b.high *= f, b.low *= f, b.close *= f;
    }
  }
  const Comparison cmp = compare(s);
  EXPECT_LE(cmp.max_rel_warm, kRelTolerance) << "worst: " << cmp.worst;
  EXPECT_LE(cmp.max_rel_early, kRelTolerance) << "worst: " << cmp.worst;
}

TEST_F(StreamingFeaturesTest, MatchesBatchAfterOverflowingVolumes) {
  // Two volumes near DBL_MAX overflow the volume sums to inf; once they leave the windows the
  // sliding sums must be finite again.
  auto s = series(800, 6);
  s.bars[400].volume = s.bars[401].volume = 1e308;
  ASSERT_NO_THROW(validate_bars(s));
  const Comparison cmp = compare(s);
  EXPECT_LE(cmp.max_rel_warm, kRelTolerance) << "worst: " << cmp.worst;
}

TEST_F(StreamingFeaturesTest, RejectedBarLeavesStateUnchanged) {
  const auto s = series(800, 3);
  const size_t n = 400;
  StreamingFeatures reference, twin;
  for (size_t i = 0; i < n; ++i) {
    reference.update(s.bars[i]);
    twin.update(s.bars[i]);
  }
  const Bar good = s.bars[n];
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  struct Bad {
    Bar bar;
    std::string mentions;  // part of the message naming what was expected
  };
  std::vector<Bad> bad;
  auto with = [&](auto edit, std::string mentions) {
    Bar b = good;
    edit(b);
    bad.push_back({b, std::move(mentions)});
  };
  with([&](Bar& b) { b.close = nan; }, "expected a finite close, got nan");
  with([&](Bar& b) { b.high = inf; }, "expected a finite high, got inf");
  with([&](Bar& b) { b.volume = nan; }, "expected a finite volume >= 0, got nan");
  with([&](Bar& b) { b.volume = -1.0; }, "expected a finite volume >= 0, got -1");
  with([&](Bar& b) { b.low = 0.0; }, "expected low > 0, got 0");
  with([&](Bar& b) { b.open = b.low = -2.0; }, "expected open > 0, got -2");
  with([&](Bar& b) { std::swap(b.high, b.low); }, "expected high >= low");
  with([&](Bar& b) { b.close = b.high * 1.01; }, "expected close in [low");
  with([&](Bar& b) { b.open = b.low * 0.99; }, "expected open in [low");
  with([&](Bar& b) { b.timestamp = s.bars[n - 1].timestamp; }, "expected a timestamp after");
  with([&](Bar& b) { b.timestamp = s.bars[n - 1].timestamp - 60; }, "expected a timestamp after");

  for (const Bad& b : bad) {
    try {
      twin.update(b.bar);
      ADD_FAILURE() << "accepted a bad bar (" << b.mentions << ")";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(b.mentions), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("[stream] bar 400"), std::string::npos) << e.what();
    }
    std::string why;
    EXPECT_FALSE(twin.try_update(b.bar, &why));
    EXPECT_NE(why.find(b.mentions), std::string::npos) << why;
  }
  EXPECT_EQ(twin.bars_seen(), reference.bars_seen());
  EXPECT_EQ(twin.last_timestamp(), reference.last_timestamp());
  // The same later bars give bit-identical rows.
  for (size_t i = n; i < s.bars.size(); ++i) {
    const auto a = reference.update(s.bars[i]);
    const auto b = twin.update(s.bars[i]);
    ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size_bytes()), 0) << "bar " << i;
  }
}

TEST_F(StreamingFeaturesTest, TryUpdateAcceptsGoodBars) {
  const auto s = series(3, 1);
  StreamingFeatures f;
  std::string why = "untouched";
  EXPECT_TRUE(f.try_update(s.bars[0], &why));
  EXPECT_EQ(why, "untouched");
  EXPECT_TRUE(f.try_update(s.bars[1]));
  EXPECT_FALSE(f.try_update(s.bars[1]));  // same timestamp again: no reason requested, no throw
  EXPECT_EQ(f.bars_seen(), 2);
  EXPECT_EQ(f.last_timestamp(), s.bars[1].timestamp);
}

TEST_F(StreamingFeaturesTest, CopyIsAnIndependentSnapshotAndResetStartsOver) {
  const auto s = series(700, 9);
  StreamingFeatures a;
  for (size_t i = 0; i < 300; ++i) a.update(s.bars[i]);
  StreamingFeatures b = a;
  for (size_t i = 300; i < s.bars.size(); ++i) {
    const auto ra = a.update(s.bars[i]);
    const auto rb = b.update(s.bars[i]);
    ASSERT_EQ(std::memcmp(ra.data(), rb.data(), ra.size_bytes()), 0) << "bar " << i;
  }
  b.reset();
  EXPECT_EQ(b.bars_seen(), 0);
  StreamingFeatures fresh;
  for (size_t i = 0; i < 50; ++i) {
    const auto rf = fresh.update(s.bars[i]);
    const auto rb = b.update(s.bars[i]);
    ASSERT_EQ(std::memcmp(rf.data(), rb.data(), rf.size_bytes()), 0) << "bar " << i;
  }
}

TEST_F(StreamingFeaturesTest, ReadyAfterWarmupAndNoRowBeforeTheFirstBar) {
  StreamingFeatures f;
  EXPECT_THROW(f.row(), InputError);
  EXPECT_THROW(f.last_timestamp(), InputError);
  EXPECT_THROW(f.calendar(), InputError);
  const auto s = series(kFeatureWarmup + 2, 2);
  for (int64_t t = 0; t < s.size(); ++t) {
    f.update(s.bars[static_cast<size_t>(t)]);
    EXPECT_EQ(f.ready(), t >= kFeatureWarmup) << "bar " << t;
  }
  const auto cal = f.calendar();
  const auto want = calendar_features(s.bars.back().timestamp);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(cal[static_cast<size_t>(k)], want[static_cast<size_t>(k)]);
}

TEST_F(StreamingFeaturesTest, NormalizedRowsMatchTheDataset) {
  const auto s = series(1200, 4);
  const MarketDataset ds(s);
  const Normalizer& nz = ds.normalizer();
  StreamingFeatures f;
  std::vector<float> norm, rl;
  std::vector<float> want(static_cast<size_t>(kRlMarketFeatures));
  for (int64_t t = 0; t < s.size(); ++t) {
    f.update(s.bars[static_cast<size_t>(t)]);
    if (t < kFeatureWarmup) continue;
    f.normalized_row(nz, norm);
    f.rl_market_row(nz, rl);
    ASSERT_EQ(norm.size(), static_cast<size_t>(kObservedFeatures));
    ASSERT_EQ(rl.size(), static_cast<size_t>(kRlMarketFeatures));
    std::vector<float> own(f.row().begin(), f.row().end());
    nz.apply_row(own.data(), kObservedFeatures);
    ASSERT_EQ(own, norm) << "bar " << t;
    ds.fill_rl_market(t, want.data());
    for (int64_t c = 0; c < kRlMarketFeatures; ++c)
      // Standardising scales a raw difference by 1/std; the raw rows agree to ~1e-7 relative.
      ASSERT_NEAR(rl[static_cast<size_t>(c)], want[static_cast<size_t>(c)], 1e-4)
          << "bar " << t << " column " << c;
  }
  Normalizer wrong = nz;
  wrong.mean.pop_back();
  wrong.stddev.pop_back();
  EXPECT_THROW(f.normalized_row(wrong, norm), InputError);
}

}  // namespace
}  // namespace foxhunt::data
