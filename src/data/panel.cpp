#include "foxhunt/data/panel.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>

#include "bar_csv.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"

namespace foxhunt::data {

namespace {

constexpr const char* kPanelComponent = "bars";  // the CSV format's errors, as in bars.cpp

/// Calls `f(line, line_no)` for every line of `text` (1-based numbers), with a leading UTF-8
/// byte-order mark and a trailing CR removed, as BarCsvReader::read_line does.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  int64_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (line_no == 1 && line.size() >= 3 && line.substr(0, 3) == "\xEF\xBB\xBF")
      line.remove_prefix(3);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!f(line, line_no)) return;
  }
}

/// The first non-blank line of a CSV: its number, whether it is a header, whether it names a
/// symbol column.
struct FirstLine {
  int64_t line = 0;  ///< 0: no non-blank line
  bool header = false;
  bool symbol = false;
};

FirstLine first_line(std::string_view text) {
  FirstLine r;
  std::vector<std::string_view> fields;
  for_each_line(text, [&](std::string_view line, int64_t line_no) {
    if (csv::trim(line).empty()) return true;
    r.line = line_no;
    try {
      csv::split_fields(line, fields, "", line_no);
    } catch (const InputError&) {
      return false;  // not a header; the reader reports the line
    }
    r.header = csv::looks_like_header(fields);
    r.symbol = r.header && std::any_of(fields.begin(), fields.end(), csv::is_symbol_name);
    return false;
  });
  return r;
}

/// A symbol being read: its bars and the line of each.
struct SymbolRows {
  BarSeries series;
  std::vector<int64_t> lines;  ///< file line of each bar
};

Panel read_single_series(std::string_view text, const std::string& source,
                         const PanelReadOptions& options) {
  Panel panel;
  panel.source = source;
  panel.single_series = true;
  std::string name = options.single_symbol;
  if (name.empty()) name = std::filesystem::path(source).stem().string();
  if (name.empty()) name = source;
  BarSeries series = parse_bars_csv(text, source);
  panel.timestamps.reserve(series.bars.size());
  for (const Bar& b : series.bars) panel.timestamps.push_back(b.timestamp);
  panel.symbols.push_back({std::move(name), std::move(series)});
  return panel;
}

}  // namespace

int64_t Panel::rows() const {
  int64_t n = 0;
  for (const PanelSymbol& s : symbols) n += s.series.size();
  return n;
}

const BarSeries* Panel::find(std::string_view symbol) const {
  for (const PanelSymbol& s : symbols)
    if (s.symbol == symbol) return &s.series;
  return nullptr;
}

bool has_symbol_column(std::string_view text) {
  return first_line(text).symbol;
}

