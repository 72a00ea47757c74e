#pragma once
/// \file bar_stream.h
/// A bars CSV streamed through an Ensemble line by line, as `foxhunt predict` does: what to do
/// with a bad bar, which decisions to report and the latency figures, in the library so that a
/// user's own feed loop and the CLI behave the same.

#include <cstdint>
#include <functional>
#include <istream>
#include <limits>
#include <string>

#include "foxhunt/core/stats.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::serving {

/// How stream_bars treats its input.
struct BarStreamOptions {
  /// The input's name in messages ("stdin", a path).
  std::string source = "stdin";
  /// Skip an invalid bar (malformed line, rejected by the ensemble) with a warning instead of
  /// stopping with InputError.
  bool skip_bad = false;
  /// Decisions before this Unix time are computed (the models warm up on them) but not reported.
  int64_t from = std::numeric_limits<int64_t>::min();
};

/// What a stream did.
struct BarStreamStats {
  int64_t bars = 0;           ///< bars fed to the ensemble
  int64_t reported = 0;       ///< decisions passed to on_decision (at or after `from`)
  int64_t skipped = 0;        ///< invalid bars skipped (skip_bad)
  LatencySummary latency_us;  ///< per-bar ensemble latency over every fed bar
};

/// Called for each reported decision with its bar.
using DecisionSink = std::function<void(const data::Bar&, const BarDecision&)>;
/// Called for each skipped bar with "SOURCE:LINE: skipped: why".
using SkipSink = std::function<void(const std::string&)>;

/// Feeds every line of `in` (a bars CSV, header first; data/bars.h formats) through `ensemble`.
/// An invalid bar is an InputError "[predict] SOURCE:LINE: ..." unless `options.skip_bad`, which
/// reports it to `on_skip` and goes on. InputError when the input holds no bar.
BarStreamStats stream_bars(Ensemble& ensemble, std::istream& in, const BarStreamOptions& options,
                           const DecisionSink& on_decision, const SkipSink& on_skip = nullptr);

/// Which of a panel's symbols a process serves: those whose symbol_shard(symbol, count) is
/// `index` (desk.h). {0, 1} serves every symbol.
struct Shard {
  int64_t index = 0;  ///< K in [0, count)
  int64_t count = 1;  ///< N >= 1
};
/// Parses "K/N" (0 <= K < N); InputError naming `what` otherwise.
Shard parse_shard(const std::string& text, const std::string& what);

/// How stream_panel treats its input.
struct PanelStreamOptions {
  /// Decisions before this Unix time are computed (the models warm up on them) but not reported.
  int64_t from = std::numeric_limits<int64_t>::min();
  /// The symbols to serve.
  Shard shard;
};

/// What a panel stream did.
struct PanelStreamStats {
  int64_t instruments = 0;      ///< symbols served (this shard's)
  int64_t timestamps = 0;       ///< timestamps with at least one served bar
  int64_t instrument_bars = 0;  ///< bars fed to the desk
  int64_t reported = 0;         ///< decisions passed to the sink (at or after `from`)
  LatencySummary latency_us;    ///< per-timestamp desk latency (the whole batch)
};

/// Called for each timestamp with its reported decisions (one per served symbol with a bar, in
/// the panel's symbol order; never empty).
using TimestampSink = std::function<void(int64_t, const std::vector<InstrumentDecision>&)>;

/// Feeds a panel through `desk` one timestamp at a time (the union of its symbols'
/// timestamps): at each, the served symbols with a bar there, as one on_timestamp call.
/// InputError when the shard holds no symbol.
PanelStreamStats stream_panel(Desk& desk, const data::Panel& panel,
                              const PanelStreamOptions& options, const TimestampSink& on_timestamp);

}  // namespace foxhunt::serving
