#include "foxhunt/serving/tape_stream.h"

#include <algorithm>
#include <limits>

#include "foxhunt/core/error.h"
#include "foxhunt/data/tape_bars.h"

namespace foxhunt::serving {

namespace tape_stream_impl {
namespace {

constexpr const char* kTapeStreamComponent = "tape";
using SteadyClock = std::chrono::steady_clock;

/// floor(ns / period) * period, for negative times too.
int64_t interval_of(int64_t ns, int64_t period) {
  int64_t q = ns / period;
  if (ns % period != 0 && ns < 0) --q;
  return q * period;
}

}  // namespace
}  // namespace tape_stream_impl

TapeBarSource::TapeBarSource(std::istream& in, TapeStreamOptions options, std::string head)
    : in_(in),
      options_(std::move(options)),
      head_(std::move(head)),
      reader_(options_.source, options_.read),
      builder_(options_.spec) {}

std::string TapeBarSource::where() const {
  return options_.source + ":" + std::to_string(reader_.line_number());
}

int64_t TapeBarSource::instruments() const {
  if (!reader_.has_symbol()) return 1;
  return std::max<int64_t>(1, static_cast<int64_t>(reader_.symbols().size()));
}

void TapeBarSource::emit(std::vector<data::TapeBar>& closed, const BarClose& close) {
  // Each bar as the batch builder's Bar (timestamps by data::tape_bar_to_bar), grouped by
  // timestamp, symbols in byte order within one (a panel's order).
  std::vector<SymbolBar> out;
  for (const auto& t : closed) {
    const auto id = static_cast<size_t>(t.symbol);
    if (previous_.size() <= id) previous_.resize(id + 1);
    const data::Bar bar = data::tape_bar_to_bar(t, options_.spec, previous_[id]);
    previous_[id] = bar.timestamp;
    out.push_back({reader_.has_symbol() ? reader_.symbols().at(id) : options_.symbol, bar,
                   data::bar_flow(t)});
  }
  closed.clear();
  std::sort(out.begin(), out.end(), [](const SymbolBar& a, const SymbolBar& b) {
    return a.bar.timestamp != b.bar.timestamp ? a.bar.timestamp < b.bar.timestamp
                                              : a.symbol < b.symbol;
  });
  for (size_t i = 0; i < out.size();) {
    size_t j = i;
    std::vector<SymbolBar> group;
    while (j < out.size() && out[j].bar.timestamp == out[i].bar.timestamp)
      group.push_back(out[j++]);
    bars_ += static_cast<int64_t>(group.size());
    ready_.emplace_back(std::move(group), close);
    i = j;
  }
}

bool TapeBarSource::read_line(std::string_view line,
                              std::chrono::steady_clock::time_point arrival) {
  using namespace tape_stream_impl;
  const bool had_header = reader_.has_header();
  const auto p = reader_.read_line(line);  // InputError for a bad line: the next call reads on
  // Checked on the header and on every print, so that skipping bad lines never serves a desk
  // bars it cannot decide on together.
  if ((p || !had_header) && reader_.has_header() && reader_.has_symbol())
    FOXHUNT_CHECK(options_.spec.kind == data::BarKind::kTime, kTapeStreamComponent, options_.source,
                  ": bar spec '", data::to_string(options_.spec),
                  "' on a tape with a symbol column: a desk needs time bars (each symbol's ",
                  data::to_string(options_.spec.kind),
                  " bars would close at its own times; expected time:<period>, or one symbol's "
                  "tape)");
  if (!p) return false;
  ++prints_;
  std::vector<data::TapeBar> closed;
  if (reader_.has_symbol()) {
    // One clock for the desk: a later interval's first print closes every symbol's bar.
    const int64_t interval = interval_of(p->time_ns, options_.spec.period_ns);
    FOXHUNT_CHECK(!clock_set_ || interval >= clock_interval_, kTapeStreamComponent, where(),
                  ": print at ", data::format_time_ns(p->time_ns), " of '",
                  reader_.symbols().at(static_cast<size_t>(p->symbol)),
                  "' falls in the interval from ", data::format_time_ns(interval),
                  " that the desk already closed at ", data::format_time_ns(clock_interval_),
                  " (expected a panel's prints in time order across symbols, within a bar "
                  "period)");
    if (clock_set_ && interval > clock_interval_) builder_.close_until(p->time_ns, closed);
    clock_interval_ = interval;
    clock_set_ = true;
    if (!closed.empty()) emit(closed, {p->time_ns, arrival, false});
  }
  if (auto bar = builder_.push(*p)) closed.push_back(*bar);
  last_print_ns_ = p->time_ns;
  if (!closed.empty()) emit(closed, {p->time_ns, arrival, false});
  return true;
}

bool TapeBarSource::next(std::vector<SymbolBar>& bars) {
  bars.clear();
  while (ready_.empty() && !ended_) {
    const auto arrival = std::chrono::steady_clock::now();
    if (head_pos_ < head_.size()) {
      size_t end = head_.find('\n', head_pos_);
      if (end == std::string::npos) end = head_.size();
      const std::string_view line(head_.data() + head_pos_, end - head_pos_);
      head_pos_ = end + 1;
      read_line(line, arrival);
      continue;
    }
    if (std::getline(in_, line_)) {
      read_line(line_, arrival);
      continue;
    }
    ended_ = true;  // the end of the tape closes the open bars
    std::vector<data::TapeBar> closed;
    builder_.flush(closed);
    if (!closed.empty()) emit(closed, {last_print_ns_, arrival, true});
  }
  if (ready_.empty()) return false;
  bars = std::move(ready_.front().first);
  close_ = ready_.front().second;
  ready_.pop_front();
  return true;
}

TapeStreamStats stream_tape(Desk& desk, std::istream& in, const TapeStreamOptions& options,
                            const StreamOptions& stream, const TapeSink& on_decisions,
                            const SkipSink& on_skip, const std::string& head) {
  TapeBarSource source(in, options, head);
  TapeStreamStats stats;
  LatencyRecorder latency_us;  // bounded: a tape may never end
  int64_t reported = 0;
  // Every timestamp reaches the sink below, which measures it and reports those at or after
  // `from` (the latency figures cover the warm-up too).
  StreamOptions all = stream;
  all.from = std::numeric_limits<int64_t>::min();
  const auto sink = [&](const std::vector<SymbolBar>& bars,
                        const std::vector<InstrumentDecision>& decisions) {
    const auto& close = source.last_close();
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::steady_clock::now() - close.arrival)
                           .count();
    latency_us.add(static_cast<double>(std::max<int64_t>(ns, 0)) / 1000.0);
    if (bars.front().bar.timestamp < stream.from) return;
    reported += static_cast<int64_t>(decisions.size());
    if (on_decisions) on_decisions(bars, decisions, close, ns);
  };
  const auto t0 = std::chrono::steady_clock::now();
  stats.stream = stream_source(desk, source, all, sink, on_skip);
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  stats.stream.reported = reported;
  stats.stream.instruments = source.instruments();
  stats.prints = source.prints();
  stats.tape_bars = source.bars();
  stats.dropped = source.dropped();
  if (stats.seconds > 0) {
    stats.prints_per_s = static_cast<double>(stats.prints) / stats.seconds;
    stats.bars_per_s = static_cast<double>(stats.tape_bars) / stats.seconds;
  }
  stats.print_to_decision_us = latency_us.summary();
  return stats;
}

}  // namespace foxhunt::serving
