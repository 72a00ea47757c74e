#include "foxhunt/data/bars.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "bar_csv.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/strings.h"

namespace foxhunt::data {

// The shared row grammar (bar_csv.h; the helpers without a declaration there are used only
// here), then the single-series reader built on it.
namespace csv {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

std::string_view clean_line(std::string_view line, int64_t line_no) {
  if (line_no == 1 && line.size() >= 3 && line.substr(0, 3) == "\xEF\xBB\xBF")
    line.remove_prefix(3);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

std::string_view trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_blank(s[b])) ++b;
  while (e > b && is_blank(s[e - 1])) --e;
  return s.substr(b, e - b);
}

std::string where(const std::string& source, int64_t line) {
  return source + ":" + std::to_string(line) + ": ";
}

/// Splits a line on commas into trimmed fields. A field enclosed in double quotes loses its
/// quotes and keeps any comma inside them (a doubled quote `""` stays as it is; nothing the
/// reader accepts contains a quote, so such a field fails later with its text shown).
void split_fields(std::string_view line, std::vector<std::string_view>& out,
                  const std::string& source, int64_t line_no) {
  out.clear();
  size_t i = 0;
  while (true) {
    while (i < line.size() && is_blank(line[i])) ++i;
    if (i < line.size() && line[i] == '"') {
      size_t close = i + 1;
      while (close < line.size()) {
        if (line[close] == '"' && close + 1 < line.size() && line[close + 1] == '"') {
          close += 2;
        } else if (line[close] == '"') {
          break;
        } else {
          ++close;
        }
      }
      FOXHUNT_CHECK(close < line.size(), kBarsComponent, where(source, line_no), "field ",
                    out.size() + 1, ": unterminated quote");
      out.push_back(trim(line.substr(i + 1, close - i - 1)));
      i = close + 1;
      while (i < line.size() && is_blank(line[i])) ++i;
      if (i == line.size()) return;
      FOXHUNT_CHECK(line[i] == ',', kBarsComponent, where(source, line_no), "field ", out.size(),
                    ": unexpected text after the closing quote");
      ++i;
      continue;
    }
    const size_t comma = line.find(',', i);
    if (comma == std::string_view::npos) {
      out.push_back(trim(line.substr(i)));
      return;
    }
    out.push_back(trim(line.substr(i, comma - i)));
    i = comma + 1;
  }
}

bool is_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

std::string normalize_name(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == ' ' || c == '\t' || c == '_' || c == '.' || c == '-') continue;
    out += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

/// A known column the reader does not use (Yahoo / yfinance exports): ignored.
constexpr int kIgnoredColumn = -2;

/// Column index of a header name, kIgnoredColumn for a known unused one, -1 when unknown.
int column_index(std::string_view name) {
  const std::string n = normalize_name(name);
  if (n == "date" || n == "datetime" || n == "time") return kTimestamp;
  for (int i = 0; i < kNumColumns; ++i)
    if (n == kColumnNames[i]) return i;
  if (n == "adjclose" || n == "adjustedclose" || n == "dividends" || n == "stocksplits")
    return kIgnoredColumn;
  // The flow columns of bars built from a tape (tape_bars.h): read by the tape tools only.
  if (n == "vwap" || n == "prints" || n == "buyvolume" || n == "sellvolume" || n == "duration" ||
      n == "realizedvariance" || n == "startns" || n == "endns")
    return kIgnoredColumn;
  return -1;
}

bool is_symbol_name(std::string_view name) {
  const std::string n = normalize_name(name);
  return n == "symbol" || n == "ticker" || n == "instrument";
}

/// A header line: every field starts with a letter and at least one is a used column.
bool looks_like_header(const std::vector<std::string_view>& fields) {
  bool known = false;
  for (auto f : fields) {
    if (f.empty() || !is_letter(f.front())) return false;
    if (column_index(f) >= 0) known = true;
  }
  return known;
}

Layout layout_from_header(const std::vector<std::string_view>& fields, const std::string& source,
                          int64_t line, bool symbol_column) {
  Layout layout;
  layout.fields = fields.size();
  bool adj_close = false;
  for (size_t i = 0; i < fields.size(); ++i) {
    if (symbol_column && is_symbol_name(fields[i])) {
      FOXHUNT_CHECK(layout.symbol < 0, kBarsComponent, where(source, line), "duplicate column '",
                    fields[i], "' in header (field ", layout.symbol + 1, " '",
                    fields[static_cast<size_t>(layout.symbol)], "' is also the symbol)");
      layout.symbol = static_cast<int>(i);
      continue;
    }
    const int c = column_index(fields[i]);
    FOXHUNT_CHECK(c != -1, kBarsComponent, where(source, line), "unknown column '", fields[i],
                  "' in header (known: ", symbol_column ? "symbol (or ticker, instrument), " : "",
                  "timestamp (or date, datetime, time), open, high, low, "
                  "close, volume; ignored: adj close, dividends, stock splits and the tape-bar "
                  "columns vwap, prints, buy volume, sell volume, duration, realized variance, "
                  "start ns, end ns)");
    if (c == kIgnoredColumn) {
      adj_close = adj_close || normalize_name(fields[i]).starts_with("adj");
      continue;
    }
    FOXHUNT_CHECK(layout.pos[c] < 0, kBarsComponent, where(source, line), "duplicate column '",
                  fields[i], "' in header (field ", layout.pos[c] + 1, " '",
                  fields[static_cast<size_t>(layout.pos[c])], "' is also the ", kColumnNames[c],
                  ")");
    layout.pos[c] = static_cast<int>(i);
  }
  FOXHUNT_CHECK(layout.pos[kClose] >= 0, kBarsComponent, where(source, line),
                "missing column 'close' in header",
                adj_close ? " ('Adj Close' is ignored: the reader uses the unadjusted close)" : "");
  const int ohl = (layout.pos[kOpen] >= 0) + (layout.pos[kHigh] >= 0) + (layout.pos[kLow] >= 0);
  FOXHUNT_CHECK(ohl == 0 || ohl == 3, kBarsComponent, where(source, line),
                "missing column(s) in header: open, high and low must all be present or all be "
                "absent (close-only), got ",
                ohl, " of them");
  return layout;
}

Layout layout_from_count(size_t count, const std::string& source, int64_t line) {
  Layout layout;
  layout.fields = count;
  if (count == 6) {
    for (int c = 0; c < kNumColumns; ++c) layout.pos[c] = c;
  } else if (count == 2) {
    layout.pos[kTimestamp] = 0;
    layout.pos[kClose] = 1;
  } else if (count == 1) {
    layout.pos[kClose] = 0;
  } else {
    FOXHUNT_CHECK(false, kBarsComponent, where(source, line),
                  "wrong column count: expected 6 (timestamp,open,high,low,close,volume), "
                  "2 (timestamp,close) or 1 (close) columns without a header, got ",
                  count);
  }
  return layout;
}

std::string RowPlace::str() const {
  std::string s = where(source, line);
  if (!symbol.empty()) s.append("symbol '").append(symbol).append("': ");
  return s;
}

std::ostream& operator<<(std::ostream& os, const RowPlace& at) {
  return os << at.str();
}

}  // namespace csv

