#pragma once
/// \file tape_stream.h
/// A tape of trade prints served live: `TapeBarSource` reads prints line by line
/// (data::TapeCsvReader), feeds the streaming bar builder (data::TapeBarBuilder, the one bar
/// definition of training) and yields a bar to the desk each time one closes, so that a decision
/// follows every closed bar; `stream_tape` is stream_source (bar_stream.h) on it, with the
/// closing print of each bar and the latency from that print's arrival (when its line was read)
/// to the decision.
///
/// The bars are, bar for bar, those `foxhunt data bars` writes for the same tape and spec
/// (data::build_tape_bars / build_tape_panel; their timestamps by data::tape_bar_to_bar), so a
/// tape served here and its bars CSV served by predict give the same decisions.
///
/// Which print closes a bar: for a time bar, the first print at or after its end (that print
/// opens the next bar); for a tick, volume or dollar bar, the print that completes it; the last
/// bar of the tape closes at the end of the input (BarClose::at_end, the print is the tape's
/// last).
///
/// A tape with a symbol column serves a desk: time bars only (each symbol's tick, volume or
/// dollar bars would close at its own times, and a desk decides on one clock; the data layer's
/// rule, data::build_tape_panel). Every symbol's bar of an interval closes when the first print
/// of a later interval arrives, and the desk gets them together, in the symbols' byte order (a
/// panel's). A print that falls in an interval the desk has already closed (a symbol's print
/// arriving more than a bar period late) is refused with SOURCE:LINE (batch building would still
/// place it; live, its bar is gone).

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/core/stats.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/serving/bar_stream.h"

namespace foxhunt::serving {

/// How a tape becomes bars for a desk.
struct TapeStreamOptions {
  std::string source = "stdin";  ///< the input's name in messages
  data::BarSpec spec;            ///< the bars (the bundles' recorded spec: tape_bar_spec)
  data::TapeReadOptions read;    ///< bad prints refused or dropped, the epoch unit
  /// The instrument of a tape without a symbol column (the ensemble's symbol).
  std::string symbol = "series";
};

/// The print that closed the bars a source last yielded.
struct BarClose {
  int64_t print_ns = 0;  ///< its timestamp (Unix ns)
  /// When its line was read (steady clock): the print's arrival.
  std::chrono::steady_clock::time_point arrival;
  bool at_end = false;  ///< closed by the end of the input (flush)
};

/// Bars built from a tape as it is read (file comment).
class TapeBarSource : public BarSource {
 public:
  /// Reads `in` (which must outlive the source). `head`: lines already taken from `in` (e.g. the
  /// header a caller read to see whether the tape has a symbol column), read first.
  TapeBarSource(std::istream& in, TapeStreamOptions options, std::string head = "");
  bool next(std::vector<SymbolBar>& bars) override;
  std::string name() const override { return options_.source; }
  std::string where() const override;
  /// Symbols seen so far (1 for a tape without a symbol column).
  int64_t instruments() const override;
  /// The closing print of the bars next() last returned.
  const BarClose& last_close() const { return close_; }
  int64_t prints() const { return prints_; }  ///< prints read (dropped ones not counted)
  int64_t bars() const { return bars_; }      ///< bars yielded (over every symbol)
  /// True once the header was read and names a symbol column.
  bool has_symbol() const { return reader_.has_symbol(); }
  /// Prints the reader dropped (TapeBadPrintPolicy::kDrop).
  const data::TapeDrops& dropped() const { return reader_.dropped(); }

 private:
  bool read_line(std::string_view line, std::chrono::steady_clock::time_point arrival);
  void emit(std::vector<data::TapeBar>& closed, const BarClose& close);

  std::istream& in_;
  TapeStreamOptions options_;
  std::string head_;
  size_t head_pos_ = 0;
  data::TapeCsvReader reader_;
  data::TapeBarBuilder builder_;
  std::string line_;
  BarClose close_;
  bool ended_ = false;
  int64_t prints_ = 0, bars_ = 0;
  int64_t last_print_ns_ = 0;   // the last print read (closes the bars at the end)
  int64_t clock_interval_ = 0;  // a panel's time grid: the open interval's start (ns)
  bool clock_set_ = false;
  std::vector<std::optional<int64_t>> previous_;  // per symbol id: its last bar's timestamp
  std::deque<std::pair<std::vector<SymbolBar>, BarClose>> ready_;  // closed, not yet returned
};

/// What a tape stream did.
struct TapeStreamStats {
  StreamStats stream;       ///< the desk's figures (bars, timestamps, latency per timestamp)
  int64_t prints = 0;       ///< prints read
  int64_t tape_bars = 0;    ///< bars built
  double seconds = 0.0;     ///< wall time of the whole stream
  double prints_per_s = 0;  ///< prints / seconds
  double bars_per_s = 0;    ///< bars / seconds
  /// From each closing print's arrival to its decision, microseconds (every timestamp, reported
  /// or not).
  LatencySummary print_to_decision_us;
  data::TapeDrops dropped;  ///< prints the reader dropped
};

/// Called for each reported timestamp with its bars, their decisions, the closing print and the
/// latency from that print's arrival to the decision (ns).
using TapeSink =
    std::function<void(const std::vector<SymbolBar>&, const std::vector<InstrumentDecision>&,
                       const BarClose&, int64_t latency_ns)>;

/// stream_source on `desk` and a TapeBarSource of `in` (`head`: lines already read from it).
/// InputError when the tape gives no bar; a bad line is "[predict] SOURCE:LINE: ..." unless
/// `stream.skip_bad`.
TapeStreamStats stream_tape(Desk& desk, std::istream& in, const TapeStreamOptions& options,
                            const StreamOptions& stream, const TapeSink& on_decisions,
                            const SkipSink& on_skip = nullptr, const std::string& head = "");

}  // namespace foxhunt::serving
