#pragma once
/// \file dataset.h
/// Chronological splits, model windows and seeded batching over one bar series. Torch-free;
/// train/batches.h assembles these windows into the tensors a model's I/O spec asks for.
///
/// Conventions:
/// - The return of bar i is r_i = log(close_i / close_{i-1}).
/// - Warm-up: bars [0, warmup) (default kFeatureWarmup = 256) are dropped because their
///   long-window features use truncated windows. The usable bars [warmup, n) are split
///   chronologically into train / validation / test by fractions (default 0.7 / 0.15 / 0.15).
/// - A window is identified by its anchor t, the last past bar: inputs are bars t-past+1 .. t,
///   targets are r_{t+1} .. r_{t+horizon}. A window belongs to a split when all of its target bars
///   lie in that split's range (so targets never overlap across splits) and its first past bar is
///   not a warm-up bar. Validation/test windows may look back into earlier splits: that is past
///   data, known at prediction time.
/// - Bank features are normalised with statistics fitted on the training rows only.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/features.h"
#include "foxhunt/data/panel.h"

namespace foxhunt::data {

/// The three chronological parts of a series.
enum class Split { kTrain = 0, kValidation = 1, kTest = 2 };

/// "train", "validation" or "test".
const char* split_name(Split split);

/// Fractions of the usable (post-warm-up) bars given to each split; they must sum to 1.
struct SplitOptions {
  double train = 0.7;        ///< first part, used to fit normalisation and models
  double validation = 0.15;  ///< middle part, for early stopping / model selection
  double test = 0.15;        ///< last part, held out
};

/// Half-open range of bar indices [begin, end).
struct BarRange {
  int64_t begin = 0;  ///< first bar
  int64_t end = 0;    ///< one past the last bar
  /// Number of bars.
  int64_t size() const { return end - begin; }
  /// True when begin <= i < end.
  bool contains(int64_t i) const { return i >= begin && i < end; }
};

/// Bar ranges of the three splits; they tile [warmup, num_bars) in order.
struct SplitRanges {
  BarRange train;       ///< training bars
  BarRange validation;  ///< validation bars
  BarRange test;        ///< test bars
  /// The range of `split`.
  const BarRange& get(Split split) const;
};

/// Splits bars [warmup, num_bars) chronologically. Throws InputError for bad fractions or when a
/// split would be empty.
SplitRanges chronological_split(int64_t num_bars, int64_t warmup, const SplitOptions& options = {});
/// chronological_split of `series`'s bars; its errors name `series.source` (the file).
SplitRanges chronological_split(const BarSeries& series, int64_t warmup,
                                const SplitOptions& options = {});

/// Cut dates shared by every instrument of a panel (Unix seconds): an instrument's validation
/// split starts at its first bar at or after `validation_begin` and its test split at its first
/// bar at or after `test_begin`. With the same dates for every instrument, no instrument trains
/// on a date another one is validated or tested on, so nothing leaks across instruments.
struct SplitCuts {
  int64_t validation_begin = 0;  ///< first timestamp of the validation splits
  int64_t test_begin = 0;        ///< first timestamp of the test splits
};

/// The cut dates of a panel: the split fractions applied to the union of the instruments' usable
/// timestamps (each symbol's bars from its `warmup`-th on), so that about `options.train` of the
/// panel's usable dates are training dates. InputError for bad fractions or a panel without a
/// symbol that has more than `warmup` bars.
SplitCuts panel_split_cuts(const Panel& panel, int64_t warmup, const SplitOptions& options = {});

/// A series' splits at the cut dates: train = [warmup, first bar >= validation_begin),
/// validation up to the first bar >= test_begin, test to the end. InputError naming the series,
/// the split left empty and the dates (a symbol that starts too late or ends too early for the
/// panel's cut dates).
SplitRanges split_at_cuts(const BarSeries& series, int64_t warmup, const SplitCuts& cuts);

/// Window geometry: `past` input bars and `horizon` target returns.
struct WindowSpec {
  int64_t past = 32;    ///< input bars ending at the anchor
  int64_t horizon = 1;  ///< future returns predicted
};

/// Options of a MarketDataset.
struct DatasetOptions {
  /// Split fractions.
  SplitOptions split;
  /// Leading bars dropped (features not fully defined).
  int64_t warmup = kFeatureWarmup;
  /// |normalised feature| cap.
  double clip = 10.0;
  /// The instrument's static id (models with a static-id input).
  int64_t instrument_id = 0;
  /// Split at these dates (a panel's common cut dates) instead of by `split`'s fractions.
  std::optional<SplitCuts> cuts = std::nullopt;
  /// Targets are log returns times this (1 = raw log returns).
  double target_scale = 1.0;
  /// When set, targets are divided by a volatility known when the forecast is made, so that a
  /// constant forecast is already volatility-aware: a raw bank column at the anchor (e.g.
  /// "rv_20", the realised volatility of the last 20 bars) or "absret_mean_<W>" (see
  /// TargetVol). "" = off.
  std::string target_vol_feature;
};

/// Smallest divisor of volatility-scaled targets (keeps a flat stretch from dividing by 0).
inline constexpr double kMinTargetVol = 1e-8;

/// Prefixes of the robust target volatilities, both over the last bars' returns (bank column
/// ret_lag_0, the anchor's own return included):
/// - "absret_mean_<W>": the mean of |r| over the last W bars;
/// - "absret_ewm_<H>": the exponentially weighted mean of |r| with a half-life of H bars over
///   the last kAbsRetEwmWindow bars (weights 2^(-i/H) for the i-th most recent, normalised), a
///   finite window so that training and serving compute it from the same values.
/// A jump of size J moves them by about |J| / W where it moves a realised volatility
/// sqrt(mean r^2) by about J^2 / (2 W sigma): on the jump-heavy synthetic series rv-scaled targets
/// lost 9-11% to the best naive baseline and absret-scaled ones about 1% (ARCHITECTURE.md,
/// "Forecast targets").
inline constexpr const char* kAbsRetMeanPrefix = "absret_mean_";
/// See kAbsRetMeanPrefix.
inline constexpr const char* kAbsRetEwmPrefix = "absret_ewm_";
/// Returns an absret_ewm volatility looks back over.
inline constexpr int64_t kAbsRetEwmWindow = 250;

/// A parsed target volatility: a bank column, or a weighted mean of |r| over `window` bars.
struct TargetVol {
  /// Bank column read at the anchor (-1 for none or for absret_*).
  int64_t column = -1;
  /// Returns of absret_mean_<W> (W) or absret_ewm_<H> (kAbsRetEwmWindow); 0 otherwise.
  int64_t window = 0;
  /// Half-life H of absret_ewm_<H> in bars (0 = equal weights, absret_mean).
  int64_t halflife = 0;
  /// True when targets are scaled at all.
  bool enabled() const { return column >= 0 || window > 0; }
};

/// Parses DatasetOptions::target_vol_feature: "" (off), a bank column name, absret_mean_<W>
/// with 1 <= W <= kFeatureWarmup (the warm-up guarantees W returns before the first anchor) or
/// absret_ewm_<H> with 1 <= H <= 1000. Throws InputError naming `what` and the accepted forms
/// otherwise.
TargetVol parse_target_vol(const std::string& name, const std::string& what);

/// The absret divisor of `vol` from the last `count` returns (oldest first; count <=
/// vol.window, fewer only before the series has that many): the weighted mean of |r| in double,
/// oldest to newest, floored at kMinTargetVol. Training (MarketDataset) and serving call this
/// same function on the same float values, so their divisors are bit-identical.
double absret_divisor(const TargetVol& vol, const float* returns, int64_t count);

/// The divisor of the targets anchored at `anchor` from the raw (unnormalised) bank `raw`:
/// the column's value, or absret_divisor over the last min(window, anchor + 1) rows' ret_lag_0,
/// floored at kMinTargetVol; 1 when `vol` is off.
double target_divisor_at(const TargetVol& vol, const Matrix& raw, int64_t anchor);

/// Index of bank column `name` in the observed features; InputError naming `what` otherwise.
int64_t bank_column(const std::string& name, const std::string& what);

/// A series with its features, normaliser (fitted on the training split) and splits.
class MarketDataset {
 public:
  /// Computes features, splits and normalisation. Throws InputError when the series is too short
  /// for the warm-up plus three non-empty splits.
  explicit MarketDataset(BarSeries series, DatasetOptions options = {});

