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

#include <cstdint>
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
