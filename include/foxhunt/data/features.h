#pragma once
/// \file features.h
/// The feature pipeline from bars to model inputs. Torch-free: matrices are row-major
/// std::vector<float> (train/batches.h converts them to tensors).
///
/// One bank of kObservedFeatures (250) past-observed market features is computed per bar.
/// Every column is strictly causal: row t depends on bars 0..t only (rolling windows end at t,
/// EMAs run forward from bar 0). Columns 0..224 are the past-observed set "past225"; the 25
/// extra columns are longer lags used only by the RL state. The feature sets a model's I/O spec
/// names (models/spec.h) are views of this bank; data never knows which model reads which:
///
/// | feature set | width | columns |
/// |---|---|---|
/// | "past225"  | 225 | bank[0..224] |
/// | "calendar" | 4   | sin/cos time of day, sin/cos day of week (known future, from the timestamp)
/// | | "compact32" | 32 | the named subset `compact_feature_names()` of bank[0..224] | | RL market
/// state | 254 | bank[0..249] + the 4 calendar features | | "rl_state" | 256 | RL market state +
/// position + scaled unrealised PnL |
///
/// Bars built from a tape add kFlowFeatures microstructure columns after the bank, and every
/// bank set gains them (flow_features.h); bars from a bar CSV have exactly the sets above.
///
/// Warm-up: the longest lookback is 240 bars (plus lags of shorter features); rows before
/// `kFeatureWarmup` (256) use truncated windows and are dropped by the datasets.
/// Bank values are plain numbers of mixed scale; `Normalizer` (fitted on the training split
/// only) standardises them.
///
/// The bank's vocabulary (every column's kind, windows and name, in column order) is one table,
/// `kFeatureTable` in feature_table.h; this bank and the streaming engine
/// (streaming_features.h) are both generated from it.

#include <array>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"

namespace foxhunt::data {

/// Width of the past-observed feature bank.
inline constexpr int64_t kObservedFeatures = 250;
/// Width of the "past225" set (the first columns of the bank).
inline constexpr int64_t kPastBankFeatures = 225;
/// Known-future (calendar) values per bar.
inline constexpr int64_t kKnownFutureFeatures = 4;
/// Width of the "compact32" set.
inline constexpr int64_t kCompactFeatures = 32;
/// RL market features per bar (bank + calendar).
inline constexpr int64_t kRlMarketFeatures = kObservedFeatures + kKnownFutureFeatures;
/// RL state width: market features + position + unrealised PnL.
inline constexpr int64_t kRlStateDim = kRlMarketFeatures + 2;
/// Leading bars whose long-window features are not fully defined.
inline constexpr int64_t kFeatureWarmup = 256;

/// Row-major float matrix.
struct Matrix {
  int64_t rows = 0;         ///< number of rows
  int64_t cols = 0;         ///< number of columns
  std::vector<float> data;  ///< rows * cols values, row after row

  Matrix() = default;
  /// A zero-filled rows x cols matrix.
  Matrix(int64_t r, int64_t c);
  /// Element (r, c).
  float& at(int64_t r, int64_t c) { return data[static_cast<size_t>(r * cols + c)]; }
  /// Element (r, c).
  float at(int64_t r, int64_t c) const { return data[static_cast<size_t>(r * cols + c)]; }
  /// Pointer to the first element of row `r`.
  const float* row(int64_t r) const { return data.data() + r * cols; }
  /// Pointer to the first element of row `r`.
  float* row(int64_t r) { return data.data() + r * cols; }
  /// The columns `columns` (in that order) of every row.
  Matrix select_columns(const std::vector<int64_t>& columns) const;
};

/// Names of the 250 bank columns, in column order (unique): the names the bank builder gives the
/// kFeatureTable entries (feature_table.h).
const std::vector<std::string>& observed_feature_names();
/// Names of the 225 columns of "past225" (= the first 225 bank names).
std::vector<std::string> past_feature_names();
/// Names of the 4 known-future calendar inputs.
const std::vector<std::string>& calendar_feature_names();
/// Names of the 32 columns of "compact32" (a documented subset of "past225").
const std::vector<std::string>& compact_feature_names();
/// Bank column indices of "compact32", in `compact_feature_names()` order.
const std::vector<int64_t>& compact_feature_columns();
/// Names of the 256 RL state entries (bank, calendar, "position", "unrealized_pnl").
std::vector<std::string> rl_state_names();

/// A named set of per-bar inputs that a model's I/O spec (models/spec.h) asks for by name.
/// Bank sets are columns of the normalised bank; "calendar" is the 4 calendar features.
struct FeatureSet {
  std::string name;              ///< "compact32", "past225", "calendar", "rl_state"
  std::vector<int64_t> columns;  ///< bank columns, in input order (empty for calendar/rl_state)
  int64_t width = 0;             ///< values per bar
};

/// The feature set called `name`: "compact32" (32 named bank columns), "past225" (bank 0..224),
/// "calendar" (4), "rl_state" (256: bank, calendar, position, unrealised PnL). Throws InputError
/// naming the known sets otherwise.
const FeatureSet& feature_set(const std::string& name);
/// `feature_set(name)`, or with `flow` its variant over a market bank with the flow columns
/// (flow_features.h): bank sets end with the kFlowFeatures flow columns, "rl_state" is
/// kFlowFeatures wider, "calendar" is the same. Defined in flow_features.cpp.
const FeatureSet& feature_set(const std::string& name, bool flow);
/// Every feature set, in a fixed order.
const std::vector<FeatureSet>& feature_sets();

/// Computes the past-observed bank for every bar: [bars, 250]. Row t uses bars 0..t only.
/// Throws InputError for an empty series.
Matrix compute_observed_features(const BarSeries& series);

/// Known-future calendar features of one timestamp: sin/cos of the time of day (UTC) and
/// sin/cos of the day of week (Monday = 0), each as 2*pi*fraction of the cycle.
std::array<float, 4> calendar_features(int64_t timestamp);

/// Calendar features of every bar: [bars, 4].
Matrix compute_calendar_features(const BarSeries& series);

/// Per-feature standardisation (x - mean) / std, clipped to +-clip. Fit it on the training split
/// only; columns with (near) zero variance get std 1 so they map to a constant instead of NaN.
struct Normalizer {
  std::vector<double> mean;    ///< per-column mean over the fitted rows
  std::vector<double> stddev;  ///< per-column std (population), 1 where the variance is ~0
  double clip = 10.0;          ///< |normalised value| is capped here (0 = no clipping)

  /// Number of columns it was fitted on.
  int64_t cols() const { return static_cast<int64_t>(mean.size()); }
  /// Fits on rows [row_begin, row_end) of `m`. Throws InputError for an empty range.
  static Normalizer fit(const Matrix& m, int64_t row_begin, int64_t row_end, double clip = 10.0);
  /// Returns the normalised copy of `m` (same shape). Throws InputError on a column mismatch.
  Matrix apply(const Matrix& m) const;
  /// Normalises `n` values of one row in place.
  void apply_row(float* row, int64_t n) const;
};

/// JSON form: {"clip": c, "mean": [...], "std": [...]} ("std" holds `stddev`).
void to_json(nlohmann::json& j, const Normalizer& n);
/// Reads the JSON form; throws InputError for missing keys, length mismatch or std <= 0.
void from_json(const nlohmann::json& j, Normalizer& n);

}  // namespace foxhunt::data