  /// The bars.
  const BarSeries& series() const { return series_; }
  /// The options it was built with.
  const DatasetOptions& options() const { return options_; }
  /// Number of bars (including warm-up).
  int64_t size() const { return series_.size(); }
  /// Split ranges.
  const SplitRanges& splits() const { return splits_; }
  /// Normalisation fitted on the training rows of the market bank.
  const Normalizer& normalizer() const { return normalizer_; }
  /// True for bars built from a tape (BarSeries::flow): the market bank ends with the flow
  /// columns (flow_features.h) and the feature sets are their flow variants.
  bool has_flow() const { return series_.has_flow(); }
  /// Raw market bank [bars, 250] (255 with the flow columns: market_feature_width).
  const Matrix& raw_features() const { return raw_; }
  /// Normalised market bank [bars, 250 or 255].
  const Matrix& features() const { return normalized_; }
  /// Values per bar of fill_rl_market: the market bank's width + 4 (254, or 259 with flow).
  int64_t rl_market_width() const { return normalized_.cols + kKnownFutureFeatures; }
  /// Calendar features [bars, 4].
  const Matrix& calendar() const { return calendar_; }

  /// r_bar = log(close_bar / close_{bar-1}) for 1 <= bar < size().
  double log_return(int64_t bar) const;

