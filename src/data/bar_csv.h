#pragma once
/// \file bar_csv.h
/// Private to the data area: the CSV row grammar that the single-series reader (bars.cpp) and the
/// panel reader (panel.cpp) share, so that both read a row the same way: field splitting, header
/// layouts, and one row's fields into a checked Bar. The format is documented in
/// foxhunt/data/bars.h (and the panel additions in foxhunt/data/panel.h). Errors are InputError
/// "[bars] SOURCE:LINE: reason". Torch-free.

#include <array>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "foxhunt/data/bars.h"

namespace foxhunt::data::csv {

/// The error component of bars and their CSV rows.
inline constexpr const char* kBarsComponent = "bars";

/// The bar columns, in the order of a headerless 6-column file.
enum Column { kTimestamp = 0, kOpen, kHigh, kLow, kClose, kVolume, kNumColumns };
/// Column names as errors print them.
inline constexpr std::array<const char*, kNumColumns> kColumnNames = {
    "timestamp", "open", "high", "low", "close", "volume"};

/// `line` (line `line_no` of its input) without a leading UTF-8 byte-order mark (first line only:
/// it is not part of the first column name) and a trailing CR.
std::string_view clean_line(std::string_view line, int64_t line_no);

/// Calls `f(line, line_no)` for every '\n'-separated line of `text` as it stands (not cleaned;
/// 1-based numbers) until `f` returns false.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (!f(line, ++line_no)) return;
  }
}

/// `s` without leading and trailing blanks (space, tab, CR).
std::string_view trim(std::string_view s);

/// Splits a line on commas into trimmed fields (quotes removed; a comma inside quotes is part of
/// the field). Throws InputError for an unterminated quote or text after a closing quote.
void split_fields(std::string_view line, std::vector<std::string_view>& out,
                  const std::string& source, int64_t line_no);

/// True for an ASCII letter (a header field starts with one).
bool is_letter(char c);

/// A column name lower-cased without blanks, '_', '.' and '-' ("Adj_Close" and "adj. close" ->
/// "adjclose"): the bar, panel and tape readers match header names in this form.
std::string normalize_name(std::string_view name);

/// True for a symbol column's name: `symbol`, `ticker` or `instrument`, any case, blanks, `_`,
/// `.` and `-` ignored.
bool is_symbol_name(std::string_view name);

/// A header line: every field starts with a letter and at least one is a bar column.
bool looks_like_header(const std::vector<std::string_view>& fields);

/// Field position of each column in a row, -1 when the file has no such column.
struct Layout {
  std::array<int, kNumColumns> pos{-1, -1, -1, -1, -1, -1};  ///< by Column
  int symbol = -1;    ///< the symbol column (panel files only)
  size_t fields = 0;  ///< fields per row
  /// No open/high/low columns.
  bool close_only() const { return pos[kOpen] < 0; }
};

/// The layout a header names. With `symbol_column`, a symbol column (is_symbol_name) is accepted
/// and recorded in Layout::symbol (at most one); without it such a name is an unknown column, as
/// in a single-series file.
Layout layout_from_header(const std::vector<std::string_view>& fields, const std::string& source,
                          int64_t line, bool symbol_column = false);

/// The layout of a headerless file from its column count (6, 2 or 1).
Layout layout_from_count(size_t count, const std::string& source, int64_t line);

/// How a timestamp was written; one file uses one.
enum class TimestampFormat { kSeconds, kMilliseconds, kIso };

/// What the rows of one file share: its timestamp format (set by the first row) and the number of
/// rows read (the synthetic timestamp of a file without a timestamp column).
struct RowState {
  std::optional<TimestampFormat> ts_format;  ///< format of the first timestamp
  int64_t ts_format_line = 0;                ///< the line that set it
  int64_t rows = 0;                          ///< rows parsed so far
};

/// Where a row is, as errors print it: "SOURCE:LINE: ", then "symbol 'S': " for a panel row.
struct RowPlace {
  const std::string& source;  ///< file path or label
  int64_t line = 0;           ///< 1-based line
  std::string_view symbol;    ///< the row's symbol; empty for a single-series row

  /// The printed prefix.
  std::string str() const;
};

/// Prints RowPlace::str().
std::ostream& operator<<(std::ostream& os, const RowPlace& at);

/// Parses the fields of one data row (split, count already checked against `layout`) into a bar
/// and checks its values (bars.h). `state` carries the file's timestamp format and row count.
/// With `blank_ohlcv` (panel rows), empty open, high and low (all three) make a close-only row
/// (open = high = low = close, and `*close_only_row` is set) and an empty volume reads as 0;
/// without it an empty field is an error, as in the single-series format.
Bar parse_row(const std::vector<std::string_view>& fields, const Layout& layout, RowState& state,
              const RowPlace& at, bool blank_ohlcv = false, bool* close_only_row = nullptr);

/// Checks one bar's values (finite prices > 0, low <= open, close <= high, finite volume >= 0);
/// `prefix` locates it ("file:line: " or "source: bar i: "). Throws InputError "[bars] ...".
void check_bar_values(const Bar& b, const std::string& prefix);

}  // namespace foxhunt::data::csv