Panel parse_panel_csv(std::string_view text, const std::string& source,
                      const PanelReadOptions& options) {
  const FirstLine first = first_line(text);
  if (!first.symbol) {
    FOXHUNT_CHECK(options.allow_single_series || first.line == 0, kPanelComponent, source, ":",
                  first.line, ": missing symbol column: a panel file starts with a header naming ",
                  "a symbol column (symbol, ticker or instrument) and the bar columns, e.g. "
                  "date,symbol,open,high,low,close,volume",
                  first.header ? "" : " (this line is not a header)");
    FOXHUNT_CHECK(options.allow_single_series, kPanelComponent, source, ":1: empty file: no bars");
    return read_single_series(text, source, options);
  }

  std::map<std::string, SymbolRows, std::less<>> by_symbol;
  std::optional<csv::Layout> layout;
  csv::RowState state;
  std::vector<std::string_view> fields;
  std::string symbol_column;
  int64_t header_line = 0;
  for_each_line(text, [&](std::string_view line, int64_t line_no) {
    if (csv::trim(line).empty()) return true;
    csv::split_fields(line, fields, source, line_no);
    if (!layout) {  // the first non-blank line: the header with the symbol column (first_line)
      layout = csv::layout_from_header(fields, source, line_no, /*symbol_column=*/true);
      FOXHUNT_CHECK(layout->pos[csv::kTimestamp] >= 0, kPanelComponent, source, ":", line_no,
                    ": missing column 'timestamp' in header (or date, datetime, time): a panel "
                    "aligns its symbols by time");
      symbol_column = fields[static_cast<size_t>(layout->symbol)];
      header_line = line_no;
      return true;
    }
    FOXHUNT_CHECK(fields.size() == layout->fields, kPanelComponent, source, ":", line_no,
                  ": wrong column count: expected ", layout->fields, " fields, got ",
                  fields.size());
    const std::string_view symbol = fields[static_cast<size_t>(layout->symbol)];
    FOXHUNT_CHECK(!symbol.empty(), kPanelComponent, source, ":", line_no,
                  ": empty symbol (column '", symbol_column, "')");
    const csv::RowPlace at{source, line_no, symbol};
    bool close_only_row = false;
    const Bar bar =
        csv::parse_row(fields, *layout, state, at, /*blank_ohlcv=*/true, &close_only_row);

    auto it = by_symbol.find(symbol);
    if (it == by_symbol.end()) {
      it = by_symbol.emplace(std::string(symbol), SymbolRows{}).first;
      it->second.series.close_only = close_only_row;
    }
    SymbolRows& rows = it->second;
    auto& bars = rows.series.bars;
    if (!bars.empty() && bar.timestamp <= bars.back().timestamp) {
      const auto same = std::lower_bound(bars.begin(), bars.end(), bar.timestamp,
                                         [](const Bar& b, int64_t t) { return b.timestamp < t; });
      FOXHUNT_CHECK(same->timestamp != bar.timestamp, kPanelComponent, at, "duplicate timestamp ",
                    format_timestamp(bar.timestamp), " (also on line ",
                    rows.lines[static_cast<size_t>(same - bars.begin())], ")");
      FOXHUNT_CHECK(false, kPanelComponent, at, "timestamp ", format_timestamp(bar.timestamp),
                    " goes back in time: the symbol's previous bar is at ",
                    format_timestamp(bars.back().timestamp), " (line ", rows.lines.back(),
                    "); each symbol's timestamps must increase");
    }
    FOXHUNT_CHECK(close_only_row == rows.series.close_only, kPanelComponent, at,
                  close_only_row ? "open, high and low are empty" : "open, high and low are given",
                  " but not on the symbol's first row (line ", rows.lines.front(),
                  "); a symbol's rows must all give open, high and low or all leave them empty");
    bars.push_back(bar);
    rows.lines.push_back(line_no);
    return true;
  });
  FOXHUNT_CHECK(!by_symbol.empty(), kPanelComponent, source, ":", header_line + 1,
                ": no bars after the header");

  Panel panel;
  panel.source = source;
  size_t total = 0;
  for (auto& [symbol, rows] : by_symbol) {  // std::map: byte order of the symbols
    rows.series.source = source + "[" + symbol + "]";
    total += rows.series.bars.size();
    panel.symbols.push_back({symbol, std::move(rows.series)});
  }
  panel.timestamps.reserve(total);
  for (const PanelSymbol& s : panel.symbols)
    for (const Bar& b : s.series.bars) panel.timestamps.push_back(b.timestamp);
  std::sort(panel.timestamps.begin(), panel.timestamps.end());
  panel.timestamps.erase(std::unique(panel.timestamps.begin(), panel.timestamps.end()),
                         panel.timestamps.end());
  return panel;
}

Panel load_panel_csv(const std::string& path, const PanelReadOptions& options) {
  return parse_panel_csv(read_file(path), path, options);
}

void check_min_bars(const Panel& panel, int64_t n, std::string_view what) {
  constexpr int kListed = 10;
  std::string listed;
  int short_symbols = 0;
  for (const PanelSymbol& s : panel.symbols) {
    if (s.series.size() >= n) continue;
    if (++short_symbols > kListed) continue;
    if (!listed.empty()) listed += ", ";
    listed += "'" + s.symbol + "' has " + std::to_string(s.series.size()) + " bars";
  }
  if (short_symbols > kListed)
    listed += " and " + std::to_string(short_symbols - kListed) + " more symbols";
  FOXHUNT_CHECK(short_symbols == 0, "panel", panel.source, ": ", what, " needs at least ", n,
                " bars per symbol; too few: ", listed);
}

std::vector<PanelSymbolSummary> summarize_panel(const Panel& panel) {
  std::vector<PanelSymbolSummary> out;
  out.reserve(panel.symbols.size());
  const auto& all = panel.timestamps;
  for (const PanelSymbol& s : panel.symbols) {
    PanelSymbolSummary r;
    r.symbol = s.symbol;
    r.bars = s.series.size();
    r.close_only = s.series.close_only;
    if (!s.series.bars.empty()) {
      r.first_timestamp = s.series.bars.front().timestamp;
      r.last_timestamp = s.series.bars.back().timestamp;
      const auto from = std::lower_bound(all.begin(), all.end(), r.first_timestamp);
      const auto to = std::upper_bound(all.begin(), all.end(), r.last_timestamp);
      r.missing_bars = static_cast<int64_t>(to - from) - r.bars;
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace foxhunt::data
