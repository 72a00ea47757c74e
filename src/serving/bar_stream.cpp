#include "foxhunt/serving/bar_stream.h"

#include <optional>
#include <vector>

#include "foxhunt/core/error.h"

namespace foxhunt::serving {

BarStreamStats stream_bars(Ensemble& ensemble, std::istream& in, const BarStreamOptions& options,
                           const DecisionSink& on_decision, const SkipSink& on_skip) {
  const std::string& source = options.source;
  data::BarCsvReader reader(source);
  BarStreamStats stats;
  std::vector<double> latencies;
  // "SOURCE:LINE" of the line being read: where a skipped or fatal bar is.
  const auto where = [&] { return source + ":" + std::to_string(reader.line_number()); };
  const auto skip = [&](const std::string& why) {
    ++stats.skipped;
    if (on_skip) on_skip(where() + ": skipped: " + why);
  };
  std::string line;
  while (std::getline(in, line)) {
    std::optional<data::Bar> bar;
    BarDecision d;
    try {
      bar = reader.read_line(line);
      if (!bar) continue;  // the header, a blank line
      if (options.skip_bad) {
        std::string why;
        if (!ensemble.try_on_bar(*bar, &d, &why)) {
          skip(why);
          continue;
        }
      } else {
        d = ensemble.on_bar(*bar);
      }
    } catch (const InputError& e) {
      if (!options.skip_bad) throw InputError("predict", where() + ": " + e.what());
      skip(e.what());
      continue;
    }
    ++stats.bars;
    latencies.push_back(d.latency_us);
    if (d.timestamp < options.from) continue;
    ++stats.reported;
    if (on_decision) on_decision(*bar, d);
  }
  FOXHUNT_CHECK(stats.bars > 0, "predict", source, ": expected at least one bar, got none");
  stats.latency_us = summarize_latencies(latencies);
  return stats;
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

PanelStreamStats stream_panel(Desk& desk, const data::Panel& panel,
                              const PanelStreamOptions& options,
                              const TimestampSink& on_timestamp) {
  FOXHUNT_CHECK(options.shard.count >= 1 && options.shard.index >= 0 &&
                    options.shard.index < options.shard.count,
                "predict", "shard: expected K/N with 0 <= K < N, got ", options.shard.index, "/",
                options.shard.count);
  // The served symbols and a cursor into each one's bars.
  std::vector<const data::PanelSymbol*> served;
  for (const auto& s : panel.symbols)
    if (symbol_shard(s.symbol, options.shard.count) == options.shard.index) served.push_back(&s);
  FOXHUNT_CHECK(!served.empty(), "predict", panel.source, ": shard ", options.shard.index, "/",
                options.shard.count, " holds none of the ", panel.size(), " symbols");
  PanelStreamStats stats;
  stats.instruments = static_cast<int64_t>(served.size());
  std::vector<size_t> cursor(served.size(), 0);
  std::vector<double> latencies;
  std::vector<SymbolBar> bars;
  for (const int64_t t : panel.timestamps) {
    bars.clear();
    for (size_t k = 0; k < served.size(); ++k) {
      const auto& series = served[k]->series.bars;
      if (cursor[k] < series.size() && series[cursor[k]].timestamp == t)
        bars.push_back({served[k]->symbol, series[cursor[k]++]});
    }
    if (bars.empty()) continue;
    auto decisions = desk.on_timestamp(t, bars);
    ++stats.timestamps;
    stats.instrument_bars += static_cast<int64_t>(bars.size());
    latencies.push_back(decisions.front().decision.latency_us);
    if (t < options.from) continue;
    stats.reported += static_cast<int64_t>(decisions.size());
    if (on_timestamp) on_timestamp(t, decisions);
  }
  stats.latency_us = summarize_latencies(latencies);
  return stats;
}

}  // namespace foxhunt::serving