// The single-series code below uses the grammar through csv:: (its kBarsComponent by name).
using csv::kBarsComponent;

namespace {

double parse_double(std::string_view field, int column, const csv::RowPlace& at) {
  double value = 0.0;
  const char* begin = field.data();
  const char* end = begin + field.size();
  if (!field.empty() && field.front() == '+') ++begin;  // from_chars rejects a leading '+'
  auto [ptr, ec] = std::from_chars(begin, end, value);
  FOXHUNT_CHECK(!field.empty() && ec == std::errc() && ptr == end, kBarsComponent, at, "column '",
                csv::kColumnNames[column], "': '", field, "' is not a number");
  FOXHUNT_CHECK(std::isfinite(value), kBarsComponent, at, "column '", csv::kColumnNames[column],
                "': non-finite value '", field, "' (NaN/Inf not allowed)");
  return value;
}

const char* format_name(csv::TimestampFormat f) {
  return enum_name(f, {"Unix seconds", "Unix milliseconds", "ISO 8601"});
}

/// A parsed timestamp, or the reason it is not one.
struct ParsedTimestamp {
  int64_t seconds = 0;
  csv::TimestampFormat format = csv::TimestampFormat::kSeconds;
  bool ok = false;
  std::string reason;  ///< detail after "is not a timestamp" (may be empty)
};

bool is_leap_year(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

int days_in_month(int64_t y, int m) {
  constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && is_leap_year(y) ? 29 : kDays[static_cast<size_t>(m - 1)];
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;                                    // [0, 399]
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;  // [0, 365]
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;            // [0, 146096]
  return era * 146097 + doe - 719468;
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (H. Hinnant's civil_from_days).
void civil_from_days(int64_t days, int64_t& y, int64_t& m, int64_t& d) {
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;                                       // [0, 146096]
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;  // [0, 399]
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);                // [0, 365]
  const int64_t mp = (5 * doy + 2) / 153;                                     // [0, 11]
  d = doy - (153 * mp + 2) / 5 + 1;
  m = mp < 10 ? mp + 3 : mp - 9;
  y = yoe + era * 400 + (m <= 2 ? 1 : 0);
}

/// Reads exactly `n` digits at `i` into `out`.
bool read_digits(std::string_view s, size_t& i, int n, int& out) {
  if (i + static_cast<size_t>(n) > s.size()) return false;
  int v = 0;
  for (int k = 0; k < n; ++k) {
    const char c = s[i + static_cast<size_t>(k)];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  i += static_cast<size_t>(n);
  out = v;
  return true;
}

std::string two_digits(int v) {
  return (v < 10 ? "0" : "") + std::to_string(v);
}

/// ISO 8601 date or datetime; `s` starts with "DDDD-".
ParsedTimestamp parse_iso(std::string_view s) {
  ParsedTimestamp r;
  r.format = csv::TimestampFormat::kIso;
  size_t i = 0;
  int year = 0, month = 0, day = 0;
  auto eat = [&](char c) {
    if (i < s.size() && s[i] == c) return ++i, true;
    return false;
  };
  if (!read_digits(s, i, 4, year) || !eat('-') || !read_digits(s, i, 2, month) || !eat('-') ||
      !read_digits(s, i, 2, day))
    return r;
  if (month < 1 || month > 12) {
    r.reason = "month " + two_digits(month) + " not in 01-12";
    return r;
  }
  const int mdays = days_in_month(year, month);
  if (day < 1 || day > mdays) {
    r.reason = "day " + two_digits(day) + " not in 01-" + std::to_string(mdays) + " for " +
               std::string(s.substr(0, 7));
    return r;
  }
  int64_t seconds = days_from_civil(year, month, day) * 86400;
  if (i < s.size()) {
    if (!(eat('T') || eat('t') || eat(' '))) return r;
    int hour = 0, minute = 0, second = 0;
    if (!read_digits(s, i, 2, hour) || !eat(':') || !read_digits(s, i, 2, minute)) return r;
    if (eat(':')) {
      if (!read_digits(s, i, 2, second)) return r;
      if (eat('.') || eat(',')) {
        const size_t start = i;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
        if (i == start) return r;  // the fraction is truncated: Bar::timestamp is whole seconds
      }
    }
    if (hour > 23) {
      r.reason = "hour " + two_digits(hour) + " not in 00-23";
      return r;
    }
    if (minute > 59) {
      r.reason = "minute " + two_digits(minute) + " not in 00-59";
      return r;
    }
    if (second > 59) {
      r.reason = "second " + two_digits(second) + " not in 00-59";
      return r;
    }
    seconds += hour * 3600 + minute * 60 + second;
    const bool utc = eat('Z') || eat('z');
    if (!utc && i < s.size() && (s[i] == '+' || s[i] == '-')) {
      const int sign = s[i] == '+' ? 1 : -1;
      ++i;
      int oh = 0, om = 0;
      if (!read_digits(s, i, 2, oh)) return r;
      if (i < s.size()) {  // +HH:MM or +HHMM
        eat(':');
        if (!read_digits(s, i, 2, om)) return r;
      }
      if (om > 59) {
        r.reason = "offset minutes " + two_digits(om) + " not in 00-59";
        return r;
      }
      if (oh * 60 + om > 14 * 60) {
        r.reason = "offset " + std::string(sign > 0 ? "+" : "-") + two_digits(oh) + ":" +
                   two_digits(om) + " beyond 14:00";
        return r;
      }
      seconds -= sign * (oh * 3600 + om * 60);  // local = UTC + offset
    }
    if (i != s.size()) return r;
  }
  r.seconds = seconds;
  r.ok = true;
  return r;
}

ParsedTimestamp parse_timestamp_text(std::string_view s) {
  ParsedTimestamp r;
  if (s.empty()) {
    r.reason = "empty";
    return r;
  }
  if (s.size() >= 5 && s[4] == '-' &&
      std::all_of(s.begin(), s.begin() + 4, [](char c) { return c >= '0' && c <= '9'; }))
    return parse_iso(s);
  const char* begin = s.data();
  const char* end = begin + s.size();
  if (s.front() == '+') ++begin;  // from_chars rejects a leading '+'
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ptr == end && ec == std::errc::result_out_of_range) {
    r.reason = "integer out of range";
    return r;
  }
  if (ptr != end || ec != std::errc()) {
    double d = 0.0;
    auto [dptr, dec] = std::from_chars(begin, end, d);
    if (dptr == end && dec == std::errc()) r.reason = "not an integer";
    return r;
  }
  if (value >= kMillisecondThreshold || value <= -kMillisecondThreshold) {
    r.format = csv::TimestampFormat::kMilliseconds;
    r.seconds = value / 1000 - (value % 1000 < 0 ? 1 : 0);  // floor
  } else {
    r.format = csv::TimestampFormat::kSeconds;
    r.seconds = value;
  }
  r.ok = true;
  return r;
}

std::string timestamp_error(std::string_view text, const ParsedTimestamp& r) {
  return detail::cat("'", text, "' is not a timestamp", r.reason.empty() ? "" : ": ", r.reason,
                     " (accepted: ", kTimestampFormats, ")");
}

void append_number(std::string& out, double v) {
  std::array<char, 64> buf{};
  auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  FOXHUNT_INTERNAL_ASSERT(ec == std::errc(), "to_chars failed");
  out.append(buf.data(), ptr);
}

void append_number(std::string& out, int64_t v) {
  std::array<char, 32> buf{};
  auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  FOXHUNT_INTERNAL_ASSERT(ec == std::errc(), "to_chars failed");
  out.append(buf.data(), ptr);
}

}  // namespace

namespace csv {

/// Checks one bar's values; `prefix` locates it ("file:line: " or "source: bar i: ").
void check_bar_values(const Bar& b, const std::string& prefix) {
  const std::array<std::pair<const char*, double>, 4> prices = {
      {{"close", b.close}, {"open", b.open}, {"high", b.high}, {"low", b.low}}};
  for (const auto& [name, v] : prices) {
    FOXHUNT_CHECK(std::isfinite(v), kBarsComponent, prefix, "column '", name,
                  "': non-finite value ", v, " (NaN/Inf not allowed)");
    FOXHUNT_CHECK(v > 0.0, kBarsComponent, prefix, "column '", name, "': price must be > 0, got ",
                  v);
  }
  FOXHUNT_CHECK(std::isfinite(b.volume), kBarsComponent, prefix,
                "column 'volume': non-finite value ", b.volume, " (NaN/Inf not allowed)");
  FOXHUNT_CHECK(b.volume >= 0.0, kBarsComponent, prefix, "column 'volume': must be >= 0, got ",
                b.volume);
  FOXHUNT_CHECK(b.high >= b.low, kBarsComponent, prefix, "high ", b.high, " < low ", b.low);
  FOXHUNT_CHECK(b.open >= b.low && b.open <= b.high, kBarsComponent, prefix, "open ", b.open,
                " outside [low ", b.low, ", high ", b.high, "]");
  FOXHUNT_CHECK(b.close >= b.low && b.close <= b.high, kBarsComponent, prefix, "close ", b.close,
                " outside [low ", b.low, ", high ", b.high, "]");
}

Bar parse_row(const std::vector<std::string_view>& fields, const Layout& layout, RowState& state,
              const RowPlace& at, bool blank_ohlcv, bool* close_only_row) {
  Bar bar;
  const auto& p = layout.pos;
  if (p[kTimestamp] >= 0) {
    const std::string_view field = fields[p[kTimestamp]];
    const ParsedTimestamp ts = parse_timestamp_text(field);
    FOXHUNT_CHECK(ts.ok, kBarsComponent, at, "column 'timestamp': ", timestamp_error(field, ts));
    if (!state.ts_format) {
      state.ts_format = ts.format;
      state.ts_format_line = at.line;
    }
    FOXHUNT_CHECK(ts.format == *state.ts_format, kBarsComponent, at, "column 'timestamp': '", field,
                  "' is ", format_name(ts.format), " but line ", state.ts_format_line, " is ",
                  format_name(*state.ts_format),
                  "; a file must use one timestamp format (integers with |value| >= 1e11 are "
                  "milliseconds)");
    bar.timestamp = ts.seconds;
  } else {
    bar.timestamp = state.rows * kDefaultBarSeconds;
  }
  bar.close = parse_double(fields[p[kClose]], kClose, at);
  bool close_only = layout.close_only();
  if (!close_only && blank_ohlcv) {
    const int blank = fields[p[kOpen]].empty() + fields[p[kHigh]].empty() + fields[p[kLow]].empty();
    FOXHUNT_CHECK(blank == 0 || blank == 3, kBarsComponent, at,
                  "open, high and low must all be given or all be empty (a close-only row), got ",
                  3 - blank, " of them");
    close_only = blank == 3;
  }
  if (close_only) {
    bar.open = bar.high = bar.low = bar.close;
  } else {
    bar.open = parse_double(fields[p[kOpen]], kOpen, at);
    bar.high = parse_double(fields[p[kHigh]], kHigh, at);
    bar.low = parse_double(fields[p[kLow]], kLow, at);
  }
  const bool has_volume = p[kVolume] >= 0 && !(blank_ohlcv && fields[p[kVolume]].empty());
  bar.volume = has_volume ? parse_double(fields[p[kVolume]], kVolume, at) : 0.0;
  check_bar_values(bar, at.str());
  ++state.rows;
  if (close_only_row) *close_only_row = close_only;
  return bar;
}

}  // namespace csv

std::vector<double> BarSeries::closes() const {
  std::vector<double> out(bars.size());
  for (size_t i = 0; i < bars.size(); ++i) out[i] = bars[i].close;
  return out;
}

std::string format_timestamp(int64_t t) {
  const int64_t days = t >= 0 ? t / 86400 : -((-(t + 1)) / 86400) - 1;  // floor, no overflow
  const int64_t secs = t - days * 86400;                                // [0, 86399]
  int64_t y = 0, m = 0, d = 0;
  civil_from_days(days, y, m, d);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z", y, m, d, secs / 3600, secs % 3600 / 60,
                     secs % 60);
}

int64_t parse_timestamp(std::string_view text) {
  const std::string_view t = csv::trim(text);
  const ParsedTimestamp r = parse_timestamp_text(t);
  FOXHUNT_CHECK(r.ok, kBarsComponent, timestamp_error(t, r));
  return r.seconds;
}

struct BarCsvReader::Impl {
  std::string source;
  std::optional<csv::Layout> layout;
  int64_t line_no = 0;
  int64_t header_line = 0;
  csv::RowState state;
  std::vector<std::string_view> fields;
};

BarCsvReader::BarCsvReader(std::string source) : impl_(std::make_unique<Impl>()) {
  impl_->source = std::move(source);
}
BarCsvReader::~BarCsvReader() = default;
BarCsvReader::BarCsvReader(BarCsvReader&&) noexcept = default;
BarCsvReader& BarCsvReader::operator=(BarCsvReader&&) noexcept = default;

int64_t BarCsvReader::line_number() const {
  return impl_->line_no;
}

int64_t BarCsvReader::header_line() const {
  return impl_->header_line;
}

bool BarCsvReader::has_layout() const {
  return impl_->layout.has_value();
}

bool BarCsvReader::close_only() const {
  return impl_->layout && impl_->layout->close_only();
}

std::optional<Bar> BarCsvReader::read_line(std::string_view line) {
  Impl& r = *impl_;
  const std::string& source = r.source;
  const int64_t line_no = ++r.line_no;
  line = csv::clean_line(line, line_no);
  if (csv::trim(line).empty()) return std::nullopt;

  auto& fields = r.fields;
  csv::split_fields(line, fields, source, line_no);
  if (!r.layout) {
    if (csv::looks_like_header(fields)) {
      r.layout = csv::layout_from_header(fields, source, line_no);
      r.header_line = line_no;
      return std::nullopt;
    }
    r.layout = csv::layout_from_count(fields.size(), source, line_no);
  }
  const csv::Layout& layout = *r.layout;
  FOXHUNT_CHECK(fields.size() == layout.fields, kBarsComponent, csv::where(source, line_no),
                "wrong column count: expected ", layout.fields, " fields, got ", fields.size());

  return csv::parse_row(fields, layout, r.state, csv::RowPlace{source, line_no, {}});
}

BarSeries parse_bars_csv(std::string_view text, const std::string& source) {
  BarSeries series;
  series.source = source;
  BarCsvReader reader(source);
  int64_t prev_ts_line = 0;
  csv::for_each_line(text, [&](std::string_view line, int64_t) {
    auto bar = reader.read_line(line);
    if (!bar) return true;
    const int64_t line_no = reader.line_number();
    if (!series.bars.empty()) {
      const int64_t prev = series.bars.back().timestamp;
      FOXHUNT_CHECK(bar->timestamp != prev, kBarsComponent, csv::where(source, line_no),
                    "duplicate timestamp ", bar->timestamp, " (also on line ", prev_ts_line, ")");
      FOXHUNT_CHECK(bar->timestamp > prev, kBarsComponent, csv::where(source, line_no),
                    "timestamp ", bar->timestamp, " is not after the previous one ", prev,
                    " (line ", prev_ts_line, "); timestamps must increase");
    }
    prev_ts_line = line_no;
    series.bars.push_back(*bar);
    return true;
  });
  if (series.bars.empty()) {
    FOXHUNT_CHECK(reader.has_layout(), kBarsComponent, csv::where(source, 1),
                  "empty file: no bars");
    FOXHUNT_CHECK(false, kBarsComponent, csv::where(source, reader.header_line() + 1),
                  "no bars after the header");
  }
  series.close_only = reader.close_only();
  return series;
}

BarSeries load_bars_csv(const std::string& path) {
  return parse_bars_csv(read_file(path), path);
}

std::string bars_to_csv(const BarSeries& series) {
  std::string out;
  out.reserve(series.bars.size() * (series.close_only ? 24 : 64) + 48);
  out += series.close_only ? "timestamp,close\n" : "timestamp,open,high,low,close,volume\n";
  for (const Bar& b : series.bars) {
    append_number(out, b.timestamp);
    out += ',';
    if (!series.close_only) {
      append_number(out, b.open);
      out += ',';
      append_number(out, b.high);
      out += ',';
      append_number(out, b.low);
      out += ',';
    }
    append_number(out, b.close);
    if (!series.close_only) {
      out += ',';
      append_number(out, b.volume);
    }
    out += '\n';
  }
  return out;
}

void write_bars_csv(const std::string& path, const BarSeries& series) {
  validate_bars(series);
  write_file_atomic(path, bars_to_csv(series));
}

}  // namespace foxhunt::data
