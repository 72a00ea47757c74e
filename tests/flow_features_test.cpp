// The microstructure (flow) columns of bars built from a tape (data/flow_features.h): their values
// by hand, batch == streaming on the real E-mini tape, plain bar CSVs unchanged, the models'
// input widths, the bundle's record and serving's refusal of the other kind of bars.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data_cache.h"
#include "foxhunt/core/error.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/flow_features.h"
#include "foxhunt/data/market_data.h"
#include "foxhunt/data/streaming_features.h"
#include "foxhunt/data/tape_bars.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/serving.h"
#include "foxhunt/train/forecast_trainer.h"
#include "foxhunt/train/market_sources.h"
#include "test_util.h"
#include "train_test_util.h"

namespace foxhunt::data {
namespace {

Bar flow_test_bar(int64_t ts, double close) {
  Bar b;
  b.timestamp = ts;
  b.open = b.high = b.low = b.close = close;
  b.volume = 10.0;
  return b;
}

BarFlow flow_test_flow(int64_t end_ns, double vwap, int64_t prints, double buy, double sell,
                       double duration, double rv) {
  const int64_t start_ns = end_ns - static_cast<int64_t>(duration * 1e9);
  return {.interval_start_ns = start_ns,
          .start_ns = start_ns,
          .end_ns = end_ns,
          .vwap = vwap,
          .prints = prints,
          .buy_volume = buy,
          .sell_volume = sell,
          .duration_seconds = duration,
          .realized_variance = rv};
}

void expect_flow_row(const std::array<float, kFlowFeatures>& got,
                     const std::array<double, kFlowFeatures>& want, int bar) {
  for (size_t k = 0; k < want.size(); ++k)
    EXPECT_NEAR(got[k], want[k], 1e-6 * std::max(1.0, std::abs(want[k])))
        << flow_feature_names()[k] << " at bar " << bar;
}

// The E-mini tape's 1-minute bars (built once; null when the data cache has no tape).
const BarSeries* flow_emini_minutes() {
  static const std::unique_ptr<BarSeries> series = []() -> std::unique_ptr<BarSeries> {
    if (!std::filesystem::exists(foxhunt::testing::emini_tape_csv())) return nullptr;
    auto md = load_tape_market_data(foxhunt::testing::emini_tape_csv(), parse_bar_spec("time:60s"));
    return std::make_unique<BarSeries>(std::move(md.series));
  }();
  return series.get();
}

#define FOXHUNT_FLOW_REQUIRE_EMINI()                                                      \
  do {                                                                                    \
    if (flow_emini_minutes() == nullptr)                                                  \
      GTEST_SKIP() << foxhunt::testing::emini_tape_csv() << " absent (scripts/setup.sh)"; \
  } while (0)

}  // namespace

// Three bars whose columns follow from the file comment's formulas by hand.
TEST(FlowFeaturesTest, HandComputedBars) {
  FlowFeatures f;
  // Bar 0: 4 prints over its own 2 s (the first bar's span), 6 bought and 2 sold.
  const auto r0 = f.update(flow_test_bar(60, 100.0),
                           flow_test_flow(2'000'000'000, 99.5, 4, 6.0, 2.0, 2.0, 1e-6));
  expect_flow_row(r0,
                  {0.5, std::log(100.0 / 99.5), 0.0, std::log(3.0),
                   std::log((1e-6 + kFlowVarianceFloor) / (0.0 + kFlowVarianceFloor))},
                  0);
  // Bar 1: 20 prints 5 s after bar 0's last print, no signed volume, closing at its vwap.
  const auto r1 = f.update(flow_test_bar(120, 101.0),
                           flow_test_flow(7'000'000'000, 101.0, 20, 0, 0, 0.0, 3e-6));
  const double r = std::log(101.0 / 100.0);
  expect_flow_row(r1,
                  {0.0, 0.0, std::log(4.0) - (std::log(2.0) + std::log(4.0)) / 2.0, 0.0,
                   std::log((1e-6 + 3e-6 + kFlowVarianceFloor) / (r * r + kFlowVarianceFloor))},
                  1);
  // Bar 2: one print in the same nanosecond as bar 1's last: the span is floored at 1 ms.
  const auto r2 =
      f.update(flow_test_bar(180, 101.0), flow_test_flow(7'000'000'000, 101.0, 1, 0, 3, 0.0, 0.0));
  const double rate2 = std::log(1.0 / kMinFlowSpanSeconds);
  expect_flow_row(r2,
                  {-1.0, 0.0, rate2 - (std::log(2.0) + std::log(4.0) + rate2) / 3.0, 0.0,
                   std::log((4e-6 + kFlowVarianceFloor) / (r * r + kFlowVarianceFloor))},
                  2);
  EXPECT_EQ(f.bars_seen(), 3);
}

// A bad flow, or a flow the engine's mode does not expect, is refused and changes nothing.
TEST(FlowFeaturesTest, RefusesBadFlowsAndTheOtherModeWithTheStateUnchanged) {
  const Bar bar = flow_test_bar(60, 100.0);
  const BarFlow good = flow_test_flow(2'000'000'000, 100.0, 2, 1, 1, 1.0, 0.0);
  FlowFeatures f;
  BarFlow none = good;
  none.prints = 0;
  EXPECT_THROW(f.update(bar, none), InputError);
  BarFlow bad_vwap = good;
  bad_vwap.vwap = NAN;
  EXPECT_THROW(f.update(bar, bad_vwap), InputError);
  EXPECT_EQ(f.bars_seen(), 0);
  (void)f.update(bar, good);
  BarFlow earlier = good;
  earlier.end_ns = good.end_ns - 1;  // a last print before the previous bar's
  EXPECT_THROW(f.update(flow_test_bar(120, 100.0), earlier), InputError);
  EXPECT_EQ(f.bars_seen(), 1);

  StreamingFeatures with_flow(true), plain;
  EXPECT_TRUE(with_flow.has_flow());
  EXPECT_EQ(with_flow.width(), kObservedFeatures + kFlowFeatures);
  EXPECT_EQ(plain.width(), kObservedFeatures);
  EXPECT_THROW(with_flow.update(bar), InputError);  // a tape engine needs the bar's flow
  EXPECT_THROW(plain.update(bar, &good), InputError);
  EXPECT_EQ(with_flow.bars_seen(), 0);
  EXPECT_EQ(plain.bars_seen(), 0);
  EXPECT_EQ(with_flow.update(bar, &good).size(), static_cast<size_t>(kObservedFeatures + 5));
}

// The flow variant of a bank set ends with the flow columns; the calendar is the same.
TEST(FlowFeaturesTest, FeatureSetsGainTheFlowColumns) {
  EXPECT_EQ(flow_feature_names(),
            (std::vector<std::string>{"ofi", "vwap_dev", "intensity", "duration", "rv_ratio"}));
  for (const auto& plain : feature_sets()) {
    const auto& flow = feature_set(plain.name, true);
    EXPECT_EQ(&feature_set(plain.name, false), &feature_set(plain.name)) << plain.name;
    if (plain.name == "calendar") {
      EXPECT_EQ(flow.width, plain.width);
      continue;
    }
    EXPECT_EQ(flow.width, plain.width + kFlowFeatures) << plain.name;
    if (plain.columns.empty()) continue;
    ASSERT_EQ(flow.columns.size(), plain.columns.size() + kFlowFeatures) << plain.name;
    for (int64_t k = 0; k < kFlowFeatures; ++k)
      EXPECT_EQ(flow.columns[plain.columns.size() + static_cast<size_t>(k)], kObservedFeatures + k);
  }
  EXPECT_EQ(feature_set("compact32", true).width, 37);
  EXPECT_EQ(feature_set("rl_state", true).width, kRlStateDim + kFlowFeatures);
  EXPECT_THROW(feature_set("no_such_set", true), InputError);
}

// A series without a flow (a bar CSV, the synthetic default) gives exactly the matrices of the
// bank alone: today's features, bit for bit.
TEST(FlowFeaturesTest, PlainBarsKeepTheBankExactly) {
  SyntheticOptions so;
  so.bars = 900;
  so.seed = 3;
  const BarSeries s = generate_synthetic(so);
  ASSERT_FALSE(s.has_flow());
  const MarketDataset ds(s);
  const Matrix bank = compute_observed_features(s);
  EXPECT_FALSE(ds.has_flow());
  EXPECT_EQ(ds.raw_features().cols, kObservedFeatures);
  EXPECT_EQ(ds.raw_features().data, bank.data);
  EXPECT_EQ(compute_market_features(s).data, bank.data);
  const auto nz = Normalizer::fit(bank, ds.splits().train.begin, ds.splits().train.end);
  EXPECT_EQ(ds.normalizer().mean, nz.mean);
  EXPECT_EQ(ds.features().data, nz.apply(bank).data);
  EXPECT_EQ(ds.rl_market_width(), kRlMarketFeatures);
  EXPECT_EQ(ds.rl_market_features(300, 310).cols, kRlMarketFeatures);
  EXPECT_THROW(compute_flow_features(s), InputError);
}

// ---- the real E-mini S&P 500 tape --------------------------------------------------------------

// Batch (MarketDataset, compute_market_features) and streaming (StreamingFeatures in flow mode,
// as serving runs it) on the tape's 1-minute bars: the flow columns are bit-identical (one
// function computes them on both paths), raw and normalised. (The bank's own batch == streaming
// bound is streaming_features_test.cpp's; its worst relative difference here is recorded.)
TEST(FlowFeaturesEminiTest, BatchEqualsStreamingOnOneMinuteBars) {
  FOXHUNT_FLOW_REQUIRE_EMINI();
  const BarSeries& s = *flow_emini_minutes();
  ASSERT_TRUE(s.has_flow());
  ASSERT_GT(s.size(), 2000);
  const MarketDataset ds(s);
  ASSERT_TRUE(ds.has_flow());
  const Matrix& batch = ds.raw_features();
  ASSERT_EQ(batch.cols, kObservedFeatures + kFlowFeatures);
  StreamingFeatures engine(true);
  std::vector<float> normalized;
  int64_t flow_equal = 0, moving = 0;
  double bank_worst = 0.0;
  for (int64_t t = 0; t < s.size(); ++t) {
    const auto row = engine.update(s.bars[static_cast<size_t>(t)], &s.flow[static_cast<size_t>(t)]);
    ASSERT_EQ(row.size(), static_cast<size_t>(batch.cols));
    for (int64_t c = 0; c < kObservedFeatures; ++c) {
      const double b = batch.at(t, c);
      bank_worst = std::max(
          bank_worst, std::abs(row[static_cast<size_t>(c)] - b) / std::max(std::abs(b), 1e-3));
    }
    for (int64_t c = kObservedFeatures; c < batch.cols; ++c) {
      flow_equal += row[static_cast<size_t>(c)] == batch.at(t, c);
      moving += batch.at(t, c) != 0.0f;
    }
    engine.normalized_row(ds.normalizer(), normalized);
    for (int64_t c = kObservedFeatures; c < batch.cols; ++c)
      ASSERT_EQ(normalized[static_cast<size_t>(c)], ds.features().at(t, c)) << t << " " << c;
  }
  EXPECT_EQ(flow_equal, s.size() * kFlowFeatures);
  RecordProperty("bank_max_rel_diff", std::to_string(bank_worst));
  EXPECT_GT(moving, s.size() * 3);  // the columns carry information, not zeros
  // The bank itself does not change with the flow.
  BarSeries plain = s;
  plain.flow.clear();
  const Matrix bank = compute_observed_features(plain);
  for (int64_t t = 0; t < s.size(); t += 97)
    for (int64_t c = 0; c < kObservedFeatures; ++c) ASSERT_EQ(batch.at(t, c), bank.at(t, c));
}

// Every forecaster with width options trains an epoch on tape bars with its past input widened
// by the flow columns; the RL state gains them too.
TEST(FlowFeaturesEminiTest, ModelsTrainOnTapeBarsWithTheFlowWidths) {
  FOXHUNT_FLOW_REQUIRE_EMINI();
  testing::OneThread one;
  auto ds = std::make_shared<const MarketDataset>(*flow_emini_minutes());
  int trained = 0;
  for (const auto& e : models::catalog()) {
    if (e.family != models::Family::kForecaster || e.input_width_options.empty()) continue;
    const auto options = models::sized_inputs(
        e.name, e.compact_model_options,
        [](const models::InputSpec& in) { return feature_set(in.feature_set, true).width; });
    torch::manual_seed(7);
    auto model = models::make_model(e.name, options);
    for (const auto& in : model->spec().inputs) {
      if (in.role == models::InputRole::kPastFeatures) {
        EXPECT_EQ(in.features, feature_set(in.feature_set).width + kFlowFeatures) << e.name;
      }
    }
    // Plain bars keep the options as they are.
    EXPECT_EQ(models::sized_inputs(
                  e.name, e.compact_model_options,
                  [](const models::InputSpec& in) { return feature_set(in.feature_set).width; }),
              e.compact_model_options);
    train::MarketBatchSource source(ds, *model, 64, 7);
    train::ForecastTrainer trainer(
        *model, source, train::ForecastTrainerOptions().epochs(1).validate_initial(false));
    const auto result = trainer.train(foxhunt::testing::quiet_run());
    EXPECT_GT(result.steps, 0) << e.name;
    EXPECT_TRUE(std::isfinite(trainer.best_validation_loss())) << e.name;
    ++trained;
  }
  EXPECT_GE(trained, 2);
  train::PanelTradingEnv env({ds}, Split::kTrain, TradingEnvOptions{});
  EXPECT_EQ(env.observation_size(), kRlStateDim + kFlowFeatures);
}

// A bundle trained on tape bars records it, loads back with its flow normaliser, serves bars
// with their flow and refuses plain bars; a plain bundle refuses tape bars; a desk refuses a mix.
TEST(FlowFeaturesEminiTest, BundlesRecordFlowAndServingRefusesTheOtherBars) {
  FOXHUNT_FLOW_REQUIRE_EMINI();
  testing::OneThread one;
  testing::TempDir dir;
  const BarSeries& s = *flow_emini_minutes();
  const MarketDataset ds(s);
  std::vector<serving::Bundle> flow_bundles;
  for (const auto& e : models::catalog()) {
    nlohmann::json options;
    if (e.family == models::Family::kPolicy) {
      if (e.policy_options == nullptr) continue;
      options = models::policy_options(e.name, {kRlStateDim + kFlowFeatures, {16}, 3});
    } else {
      if (e.input_width_options.empty()) continue;
      options = models::sized_inputs(
          e.name, e.compact_model_options,
          [](const models::InputSpec& in) { return feature_set(in.feature_set, true).width; });
    }
    torch::manual_seed(3);
    serving::Bundle b;
    b.model = models::make_model(e.name, options);
    b.normalizer = ds.normalizer();
    b.flow_features = true;
    b.data = serving::fingerprint(s);
    const auto path = dir.file(e.name + ".fhb");
    serving::save_bundle(b, path);
    auto back = serving::load_bundle(path);
    EXPECT_TRUE(back.flow_features) << e.name;
    EXPECT_EQ(back.normalizer.cols(), kObservedFeatures + kFlowFeatures) << e.name;
    flow_bundles.push_back(std::move(back));
  }
  ASSERT_GE(flow_bundles.size(), 4u);

  serving::Ensemble ensemble(flow_bundles);
  EXPECT_TRUE(ensemble.flow_features());
  EXPECT_THROW(ensemble.on_bar(s.bars[0]), InputError);  // a plain bar
  EXPECT_EQ(ensemble.bars_seen(), 0);
  const int64_t n = ensemble.warmup_bars() + 5;
  ASSERT_LT(n, s.size());
  serving::BarDecision last;
  for (int64_t t = 0; t < n; ++t)
    last = ensemble.on_bar(s.bars[static_cast<size_t>(t)], &s.flow[static_cast<size_t>(t)]);
  for (const auto& sig : last.signals) EXPECT_TRUE(sig.ready);

  // A bundle of plain bars reads a tape's bar as a bar (its flow is not one of its inputs), a
  // bundle trained on tape bars refuses a plain bar, and a desk will not mix the two.
  SyntheticOptions so;
  so.bars = 700;
  const MarketDataset plain_ds(generate_synthetic(so));
  serving::Bundle plain;
  plain.model = models::make_model(flow_bundles.back().name());
  plain.normalizer = plain_ds.normalizer();
  serving::Ensemble plain_ensemble(std::vector<serving::Bundle>{plain});
  EXPECT_FALSE(plain_ensemble.flow_features());
  serving::Ensemble plain_with_flow(std::vector<serving::Bundle>{plain});
  for (int64_t t = 0; t < n; ++t) {
    const auto a = plain_ensemble.on_bar(s.bars[static_cast<size_t>(t)]);
    const auto b =
        plain_with_flow.on_bar(s.bars[static_cast<size_t>(t)], &s.flow[static_cast<size_t>(t)]);
    ASSERT_EQ(a.decision, b.decision) << t;
    ASSERT_EQ(a.signals.size(), b.signals.size());
    for (size_t k = 0; k < a.signals.size(); ++k) {
      ASSERT_EQ(a.signals[k].signal, b.signals[k].signal);
      ASSERT_EQ(a.signals[k].raw, b.signals[k].raw);
    }
  }
  EXPECT_EQ(plain_with_flow.bars_seen(), n);
  std::vector<serving::Bundle> mixed = {plain};
  mixed.push_back(serving::load_bundle(dir.file(flow_bundles.front().name() + ".fhb")));
  EXPECT_THROW((void)serving::Desk(std::move(mixed)), InputError);
}

}  // namespace foxhunt::data
