#include "foxhunt/data/market_data.h"

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/data/tape_bars.h"

namespace foxhunt::data {

MarketData load_market_data(const std::string& path) {
  MarketData bars;
  if (path.empty()) {
    bars.series = generate_synthetic(SyntheticOptions{});
    return bars;
  }
  return parse_market_data(read_file(path), path);
}

MarketData parse_market_data(std::string_view text, const std::string& path) {
  MarketData bars;
  // A tape's header would fail as "unknown column 'Price'": say what the file is instead.
  FOXHUNT_CHECK(!has_tape_header(text), "bars", path,
                ": a tape of trade prints (timestamp, price, size), expected bars here: build "
                "bars from it first (`foxhunt data bars --ticks ",
                path, " --bar time:60s --out bars.csv`, or data/tape_bars.h)");
  if (has_symbol_column(text))
    bars.panel = parse_panel_csv(text, path);
  else
    bars.series = parse_bars_csv(text, path);
  return bars;
}

bool MarketData::has_flow() const {
  return panel ? !panel->symbols.empty() && panel->symbols.front().series.has_flow()
               : series.has_flow();
}

MarketData tape_market_data(const Tape& tape, const BarSpec& spec) {
  FOXHUNT_CHECK(tape.size_prints() > 0, "bars", "'", tape.source,
                "': expected a tape with at least one print, got none");
  MarketData bars;
  bars.bar_spec = spec;
  bars.dropped = tape.dropped;
  if (tape.symbols.empty())
    bars.series = build_tape_bars(tape, spec).bars;  // carries its flow
  else
    bars.panel = build_tape_panel(tape, spec).panel;
  return bars;
}

MarketData load_tape_market_data(const std::string& path, const BarSpec& spec,
                                 const TapeReadOptions& read) {
  const std::string text = read_file(path);
  FOXHUNT_CHECK(has_tape_header(text), "bars", path,
                ": expected a tape of trade prints (a timestamp, a price and a size column, no "
                "open/high/low/close), got another header; give bars with --data instead");
  return tape_market_data(parse_tape_csv(text, path, read), spec);
}

}  // namespace foxhunt::data
