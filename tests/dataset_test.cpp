#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <set>
#include <tuple>

#include "foxhunt/core/error.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/model.h"
#include "foxhunt/train/batches.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

// The window geometry and I/O spec of the default Mamba-2 and TFT (the model's own contract).
const models::IoSpec& mamba2_spec() {
  static const models::IoSpec s = models::make_model("mamba2")->spec();
  return s;
}
const models::IoSpec& tft_spec() {
  static const models::IoSpec s = models::make_model("tft")->spec();
  return s;
}
const WindowSpec kMamba2Window = train::window_of(mamba2_spec());
const WindowSpec kTftWindow = train::window_of(tft_spec());
models::Batch mamba2_batch(const MarketDataset& ds, const std::vector<int64_t>& anchors) {
  return train::market_batch(ds, mamba2_spec(), anchors);
}
models::Batch tft_batch(const MarketDataset& ds, const std::vector<int64_t>& anchors) {
  return train::market_batch(ds, tft_spec(), anchors);
}

// The first `n` window anchors of `split` (at least n must exist).
std::vector<int64_t> first_anchors(const MarketDataset& ds, Split split, const WindowSpec& spec,
                                   size_t n) {
  const auto anchors = ds.anchors(split, spec);
  EXPECT_GE(anchors.size(), n);
  return {anchors.begin(),
          anchors.begin() + static_cast<std::ptrdiff_t>(std::min(n, anchors.size()))};
}

class DatasetTest : public foxhunt::testing::SeededTest {
 protected:
  static BarSeries series(int64_t bars = 1500, uint64_t seed = 21) {
    return generate_synthetic({.bars = bars, .seed = seed});
  }
};

TEST_F(DatasetTest, ChronologicalSplitTilesUsableBars) {
  const auto s = chronological_split(1256, 256);
  EXPECT_EQ(s.train.begin, 256);
  EXPECT_EQ(s.train.size(), 700);
  EXPECT_EQ(s.validation.begin, s.train.end);
  EXPECT_EQ(s.validation.size(), 150);
  EXPECT_EQ(s.test.begin, s.validation.end);
  EXPECT_EQ(s.test.end, 1256);
  EXPECT_EQ(s.test.size(), 150);

  const auto custom = chronological_split(1100, 100, {0.5, 0.25, 0.25});
  EXPECT_EQ(custom.train.size(), 500);
  EXPECT_EQ(custom.validation.size(), 250);
  EXPECT_EQ(custom.test.size(), 250);

  EXPECT_THROW(chronological_split(1000, 256, {0.7, 0.2, 0.2}), InputError);
  EXPECT_THROW(chronological_split(258, 256), InputError);
  EXPECT_THROW(chronological_split(1000, 256, {0.0, 0.5, 0.5}), InputError);
}

TEST_F(DatasetTest, TooShortSeriesIsInputError) {
  EXPECT_THROW(MarketDataset(series(200)), InputError);  // shorter than the warm-up
  EXPECT_THROW(MarketDataset(series(258)), InputError);  // warm-up + 2: a split would be empty
  EXPECT_NO_THROW(MarketDataset(series(300)));
}

