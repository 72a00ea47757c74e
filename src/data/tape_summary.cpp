// summarize_tape (tape.h): what `foxhunt data inspect` prints for a tape.

#include <algorithm>
#include <cmath>
#include <limits>

#include "foxhunt/core/error.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/data/tape.h"

namespace foxhunt::data {

namespace tape_summary_impl {
namespace {

constexpr int64_t kNsPerSecond = 1'000'000'000;
constexpr int64_t kNsPerMilli = 1'000'000;

/// floor(a / b) for b > 0.
int64_t tape_floor_div(int64_t a, int64_t b) {
  const int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

/// A price difference without the binary noise of decimal prices (0.01 - 0.00 is not 0.01
/// exactly): rounded to 1e-10.
double clean_increment(double d) {
  return std::round(d * 1e10) / 1e10;
}

}  // namespace
}  // namespace tape_summary_impl

TapeSummary summarize_tape(const Tape& tape, const TapeSummaryOptions& options) {
  using namespace tape_summary_impl;
  const int64_t n = tape.size_prints();
  FOXHUNT_CHECK(n > 0, "tape", tape.source, ": no prints to summarise (expected at least one)");
  FOXHUNT_CHECK(options.gap_seconds > 0 && std::isfinite(options.gap_seconds), "tape",
                "gap threshold ", options.gap_seconds, " s: expected a number > 0");
  TapeSummary s;
  s.prints = n;
  s.gap_seconds = options.gap_seconds;
  s.has_side = !tape.side.empty();
  s.has_quotes = !tape.bid.empty();
  s.has_trade_id = !tape.trade_id.empty();
  s.dropped = tape.dropped;

  // Per symbol, in file order (each symbol's prints are in time order).
  const auto symbols = static_cast<size_t>(tape.symbol_count());
  s.symbols.resize(symbols);
  std::vector<double> last_price(symbols, 0.0);
  std::vector<double> increment(symbols, std::numeric_limits<double>::infinity());
  for (int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    const auto sym = tape.symbol.empty() ? size_t{0} : static_cast<size_t>(tape.symbol[k]);
    auto& ss = s.symbols[sym];
    const double p = tape.price[k];
    if (ss.prints == 0) {
      ss.first_ns = tape.time_ns[k];
      ss.first_price = ss.min_price = ss.max_price = p;
    } else {
      const double d = clean_increment(std::fabs(p - last_price[sym]));
      if (d > 0) increment[sym] = std::min(increment[sym], d);
    }
    ++ss.prints;
    ss.last_ns = tape.time_ns[k];
    ss.last_price = p;
    ss.min_price = std::min(ss.min_price, p);
    ss.max_price = std::max(ss.max_price, p);
    ss.volume += tape.size[k];
    last_price[sym] = p;
  }
  s.price_increment = std::numeric_limits<double>::infinity();
  for (size_t k = 0; k < symbols; ++k) {
    auto& ss = s.symbols[k];
    if (!tape.symbols.empty()) ss.symbol = tape.symbols[k];
    ss.price_increment = std::isfinite(increment[k]) ? increment[k] : 0.0;
    if (ss.price_increment > 0) s.price_increment = std::min(s.price_increment, ss.price_increment);
    s.volume += ss.volume;
  }
  if (!std::isfinite(s.price_increment)) s.price_increment = 0.0;

  // Consecutive prints in file order: same millisecond, identical in every column.
  int64_t same_ms = 0;
  for (int64_t i = 1; i < n; ++i) {
    const auto k = static_cast<size_t>(i);
    const bool same_time = tape.time_ns[k] == tape.time_ns[k - 1];
    if (same_time || tape_floor_div(tape.time_ns[k], kNsPerMilli) ==
                         tape_floor_div(tape.time_ns[k - 1], kNsPerMilli))
      ++same_ms;
    const bool identical =
        same_time && tape.price[k] == tape.price[k - 1] && tape.size[k] == tape.size[k - 1] &&
        (tape.side.empty() || tape.side[k] == tape.side[k - 1]) &&
        (tape.symbol.empty() || tape.symbol[k] == tape.symbol[k - 1]) &&
        (tape.bid.empty() || ((tape.bid[k] == tape.bid[k - 1] ||
                               (std::isnan(tape.bid[k]) && std::isnan(tape.bid[k - 1]))) &&
                              (tape.ask[k] == tape.ask[k - 1] ||
                               (std::isnan(tape.ask[k]) && std::isnan(tape.ask[k - 1]))))) &&
        (tape.trade_id.empty() || tape.trade_id[k] == tape.trade_id[k - 1]);
    if (identical) ++s.identical_consecutive;
  }
  s.same_millisecond_share = n > 1 ? static_cast<double>(same_ms) / static_cast<double>(n - 1) : 0;

  // Time order over every symbol (a panel's symbols interleave freely): span, sessions, gaps and
  // prints per second.
  std::vector<int64_t> t(tape.time_ns);
  if (!std::is_sorted(t.begin(), t.end())) std::sort(t.begin(), t.end());
  s.first_ns = t.front();
  s.last_ns = t.back();
  s.span_seconds = static_cast<double>(s.last_ns - s.first_ns) / kNsPerSecond;
  const auto gap_ns = static_cast<int64_t>(options.gap_seconds * kNsPerSecond);
  TapeSession session{t.front(), t.front(), 0};
  std::vector<double> per_second;
  int64_t second = tape_floor_div(t.front(), kNsPerSecond);
  int64_t in_second = 0;
  for (size_t k = 0; k < t.size(); ++k) {
    if (k > 0 && t[k] - t[k - 1] > gap_ns) {
      s.sessions.push_back(session);
      session = TapeSession{t[k], t[k], 0};
    }
    session.last_ns = t[k];
    ++session.prints;
    const int64_t sec = tape_floor_div(t[k], kNsPerSecond);
    if (sec != second) {
      per_second.push_back(static_cast<double>(in_second));
      second = sec;
      in_second = 0;
    }
    ++in_second;
  }
  s.sessions.push_back(session);
  per_second.push_back(static_cast<double>(in_second));
  s.max_prints_per_second =
      static_cast<int64_t>(*std::max_element(per_second.begin(), per_second.end()));
  s.median_prints_per_second = percentile(per_second, 50.0);
  s.p99_prints_per_second = percentile(std::move(per_second), 99.0);
  return s;
}

}  // namespace foxhunt::data
