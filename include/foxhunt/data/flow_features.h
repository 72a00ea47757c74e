#pragma once
/// \file flow_features.h
/// The microstructure columns of bars built from a tape (tape_bars.h): what only the prints
/// know, as kFlowFeatures values per bar computed from the bar and its BarFlow. Torch-free.
///
/// One definition for training and serving: `FlowFeatures::update` computes one bar's values
/// from its own state (fixed rings of the last kFlowWindow bars, no heap); the batch path
/// (`compute_flow_features`, used by MarketDataset) is a loop over it and the streaming engine
/// (StreamingFeatures in flow mode) calls it once per bar, so both give the same floats, bit for
/// bit (flow_features_test.cpp checks it on the E-mini tape's 1-minute bars).
///
/// The columns, for bar t with close c_t and flow f_t (W = kFlowWindow bars ending at t,
/// truncated at bar 0 like the bank's windows, features.h):
/// | name | value |
/// |---|---|
/// | "ofi"       | order-flow imbalance (buy - sell) / (buy + sell) volume; 0 when both are 0 |
/// | "vwap_dev"  | log(c_t / vwap_t): where the bar closed against where its volume traded |
/// | "intensity" | log(prints_t / span_t) minus its mean over W: the pace of printing against
///                 its recent level (span_t = end_t - end_{t-1}, the time the market took to
///                 make this bar since the previous one closed; bar 0: its own duration; at
///                 least kMinFlowSpanSeconds, the tape's millisecond resolution) |
/// | "duration"  | log(1 + duration_t), duration_t = last print - first print in seconds: for
///                 tick, volume and dollar bars how long the bar took to fill; for time bars
///                 how much of the interval traded |
/// | "rv_ratio"  | log((sum_W rv + eps) / (sum_W r^2 + eps)): the realised variance of the
///                 prints inside the bars against the close-to-close variance over the same
///                 bars (r_t = log(c_t / c_{t-1}), r_0 = 0; eps = kFlowVarianceFloor): above 0
///                 where prints bounce more than closes move (microstructure noise) |
///
/// Model inputs. A series with a flow (BarSeries::flow) has a market bank of
/// kObservedFeatures + kFlowFeatures columns (the bank, then these); its normaliser is fitted
/// on all of them, and every bank feature set a model reads gains the flow columns at its end
/// (`feature_set(name, true)`: "compact32" reads 37 values, "past225" 230, "rl_state" 261; the
/// calendar is unchanged). A series without a flow (a bar CSV) has exactly the bank of
/// features.h: its matrices are what they were before flow features existed.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/features.h"

namespace foxhunt::data {

/// Flow columns per bar.
inline constexpr int64_t kFlowFeatures = 5;
/// Bars in the flow columns' rolling windows (intensity, rv_ratio).
inline constexpr int64_t kFlowWindow = 20;
/// Shortest span a bar's print rate divides by, in seconds (the tape's millisecond resolution:
/// several tick bars can close in one millisecond).
inline constexpr double kMinFlowSpanSeconds = 1e-3;
/// Added to both sums of rv_ratio, so that a window without a price change is log(1) = 0.
inline constexpr double kFlowVarianceFloor = 1e-12;

/// Names of the flow columns, in column order: ofi, vwap_dev, intensity, duration, rv_ratio.
const std::vector<std::string>& flow_feature_names();

/// Width of the market bank: kObservedFeatures, plus kFlowFeatures with `flow`.
constexpr int64_t market_feature_width(bool flow) {
  return kObservedFeatures + (flow ? kFlowFeatures : 0);
}

/// The flow columns of one instrument, bar by bar: the one definition of the file comment.
/// Plain values (copying it snapshots it).
class FlowFeatures {
 public:
  /// Checks `bar` with its `flow` as update would, without consuming them: InputError
  /// "[flow] bar N: ..." for at least one print, a finite vwap > 0, finite buy and sell
  /// volumes >= 0, a finite duration >= 0, a finite realised variance >= 0, and a last print
  /// not before the previous bar's.
  void check(const Bar& bar, const BarFlow& flow) const;
  /// Consumes the next bar and returns its flow columns. InputError (state unchanged) for a bar
  /// check() refuses.
  std::array<float, kFlowFeatures> update(const Bar& bar, const BarFlow& flow);
  /// Bars consumed.
  int64_t bars_seen() const { return t_; }

 private:
  // The last kFlowWindow values of one per-bar series, oldest overwritten first.
  struct Ring {
    std::array<double, kFlowWindow> v{};
    // Sum of the last min(n, kFlowWindow) values, oldest to newest (the same order on every path).
    double sum(int64_t n) const;
  };
  int64_t t_ = 0;            // bars consumed
  double prev_close_ = 0.0;  // c_{t-1}
  int64_t prev_end_ns_ = 0;  // the previous bar's last print
  Ring log_rate_, rv_, r2_;  // log(prints / span), realised variance, squared return
};

/// The flow columns of every bar of `series`: [bars, kFlowFeatures], row t from bars 0..t.
/// InputError for a series without a flow, or naming the source and bar FlowFeatures refuses.
Matrix compute_flow_features(const BarSeries& series);

/// The market bank of `series`: compute_observed_features, then (for a series with a flow) the
/// flow columns: [bars, market_feature_width(series.has_flow())].
Matrix compute_market_features(const BarSeries& series);

}  // namespace foxhunt::data
