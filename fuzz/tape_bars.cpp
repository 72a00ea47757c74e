// The tape reader and the bar builder (data/tape.h, data/bar_builder.h), torch-free. The input's
// first two bytes choose the bar spec, the bad-print policy and the epoch unit; the rest is tape
// CSV text. A refused tape names the input and its line ("fuzz.csv:LINE: ...", or "fuzz.csv:
// empty tape"). On every accepted tape the bars of build_bars must:
// - partition the accepted prints: per symbol, in print order, bar k holds the next `prints`
//   prints (none in two bars, none lost: the bars' print counts sum to the prints read), with
//   open/close/start/end those of its first and last print and high/low their extremes;
// - conserve volume and notional (each bar's sums equal its prints', summed in the same order);
// - have their VWAP within [low, high] and be finite;
// - split volume by the documented aggressor rule: buy and sell volume equal the sizes of the
//   prints signed + and - by their side, else by the tick rule (the sign of the last price
//   change of the symbol); a print before the symbol's first change is neither, so buy + sell
//   + unsigned = volume;
// - increase in time per symbol (time bars: interval starts strictly, every print inside its
//   interval; others: a bar starts at or after the previous one ended);
// - close at their threshold: tick bars hold exactly N prints, volume and dollar bars reach N
//   with their last print and not before it (all but each symbol's last, flushed bar);
// - equal, bar for bar, what a live feed gives: the same prints pushed one at a time with
//   close_until(print time) before each (the streaming path), then a flush.
// A broken invariant throws std::logic_error (a crash for libFuzzer, a failure for the replay).
#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/tape.h"
#include "fuzz.h"

