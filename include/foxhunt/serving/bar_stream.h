#pragma once
/// \file bar_stream.h
/// The one stream runtime's input side: a `BarSource` yields bars one timestamp at a time (a
/// bars CSV of one series read line by line, a panel, any feed a caller writes) and
/// `stream_source` feeds them through a Desk, with what to do with a bad bar, which decisions to
/// report and the latency figures, in the library so that a user's own feed loop and the CLI
/// behave the same. `stream_bars` (one series through an Ensemble, a desk of one) and
/// `stream_panel` (a panel through a desk) are that one function on their sources.

#include <cstdint>
#include <functional>
#include <istream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/core/stats.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::serving {

/// Bars for a desk, one timestamp at a time.
class BarSource {
 public:
  virtual ~BarSource() = default;
  /// Replaces `bars` with the next timestamp's bars (at most one per symbol, all at one
  /// timestamp) and returns true; false at the end. May throw InputError for a bad record (the
  /// stream skips it or stops, BarStreamOptions::skip_bad); the next call reads on after it.
  virtual bool next(std::vector<SymbolBar>& bars) = 0;
  /// The input's name in messages ("stdin", a path).
  virtual std::string name() const = 0;
  /// Where the record last read is ("SOURCE:LINE"), for messages; "" for a source whose records
  /// have no place of their own (a panel in memory): its errors pass through as they are.
  virtual std::string where() const { return ""; }
  /// Symbols the source serves.
  virtual int64_t instruments() const = 0;
};

/// One series as a bars CSV (data/bars.h formats, header first), read line by line: every bar
/// is one timestamp of the instrument `symbol`. A malformed line is an InputError from next().
class CsvBarSource : public BarSource {
 public:
  /// Reads `in` (which must outlive the source); `source` names it in messages.
  CsvBarSource(std::istream& in, std::string source, std::string symbol);
  bool next(std::vector<SymbolBar>& bars) override;
  std::string name() const override { return source_; }
  std::string where() const override;
  int64_t instruments() const override { return 1; }

 private:
  std::istream& in_;
  std::string source_;
  std::string symbol_;
  data::BarCsvReader reader_;
  std::string line_;
};

/// A panel's symbols (those `serve` accepts; every one without it) one timestamp at a time, over
/// the union of their timestamps: at each, the served symbols with a bar there, in the panel's
/// symbol order. Timestamps where none of them has a bar are passed over. A series built from a
/// tape (BarSeries::flow) gives each bar its flow (SymbolBar::flow).
class PanelBarSource : public BarSource {
 public:
  /// Streams `panel` (which must outlive the source).
  explicit PanelBarSource(const data::Panel& panel,
                          const std::function<bool(const std::string&)>& serve = nullptr);
  bool next(std::vector<SymbolBar>& bars) override;
  std::string name() const override { return panel_.source; }
  int64_t instruments() const override { return static_cast<int64_t>(served_.size()); }

 private:
  const data::Panel& panel_;
  std::vector<const data::PanelSymbol*> served_;
  std::vector<size_t> cursor_;  // per served symbol: its next bar
  size_t next_time_ = 0;        // index into panel_.timestamps
};

/// A panel CSV (data/panel.h formats, header first, rows in time order) read line by line
/// (data::PanelCsvStream): at each timestamp, the served symbols (those `serve` accepts; every
/// one without it) with a row there, in byte order of their symbols (a panel's order), so that it
/// yields what PanelBarSource yields on parse_panel_csv of the same text while holding one
/// timestamp's rows and a few bytes per symbol. Timestamps where none of them has a bar are
/// passed over. A timestamp is handed out once a row of a later one (or the end) is read. A bad
/// row, or one going back in time, is an InputError from next().
class CsvPanelSource : public BarSource {
 public:
  /// Reads `in` (which must outlive the source); `source` names it in messages; `head`: lines
  /// already taken from `in`, read first.
  CsvPanelSource(std::istream& in, std::string source,
                 std::function<bool(const std::string&)> serve = nullptr, std::string head = "");
  bool next(std::vector<SymbolBar>& bars) override;
  std::string name() const override { return source_; }
  std::string where() const override;
  /// Served symbols read so far.
  int64_t instruments() const override { return served_; }
  /// Every symbol read so far, served or not.
  int64_t symbols() const { return stream_.symbols(); }
  /// The input's last timestamp read (served or not; none before the first).
  std::optional<int64_t> last_timestamp() const { return stream_.last_timestamp(); }
  /// True once the input has ended.
  bool ended() const { return stream_.ended(); }

