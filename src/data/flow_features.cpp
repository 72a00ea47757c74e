#include "foxhunt/data/flow_features.h"

#include <algorithm>
#include <cmath>

#include "foxhunt/core/error.h"

namespace foxhunt::data {

namespace {
constexpr const char* kFlowFeaturesComponent = "flow";
constexpr double kNsPerSecondFlow = 1e9;
}  // namespace

const std::vector<std::string>& flow_feature_names() {
  static const std::vector<std::string> names = {"ofi", "vwap_dev", "intensity", "duration",
                                                 "rv_ratio"};
  return names;
}

double FlowFeatures::Ring::sum(int64_t n) const {
  const int64_t count = std::min(n, kFlowWindow);
  double s = 0.0;
  // Bar n-1 is at (n - 1) % W: walk from the oldest kept bar to it.
  for (int64_t k = n - count; k < n; ++k) s += v[static_cast<size_t>(k % kFlowWindow)];
  return s;
}

void FlowFeatures::check(const Bar& bar, const BarFlow& f) const {
  (void)bar;  // the bar's own values are the feature engine's to check (StreamingFeatures)
  const int64_t i = t_;
  FOXHUNT_CHECK(f.prints >= 1, kFlowFeaturesComponent, "bar ", i,
                ": expected a flow of at least one print, got ", f.prints, " prints");
  FOXHUNT_CHECK(std::isfinite(f.vwap) && f.vwap > 0.0, kFlowFeaturesComponent, "bar ", i,
                ": expected a finite vwap > 0, got ", f.vwap);
  FOXHUNT_CHECK(std::isfinite(f.buy_volume) && f.buy_volume >= 0.0 &&
                    std::isfinite(f.sell_volume) && f.sell_volume >= 0.0,
                kFlowFeaturesComponent, "bar ", i,
                ": expected finite buy and sell volumes >= 0, got ", f.buy_volume, " and ",
                f.sell_volume);
  FOXHUNT_CHECK(std::isfinite(f.duration_seconds) && f.duration_seconds >= 0.0,
                kFlowFeaturesComponent, "bar ", i, ": expected a finite duration >= 0 s, got ",
                f.duration_seconds);
  FOXHUNT_CHECK(std::isfinite(f.realized_variance) && f.realized_variance >= 0.0,
                kFlowFeaturesComponent, "bar ", i,
                ": expected a finite realised variance >= 0, got ", f.realized_variance);
  FOXHUNT_CHECK(i == 0 || f.end_ns >= prev_end_ns_, kFlowFeaturesComponent, "bar ", i,
                ": expected a last print at or after the previous bar's (", prev_end_ns_,
                " ns), got ", f.end_ns, " ns");
}

std::array<float, kFlowFeatures> FlowFeatures::update(const Bar& bar, const BarFlow& f) {
  check(bar, f);  // before any state changes
  const int64_t t = t_;
  const auto slot = static_cast<size_t>(t % kFlowWindow);
  const int64_t n = t + 1;  // bars in the windows, this one included (truncated at bar 0)

  const double flow_volume = f.buy_volume + f.sell_volume;
  const double ofi = flow_volume > 0.0 ? (f.buy_volume - f.sell_volume) / flow_volume : 0.0;
  const double vwap_dev = std::log(bar.close / f.vwap);

  const double span_s =
      t == 0 ? f.duration_seconds : static_cast<double>(f.end_ns - prev_end_ns_) / kNsPerSecondFlow;
  log_rate_.v[slot] =
      std::log(static_cast<double>(f.prints) / std::max(span_s, kMinFlowSpanSeconds));
  const double intensity =
      log_rate_.v[slot] - log_rate_.sum(n) / static_cast<double>(std::min(n, kFlowWindow));

  const double duration = std::log1p(f.duration_seconds);

  const double r = t == 0 ? 0.0 : std::log(bar.close / prev_close_);
  rv_.v[slot] = f.realized_variance;
  r2_.v[slot] = r * r;
  const double rv_ratio =
      std::log((rv_.sum(n) + kFlowVarianceFloor) / (r2_.sum(n) + kFlowVarianceFloor));

  const std::array<double, kFlowFeatures> v = {ofi, vwap_dev, intensity, duration, rv_ratio};
  std::array<float, kFlowFeatures> out{};
  for (size_t k = 0; k < v.size(); ++k)
    out[k] = static_cast<float>(std::isfinite(v[k]) ? v[k] : 0.0);
  prev_close_ = bar.close;
  prev_end_ns_ = f.end_ns;
  t_ = n;
  return out;
}

Matrix compute_flow_features(const BarSeries& series) {
  FOXHUNT_CHECK(series.has_flow() && series.flow.size() == series.bars.size(),
                kFlowFeaturesComponent, "'", series.source, "': expected a flow for each of the ",
                series.bars.size(), " bars (bars built from a tape), got ", series.flow.size());
  Matrix m(series.size(), kFlowFeatures);
  FlowFeatures engine;
  try {
    for (int64_t t = 0; t < series.size(); ++t) {
      const auto row =
          engine.update(series.bars[static_cast<size_t>(t)], series.flow[static_cast<size_t>(t)]);
      std::copy(row.begin(), row.end(), m.row(t));
    }
  } catch (const InputError& e) {
    throw InputError(kFlowFeaturesComponent, "'" + series.source + "': " + e.message());
  }
  return m;
}

Matrix compute_market_features(const BarSeries& series) {
  Matrix bank = compute_observed_features(series);
  if (!series.has_flow()) return bank;
  const Matrix flow = compute_flow_features(series);
  Matrix out(bank.rows, market_feature_width(true));
  for (int64_t t = 0; t < bank.rows; ++t) {
    float* dst = std::copy(bank.row(t), bank.row(t) + bank.cols, out.row(t));
    std::copy(flow.row(t), flow.row(t) + kFlowFeatures, dst);
  }
  return out;
}

const FeatureSet& feature_set(const std::string& name, bool flow) {
  const FeatureSet& plain = feature_set(name);  // unknown names: its InputError
  if (!flow) return plain;
  // The flow variant of every set: bank sets read the flow columns after their own, the RL
  // state holds them between the bank and the calendar; the calendar is unchanged.
  static const std::vector<FeatureSet> sets = [] {
    std::vector<FeatureSet> out;
    for (FeatureSet s : feature_sets()) {
      if (!s.columns.empty()) {
        for (int64_t c = 0; c < kFlowFeatures; ++c) s.columns.push_back(kObservedFeatures + c);
        s.width += kFlowFeatures;
      } else if (s.name == "rl_state") {
        s.width += kFlowFeatures;
      }
      out.push_back(std::move(s));
    }
    return out;
  }();
  for (const auto& s : sets)
    if (s.name == name) return s;
  FOXHUNT_INTERNAL_ASSERT(false, "feature set '" + name + "' has no flow variant");
  return plain;
}

}  // namespace foxhunt::data