  /// Anchors of every window of `spec` belonging to `split`, in time order.
  std::vector<int64_t> anchors(Split split, const WindowSpec& spec) const;

  /// Past rows of one window: `out` gets [spec.past, columns.size()] normalised bank values of
  /// bars anchor-past+1..anchor, the bank columns `columns` in that order. Throws InputError
  /// when the window leaves [warmup, size()) or a column is outside the bank.
  void fill_past(int64_t anchor, const WindowSpec& spec, const std::vector<int64_t>& columns,
                 float* out) const;

  /// Known-future rows of one window: `out` gets [spec.horizon, 4] calendar features of bars
  /// anchor+1..anchor+horizon.
  void fill_future_calendar(int64_t anchor, const WindowSpec& spec, float* out) const;

  /// What the returns of the window anchored at `anchor` are divided by: the target volatility
  /// column's raw value there or the absret_mean of the returns up to it (floored at
  /// kMinTargetVol), or 1 without one.
  double target_divisor(int64_t anchor) const;

  /// Targets of one window: `out` gets [spec.horizon] scaled returns r_{anchor+1..anchor+horizon}
  /// / target_divisor(anchor) * target_scale.
  void fill_target(int64_t anchor, const WindowSpec& spec, float* out) const;

  /// RL market features of one bar: normalised market bank (250, or 255 with the flow columns)
  /// then calendar (4): rl_market_width() values.
  void fill_rl_market(int64_t bar, float* out) const;

  /// RL market features of bars [begin, end) as a [end-begin, rl_market_width()] matrix.
  Matrix rl_market_features(int64_t begin, int64_t end) const;

 private:
  void check_window(int64_t anchor, const WindowSpec& spec) const;

  BarSeries series_;
  DatasetOptions options_;
  SplitRanges splits_;
  Matrix raw_;
  Matrix normalized_;
  Matrix calendar_;
  Normalizer normalizer_;
  TargetVol target_vol_;
};

/// One window of a panel: the instrument's index (its dataset among the panel's) and the anchor.
struct WindowRef {
  int64_t instrument = 0;  ///< index of the instrument's dataset
  int64_t anchor = 0;      ///< the window's anchor in that dataset
};

/// Groups `anchors` into batches of `batch_size` (the last one may be smaller unless
/// `drop_last`). With `shuffle` the order is a seeded permutation (same seed, same batches).
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& anchors,
                                               int64_t batch_size, bool shuffle, uint64_t seed,
                                               bool drop_last = false);

}  // namespace foxhunt::data
