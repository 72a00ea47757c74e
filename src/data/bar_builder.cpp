#include "foxhunt/data/bar_builder.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/strings.h"

namespace foxhunt::data {

namespace bar_builder_impl {
namespace {

constexpr const char* kBarBuilderComponent = "bars";
constexpr int64_t kNsPerSecondBars = 1'000'000'000;

/// floor(a / b) * b for b > 0 (the start of the period holding a, also before the epoch).
int64_t period_floor(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return ((a % b != 0 && a < 0) ? q - 1 : q) * b;
}

[[noreturn]] void bad_spec(std::string_view text, std::string_view reason) {
  throw InputError(kBarBuilderComponent,
                   fmt::format("bar spec '{}': {} (expected {})", text, reason, kBarSpecForms));
}

void check_spec(const BarSpec& s) {
  if (s.kind == BarKind::kTime) {
    FOXHUNT_CHECK(s.period_ns >= kNsPerSecondBars, kBarBuilderComponent, "time bars: period ",
                  s.period_ns, " ns: expected at least 1 s (", kBarSpecForms, ")");
    return;
  }
  FOXHUNT_CHECK(std::isfinite(s.threshold) && s.threshold > 0, kBarBuilderComponent,
                to_string(s.kind), " bars: threshold ", s.threshold,
                ": expected a finite number > 0 (", kBarSpecForms, ")");
  FOXHUNT_CHECK(s.kind != BarKind::kTick || s.threshold == std::floor(s.threshold),
                kBarBuilderComponent, "tick bars: threshold ", s.threshold,
                ": expected a whole number of prints");
}

}  // namespace
}  // namespace bar_builder_impl

const char* to_string(BarKind kind) {
  return enum_name(kind, {"time", "tick", "volume", "dollar"}, "unknown");
}

BarSpec parse_bar_spec(std::string_view text) {
  using namespace bar_builder_impl;
  std::string_view t = text;
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  const size_t colon = t.find(':');
  if (colon == std::string_view::npos) bad_spec(text, "no ':' between the kind and its size");
  std::string kind(t.substr(0, colon));
  for (char& c : kind) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  const std::string_view arg = t.substr(colon + 1);
  if (arg.empty()) bad_spec(text, "no size after the ':'");
  BarSpec spec;
  if (kind == "time") {
    spec.kind = BarKind::kTime;
    int64_t n = 0;
    const auto r = std::from_chars(arg.data(), arg.data() + arg.size(), n);
    if (r.ec != std::errc() || r.ptr == arg.data())
      bad_spec(text, "a time period starts with a whole number");
    const std::string_view unit(r.ptr, static_cast<size_t>(arg.data() + arg.size() - r.ptr));
    int64_t unit_ns = 0;
    if (unit == "ms")
      unit_ns = 1'000'000;
    else if (unit == "s")
      unit_ns = kNsPerSecondBars;
    else if (unit == "m")
      unit_ns = 60 * kNsPerSecondBars;
    else if (unit == "h")
      unit_ns = 3600 * kNsPerSecondBars;
    else
      bad_spec(text, fmt::format("unit '{}' is not one of ms, s, m, h", unit));
    if (n <= 0 || n > std::numeric_limits<int64_t>::max() / unit_ns)
      bad_spec(text, "the period must be > 0 and fit in int64 nanoseconds");
    spec.period_ns = n * unit_ns;
    if (spec.period_ns < kNsPerSecondBars) bad_spec(text, "the period must be at least 1 s");
    return spec;
  }
  if (kind == "tick")
    spec.kind = BarKind::kTick;
  else if (kind == "volume")
    spec.kind = BarKind::kVolume;
  else if (kind == "dollar")
    spec.kind = BarKind::kDollar;
  else
    bad_spec(text, fmt::format("unknown kind '{}'", t.substr(0, colon)));
  double v = 0;
  const auto r = std::from_chars(arg.data(), arg.data() + arg.size(), v);
  if (r.ec != std::errc() || r.ptr != arg.data() + arg.size() || !std::isfinite(v) || v <= 0)
    bad_spec(text, fmt::format("'{}' is not a finite number > 0", arg));
  if (spec.kind == BarKind::kTick && v != std::floor(v))
    bad_spec(text, "a tick bar holds a whole number of prints");
  spec.threshold = v;
  return spec;
}

std::string to_string(const BarSpec& spec) {
  using namespace bar_builder_impl;
  if (spec.kind == BarKind::kTime) {
    const int64_t p = spec.period_ns;
    constexpr int64_t kHour = 3600 * kNsPerSecondBars, kMinute = 60 * kNsPerSecondBars;
    if (p % kHour == 0) return fmt::format("time:{}h", p / kHour);
    if (p % kMinute == 0) return fmt::format("time:{}m", p / kMinute);
    if (p % kNsPerSecondBars == 0) return fmt::format("time:{}s", p / kNsPerSecondBars);
    // A period that is not whole milliseconds (built in code, not parsed) prints rounded.
    return fmt::format("time:{}ms", p / 1'000'000);
  }
  return fmt::format("{}:{}", to_string(spec.kind), spec.threshold);
}

BarBuilder::BarBuilder(const BarSpec& spec) : spec_(spec) {
  bar_builder_impl::check_spec(spec);
}

TapeBar BarBuilder::take() {
  TapeBar b = bar_;
  // Within [low, high] as a mean of the prints' prices is: the division may round one ulp out.
  b.vwap = std::clamp(b.notional / b.volume, b.low, b.high);
  b.duration_seconds = static_cast<double>(b.end_ns - b.start_ns) / 1e9;
  bar_ = TapeBar{};
  return b;
}

std::optional<TapeBar> BarBuilder::push(const Print& p) {
  using namespace bar_builder_impl;
  FOXHUNT_CHECK(std::isfinite(p.price) && p.price > 0 && std::isfinite(p.size) && p.size > 0,
                kBarBuilderComponent, "print at ", format_time_ns(p.time_ns), ": price ", p.price,
                " size ", p.size, ": expected a finite price > 0 and a finite size > 0");
  FOXHUNT_CHECK(!has_last_ || p.time_ns >= last_ns_, kBarBuilderComponent, "print at ",
                format_time_ns(p.time_ns), " is earlier than the previous print at ",
                format_time_ns(last_ns_), " (expected prints in time order)");
  std::optional<TapeBar> closed;
  if (spec_.kind == BarKind::kTime && bar_.prints > 0 && p.time_ns >= bar_end_ns_) closed = take();

  // The aggressor: the given side, else the tick rule (its state follows every print).
  int8_t sign = p.side > 0 ? 1 : (p.side < 0 ? -1 : 0);
  if (has_last_ && p.price != last_price_) tick_sign_ = p.price > last_price_ ? 1 : -1;
  if (sign == 0) sign = tick_sign_;

  TapeBar& b = bar_;
  if (b.prints == 0) {
    b.symbol = p.symbol;
    b.start_ns = p.time_ns;
    b.open = b.high = b.low = p.price;
    if (spec_.kind == BarKind::kTime) {
      b.interval_start_ns = period_floor(p.time_ns, spec_.period_ns);
      // Saturated: a period reaching past int64's last nanosecond ends there.
      if (__builtin_add_overflow(b.interval_start_ns, spec_.period_ns, &bar_end_ns_))
        bar_end_ns_ = std::numeric_limits<int64_t>::max();
    } else {
      b.interval_start_ns = p.time_ns;
    }
  } else {
    const double r = std::log(p.price / b.close);
    b.realized_variance += r * r;
    b.high = std::max(b.high, p.price);
    b.low = std::min(b.low, p.price);
  }
  b.close = p.price;
  b.end_ns = p.time_ns;
  b.volume += p.size;
  b.notional += p.price * p.size;
  ++b.prints;
  if (sign > 0) b.buy_volume += p.size;
  if (sign < 0) b.sell_volume += p.size;
  last_ns_ = p.time_ns;
  last_price_ = p.price;
  has_last_ = true;

  switch (spec_.kind) {
    case BarKind::kTime:
      break;
    case BarKind::kTick:
      if (static_cast<double>(b.prints) >= spec_.threshold) closed = take();
      break;
    case BarKind::kVolume:
      if (b.volume >= spec_.threshold) closed = take();
      break;
    case BarKind::kDollar:
      if (b.notional >= spec_.threshold) closed = take();
      break;
  }
  return closed;
}

std::optional<TapeBar> BarBuilder::close_until(int64_t now_ns) {
  if (spec_.kind != BarKind::kTime || bar_.prints == 0 || now_ns < bar_end_ns_) return std::nullopt;
  return take();
}

std::optional<TapeBar> BarBuilder::flush() {
  if (bar_.prints == 0) return std::nullopt;
  return take();
}

TapeBarBuilder::TapeBarBuilder(const BarSpec& spec) : spec_(spec) {
  bar_builder_impl::check_spec(spec);
}

std::optional<TapeBar> TapeBarBuilder::push(const Print& p) {
  FOXHUNT_CHECK(p.symbol >= 0, bar_builder_impl::kBarBuilderComponent, "print at ",
                format_time_ns(p.time_ns), ": symbol id ", p.symbol, ": expected an id >= 0");
  const auto k = static_cast<size_t>(p.symbol);
  while (builders_.size() <= k) builders_.emplace_back(spec_);
  return builders_[k].push(p);
}

void TapeBarBuilder::close_until(int64_t now_ns, std::vector<TapeBar>& out) {
  for (auto& b : builders_)
    if (auto bar = b.close_until(now_ns)) out.push_back(*bar);
}

void TapeBarBuilder::flush(std::vector<TapeBar>& out) {
  for (auto& b : builders_)
    if (auto bar = b.flush()) out.push_back(*bar);
}

std::vector<TapeBar> build_bars(const Tape& tape, const BarSpec& spec) {
  TapeBarBuilder builder(spec);
  std::vector<TapeBar> bars;
  const int64_t n = tape.size_prints();
  const bool side = !tape.side.empty(), symbol = !tape.symbol.empty();
  Print p;  // the columns the builder reads; quotes and trade ids play no part in a bar
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    p.time_ns = tape.time_ns[k];
    p.price = tape.price[k];
    p.size = tape.size[k];
    p.side = side ? tape.side[k] : 0;
    p.symbol = symbol ? tape.symbol[k] : 0;
    if (auto bar = builder.push(p)) bars.push_back(*bar);
  }
  builder.flush(bars);
  return bars;
}

}  // namespace foxhunt::data
