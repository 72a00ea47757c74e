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

/// Calls `f(line, line_no)` for every line of `text` (1-based numbers), cleaned as
/// BarCsvReader::read_line cleans it (csv::clean_line), until `f` returns false.
template <typename F>
void for_each_line(std::string_view text, F&& f) {
  csv::for_each_line(text, [&](std::string_view line, int64_t line_no) {
    return f(csv::clean_line(line, line_no), line_no);
  });
}

/// The error for a first line that names no symbol column.
[[noreturn]] void missing_symbol_column(const std::string& source, int64_t line, bool header) {
  throw InputError(
      kPanelComponent,
      foxhunt::detail::cat(source, ":", line,
                           ": missing symbol column: a panel file starts with a header naming ",
                           "a symbol column (symbol, ticker or instrument) and the bar columns, "
                           "e.g. date,symbol,open,high,low,close,volume",
                           header ? "" : " (this line is not a header)"));
}

/// One data row of a panel CSV; `symbol` views the line it was read from.
struct RowText {
  std::string_view symbol;
  Bar bar;
  bool close_only = false;  ///< open, high and low left empty
};

/// A panel CSV's row grammar, shared by parse_panel_csv and PanelCsvStream: the header (which
/// must name a symbol and a timestamp column), then rows of its layout.
class RowReader {
 public:
  explicit RowReader(const std::string& source) : source_(source) {}

  /// The row on `line` (cleaned, line `line_no`), or nothing for a blank line or the header.
  std::optional<RowText> read(std::string_view line, int64_t line_no) {
    if (csv::trim(line).empty()) return std::nullopt;
    csv::split_fields(line, fields_, source_, line_no);
    if (!layout_) {  // the first non-blank line: the header with the symbol column
      const bool header = csv::looks_like_header(fields_);
      if (!header || std::none_of(fields_.begin(), fields_.end(), csv::is_symbol_name))
        missing_symbol_column(source_, line_no, header);
      layout_ = csv::layout_from_header(fields_, source_, line_no, /*symbol_column=*/true);
      FOXHUNT_CHECK(layout_->pos[csv::kTimestamp] >= 0, kPanelComponent, source_, ":", line_no,
                    ": missing column 'timestamp' in header (or date, datetime, time): a panel "
                    "aligns its symbols by time");
      symbol_column_ = fields_[static_cast<size_t>(layout_->symbol)];
      header_line_ = line_no;
      return std::nullopt;
    }
    FOXHUNT_CHECK(fields_.size() == layout_->fields, kPanelComponent, source_, ":", line_no,
                  ": wrong column count: expected ", layout_->fields, " fields, got ",
                  fields_.size());
    RowText row;
    row.symbol = fields_[static_cast<size_t>(layout_->symbol)];
    FOXHUNT_CHECK(!row.symbol.empty(), kPanelComponent, source_, ":", line_no,
                  ": empty symbol (column '", symbol_column_, "')");
    const csv::RowPlace at{source_, line_no, row.symbol};
    row.bar = csv::parse_row(fields_, *layout_, state_, at, /*blank_ohlcv=*/true, &row.close_only);
    return row;
  }

  /// True once the header was read.
  bool has_header() const { return layout_.has_value(); }
  /// Its line (0: none yet).
  int64_t header_line() const { return header_line_; }

 private:
  const std::string& source_;
  std::optional<csv::Layout> layout_;
  csv::RowState state_;
  std::vector<std::string_view> fields_;
  std::string symbol_column_;
  int64_t header_line_ = 0;
};

/// Refuses a second row of a symbol at one timestamp.
[[noreturn]] void duplicate_timestamp(const csv::RowPlace& at, int64_t t, int64_t other_line) {
  throw InputError(kPanelComponent,
                   foxhunt::detail::cat(at, "duplicate timestamp ", format_timestamp(t),
                                        " (also on line ", other_line, ")"));
}

