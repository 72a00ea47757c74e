#pragma once
/// \file panel.h
/// Panel data: the bars of many instruments, read from one CSV in long format (one row per
/// symbol and bar, as traders export a universe). Torch-free.
///
/// Panel CSV format: the bar CSV of bars.h (separators, quotes, blank lines, BOM, header
/// spellings, timestamp formats, value checks) plus one symbol column, with these differences:
/// - A header is required and names a symbol column: `symbol`, also `ticker` or `instrument`
///   (case-insensitive, blanks, `_`, `.` and `-` ignored, at most one), and a timestamp column
///   (`timestamp`, `date`, `datetime` or `time`). Example:
///   `date,symbol,open,high,low,close,volume`.
/// - Rows of different symbols interleave in any order; each symbol's timestamps must strictly
///   increase (a symbol's rows keep their order in the file). Symbols may miss bars: a date one
///   symbol lacks is simply absent for it. Symbols are case-sensitive and never empty.
/// - Close-only rows: with open/high/low columns in the header, a row may leave all three empty
///   (`2019-01-02,WTI,,,,46.31,`): open = high = low = close. A symbol's rows are either all
///   close-only or all OHLC (its BarSeries::close_only); a file without open/high/low columns
///   is close-only throughout. An empty volume reads as 0.
/// - One timestamp format per file (across all symbols), as in bars.h.
/// Errors are InputError "[bars] FILE:LINE: symbol 'S': reason" (the symbol once it is known):
/// a duplicated (timestamp, symbol), a symbol going back in time, an empty symbol, a missing
/// symbol column (when no single-series file is allowed), a row's bad values.
///
/// A file without a symbol column is a single-series file: parse_panel_csv reads it with the
/// single-series reader (parse_bars_csv, unchanged) as a one-symbol panel.
///
/// A panel whose rows are in time order (a timestamp's rows together, timestamps increasing) can
/// also be read as a stream, one timestamp at a time (PanelCsvStream), in memory proportional to
/// its symbols rather than its rows: the same rows, checks and messages as parse_panel_csv, plus
/// a row going back in time refused with its FILE:LINE.

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "foxhunt/data/bars.h"

namespace foxhunt::data {

/// One instrument of a panel: its symbol and its bars.
struct PanelSymbol {
  std::string symbol;  ///< as written in the file (or the single-series name)
  BarSeries series;    ///< strictly increasing timestamps; source "FILE[SYMBOL]"
};

/// The bars of many instruments, each its own series.
struct Panel {
  /// Sorted by symbol (byte order, so "SP500" < "WTI" < "aapl"): the order, and therefore an
  /// instrument's index, does not depend on how the file's rows were ordered.
  std::vector<PanelSymbol> symbols;
  /// Union of every symbol's timestamps, strictly increasing.
  std::vector<int64_t> timestamps;
  /// File path or the caller's label.
  std::string source;
  /// Read from a file without a symbol column (one symbol, the single-series reader's bars).
  bool single_series = false;

