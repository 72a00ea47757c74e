#include "foxhunt/data/tape_bars.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "foxhunt/core/error.h"

namespace foxhunt::data {

namespace tape_bars_impl {
namespace {

constexpr const char* kTapeBarsComponent = "bars";
constexpr int64_t kNsPerSecondTapeBars = 1'000'000'000;

int64_t floor_seconds(int64_t ns) {
  const int64_t q = ns / kNsPerSecondTapeBars;
  return (ns % kNsPerSecondTapeBars != 0 && ns < 0) ? q - 1 : q;
}

/// One CSV row after the timestamp (and symbol): OHLCV then the flow columns.
void append_row(fmt::memory_buffer& out, const Bar& b, const BarFlow& f) {
  fmt::format_to(std::back_inserter(out), ",{},{},{},{},{},{},{},{},{},{},{},{},{}\n", b.open,
                 b.high, b.low, b.close, b.volume, f.vwap, f.prints, f.buy_volume, f.sell_volume,
                 f.duration_seconds, f.realized_variance, f.start_ns, f.end_ns);
}

constexpr const char* kFlowHeader =
    "open,high,low,close,volume,vwap,prints,buy_volume,sell_volume,duration,realized_variance,"
    "start_ns,end_ns\n";

}  // namespace

}  // namespace tape_bars_impl

BarFlow bar_flow(const TapeBar& b) {
  return b;  // the BarFlow part
}

Bar tape_bar_to_bar(const TapeBar& t, const BarSpec& spec, std::optional<int64_t> previous,
                    bool* shifted) {
  using namespace tape_bars_impl;
  Bar b;
  b.timestamp = floor_seconds(t.interval_start_ns);
  if (shifted) *shifted = false;
  if (previous && b.timestamp <= *previous) {
    FOXHUNT_CHECK(spec.kind != BarKind::kTime, kTapeBarsComponent, "time bar starting at ",
                  format_time_ns(t.interval_start_ns),
                  " is not after the previous bar (expected bars in time order)");
    b.timestamp = *previous + 1;
    if (shifted) *shifted = true;
  }
  b.open = t.open;
  b.high = t.high;
  b.low = t.low;
  b.close = t.close;
  b.volume = t.volume;
  return b;
}

TapeBars to_tape_bars(const std::vector<TapeBar>& bars, const BarSpec& spec,
                      const std::string& source) {
  using namespace tape_bars_impl;
  FOXHUNT_CHECK(!bars.empty(), kTapeBarsComponent, source,
                ": no bars (expected a tape with at least one print)");
  TapeBars out;
  out.spec = spec;
  out.bars.source = source;
  out.bars.bars.reserve(bars.size());
  out.flow.reserve(bars.size());
  for (size_t i = 0; i < bars.size(); ++i) {
    const TapeBar& t = bars[i];
    FOXHUNT_CHECK(t.symbol == bars.front().symbol, kTapeBarsComponent, source, ": bar ", i,
                  " is of symbol id ", t.symbol, ", bar 0 of ", bars.front().symbol,
                  " (expected one instrument's bars)");
    bool shifted = false;
    const std::optional<int64_t> previous =
        out.bars.bars.empty() ? std::nullopt
                              : std::optional<int64_t>(out.bars.bars.back().timestamp);
    try {
      out.bars.bars.push_back(tape_bar_to_bar(t, spec, previous, &shifted));
    } catch (const InputError& e) {
      throw InputError(kTapeBarsComponent, fmt::format("{}: bar {}: {}", source, i, e.message()));
    }
    if (shifted) ++out.shifted_timestamps;
    out.flow.push_back(bar_flow(t));
  }
  out.bars.flow = out.flow;  // the series carries its flow: datasets add the flow columns
  return out;
}

TapeBars build_tape_bars(const Tape& tape, const BarSpec& spec) {
  FOXHUNT_CHECK(tape.symbols.empty(), tape_bars_impl::kTapeBarsComponent, tape.source,
                ": a tape with a symbol column (", tape.symbols.size(),
                " symbols): expected one instrument here (build_tape_panel builds a panel)");
  return to_tape_bars(build_bars(tape, spec), spec,
                      fmt::format("{}[{}]", tape.source, to_string(spec)));
}

TapePanelBars build_tape_panel(const Tape& tape, const BarSpec& spec) {
  using namespace tape_bars_impl;
  FOXHUNT_CHECK(spec.kind == BarKind::kTime, kTapeBarsComponent, tape.source, ": bar spec '",
                to_string(spec), "' on a tape with a symbol column: a desk needs time bars (",
                "each symbol's ", to_string(spec.kind),
                " bars would close at its own times; expected time:<period>, or one symbol's "
                "tape)");
  const std::vector<TapeBar> bars = build_bars(tape, spec);
  const auto symbols = static_cast<size_t>(tape.symbol_count());
  std::vector<std::vector<TapeBar>> by_symbol(symbols);
  for (const auto& b : bars) by_symbol[static_cast<size_t>(b.symbol)].push_back(b);
  TapePanelBars out;
  out.spec = spec;
  out.panel.source = fmt::format("{}[{}]", tape.source, to_string(spec));
  out.panel.single_series = tape.symbols.empty();
  for (size_t s = 0; s < symbols; ++s) {
    const std::string name = tape.symbols.empty() ? std::string("tape") : tape.symbols[s];
    TapeBars one = to_tape_bars(by_symbol[s], spec, fmt::format("{}[{}]", tape.source, name));
    out.panel.symbols.push_back(PanelSymbol{name, std::move(one.bars)});
    out.flow.push_back(std::move(one.flow));
  }
  for (const auto& ps : out.panel.symbols)
    for (const auto& b : ps.series.bars) out.panel.timestamps.push_back(b.timestamp);
  std::sort(out.panel.timestamps.begin(), out.panel.timestamps.end());
  out.panel.timestamps.erase(std::unique(out.panel.timestamps.begin(), out.panel.timestamps.end()),
                             out.panel.timestamps.end());
  return out;
}

std::string tape_bars_to_csv(const TapeBars& bars) {
  using namespace tape_bars_impl;
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "timestamp,{}", kFlowHeader);
  for (size_t i = 0; i < bars.flow.size(); ++i) {
    const Bar& b = bars.bars.bars[i];
    fmt::format_to(std::back_inserter(out), "{}", format_timestamp(b.timestamp));
    append_row(out, b, bars.flow[i]);
  }
  return fmt::to_string(out);
}

std::string tape_panel_to_csv(const TapePanelBars& bars) {
  using namespace tape_bars_impl;
  // Rows by timestamp, then symbol (the panel's order is byte order of the names).
  struct Row {
    int64_t timestamp;
    size_t symbol;
    size_t bar;
  };
  std::vector<Row> rows;
  for (size_t s = 0; s < bars.panel.symbols.size(); ++s)
    for (size_t i = 0; i < bars.panel.symbols[s].series.bars.size(); ++i)
      rows.push_back({bars.panel.symbols[s].series.bars[i].timestamp, s, i});
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
    return a.timestamp != b.timestamp ? a.timestamp < b.timestamp : a.symbol < b.symbol;
  });
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "timestamp,symbol,{}", kFlowHeader);
  for (const Row& r : rows) {
    const auto& ps = bars.panel.symbols[r.symbol];
    fmt::format_to(std::back_inserter(out), "{},{}", format_timestamp(r.timestamp), ps.symbol);
    append_row(out, ps.series.bars[r.bar], bars.flow[r.symbol][r.bar]);
  }
  return fmt::to_string(out);
}

}  // namespace foxhunt::data