TEST_F(DatasetTest, Mamba2BatchShapesAndContents) {
  const MarketDataset ds(series());
  const auto pick = first_anchors(ds, Split::kTrain, kMamba2Window, 8);
  const auto b = mamba2_batch(ds, pick);
  ASSERT_EQ(b.inputs.size(), 1u);
  EXPECT_EQ(b.inputs[0].sizes(), (std::vector<int64_t>{8, 32, 32}));
  EXPECT_EQ(b.inputs[0].scalar_type(), torch::kFloat32);
  EXPECT_EQ(b.target.sizes(), (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(b.size(), 8);
  // Row i, step k, feature j is the normalised bank value of bar anchor-31+k.
  const auto& cols = compact_feature_columns();
  for (int i : {0, 7})
    for (int k : {0, 31})
      for (int j : {0, 13, 31})
        EXPECT_EQ(b.inputs[0][i][k][j].item<float>(), ds.features().at(pick[i] - 31 + k, cols[j]));
}

TEST_F(DatasetTest, TftBatchShapesDtypesAndContents) {
  DatasetOptions opt;
  opt.instrument_id = 3;
  const MarketDataset ds(series(), opt);
  const auto pick = first_anchors(ds, Split::kValidation, kTftWindow, 5);
  const auto b = tft_batch(ds, pick);
  ASSERT_EQ(b.inputs.size(), 3u);
  EXPECT_EQ(b.inputs[0].sizes(), (std::vector<int64_t>{5, 60, 225}));
  EXPECT_EQ(b.inputs[1].sizes(), (std::vector<int64_t>{5, 5, 4}));
  EXPECT_EQ(b.inputs[2].sizes(), (std::vector<int64_t>{5}));
  EXPECT_EQ(b.inputs[0].scalar_type(), torch::kFloat32);
  EXPECT_EQ(b.inputs[1].scalar_type(), torch::kFloat32);
  EXPECT_EQ(b.inputs[2].scalar_type(), torch::kInt64);
  EXPECT_EQ(b.inputs[2][4].item<int64_t>(), 3);
  EXPECT_EQ(b.target.sizes(), (std::vector<int64_t>{5, 5}));
  // Past rows end at the anchor; future rows are the calendar of the next 5 bars.
  EXPECT_EQ(b.inputs[0][2][59][100].item<float>(), ds.features().at(pick[2], 100));
  EXPECT_EQ(b.inputs[0][2][0][7].item<float>(), ds.features().at(pick[2] - 59, 7));
  const auto f = calendar_features(ds.series().bars[pick[2] + 3].timestamp);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(b.inputs[1][2][2][k].item<float>(), f[k]);
}

TEST_F(DatasetTest, VolatilityScaledTargetsDivideByTheAnchorsRealisedVolatility) {
  DatasetOptions opt;
  opt.target_vol_feature = "rv_20";
  opt.target_scale = 3;
  const MarketDataset ds(series(), opt);
  const auto c = ds.series().closes();
  const int64_t col = bank_column("rv_20", "test");
  const auto anchors = ds.anchors(Split::kValidation, kMamba2Window);
  for (int64_t a : {anchors.front(), anchors.back()}) {
    // rv_20 = sqrt(mean of the last 20 squared returns up to the anchor): known at the anchor.
    double sq = 0;
    for (int64_t i = a - 19; i <= a; ++i) sq += std::pow(std::log(c[i] / c[i - 1]), 2);
    const double rv = std::sqrt(sq / 20);
    EXPECT_NEAR(ds.raw_features().row(a)[col], rv, 1e-6 * rv);
    EXPECT_NEAR(ds.target_divisor(a), ds.raw_features().row(a)[col], 1e-12);
    float t = 0;
    ds.fill_target(a, {1, 1}, &t);
    EXPECT_NEAR(t, 3 * std::log(c[a + 1] / c[a]) / ds.target_divisor(a), 1e-5);
  }
  DatasetOptions bad;
  bad.target_vol_feature = "no_such_column";
  EXPECT_NE(
      foxhunt::testing::input_error([&] { MarketDataset(series(), bad); }).find("no_such_column"),
      std::string::npos);
  EXPECT_EQ(MarketDataset(series(), DatasetOptions{}).target_divisor(anchors.front()), 1.0);
}

TEST_F(DatasetTest, AbsReturnTargetVolatilitiesAreWeightedMeansOfThePastAbsoluteReturns) {
  const auto c = series().closes();
  // Hand-computed from the closes: returns up to and including the anchor's, never later ones.
  auto absret = [&](int64_t a, int64_t window, double halflife) {
    double sum = 0, weights = 0;
    for (int64_t i = 0; i < window; ++i) {  // i-th most recent
      const double w = halflife > 0 ? std::pow(2.0, -static_cast<double>(i) / halflife) : 1.0;
      sum += w * std::fabs(std::log(c[a - i] / c[a - i - 1]));
      weights += w;
    }
    return sum / weights;
  };
  for (const auto& [name, window, halflife] :
       {std::tuple<std::string, int64_t, double>{"absret_mean_20", 20, 0.0},
        {"absret_mean_256", 256, 0.0},
        {"absret_ewm_10", kAbsRetEwmWindow, 10.0}}) {
    SCOPED_TRACE(name);
    DatasetOptions opt;
    opt.target_vol_feature = name;
    opt.target_scale = 2;
    const MarketDataset ds(series(), opt);
    const auto anchors = ds.anchors(Split::kTest, kMamba2Window);
    for (int64_t a : {anchors.front(), anchors.back()}) {
      const double d = absret(a, window, halflife);
      EXPECT_NEAR(ds.target_divisor(a), d, 1e-6 * d);
      float t = 0;
      ds.fill_target(a, {1, 1}, &t);
      EXPECT_NEAR(t, 2 * std::log(c[a + 1] / c[a]) / ds.target_divisor(a), 1e-5);
    }
    // The free function on the raw bank is what the dataset uses (and serving, on its history).
    const auto vol = parse_target_vol(name, "test");
    EXPECT_EQ(vol.window, window);
    EXPECT_EQ(target_divisor_at(vol, ds.raw_features(), anchors.front()),
              ds.target_divisor(anchors.front()));
  }
  // A jump moves the absret volatility by |J| / W, the realised one by far more.
  std::vector<float> calm(60, 1e-3f), jumped = calm;
  jumped.back() = 5e-2f;
  const auto mean60 = parse_target_vol("absret_mean_60", "test");
  EXPECT_NEAR(absret_divisor(mean60, jumped.data(), 60) - absret_divisor(mean60, calm.data(), 60),
              (5e-2 - 1e-3) / 60, 1e-9);
  // Flat prices floor the divisor instead of dividing by zero.
  const std::vector<float> flat(20, 0.0f);
  EXPECT_EQ(absret_divisor(parse_target_vol("absret_ewm_5", "test"), flat.data(), 20),
            kMinTargetVol);
  for (const std::string bad : {"absret_mean_0", "absret_mean_257", "absret_mean_x", "absret_ewm_",
                                "absret_ewm_1001", "rv_21"}) {
    SCOPED_TRACE(bad);
    EXPECT_NE(foxhunt::testing::input_error([&] { parse_target_vol(bad, "where"); }).find(bad),
              std::string::npos);
  }
  EXPECT_FALSE(parse_target_vol("", "test").enabled());
  EXPECT_EQ(parse_target_vol("rv_20", "test").column, bank_column("rv_20", "test"));
}

TEST_F(DatasetTest, TargetsEqualActualFutureLogReturns) {
  DatasetOptions opt;
  const MarketDataset ds(series(), opt);
  const auto c = ds.series().closes();
  const auto anchors = ds.anchors(Split::kTest, kTftWindow);
  const std::vector<int64_t> pick = {anchors.front(), anchors[anchors.size() / 2], anchors.back()};
  const auto b = tft_batch(ds, pick);
  for (size_t i = 0; i < pick.size(); ++i)
    for (int k = 0; k < 5; ++k)
      EXPECT_NEAR(b.target[i][k].item<float>(), std::log(c[pick[i] + 1 + k] / c[pick[i] + k]),
                  1e-7);
  const auto m = mamba2_batch(ds, pick);
  for (size_t i = 0; i < pick.size(); ++i)
    EXPECT_NEAR(m.target[i][0].item<float>(), std::log(c[pick[i] + 1] / c[pick[i]]), 1e-7);

  opt.target_scale = 100;
  const MarketDataset scaled(series(), opt);
  const auto bs = mamba2_batch(scaled, pick);
  EXPECT_NEAR(bs.target[0][0].item<float>(), 100 * std::log(c[pick[0] + 1] / c[pick[0]]), 1e-5);
}

TEST_F(DatasetTest, SplitsDoNotShareTargetsAndStayChronological) {
  const MarketDataset ds(series());
  for (const WindowSpec& spec : {kMamba2Window, kTftWindow}) {
    std::vector<std::set<int64_t>> targets(3);
    for (int s = 0; s < 3; ++s) {
      const auto split = static_cast<Split>(s);
      const auto& range = ds.splits().get(split);
      const auto anchors = ds.anchors(split, spec);
      ASSERT_FALSE(anchors.empty()) << split_name(split);
      for (int64_t a : anchors) {
        EXPECT_GE(a - spec.past + 1, ds.options().warmup);
        for (int64_t k = 1; k <= spec.horizon; ++k) {
          EXPECT_TRUE(range.contains(a + k)) << split_name(split) << " anchor " << a;
          targets[s].insert(a + k);
        }
      }
    }
    EXPECT_LT(*targets[0].rbegin(), *targets[1].begin());
    EXPECT_LT(*targets[1].rbegin(), *targets[2].begin());
    // Every bar of validation and test is some window's target (no bars wasted at the seams).
    EXPECT_EQ(*targets[1].begin(), ds.splits().validation.begin);
    EXPECT_EQ(*targets[2].rbegin(), ds.size() - 1);
  }
}

TEST_F(DatasetTest, NormalizationComesFromTrainingSplitOnly) {
  const auto base = series();
  const MarketDataset ds(base);
  const auto& test = ds.splits().test;

  // Wild changes to validation and test bars leave the statistics untouched.
  auto changed = base;
  for (int64_t i = ds.splits().validation.begin; i < changed.size(); ++i) {
    Bar& b = changed.bars[static_cast<size_t>(i)];
    b.open *= 3;
    b.close *= 3.3;
    b.high = std::max(b.open, b.close) * 1.05;
    b.low = std::min(b.open, b.close) * 0.95;
    b.volume *= 10;
  }
  const MarketDataset ds2(changed);
  EXPECT_EQ(ds2.normalizer().mean, ds.normalizer().mean);
  EXPECT_EQ(ds2.normalizer().stddev, ds.normalizer().stddev);
  int differing = 0;  // ... while the test-split features themselves did change
  for (int64_t c = 0; c < kObservedFeatures; ++c)
    differing += ds2.features().at(test.begin, c) != ds.features().at(test.begin, c);
  EXPECT_GT(differing, 10);

  // A change inside the training split does move them (the check above can fail).
  auto in_train = base;
  in_train.bars[static_cast<size_t>(ds.splits().train.begin + 10)].volume *= 50;
  const MarketDataset ds3(in_train);
  EXPECT_NE(ds3.normalizer().mean, ds.normalizer().mean);

  // Normalised training rows are standardised; the fit ignores warm-up rows.
  const auto& tr = ds.splits().train;
  const int64_t c = 0;  // ret_lag_0
  double mean = 0;
  for (int64_t t = tr.begin; t < tr.end; ++t) mean += ds.features().at(t, c);
  mean /= static_cast<double>(tr.size());
  EXPECT_NEAR(mean, 0.0, 0.05);  // clipping can shift it slightly
}

TEST_F(DatasetTest, SeededShuffledBatches) {
  std::vector<int64_t> anchors(103);
  std::iota(anchors.begin(), anchors.end(), 500);
  const auto a = make_batches(anchors, 16, true, 7);
  const auto b = make_batches(anchors, 16, true, 7);
  const auto c = make_batches(anchors, 16, true, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  ASSERT_EQ(a.size(), 7u);
  EXPECT_EQ(a.back().size(), 7u);
  std::multiset<int64_t> seen;
  for (const auto& batch : a) seen.insert(batch.begin(), batch.end());
  EXPECT_EQ(seen, std::multiset<int64_t>(anchors.begin(), anchors.end()));
  EXPECT_NE(a.front(), std::vector<int64_t>(anchors.begin(), anchors.begin() + 16));

  const auto ordered = make_batches(anchors, 16, false, 7, /*drop_last=*/true);
  ASSERT_EQ(ordered.size(), 6u);
  EXPECT_EQ(ordered[1].front(), 516);
  EXPECT_THROW(make_batches(anchors, 0, false, 0), InputError);
}

TEST_F(DatasetTest, BadWindowsAreRejected) {
  const MarketDataset ds(series());
  std::vector<float> x(32 * 32), y(1);
  const auto& cols = compact_feature_columns();
  EXPECT_THROW(ds.fill_past(ds.options().warmup, kMamba2Window, cols, x.data()),
               InputError);  // window would reach into the warm-up
  EXPECT_THROW(ds.fill_target(ds.size() - 1, kMamba2Window, y.data()),
               InputError);  // no next bar
  EXPECT_THROW(ds.fill_past(ds.options().warmup + 40, kMamba2Window, {kObservedFeatures}, x.data()),
               InputError);  // column outside the bank
  EXPECT_THROW(mamba2_batch(ds, {}), InputError);
  EXPECT_THROW(ds.anchors(Split::kTrain, {0, 1}), InputError);
}

TEST_F(DatasetTest, TensorConversionsRoundTrip) {
  Matrix m(3, 2);
  for (size_t i = 0; i < m.data.size(); ++i) m.data[i] = static_cast<float>(i) * 0.5f;
  const auto t = train::to_tensor(m);
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(t[2][1].item<float>(), 2.5f);
  const Matrix back = train::from_tensor(t.to(torch::kDouble));
  EXPECT_EQ(back.data, m.data);
  EXPECT_THROW(train::from_tensor(torch::zeros({2})), InputError);
}

}  // namespace
}  // namespace foxhunt::data