/// A symbol's rows all give open, high and low or all leave them empty (its first row decides).
void check_close_only(const csv::RowPlace& at, bool row, bool symbol, int64_t first_line) {
  FOXHUNT_CHECK(row == symbol, kPanelComponent, at,
                row ? "open, high and low are empty" : "open, high and low are given",
                " but not on the symbol's first row (line ", first_line,
                "); a symbol's rows must all give open, high and low or all leave them empty");
}

/// No rows: an input without a header, or nothing after it.
[[noreturn]] void no_rows(const std::string& source, const RowReader& reader) {
  FOXHUNT_CHECK(reader.has_header(), kPanelComponent, source, ":1: empty file: no bars");
  throw InputError(kPanelComponent, foxhunt::detail::cat(source, ":", reader.header_line() + 1,
                                                         ": no bars after the header"));
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
    if (!options.allow_single_series && first.line != 0)
      missing_symbol_column(source, first.line, first.header);
    FOXHUNT_CHECK(options.allow_single_series, kPanelComponent, source, ":1: empty file: no bars");
    return read_single_series(text, source, options);
  }

  std::map<std::string, SymbolRows, std::less<>> by_symbol;
  RowReader reader(source);
  for_each_line(text, [&](std::string_view line, int64_t line_no) {
    const auto row = reader.read(line, line_no);
    if (!row) return true;
    const Bar& bar = row->bar;
    const csv::RowPlace at{source, line_no, row->symbol};
    auto it = by_symbol.find(row->symbol);
    if (it == by_symbol.end()) {
      it = by_symbol.emplace(std::string(row->symbol), SymbolRows{}).first;
      it->second.series.close_only = row->close_only;
    }
    SymbolRows& rows = it->second;
    auto& bars = rows.series.bars;
    if (!bars.empty() && bar.timestamp <= bars.back().timestamp) {
      const auto same = std::lower_bound(bars.begin(), bars.end(), bar.timestamp,
                                         [](const Bar& b, int64_t t) { return b.timestamp < t; });
      if (same->timestamp == bar.timestamp)
        duplicate_timestamp(at, bar.timestamp,
                            rows.lines[static_cast<size_t>(same - bars.begin())]);
      FOXHUNT_CHECK(false, kPanelComponent, at, "timestamp ", format_timestamp(bar.timestamp),
                    " goes back in time: the symbol's previous bar is at ",
                    format_timestamp(bars.back().timestamp), " (line ", rows.lines.back(),
                    "); each symbol's timestamps must increase");
    }
    check_close_only(at, row->close_only, rows.series.close_only,
                     rows.lines.empty() ? line_no : rows.lines.front());
    bars.push_back(bar);
    rows.lines.push_back(line_no);
    return true;
  });
  if (by_symbol.empty()) no_rows(source, reader);

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

/// A symbol of a stream: what its next rows are checked against.
struct StreamSymbol {
  bool close_only = false;
  int64_t first_line = 0;
  int64_t last_timestamp = 0;
  int64_t last_line = 0;
};

struct PanelCsvStream::Impl {
  Impl(std::istream& in_, std::string source_, std::string head_)
      : in(in_), source(std::move(source_)), head(std::move(head_)), reader(source) {}

  /// The next raw line (the head's first), false at the end of the input.
  bool read_line(std::string_view& out) {
    if (head_pos < head.size()) {
      size_t end = head.find('\n', head_pos);
      if (end == std::string::npos) end = head.size();
      out = std::string_view(head).substr(head_pos, end - head_pos);
      head_pos = end + 1;
      return true;
    }
    if (!std::getline(in, line)) return false;
    out = line;
    return true;
  }

