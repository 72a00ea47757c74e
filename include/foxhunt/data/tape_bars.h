#pragma once
/// \file tape_bars.h
/// Bars built from a tape in the system's bar types: a BarSeries (one instrument) or a Panel
/// (a tape with a symbol column, time bars), with the columns only prints give (BarFlow) kept
/// beside them, and their CSV (`foxhunt data bars`). Torch-free.
///
/// Timestamps. A Bar's timestamp is whole Unix seconds and strictly increases (bars.h). A time
/// bar's is the start of its interval (t0; periods are at least 1 s, so they increase). A tick,
/// volume or dollar bar's is the second of its first print; when several bars start in the same
/// second (a busy second of the E-mini tape holds 1,582 prints) each later one is moved to the
/// second after the previous bar's, and TapeBars::shifted_timestamps counts them. The exact
/// first and last print of every bar stay in BarFlow (nanoseconds) and in the CSV.
///
/// CSV (tape_bars_to_csv): the bar CSV of bars.h with an ISO timestamp
/// (`2013-09-01T17:00:00Z`) and, after OHLCV, the flow columns `vwap, prints, buy_volume,
/// sell_volume, duration, realized_variance, start_ns, end_ns` (duration in seconds). The bar
/// and panel readers (bars.h, panel.h) ignore the flow columns, so the file trains and predicts
/// like any bar CSV. A panel's CSV has a `symbol` column after the timestamp.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/data/tape.h"

namespace foxhunt::data {

// BarFlow (what a bar knows beyond OHLCV: TapeBar without its prices and volume) is in bars.h,
// where BarSeries::flow carries it.

/// One instrument's bars from a tape: element i of `flow` belongs to `bars.bars[i]`.
struct TapeBars {
  /// OHLCV, strictly increasing timestamps (file comment), with `bars.flow` = `flow`: a
  /// MarketDataset of it has the flow feature columns (flow_features.h).
  BarSeries bars;
  std::vector<BarFlow> flow;       ///< per bar
  BarSpec spec;                    ///< how they were sampled
  int64_t shifted_timestamps = 0;  ///< bars whose timestamp was moved past a busy second
};

/// A panel's bars from a tape with a symbol column (time bars): `flow[s]` belongs to
/// `panel.symbols[s].series`.
struct TapePanelBars {
  /// One series per symbol, in the tape's symbol order, each carrying its flow (BarSeries::flow).
  Panel panel;
  std::vector<std::vector<BarFlow>> flow;  ///< per symbol, per bar
  BarSpec spec;                            ///< how they were sampled
};

/// What bar `t` knows beyond OHLCV (its prints, VWAP, buy and sell volume, times): the flow the
/// batch path stores beside each bar and the streaming path hands the desk with it.
BarFlow bar_flow(const TapeBar& t);

/// The Bar of tape bar `t` as to_tape_bars gives it, after a bar at `previous` (the series'
/// previous bar's timestamp; none for the first): OHLCV, and the timestamp of the file comment
/// (a tick, volume or dollar bar starting in the second of the previous one moves to the second
/// after it; `*shifted` says so). The one rule of batch (to_tape_bars) and streaming
/// (serving's TapeBarSource). InputError for a time bar not after `previous`.
Bar tape_bar_to_bar(const TapeBar& t, const BarSpec& spec, std::optional<int64_t> previous,
                    bool* shifted = nullptr);

/// One instrument's bars (from build_bars on a tape without a symbol column, or one symbol's
/// bars) in the system's types. `source` labels the series. InputError when `bars` is empty or
/// mixes symbols.
TapeBars to_tape_bars(const std::vector<TapeBar>& bars, const BarSpec& spec,
                      const std::string& source);

/// build_bars + to_tape_bars for a tape without a symbol column (InputError for one with a
/// symbol column: build_tape_panel reads those). Source "TAPE[SPEC]".
TapeBars build_tape_bars(const Tape& tape, const BarSpec& spec);

/// The time bars of a tape with a symbol column as a panel (each symbol's bars on the shared
/// clock of the time grid). Tick, volume and dollar bars are refused: each symbol's bars would
/// close at its own times, and a desk needs one clock (build_bars gives them per symbol).
TapePanelBars build_tape_panel(const Tape& tape, const BarSpec& spec);

/// The CSV of the file comment.
std::string tape_bars_to_csv(const TapeBars& bars);
/// The panel CSV of the file comment (rows by timestamp, then symbol).
std::string tape_panel_to_csv(const TapePanelBars& bars);

}  // namespace foxhunt::data
