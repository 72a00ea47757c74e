#include "foxhunt/serving/bar_stream.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "foxhunt/core/error.h"

namespace foxhunt::serving {

CsvBarSource::CsvBarSource(std::istream& in, std::string source, std::string symbol)
    : in_(in), source_(std::move(source)), symbol_(std::move(symbol)), reader_(source_) {}

bool CsvBarSource::next(std::vector<SymbolBar>& bars) {
  bars.clear();
  while (std::getline(in_, line_)) {
    auto bar = reader_.read_line(line_);  // InputError for a bad line: the next call reads on
    if (!bar) continue;                   // the header, a blank line
    bars.push_back({symbol_, *bar});
    return true;
  }
  return false;
}

std::string CsvBarSource::where() const {
  return source_ + ":" + std::to_string(reader_.line_number());
}

PanelBarSource::PanelBarSource(const data::Panel& panel,
                               const std::function<bool(const std::string&)>& serve)
    : panel_(panel) {
  for (const auto& s : panel.symbols)
    if (!serve || serve(s.symbol)) served_.push_back(&s);
  cursor_.assign(served_.size(), 0);
}

bool PanelBarSource::next(std::vector<SymbolBar>& bars) {
  while (next_time_ < panel_.timestamps.size()) {
    const int64_t t = panel_.timestamps[next_time_++];
    bars.clear();
    for (size_t k = 0; k < served_.size(); ++k) {
      const auto& series = served_[k]->series.bars;
      const auto& flow = served_[k]->series.flow;  // bars built from a tape carry theirs
      if (cursor_[k] < series.size() && series[cursor_[k]].timestamp == t) {
        const size_t i = cursor_[k]++;
        bars.push_back({served_[k]->symbol, series[i],
                        i < flow.size() ? std::optional<data::BarFlow>(flow[i]) : std::nullopt});
      }
    }
    if (!bars.empty()) return true;
  }
  bars.clear();
  return false;
}

CsvPanelSource::CsvPanelSource(std::istream& in, std::string source,
                               std::function<bool(const std::string&)> serve, std::string head)
    : source_(std::move(source)), stream_(in, source_, std::move(head)), serve_(std::move(serve)) {}

bool CsvPanelSource::next(std::vector<SymbolBar>& bars) {
  bars.clear();
  while (stream_.next(rows_)) {  // InputError for a bad row: the next call reads on
    for (auto& r : rows_) {
      if (serve_ && !serve_(r.symbol)) continue;
      if (r.first) ++served_;
      bars.push_back({std::move(r.symbol), r.bar});
    }
    if (bars.empty()) continue;  // none of the served symbols has a bar here
    // A panel's order (PanelBarSource): its symbols in byte order.
    std::sort(bars.begin(), bars.end(),
              [](const SymbolBar& a, const SymbolBar& b) { return a.symbol < b.symbol; });
    return true;
  }
  return false;
}

std::string CsvPanelSource::where() const {
  return source_ + ":" + std::to_string(stream_.line_number());
}

StreamStats stream_source(Desk& desk, BarSource& source, const StreamOptions& options,
                          const StreamSink& on_decisions, const SkipSink& on_skip) {
  StreamStats stats;
  LatencyRecorder latencies;  // bounded: a feed may never end
  std::vector<SymbolBar> bars;
  while (true) {
    std::vector<InstrumentDecision> decisions;
    try {
      if (!source.next(bars)) break;
      if (bars.empty()) continue;  // a source may hand out a timestamp without bars
      // The desk checks every bar before any state changes: a rejected one changes nothing.
      decisions = desk.on_timestamp(bars.front().bar.timestamp, bars);
    } catch (const InputError& e) {
      const std::string at = source.where();
      if (!options.skip_bad) {
        if (at.empty()) throw;
        throw InputError("predict", at + ": " + e.what());
      }
      ++stats.skipped;
      if (on_skip) on_skip((at.empty() ? source.name() : at) + ": skipped: " + e.what());
      continue;
    }
    ++stats.timestamps;
    stats.bars += static_cast<int64_t>(bars.size());
    latencies.add(decisions.front().decision.latency_us);
    if (bars.front().bar.timestamp < options.from) continue;
    stats.reported += static_cast<int64_t>(decisions.size());
    if (on_decisions) on_decisions(bars, decisions);
  }
  // A source that reads its symbols as it goes (a panel, a tape) knows them all only now.
  stats.instruments = source.instruments();
  FOXHUNT_CHECK(stats.bars > 0, "predict", source.name(), ": expected at least one bar, got none");
  stats.latency_us = latencies.summary();
  return stats;
}

StreamStats stream_bars(Ensemble& ensemble, std::istream& in, const BarStreamOptions& options,
                        const DecisionSink& on_decision, const SkipSink& on_skip) {
  CsvBarSource source(in, options.source, ensemble.symbol());
  const auto sink = [&](const std::vector<SymbolBar>& bars,
                        const std::vector<InstrumentDecision>& decisions) {
    if (on_decision) on_decision(bars.front().bar, decisions.front().decision);
  };
  StreamOptions o;
  o.skip_bad = options.skip_bad;
  o.from = options.from;
  return stream_source(ensemble.desk(), source, o, sink, on_skip);
}

Shard parse_shard(const std::string& text, const std::string& what) {
  const auto slash = text.find('/');
  Shard s;
  bool ok = slash != std::string::npos && slash > 0 && slash + 1 < text.size();
  if (ok) {
    try {
      size_t a = 0, b = 0;
      s.index = std::stoll(text.substr(0, slash), &a);
      s.count = std::stoll(text.substr(slash + 1), &b);
      ok = a == slash && b == text.size() - slash - 1;
    } catch (const std::exception&) {
      ok = false;
    }
  }
  FOXHUNT_CHECK(ok && s.count >= 1 && s.index >= 0 && s.index < s.count, "predict", what,
                ": expected K/N with 0 <= K < N (shard K of N), got '", text, "'");
  return s;
}

namespace {

/// The symbols of `shard` (checked).
std::function<bool(const std::string&)> shard_filter(const Shard& shard) {
  FOXHUNT_CHECK(shard.count >= 1 && shard.index >= 0 && shard.index < shard.count, "predict",
                "shard: expected K/N with 0 <= K < N, got ", shard.index, "/", shard.count);
  return [shard](const std::string& symbol) {
    return symbol_shard(symbol, shard.count) == shard.index;
  };
}

/// stream_source on a panel's source, reporting each timestamp.
StreamStats stream_timestamps(Desk& desk, BarSource& source, const PanelStreamOptions& options,
                              const TimestampSink& on_timestamp) {
  const auto sink = [&](const std::vector<SymbolBar>& bars,
                        const std::vector<InstrumentDecision>& decisions) {
    if (on_timestamp) on_timestamp(bars.front().bar.timestamp, decisions);
  };
  StreamOptions o;
  o.from = options.from;
  return stream_source(desk, source, o, sink);
}

/// The error for a shard that holds none of a panel's `symbols`.
[[noreturn]] void empty_shard(const std::string& source, const Shard& shard, int64_t symbols) {
  throw InputError("predict",
                   foxhunt::detail::cat(source, ": shard ", shard.index, "/", shard.count,
                                        " holds none of the ", symbols, " symbols"));
}

}  // namespace

StreamStats stream_panel(Desk& desk, const data::Panel& panel, const PanelStreamOptions& options,
                         const TimestampSink& on_timestamp) {
  PanelBarSource source(panel, shard_filter(options.shard));
  if (source.instruments() == 0) empty_shard(panel.source, options.shard, panel.size());
  return stream_timestamps(desk, source, options, on_timestamp);
}

PanelCsvStreamStats stream_panel_csv(Desk& desk, std::istream& in, const std::string& source,
                                     const PanelStreamOptions& options,
                                     const TimestampSink& on_timestamp, const std::string& head) {
  CsvPanelSource panel(in, source, shard_filter(options.shard), head);
  PanelCsvStreamStats stats;
  try {
    stats.stream = stream_timestamps(desk, panel, options, on_timestamp);
  } catch (const InputError&) {
    // The shard's symbols are known at the end only: none there, no bar was served.
    if (panel.ended() && panel.instruments() == 0 && panel.symbols() > 0)
      empty_shard(source, options.shard, panel.symbols());
    throw;
  }
  stats.symbols = panel.symbols();
  stats.last_timestamp = panel.last_timestamp();
  return stats;
}

}  // namespace foxhunt::serving
