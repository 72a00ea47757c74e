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
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/features.h"

namespace foxhunt::data {

/// The three chronological parts of a series.
enum class Split { kTrain = 0, kValidation = 1, kTest = 2 };

/// "train", "validation" or "test".
const char* split_name(Split split);

/// Parses "train", "validation"/"val" or "test"; throws InputError otherwise.
Split split_from_name(const std::string& name);

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
  /// Static instrument id fed to the TFT.
  int64_t instrument_id = 0;
  /// Targets are log returns times this (1 = raw log returns).
  double target_scale = 1.0;
  /// When set, targets are divided by this raw bank column at the anchor (e.g. "rv_20", the
  /// realised volatility of the last 20 bars): returns in units of the volatility known when the
  /// forecast is made, so that a constant forecast is already volatility-aware. "" = off.
  std::string target_vol_feature;
};

/// Smallest divisor of volatility-scaled targets (keeps a flat stretch from dividing by 0).
inline constexpr double kMinTargetVol = 1e-8;

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
  /// Normalisation fitted on the training rows of the bank.
  const Normalizer& normalizer() const { return normalizer_; }
  /// Raw past-observed bank [bars, 250].
  const Matrix& raw_features() const { return raw_; }
  /// Normalised bank [bars, 250].
  const Matrix& features() const { return normalized_; }
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
  /// column's raw value there (floored at kMinTargetVol), or 1 without one.
  double target_divisor(int64_t anchor) const;

  /// Targets of one window: `out` gets [spec.horizon] scaled returns r_{anchor+1..anchor+horizon}
  /// / target_divisor(anchor) * target_scale.
  void fill_target(int64_t anchor, const WindowSpec& spec, float* out) const;

  /// RL market features of one bar: normalised bank (250) then calendar (4) = 254 values.
  void fill_rl_market(int64_t bar, float* out) const;

  /// RL market features of bars [begin, end) as a [end-begin, 254] matrix.
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
  int64_t target_vol_column_ = -1;
};

/// Groups `anchors` into batches of `batch_size` (the last one may be smaller unless
/// `drop_last`). With `shuffle` the order is a seeded permutation (same seed, same batches).
std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& anchors,
                                               int64_t batch_size, bool shuffle, uint64_t seed,
                                               bool drop_last = false);

}  // namespace foxhunt::data
