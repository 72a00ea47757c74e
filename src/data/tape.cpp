#include "foxhunt/data/tape.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

#include "bar_csv.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/strings.h"

namespace foxhunt::data {

// The reader: one line's fields into a Print with hand-written parsers over the buffer (no
// string per line or field), the policy checks, and the batch reader that loops it.
namespace tape_impl {
namespace {

constexpr const char* kTapeComponent = "tape";
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Columns of a tape file.
enum TapeColumn { kTime = 0, kPrice, kSize, kSide, kBid, kAsk, kSymbol, kTradeId, kTapeColumns };
constexpr std::array<const char*, kTapeColumns> kTapeColumnNames = {
    "timestamp", "price", "size", "side", "bid", "ask", "symbol", "trade id"};
constexpr const char* kKnownTapeColumns =
    "timestamp (or datetime, time, date, ts), price (or last, trade price), size (or volume, qty, "
    "quantity, trade size), side (or aggressor), bid, ask (or offer), symbol (or ticker, "
    "instrument), trade id (or id, seq, sequence)";
constexpr const char* kTapeTimeFormats =
    "ISO 8601 YYYY-MM-DD HH:MM:SS[.fffffffff][Z] (space or T), or Unix epoch numbers in s, ms, us "
    "or ns";

/// The tape column a header name denotes, -1 when none. Bar columns return -2.
int tape_column(std::string_view name) {
  const std::string n = csv::normalize_name(name);
  if (n == "timestamp" || n == "datetime" || n == "time" || n == "date" || n == "ts") return kTime;
  if (n == "price" || n == "last" || n == "tradeprice" || n == "lastprice") return kPrice;
  if (n == "size" || n == "volume" || n == "qty" || n == "quantity" || n == "tradesize")
    return kSize;
  if (n == "side" || n == "aggressor" || n == "aggressorside") return kSide;
  if (n == "bid" || n == "bidprice" || n == "bestbid") return kBid;
  if (n == "ask" || n == "askprice" || n == "bestask" || n == "offer") return kAsk;
  if (n == "symbol" || n == "ticker" || n == "instrument") return kSymbol;
  if (n == "tradeid" || n == "id" || n == "seq" || n == "sequence" || n == "seqno") return kTradeId;
  if (n == "open" || n == "high" || n == "low" || n == "close") return -2;
  return -1;
}

/// Field positions of a tape file's columns (-1: absent).
struct TapeLayout {
  std::array<int, kTapeColumns> pos{-1, -1, -1, -1, -1, -1, -1, -1};
  size_t fields = 0;
};

/// Splits a line on commas into trimmed fields; quoted fields go through the bar CSV grammar.
/// Returns the field count (more than `out.size()` when there are too many).
size_t split_tape_line(std::string_view line, std::array<std::string_view, kTapeColumns + 1>& out,
                       std::vector<std::string_view>& quoted, const std::string& source,
                       int64_t line_no) {
  if (line.find('"') != std::string_view::npos) {
    csv::split_fields(line, quoted, source, line_no);
    const size_t n = std::min(quoted.size(), out.size());
    std::copy_n(quoted.begin(), n, out.begin());
    return quoted.size();
  }
  size_t n = 0;
  const char* p = line.data();
  const char* const end = p + line.size();
  while (true) {
    const char* comma = static_cast<const char*>(std::memchr(p, ',', static_cast<size_t>(end - p)));
    const char* stop = comma ? comma : end;
    const char* b = p;
    const char* e = stop;
    while (b < e && (*b == ' ' || *b == '\t')) ++b;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) --e;
    if (n < out.size()) out[n] = std::string_view(b, static_cast<size_t>(e - b));
    ++n;
    if (!comma) return n;
    p = comma + 1;
  }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t civil_days(int64_t y, int m, int d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int month_days(int64_t y, int m) {
  constexpr std::array<int, 12> kDays = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  const bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
  return m == 2 && leap ? 29 : kDays[static_cast<size_t>(m - 1)];
}

/// `n` digits at `p` as a number, or -1 when one is not a digit.
inline int tape_digits(const char* p, int n) {
  int v = 0;
  for (int k = 0; k < n; ++k) {
    const unsigned d = static_cast<unsigned>(p[k] - '0');
    if (d > 9) return -1;
    v = v * 10 + static_cast<int>(d);
  }
  return v;
}

/// How the file writes its timestamps (set by the first print).
enum class TimeText { kUnknown, kIso, kEpoch };

constexpr std::array<int64_t, 5> kUnitNs = {0, 1'000'000'000, 1'000'000, 1'000, 1};
constexpr std::array<const char*, 5> kUnitNames = {"auto", "s", "ms", "us", "ns"};

/// The epoch unit a magnitude implies.
TapeEpochUnit unit_of(int64_t v) {
  const int64_t a = v < 0 ? -(v + 1) : v;
  if (a < 100'000'000'000) return TapeEpochUnit::kSeconds;
  if (a < 100'000'000'000'000) return TapeEpochUnit::kMilliseconds;
  if (a < 100'000'000'000'000'000) return TapeEpochUnit::kMicroseconds;
  return TapeEpochUnit::kNanoseconds;
}

}  // namespace
}  // namespace tape_impl

const char* to_string(TapeDropReason reason) {
  constexpr const char* kNames[] = {"out_of_order", "non_positive_price", "non_positive_size",
                                    "crossed_quote", "repeated_trade_id"};  // in the enum's order
  static_assert(std::size(kNames) == static_cast<size_t>(TapeDropReason::kCount));
  return enum_name(reason, kNames, "unknown");
}

int64_t TapeDrops::total() const {
  int64_t t = 0;
  for (int64_t c : count) t += c;
  return t;
}

int64_t Tape::symbol_count() const {
  return symbols.empty() ? 1 : static_cast<int64_t>(symbols.size());
}

Print Tape::at(int64_t i) const {
  const auto k = static_cast<size_t>(i);
  Print p;
  p.time_ns = time_ns[k];
  p.price = price[k];
  p.size = size[k];
  p.side = side.empty() ? 0 : side[k];
  p.symbol = symbol.empty() ? 0 : symbol[k];
  p.bid = bid.empty() ? tape_impl::kNaN : bid[k];
  p.ask = ask.empty() ? tape_impl::kNaN : ask[k];
  p.trade_id = trade_id.empty() ? 0 : trade_id[k];
  return p;
}

std::string format_time_ns(int64_t ns) {
  constexpr int64_t kSec = 1'000'000'000;
  const int64_t s = ns >= 0 ? ns / kSec : -((-(ns + 1)) / kSec) - 1;  // floor
  const int64_t frac = ns - s * kSec;                                 // [0, 1e9)
  std::string t = format_timestamp(s);                                // "...SSZ"
  if (frac == 0) return t;
  t.pop_back();
  if (frac % 1'000'000 == 0) return fmt::format("{}.{:03}Z", t, frac / 1'000'000);
  if (frac % 1'000 == 0) return fmt::format("{}.{:06}Z", t, frac / 1'000);
  return fmt::format("{}.{:09}Z", t, frac);
}

bool is_tape_csv(std::string_view header_line) {
  using namespace tape_impl;
  std::string_view line = header_line;
  if (line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
  std::array<bool, kTapeColumns> seen{};
  size_t i = 0;
  while (true) {
    const size_t comma = line.find(',', i);
    std::string_view f =
        csv::trim(line.substr(i, comma == std::string_view::npos ? line.npos : comma - i));
    if (f.size() >= 2 && f.front() == '"' && f.back() == '"')
      f = csv::trim(f.substr(1, f.size() - 2));
    if (f.empty() || !csv::is_letter(f.front())) return false;
    const int c = tape_column(f);
    if (c == -2) return false;  // a bar column: a bar CSV
    if (c >= 0) seen[static_cast<size_t>(c)] = true;
    if (comma == std::string_view::npos) break;
    i = comma + 1;
  }
  return seen[kTime] && seen[kPrice] && seen[kSize];
}

bool has_tape_header(std::string_view text) {
  size_t i = 0;
  if (text.starts_with("\xEF\xBB\xBF")) i = 3;
  while (i < text.size()) {
    const size_t nl = text.find('\n', i);
    const std::string_view line =
        text.substr(i, nl == std::string_view::npos ? std::string_view::npos : nl - i);
    if (!csv::trim(line).empty()) return is_tape_csv(line);
    if (nl == std::string_view::npos) break;
    i = nl + 1;
  }
  return false;
}

struct TapeCsvReader::Impl {
  std::string source;
  TapeReadOptions options;
  int64_t line_no = 0;
  bool header = false;
  tape_impl::TapeLayout layout;
  tape_impl::TimeText time_text = tape_impl::TimeText::kUnknown;
  TapeEpochUnit unit = TapeEpochUnit::kAuto;  // the file's epoch unit once known
  // The date part of the last ISO timestamp and its day number (one day holds many prints).
  std::array<char, 10> cached_date{};
  int64_t cached_day_ns = 0;
  bool has_cached_date = false;
  // Per symbol id: the last kept print's time and line.
  std::vector<int64_t> last_ns;
  std::vector<int64_t> last_line;
  std::vector<std::string> symbols;
  std::map<std::string, int32_t, std::less<>> symbol_ids;
  std::string_view last_symbol_text;  // of the previous row (points into `symbols`)
  int32_t last_symbol_id = -1;
  // Per symbol id: trade id -> the line that had it.
  std::vector<std::unordered_map<int64_t, int64_t>> trade_ids;
  TapeDrops drops;
  std::array<std::string_view, tape_impl::kTapeColumns + 1> fields;
  std::vector<std::string_view> quoted;

  /// "SOURCE:LINE: "
  std::string at() const { return fmt::format("{}:{}: ", source, line_no); }

  [[noreturn]] void fail(const std::string& reason) const {
    throw InputError(tape_impl::kTapeComponent, at() + reason);
  }

  void read_header(std::string_view line);
  int64_t parse_time(std::string_view t);
  int64_t parse_epoch(std::string_view t);
  double parse_number(std::string_view t, const char* what) const;
  int8_t parse_side(std::string_view t) const;
  int32_t symbol_id(std::string_view t);
  /// Parses a data line into `p`; false when the print is dropped.
  bool parse(std::string_view line, Print& p);
  /// A bad print: refused (throws) or counted; returns false.
  bool bad(TapeDropReason r, const std::string& reason);
};

void TapeCsvReader::Impl::read_header(std::string_view line) {
  using namespace tape_impl;
  const size_t n = split_tape_line(line, fields, quoted, source, line_no);
  std::vector<std::string_view> names(fields.begin(), fields.begin() + std::min(n, fields.size()));
  if (n > fields.size()) {
    csv::split_fields(line, quoted, source, line_no);
    names = quoted;
  }
  layout = TapeLayout{};
  layout.fields = n;
  for (size_t i = 0; i < names.size(); ++i) {
    const int c = tape_column(names[i]);
    if (c < 0)
      fail(fmt::format("{} column '{}' in the tape header (expected the tape columns: {})",
                       c == -2 ? "bar" : "unknown", names[i], kKnownTapeColumns));
    auto& slot = layout.pos[static_cast<size_t>(c)];
    if (slot >= 0)
      fail(fmt::format("duplicate column '{}' in header (field {} '{}' is also the {})", names[i],
                       slot + 1, names[static_cast<size_t>(slot)], kTapeColumnNames[c]));
    slot = static_cast<int>(i);
  }
  for (int c : {kTime, kPrice, kSize})
    if (layout.pos[c] < 0)
      fail(
          fmt::format("the tape header has no {} column (expected a header with a timestamp, a "
                      "price and a size column; known: {})",
                      kTapeColumnNames[c], kKnownTapeColumns));
  if ((layout.pos[kBid] < 0) != (layout.pos[kAsk] < 0))
    fail("a tape has both quote columns (bid and ask) or neither; this header has one");
  header = true;
}

int64_t TapeCsvReader::Impl::parse_epoch(std::string_view t) {
  using namespace tape_impl;
  const char* p = t.data();
  const char* const end = p + t.size();
  const bool negative = p < end && *p == '-';  // "-0.5" reads 0 as the whole part
  int64_t whole = 0;
  const auto r = std::from_chars(p, end, whole);
  if (r.ec != std::errc() || r.ptr == p)
    fail(fmt::format("timestamp '{}' is not a number (accepted: {})", t, kTapeTimeFormats));
  const char* q = r.ptr;
  int64_t frac_digits_ns = 0;
  int frac_len = 0;
  std::array<int, 9> frac{};
  if (q < end && *q == '.') {
    ++q;
    while (q < end && *q >= '0' && *q <= '9') {
      if (frac_len < 9) frac[static_cast<size_t>(frac_len)] = *q - '0';
      ++frac_len;
      ++q;
    }
  }
  if (q != end)
    fail(fmt::format("timestamp '{}' is not a number (accepted: {})", t, kTapeTimeFormats));
  if (unit == TapeEpochUnit::kAuto) {
    unit = options.epoch_unit != TapeEpochUnit::kAuto ? options.epoch_unit : unit_of(whole);
  } else if (options.epoch_unit == TapeEpochUnit::kAuto && unit_of(whole) != unit) {
    fail(fmt::format(
        "timestamp '{}' reads as Unix {} but the file's first print set Unix {} "
        "(expected one epoch unit per file; state the unit to read it otherwise)",
        t, kUnitNames[static_cast<size_t>(unit_of(whole))], kUnitNames[static_cast<size_t>(unit)]));
  }
  const int64_t mult = kUnitNs[static_cast<size_t>(unit)];
  // Strict bounds leave room for the fraction.
  if (whole >= std::numeric_limits<int64_t>::max() / mult ||
      whole <= std::numeric_limits<int64_t>::min() / mult)
    fail(
        fmt::format("timestamp '{}' in Unix {} is outside the int64 nanosecond range (years "
                    "1678-2261)",
                    t, kUnitNames[static_cast<size_t>(unit)]));
  // The fraction of one unit, truncated to the nanosecond.
  for (int64_t scale = mult / 10, k = 0; scale > 0 && k < 9; scale /= 10, ++k)
    frac_digits_ns += frac[static_cast<size_t>(k)] * scale;
  return whole * mult + (negative ? -frac_digits_ns : frac_digits_ns);
}

int64_t TapeCsvReader::Impl::parse_time(std::string_view t) {
  using namespace tape_impl;
  if (time_text == TimeText::kUnknown)
    time_text = t.size() >= 10 && t[4] == '-' ? TimeText::kIso : TimeText::kEpoch;
  if (time_text == TimeText::kEpoch) {
    if (t.size() >= 10 && t[4] == '-')
      fail(
          fmt::format("timestamp '{}' is ISO 8601 but the file's first print was a Unix epoch "
                      "number (expected one timestamp format per file)",
                      t));
    return parse_epoch(t);
  }
  // YYYY-MM-DD[ T]HH:MM:SS[.f{1,9}][Z]
  const char* s = t.data();
  const size_t n = t.size();
  auto bad_time = [&](std::string_view why) {
    fail(fmt::format("timestamp '{}' is not a tape timestamp{}{} (accepted: {})", t,
                     why.empty() ? "" : ": ", why, kTapeTimeFormats));
  };
  if (n < 19 || s[4] != '-' || s[7] != '-' || (s[10] != ' ' && s[10] != 'T') || s[13] != ':' ||
      s[16] != ':')
    bad_time(n >= 10 && s[4] == '-' && n < 19 ? "expected a time of day HH:MM:SS" : "");
  int64_t day_ns = 0;
  if (has_cached_date && std::memcmp(s, cached_date.data(), 10) == 0) {
    day_ns = cached_day_ns;
  } else {
    const int y = tape_digits(s, 4), m = tape_digits(s + 5, 2), d = tape_digits(s + 8, 2);
    if (y < 0 || m < 0 || d < 0) bad_time("");
    if (m < 1 || m > 12) bad_time(fmt::format("month {:02} not in 01-12", m));
    if (d < 1 || d > month_days(y, m))
      bad_time(fmt::format("day {:02} not in 01-{} for {}", d, month_days(y, m), t.substr(0, 7)));
    if (y < 1678 || y > 2261) bad_time("year outside 1678-2261 (int64 nanoseconds)");
    day_ns = civil_days(y, m, d) * 86'400'000'000'000;
    std::memcpy(cached_date.data(), s, 10);
    cached_day_ns = day_ns;
    has_cached_date = true;
  }
  const int hh = tape_digits(s + 11, 2), mm = tape_digits(s + 14, 2), ss = tape_digits(s + 17, 2);
  if (hh < 0 || mm < 0 || ss < 0) bad_time("");
  if (hh > 23) bad_time(fmt::format("hour {:02} not in 00-23", hh));
  if (mm > 59) bad_time(fmt::format("minute {:02} not in 00-59", mm));
  if (ss > 59) bad_time(fmt::format("second {:02} not in 00-59", ss));
  int64_t frac = 0;
  size_t i = 19;
  if (i < n && (s[i] == '.' || s[i] == ',')) {
    ++i;
    int len = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      if (len < 9) frac = frac * 10 + (s[i] - '0');
      ++len;
      ++i;
    }
    if (len == 0 || len > 9) bad_time("expected 1 to 9 fraction digits");
    for (int k = len; k < 9; ++k) frac *= 10;
  }
  if (i < n && (s[i] == 'Z' || s[i] == 'z')) ++i;
  if (i != n) bad_time("unexpected text after the seconds (a UTC offset is not accepted)");
  return day_ns + (hh * 3600LL + mm * 60LL + ss) * 1'000'000'000 + frac;
}

double TapeCsvReader::Impl::parse_number(std::string_view t, const char* what) const {
  double v = 0;
  const char* b = t.data();
  const char* e = b + t.size();
  if (b < e && *b == '+') ++b;
  const auto r = std::from_chars(b, e, v);
  if (r.ec != std::errc() || r.ptr != e || b == e || !std::isfinite(v))
    fail(fmt::format("{} '{}': expected a finite number", what, t));
  // Bounded so that a bar's sums (volume, notional = sum of price * size) stay finite and
  // nonzero; zero and negative values go on to the bad-print checks.
  if (v > 0 && (v > kTapeMaxValue || v < kTapeMinValue))
    fail(fmt::format("{} '{}': expected a number in [{:g}, {:g}]", what, t, kTapeMinValue,
                     kTapeMaxValue));
  return v;
}

int8_t TapeCsvReader::Impl::parse_side(std::string_view t) const {
  if (t.empty()) return 0;
  if (t.size() <= 4) {
    std::array<char, 4> low{};
    for (size_t k = 0; k < t.size(); ++k)
      low[k] = (t[k] >= 'A' && t[k] <= 'Z') ? static_cast<char>(t[k] - 'A' + 'a') : t[k];
    const std::string_view l(low.data(), t.size());
    if (l == "buy" || l == "b" || l == "1" || l == "+1") return 1;
    if (l == "sell" || l == "s" || l == "-1") return -1;
    if (l == "0") return 0;
  }
  fail(fmt::format("side '{}': expected buy/sell, B/S, 1/-1, or 0 or empty for unknown", t));
}

int32_t TapeCsvReader::Impl::symbol_id(std::string_view t) {
  if (last_symbol_id >= 0 && t == last_symbol_text) return last_symbol_id;
  if (t.empty())
    fail(
        "empty symbol (expected a symbol name in every row of a tape with a symbol "
        "column)");
  auto it = symbol_ids.find(t);
  int32_t id = 0;
  if (it == symbol_ids.end()) {
    id = static_cast<int32_t>(symbols.size());
    symbols.emplace_back(t);
    symbol_ids.emplace(std::string(t), id);
    last_ns.push_back(std::numeric_limits<int64_t>::min());
    last_line.push_back(0);
    trade_ids.emplace_back();
  } else {
    id = it->second;
  }
  last_symbol_id = id;
  last_symbol_text = symbols[static_cast<size_t>(id)];
  return id;
}

bool TapeCsvReader::Impl::bad(TapeDropReason r, const std::string& reason) {
  if (options.on_bad == TapeBadPrintPolicy::kRefuse)
    fail(reason + " (or choose the drop policy to drop and count such prints)");
  ++drops.count[static_cast<size_t>(r)];
  if (drops.first_line == 0) drops.first_line = line_no;
  return false;
}

bool TapeCsvReader::Impl::parse(std::string_view line, Print& p) {
  using namespace tape_impl;
  const size_t n = split_tape_line(line, fields, quoted, source, line_no);
  if (n != layout.fields)
    fail(fmt::format("{} fields, expected {} (the header's columns)", n, layout.fields));
  const auto& pos = layout.pos;
  auto field = [&](int c) { return fields[static_cast<size_t>(pos[static_cast<size_t>(c)])]; };
  p.time_ns = parse_time(field(kTime));
  p.price = parse_number(field(kPrice), "price");
  p.size = parse_number(field(kSize), "size");
  p.side = pos[kSide] >= 0 ? parse_side(field(kSide)) : 0;
  p.bid = p.ask = kNaN;
  if (pos[kBid] >= 0) {
    const auto b = field(kBid), a = field(kAsk);
    if (!b.empty()) p.bid = parse_number(b, "bid");
    if (!a.empty()) p.ask = parse_number(a, "ask");
  }
  if (pos[kSymbol] >= 0) {
    // Registering a new symbol before a refusal is harmless: it only names the symbol.
    p.symbol = symbol_id(field(kSymbol));
  } else {
    p.symbol = 0;
    if (last_ns.empty()) {
      last_ns.push_back(std::numeric_limits<int64_t>::min());
      last_line.push_back(0);
      trade_ids.emplace_back();
    }
  }
  p.trade_id = 0;
  if (pos[kTradeId] >= 0) {
    const auto t = field(kTradeId);
    const auto r = std::from_chars(t.data(), t.data() + t.size(), p.trade_id);
    if (r.ec != std::errc() || r.ptr != t.data() + t.size() || t.empty())
      fail(fmt::format("trade id '{}': expected an integer", t));
  }
  // The policy's checks; nothing of the reader's state changes before the print is kept.
  if (!(p.price > 0))
    return bad(TapeDropReason::kNonPositivePrice,
               fmt::format("price {}: expected a price > 0", p.price));
  if (!(p.size > 0))
    return bad(TapeDropReason::kNonPositiveSize,
               fmt::format("size {}: expected a size > 0", p.size));
  if (p.bid <= 0 || p.ask <= 0)
    return bad(TapeDropReason::kNonPositivePrice,
               fmt::format("quote bid {} ask {}: expected quotes > 0", p.bid, p.ask));
  if (p.bid > p.ask)
    return bad(TapeDropReason::kCrossedQuote,
               fmt::format("crossed quote: bid {} > ask {} (expected bid <= ask)", p.bid, p.ask));
  const auto sym = static_cast<size_t>(p.symbol);
  if (p.time_ns < last_ns[sym]) {
    const std::string of =
        pos[kSymbol] >= 0 ? fmt::format(" of symbol '{}'", symbols[sym]) : std::string();
    return bad(
        TapeDropReason::kOutOfOrder,
        fmt::format("print at {} is earlier than the previous print{} at {} (line {}); "
                    "expected timestamps that never decrease (equal ones keep the file's "
                    "order)",
                    format_time_ns(p.time_ns), of, format_time_ns(last_ns[sym]), last_line[sym]));
  }
  if (pos[kTradeId] >= 0) {
    auto [it, fresh] = trade_ids[sym].try_emplace(p.trade_id, line_no);
    if (!fresh)
      return bad(TapeDropReason::kRepeatedTradeId,
                 fmt::format("trade id {} repeats the one of line {} (expected unique trade ids{})",
                             p.trade_id, it->second, pos[kSymbol] >= 0 ? " per symbol" : ""));
  }
  last_ns[sym] = p.time_ns;
  last_line[sym] = line_no;
  return true;
}

TapeCsvReader::TapeCsvReader(std::string source, TapeReadOptions options)
    : impl_(std::make_unique<Impl>()) {
  impl_->source = std::move(source);
  impl_->options = options;
}
TapeCsvReader::~TapeCsvReader() = default;
TapeCsvReader::TapeCsvReader(TapeCsvReader&&) noexcept = default;
TapeCsvReader& TapeCsvReader::operator=(TapeCsvReader&&) noexcept = default;

std::optional<Print> TapeCsvReader::read_line(std::string_view line) {
  Impl& m = *impl_;
  ++m.line_no;
  if (m.line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (csv::trim(line).empty()) return std::nullopt;
  if (!m.header) {
    const std::string_view first = csv::trim(line);
    if (!csv::is_letter(first.front()) && first.front() != '"')
      m.fail(
          fmt::format("expected a tape header naming a timestamp, a price and a size column "
                      "(e.g. DateTime,Price,Volume), got '{}'",
                      line.substr(0, 80)));
    m.read_header(line);
    return std::nullopt;
  }
  // A refused line leaves the state as it was, except a newly named symbol and the file's
  // timestamp format, which only describe the file.
  Print p;
  if (!m.parse(line, p)) return std::nullopt;
  return p;
}

int64_t TapeCsvReader::line_number() const {
  return impl_->line_no;
}
bool TapeCsvReader::has_header() const {
  return impl_->header;
}
bool TapeCsvReader::has_side() const {
  return impl_->layout.pos[tape_impl::kSide] >= 0;
}
bool TapeCsvReader::has_quotes() const {
  return impl_->layout.pos[tape_impl::kBid] >= 0;
}
bool TapeCsvReader::has_symbol() const {
  return impl_->layout.pos[tape_impl::kSymbol] >= 0;
}
bool TapeCsvReader::has_trade_id() const {
  return impl_->layout.pos[tape_impl::kTradeId] >= 0;
}
const std::vector<std::string>& TapeCsvReader::symbols() const {
  return impl_->symbols;
}
const TapeDrops& TapeCsvReader::dropped() const {
  return impl_->drops;
}

Tape parse_tape_csv(std::string_view text, const std::string& source,
                    const TapeReadOptions& options) {
  TapeCsvReader reader(source, options);
  Tape tape;
  tape.source = source;
  // Room for every line up front: one pass to count them costs less than regrowing.
  const auto lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  bool columns_sized = false;
  const char* p = text.data();
  const char* const end = p + text.size();
  while (p < end) {
    const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
    const char* stop = nl ? nl : end;
    const std::optional<Print> print =
        reader.read_line(std::string_view(p, static_cast<size_t>(stop - p)));
    p = nl ? nl + 1 : end;
    if (!print) continue;
    if (!columns_sized) {
      columns_sized = true;
      tape.time_ns.reserve(lines);
      tape.price.reserve(lines);
      tape.size.reserve(lines);
      if (reader.has_side()) tape.side.reserve(lines);
      if (reader.has_quotes()) tape.bid.reserve(lines), tape.ask.reserve(lines);
      if (reader.has_symbol()) tape.symbol.reserve(lines);
      if (reader.has_trade_id()) tape.trade_id.reserve(lines);
    }
    tape.time_ns.push_back(print->time_ns);
    tape.price.push_back(print->price);
    tape.size.push_back(print->size);
    if (reader.has_side()) tape.side.push_back(print->side);
    if (reader.has_quotes()) tape.bid.push_back(print->bid), tape.ask.push_back(print->ask);
    if (reader.has_symbol()) tape.symbol.push_back(print->symbol);
    if (reader.has_trade_id()) tape.trade_id.push_back(print->trade_id);
  }
  FOXHUNT_CHECK(reader.has_header(), tape_impl::kTapeComponent, source,
                ": empty tape (expected a header naming a timestamp, a price and a size column, "
                "then one print per line)");
  tape.dropped = reader.dropped();
  if (reader.has_symbol()) {
    // Ids in byte order of the names, as a Panel orders its symbols; a symbol whose every print
    // was dropped is left out.
    const auto& names = reader.symbols();
    std::vector<int64_t> prints(names.size(), 0);
    for (int32_t s : tape.symbol) ++prints[static_cast<size_t>(s)];
    std::vector<int32_t> order;
    for (size_t i = 0; i < names.size(); ++i)
      if (prints[i] > 0) order.push_back(static_cast<int32_t>(i));
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
      return names[static_cast<size_t>(a)] < names[static_cast<size_t>(b)];
    });
    std::vector<int32_t> new_id(names.size(), -1);
    for (size_t k = 0; k < order.size(); ++k) {
      new_id[static_cast<size_t>(order[k])] = static_cast<int32_t>(k);
      tape.symbols.push_back(names[static_cast<size_t>(order[k])]);
    }
    for (auto& s : tape.symbol) s = new_id[static_cast<size_t>(s)];
  }
  return tape;
}

Tape load_tape_csv(const std::string& path, const TapeReadOptions& options) {
  return parse_tape_csv(read_file(path), path, options);
}

}  // namespace foxhunt::data
