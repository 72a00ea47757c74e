#pragma once
/// \file streaming_features.h
/// Bar-by-bar computation of the feature bank of features.h, for serving one instrument.
///
/// `compute_observed_features` recomputes every rolling window for every bar (O(bars x window));
/// `StreamingFeatures` keeps running state instead: sliding sums (shifted, with exact periodic
/// re-summation from ring buffers), monotone deques for rolling max/min, EMAs and ring buffers for
/// lags. One `update` costs O(1) amortised per feature and the memory is bounded by the longest
/// lookback (240 bars), not by the series length. Torch-free.
///
/// The engine is generated from the same table as the batch bank, `kFeatureTable`
/// (feature_table.h): on first use it walks the table once and derives which rolling statistics
/// to keep (each window, EMA and lag shared by every column that reads it) and, per column, what
/// to read; `update` then computes the columns in table order. `column_names()` are the names of
/// the columns it planned, equal to `observed_feature_names()` (streaming_features_test.cpp).
///
/// Row t equals row t of `compute_observed_features` on bars 0..t, up to floating-point rounding
/// (the test bounds the relative difference by 1e-6; most values are bit-identical), on every
/// bar including the warm-up, flat windows (one price or volume throughout) included: variances
/// are exactly 0 there on both paths. Checked on synthetic series with jumps, flat stretches and
/// overflowing volumes, and on the S&P 500 daily closes (streaming_features_test.cpp).
///
/// Flow mode (`StreamingFeatures(true)`, for bars built from a tape): every bar comes with its
/// BarFlow and the row is kObservedFeatures + kFlowFeatures wide, the bank then the flow columns
/// that `FlowFeatures` (flow_features.h) computes, the same function as the batch path, so the
/// flow columns equal compute_market_features' bit for bit. An engine refuses a bar without a
/// flow in flow mode and a bar with one otherwise (InputError naming the bar).
///
/// Serving boundary: `update` rejects a bar with a non-finite or non-positive price, a
/// non-finite or negative volume, high < low, open/close outside [low, high], or a timestamp not
/// after the previous accepted bar, with foxhunt::InputError "[stream] bar N: ..." naming the
/// expected and received values. A rejected bar leaves the engine exactly as it was.
///
/// Example:
///   StreamingFeatures f;
///   for (const Bar& bar : live_bars) {
///     std::string why;
///     if (!f.try_update(bar, &why)) { log_warning(why); continue; }
///     if (f.ready()) f.rl_market_row(normalizer, state);
///   }

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/features.h"
#include "foxhunt/data/flow_features.h"

namespace foxhunt::data {

/// Incremental feature bank of one instrument: feed bars in time order, read the latest row.
class StreamingFeatures {
 public:
  /// An engine that has seen no bars, without flow columns.
  StreamingFeatures();
  /// An engine that has seen no bars; with `flow` every bar needs its BarFlow and the row ends
  /// with the flow columns (the file comment).
  explicit StreamingFeatures(bool flow);
  ~StreamingFeatures();
  /// Deep copy of the whole state (a snapshot; the copy continues independently).
  StreamingFeatures(const StreamingFeatures& other);
  /// Deep copy of the whole state.
  StreamingFeatures& operator=(const StreamingFeatures& other);
  StreamingFeatures(StreamingFeatures&&) noexcept;
  StreamingFeatures& operator=(StreamingFeatures&&) noexcept;

  /// Consumes the next bar (with its `flow` in flow mode, null otherwise) and returns its row
  /// (width() values, valid until the next successful update). Throws InputError for an invalid
  /// bar or flow, or a flow given to an engine without flow mode or missing in flow mode; the
  /// state is then unchanged.
  std::span<const float> update(const Bar& bar, const BarFlow* flow = nullptr);

  /// Like `update`, but returns false instead of throwing for an invalid bar and writes the
  /// reason to `why` (when given): the "skip the bar with a warning" mode of a live feed.
  bool try_update(const Bar& bar, std::string* why = nullptr, const BarFlow* flow = nullptr);

  /// Checks `bar` (and `flow`) as `update` would, without consuming it; throws InputError when
  /// invalid.
  void check(const Bar& bar, const BarFlow* flow = nullptr) const;

  /// True in flow mode.
  bool has_flow() const;
  /// Values per row: market_feature_width(has_flow()), 250 or 255.
  int64_t width() const;

  /// Names of the bank's entries, in row order: the kFeatureTable entries the engine planned its
  /// columns from (equal to observed_feature_names()); in flow mode flow_feature_names() follow.
  static const std::vector<std::string>& column_names();

  /// The bank row of the last accepted bar. Throws InputError before the first bar.
  std::span<const float> row() const;

  /// Calendar features of the last accepted bar (calendar_features of its timestamp).
  std::array<float, 4> calendar() const;

  /// The last row normalised by `nz` (fitted on the width() market columns), written to `out`
  /// (resized to width()). Throws InputError on a column mismatch or before the first bar.
  void normalized_row(const Normalizer& nz, std::vector<float>& out) const;

  /// The RL market features of the last bar, as MarketDataset::fill_rl_market builds them: the
  /// normalised row (width()) then the calendar features (4); `out` is resized to width() + 4.
  void rl_market_row(const Normalizer& nz, std::vector<float>& out) const;

  /// Bars accepted so far.
  int64_t bars_seen() const;

  /// True once the last row is past the warm-up (row index >= kFeatureWarmup), i.e. every
  /// window is full; the datasets drop earlier rows.
  bool ready() const { return bars_seen() > kFeatureWarmup; }

  /// Timestamp of the last accepted bar. Throws InputError before the first bar.
  int64_t last_timestamp() const;

  /// Bytes this engine holds (the object and its rings, windows and deques, all sized at
  /// construction): what one instrument's feature state costs a desk (serving/desk.h).
  size_t state_bytes() const;

  /// Forgets every bar (back to the freshly constructed state, in the same mode).
  void reset();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace foxhunt::data