namespace foxhunt::data {
namespace {

[[noreturn]] void broken(const std::string& what) {
  throw std::logic_error("tape_bars invariant: " + what);
}

void expect(bool ok, const std::string& what) {
  if (!ok) broken(what);
}

// Sums of doubles that may round: equal within a relative 1e-9.
bool near(double a, double b) {
  return std::abs(a - b) <= 1e-9 * std::max({std::abs(a), std::abs(b), 1e-300});
}

BarSpec spec_of(uint8_t kind, uint8_t size) {
  static const char* const kSpecs[4][4] = {
      {"time:1s", "time:60s", "time:1h", "time:277777h"},
      {"tick:1", "tick:2", "tick:3", "tick:7"},
      {"volume:1", "volume:10", "volume:1000", "volume:0.5"},
      {"dollar:1", "dollar:100", "dollar:1e6", "dollar:0.001"}};
  return parse_bar_spec(kSpecs[kind % 4][size % 4]);
}

// Checks every bar of one symbol against its prints (in tape order).
void check_symbol(const Tape& t, const std::vector<int64_t>& prints,
                  const std::vector<const TapeBar*>& bars, const BarSpec& spec) {
  size_t next = 0;
  int8_t tick_sign = 0;  // the tick rule's state, carried across bars
  double last_price = 0.0;
  for (size_t k = 0; k < bars.size(); ++k) {
    const TapeBar& b = *bars[k];
    const std::string at = fmt::format("symbol {} bar {}", b.symbol, k);
    expect(b.prints >= 1 && next + static_cast<size_t>(b.prints) <= prints.size(),
           at + ": holds prints the tape does not have");
    double volume = 0, notional = 0, buy = 0, sell = 0, unsigned_volume = 0;
    double high = -HUGE_VAL, low = HUGE_VAL, before_last = 0;
    for (int64_t j = 0; j < b.prints; ++j) {
      const auto i = static_cast<size_t>(prints[next + static_cast<size_t>(j)]);
      const double price = t.price[i], size = t.size[i];
      if (next + static_cast<size_t>(j) > 0 && price != last_price)
        tick_sign = price > last_price ? 1 : -1;
      const int8_t given = t.side.empty() ? int8_t{0} : t.side[i];
      const int8_t sign = given != 0 ? given : tick_sign;
      (sign > 0 ? buy : sign < 0 ? sell : unsigned_volume) += size;
      before_last = spec.kind == BarKind::kDollar ? notional : volume;
      volume += size;
      notional += price * size;
      high = std::max(high, price);
      low = std::min(low, price);
      last_price = price;
      if (j == 0) {
        expect(b.open == price && b.start_ns == t.time_ns[i], at + ": open is not its first print");
        if (spec.kind == BarKind::kTime)
          expect(b.interval_start_ns <= t.time_ns[i], at + ": first print before its interval");
      }
      if (j + 1 == b.prints)
        expect(b.close == price && b.end_ns == t.time_ns[i], at + ": close is not its last print");
      if (spec.kind == BarKind::kTime)
        expect(t.time_ns[i] - b.interval_start_ns < spec.period_ns,
               at + ": a print after the end of its interval");
    }
    next += static_cast<size_t>(b.prints);
    expect(b.high == high && b.low == low, at + ": high/low are not its prints' extremes");
    expect(b.volume == volume && b.notional == notional, at + ": volume or notional not conserved");
    expect(b.buy_volume == buy && b.sell_volume == sell,
           at + fmt::format(": buy/sell volume {}/{} differ from the rule's {}/{}", b.buy_volume,
                            b.sell_volume, buy, sell));
    expect(near(b.buy_volume + b.sell_volume + unsigned_volume, b.volume),
           at + ": buy + sell + unsigned != volume");
    expect(std::isfinite(b.vwap) && b.vwap >= b.low && b.vwap <= b.high,
           at + fmt::format(": vwap {} outside [{}, {}]", b.vwap, b.low, b.high));
    expect(b.duration_seconds >= 0 && b.realized_variance >= 0, at + ": negative duration");
    if (k > 0) {
      const TapeBar& prev = *bars[k - 1];
      expect(b.start_ns >= prev.end_ns, at + ": starts before the previous bar ended");
      if (spec.kind == BarKind::kTime)
        expect(b.interval_start_ns > prev.interval_start_ns, at + ": interval not after the last");
    }
    const bool last = k + 1 == bars.size();
    if (!last) {
      switch (spec.kind) {
        case BarKind::kTime:
          break;
        case BarKind::kTick:
          expect(static_cast<double>(b.prints) == spec.threshold, at + ": tick count");
          break;
        case BarKind::kVolume:
          expect(volume >= spec.threshold && before_last < spec.threshold, at + ": volume bar");
          break;
        case BarKind::kDollar:
          expect(notional >= spec.threshold && before_last < spec.threshold, at + ": dollar bar");
          break;
      }
    }
  }
  expect(next == prints.size(),
         fmt::format("{} prints of a symbol in no bar", prints.size() - next));
}

// The live feed's bars: close_until(print time) before each push, then a flush.
std::vector<TapeBar> streamed(const Tape& t, const BarSpec& spec) {
  TapeBarBuilder builder(spec);
  std::vector<TapeBar> out;
  for (int64_t i = 0; i < t.size_prints(); ++i) {
    const Print p = t.at(i);
    builder.close_until(p.time_ns, out);
    if (auto bar = builder.push(p)) out.push_back(*bar);
  }
  builder.flush(out);
  return out;
}

void check_bars(const Tape& t, const BarSpec& spec) {
  const auto bars = build_bars(t, spec);  // an accepted tape: the builder must not refuse it
  std::map<int32_t, std::vector<int64_t>> prints;
  for (int64_t i = 0; i < t.size_prints(); ++i)
    prints[t.symbol.empty() ? 0 : t.symbol[static_cast<size_t>(i)]].push_back(i);
  std::map<int32_t, std::vector<const TapeBar*>> mine;
  int64_t counted = 0;
  for (const auto& b : bars) {
    mine[b.symbol].push_back(&b);
    counted += b.prints;
  }
  expect(counted == t.size_prints(),
         fmt::format("bars hold {} prints, the tape {}", counted, t.size_prints()));
  for (const auto& [symbol, list] : mine) {
    expect(prints.count(symbol) == 1, fmt::format("a bar of symbol {} without prints", symbol));
    check_symbol(t, prints.at(symbol), list, spec);
  }
  expect(mine.size() == prints.size(), "a symbol's prints in no bar");
  // One instrument: the live feed with its clock gives the same bars. (A panel's prints are in
  // order per symbol only, so one shared clock could close a bar early; not compared.)
  if (t.symbol.empty()) expect(streamed(t, spec) == bars, "the live feed's bars differ");
}

}  // namespace
}  // namespace foxhunt::data

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace foxhunt;
  if (size < 2) return 0;
  const data::BarSpec spec = data::spec_of(data[0] & 3, data[1]);
  data::TapeReadOptions options;
  options.on_bad =
      (data[0] & 4) ? data::TapeBadPrintPolicy::kDrop : data::TapeBadPrintPolicy::kRefuse;
  static const data::TapeEpochUnit kUnits[4] = {
      data::TapeEpochUnit::kAuto, data::TapeEpochUnit::kSeconds, data::TapeEpochUnit::kMilliseconds,
      data::TapeEpochUnit::kNanoseconds};
  options.epoch_unit = kUnits[(data[0] >> 3) & 3];
  data::Tape tape;
  try {
    tape = data::parse_tape_csv(fuzz::text_of(data + 2, size - 2), "fuzz.csv", options);
  } catch (const InputError& e) {
    // A refusal names the input and, for a line, its number.
    const std::string w = e.what();
    const auto at = w.find("fuzz.csv:");
    const bool line =
        at != std::string::npos && at + 9 < w.size() && w[at + 9] >= '0' && w[at + 9] <= '9';
    if (!line && w.find("fuzz.csv: empty tape") == std::string::npos)
      data::broken("a refusal without FILE:LINE: " + w);
    return 0;
  }
  data::check_bars(tape, spec);
  return 0;
}
