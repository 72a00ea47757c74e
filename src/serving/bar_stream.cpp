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

}  // namespace foxhunt::serving