  /// Checks the row on line `line_no` against the rows before it (a refused row changes nothing)
  /// and adds it to `group`; a row of a later timestamp first moves the complete group to `ready`.
  void take(const RowText& row, int64_t line_no) {
    const csv::RowPlace at{source, line_no, row.symbol};
    const int64_t t = row.bar.timestamp;
    if (!group.empty() && t < group.back().bar.timestamp) {
      out_of_order = true;
      const PanelRow& prev = group.back();
      FOXHUNT_CHECK(false, kPanelComponent, at, "timestamp ", format_timestamp(t),
                    " goes back in time: the previous row is at ",
                    format_timestamp(prev.bar.timestamp), " (line ", prev.line,
                    "); a panel read as a stream must be in time order (the rows of a timestamp "
                    "together, timestamps increasing)");
    }
    auto it = symbols.find(row.symbol);
    const bool first = it == symbols.end();
    if (!first) {
      // In time order, a symbol's earlier rows are all at or before `t`: equal is its last.
      if (it->second.last_timestamp == t) duplicate_timestamp(at, t, it->second.last_line);
      check_close_only(at, row.close_only, it->second.close_only, it->second.first_line);
    }
    if (!group.empty() && t > group.back().bar.timestamp) {
      ready.swap(group);  // a later timestamp: the one before is complete
      group.clear();
    }
    if (first)
      it = symbols.emplace(std::string(row.symbol), StreamSymbol{row.close_only, line_no}).first;
    it->second.last_timestamp = t;
    it->second.last_line = line_no;
    group.push_back({std::string(row.symbol), row.bar, line_no, first});
  }

  std::istream& in;
  std::string source;
  std::string head;
  size_t head_pos = 0;
  std::string line;
  RowReader reader;
  int64_t line_no = 0;  // lines read
  int64_t place = 0;    // PanelCsvStream::line_number
  std::map<std::string, StreamSymbol, std::less<>> symbols;
  std::vector<PanelRow> group;  // the timestamp being read
  std::vector<PanelRow> ready;  // a complete timestamp not yet handed out
  std::optional<int64_t> last_timestamp;
  bool ended = false;
  bool out_of_order = false;
};

PanelCsvStream::PanelCsvStream(std::istream& in, std::string source, std::string head)
    : impl_(std::make_unique<Impl>(in, std::move(source), std::move(head))) {}
PanelCsvStream::~PanelCsvStream() = default;
PanelCsvStream::PanelCsvStream(PanelCsvStream&&) noexcept = default;

bool PanelCsvStream::next(std::vector<PanelRow>& rows) {
  Impl& s = *impl_;
  rows.clear();
  std::string_view line;
  while (s.ready.empty() && !s.ended) {
    if (!s.read_line(line)) {
      s.ended = true;
      if (s.symbols.empty()) no_rows(s.source, s.reader);
      s.ready.swap(s.group);
      break;
    }
    const int64_t line_no = ++s.line_no;
    s.place = line_no;
    if (const auto row = s.reader.read(csv::clean_line(line, line_no), line_no))
      s.take(*row, line_no);
  }
  if (s.ready.empty()) return false;
  rows.swap(s.ready);
  s.ready.clear();
  s.last_timestamp = rows.front().bar.timestamp;
  s.place = rows.back().line;  // a bar of it the caller refuses is placed in its timestamp
  return true;
}

int64_t PanelCsvStream::line_number() const {
  return impl_->place;
}

int64_t PanelCsvStream::symbols() const {
  return static_cast<int64_t>(impl_->symbols.size());
}

std::optional<int64_t> PanelCsvStream::last_timestamp() const {
  return impl_->last_timestamp;
}

bool PanelCsvStream::ended() const {
  return impl_->ended;
}

bool PanelCsvStream::out_of_order() const {
  return impl_->out_of_order;
}

PanelCsvScan scan_panel_csv(std::istream& in, const std::string& source) {
  PanelCsvStream stream(in, source);
  PanelCsvScan scan;
  std::vector<PanelRow> rows;
  try {
    while (stream.next(rows)) scan.rows += static_cast<int64_t>(rows.size());
  } catch (const InputError&) {
    if (!stream.out_of_order()) throw;
    scan.symbols = stream.symbols();
    return scan;
  }
  scan.time_ordered = true;
  scan.symbols = stream.symbols();
  scan.last_timestamp = stream.last_timestamp();
  return scan;
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