  /// Number of symbols.
  int64_t size() const { return static_cast<int64_t>(symbols.size()); }
  /// Bars over all symbols (the file's data rows).
  int64_t rows() const;
  /// The symbol's series, or nullptr when the panel has no such symbol.
  const BarSeries* find(std::string_view symbol) const;
};

/// How parse_panel_csv treats a file without a symbol column.
struct PanelReadOptions {
  /// Read a file without a symbol column as a one-symbol panel (false: InputError "missing
  /// symbol column").
  bool allow_single_series = true;
  /// The symbol of such a file; empty: the file name's stem ("data/spx.csv" -> "spx"; the whole
  /// source when it has no stem).
  std::string single_symbol;
};

/// True when the CSV text's first non-blank line is a header with a symbol column (`symbol`,
/// `ticker` or `instrument`): the file is a panel. Never throws on malformed text (false).
bool has_symbol_column(std::string_view text);

/// Parses a panel CSV (see the file comment). `source` names the input in errors and is stored
/// in the result.
Panel parse_panel_csv(std::string_view text, const std::string& source,
                      const PanelReadOptions& options = {});

/// Reads and parses a panel CSV file; errors name the path, the 1-based line and the symbol.
Panel load_panel_csv(const std::string& path, const PanelReadOptions& options = {});

/// One row of a panel CSV read as a stream.
struct PanelRow {
  std::string symbol;  ///< its symbol
  Bar bar;             ///< its bar
  int64_t line = 0;    ///< its 1-based line
  bool first = false;  ///< the symbol's first row
};

/// A panel CSV (the file comment's format, header first) read line by line, one timestamp at a
/// time: for predict over a stream, whose memory must not grow with its rows. The rows must be in
/// time order; each row is checked as parse_panel_csv checks it (the same InputErrors), and a row
/// whose timestamp is before the previous row's is refused ("[bars] SOURCE:LINE: symbol 'S':
/// timestamp T goes back in time ..."). Holds the rows of one timestamp and a few bytes per
/// symbol.
class PanelCsvStream {
 public:
  /// Reads `in` (which must outlive the stream); `source` names it in messages. `head`: lines
  /// already taken from `in` (the header a caller read to see whether it is a panel), read first.
  PanelCsvStream(std::istream& in, std::string source, std::string head = "");
  ~PanelCsvStream();
  PanelCsvStream(PanelCsvStream&&) noexcept;

  /// Replaces `rows` with the rows of the next timestamp, in file order, and returns true; false
  /// at the end. A timestamp is complete when a row of a later one (or the end) is read. Throws
  /// InputError for a bad row (the next call reads on after it), and at the end of an input
  /// without a header or without rows (as parse_panel_csv).
  bool next(std::vector<PanelRow>& rows);
  /// Where the last next() stopped: the line it refused, else the last row of the timestamp it
  /// returned.
  int64_t line_number() const;
  /// Symbols read so far.
  int64_t symbols() const;
  /// The timestamp of the rows next() last returned (none before the first).
  std::optional<int64_t> last_timestamp() const;
  /// True once next() has returned false.
  bool ended() const;
  /// True once a row going back in time was refused: the input is not in time order (a file of
  /// it can still be read whole by parse_panel_csv).
  bool out_of_order() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// What scan_panel_csv found.
struct PanelCsvScan {
  /// The rows are in time order: PanelCsvStream reads the input to its end.
  bool time_ordered = false;
  int64_t rows = 0;                       ///< rows read (up to the first out of order)
  int64_t symbols = 0;                    ///< symbols read (up to the first row out of order)
  std::optional<int64_t> last_timestamp;  ///< of the last row (time_ordered only)
};

/// Reads `in` through a PanelCsvStream to its end, or to the first row going back in time
/// (time_ordered false): a file is checked before it is served. InputError for a bad row before
/// that one.
PanelCsvScan scan_panel_csv(std::istream& in, const std::string& source);

/// Throws InputError "[panel] SOURCE: WHAT needs at least N bars per symbol; too few: 'S' has K
/// bars, ..." naming every symbol with fewer than `n` bars. `what` says what needs them ("a
/// 250-bar window").
void check_min_bars(const Panel& panel, int64_t n, std::string_view what);

/// One symbol's line of `foxhunt data inspect`.
struct PanelSymbolSummary {
  std::string symbol;           ///< the symbol
  int64_t bars = 0;             ///< its number of bars
  int64_t first_timestamp = 0;  ///< its first bar
  int64_t last_timestamp = 0;   ///< its last bar
  /// Panel timestamps (the union) between its first and last bar that it has no bar for.
  int64_t missing_bars = 0;
  bool close_only = false;  ///< open/high/low derived from close
};

/// Per symbol, in the panel's order.
std::vector<PanelSymbolSummary> summarize_panel(const Panel& panel);

}  // namespace foxhunt::data