 private:
  std::string source_;
  data::PanelCsvStream stream_;
  std::function<bool(const std::string&)> serve_;
  std::vector<data::PanelRow> rows_;
  int64_t served_ = 0;
};

/// How a stream treats its input.
struct StreamOptions {
  /// Skip a bad record (a malformed line, a bar the desk rejects) with a warning instead of
  /// stopping with InputError.
  bool skip_bad = false;
  /// Decisions before this Unix time are computed (the models warm up on them) but not reported.
  int64_t from = std::numeric_limits<int64_t>::min();
};

/// What a stream did.
struct StreamStats {
  int64_t instruments = 0;    ///< symbols the source serves
  int64_t timestamps = 0;     ///< timestamps fed to the desk
  int64_t bars = 0;           ///< bars fed to the desk (over every symbol)
  int64_t reported = 0;       ///< decisions passed to the sink (at or after `from`)
  int64_t skipped = 0;        ///< bad records skipped (skip_bad)
  LatencySummary latency_us;  ///< per-timestamp desk latency (the whole batch)
};

/// Called for each reported timestamp with its bars and their decisions (same order; never
/// empty).
using StreamSink =
    std::function<void(const std::vector<SymbolBar>&, const std::vector<InstrumentDecision>&)>;
/// Called for each skipped record with "SOURCE:LINE: skipped: why".
using SkipSink = std::function<void(const std::string&)>;

/// Feeds every timestamp of `source` through `desk`. A bad record (the source's InputError, or
/// the desk's for a bar) is an InputError "[predict] WHERE: ..." (as it is when the source has
/// no WHERE) unless `options.skip_bad`, which reports it to `on_skip` and goes on. InputError
/// when the source holds no bar.
StreamStats stream_source(Desk& desk, BarSource& source, const StreamOptions& options,
                          const StreamSink& on_decisions, const SkipSink& on_skip = nullptr);

/// How stream_bars treats its input (StreamOptions with the input's name).
struct BarStreamOptions {
  /// The input's name in messages ("stdin", a path).
  std::string source = "stdin";
  /// StreamOptions::skip_bad.
  bool skip_bad = false;
  /// StreamOptions::from.
  int64_t from = std::numeric_limits<int64_t>::min();
};

/// Called for each reported decision with its bar.
using DecisionSink = std::function<void(const data::Bar&, const BarDecision&)>;

/// stream_source on the ensemble's desk of one and a CsvBarSource of `in` (a bars CSV, header
/// first): an invalid bar is an InputError "[predict] SOURCE:LINE: ..." unless
/// `options.skip_bad`. InputError when the input holds no bar.
StreamStats stream_bars(Ensemble& ensemble, std::istream& in, const BarStreamOptions& options,
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
  /// StreamOptions::from.
  int64_t from = std::numeric_limits<int64_t>::min();
  /// The symbols to serve.
  Shard shard;
};

/// Called for each timestamp with its reported decisions (one per served symbol with a bar, in
/// the panel's symbol order; never empty).
using TimestampSink = std::function<void(int64_t, const std::vector<InstrumentDecision>&)>;

/// stream_source on `desk` and a PanelBarSource of the shard's symbols. InputError when the
/// shard holds no symbol.
StreamStats stream_panel(Desk& desk, const data::Panel& panel, const PanelStreamOptions& options,
                         const TimestampSink& on_timestamp);

/// What stream_panel_csv did.
struct PanelCsvStreamStats {
  StreamStats stream;   ///< the desk's figures
  int64_t symbols = 0;  ///< symbols in the input (served or not)
  /// The input's last timestamp (served or not).
  std::optional<int64_t> last_timestamp;
};

/// stream_panel on a panel CSV read line by line from `in` (a CsvPanelSource of the shard's
/// symbols; `source` names it, `head` holds lines already taken from it): the same decisions, in
/// memory that does not grow with the input. A bad row is an InputError "[predict] SOURCE:LINE:
/// ..." (the stream stops there; what came before it was served). InputError when the input ends
/// and the shard held none of its symbols.
PanelCsvStreamStats stream_panel_csv(Desk& desk, std::istream& in, const std::string& source,
                                     const PanelStreamOptions& options,
                                     const TimestampSink& on_timestamp,
                                     const std::string& head = "");

}  // namespace foxhunt::serving
