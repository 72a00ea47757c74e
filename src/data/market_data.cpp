#include "foxhunt/data/market_data.h"

#include "foxhunt/core/file_io.h"

namespace foxhunt::data {

MarketData load_market_data(const std::string& path) {
  MarketData bars;
  if (path.empty()) {
    bars.series = generate_synthetic(SyntheticOptions{});
    return bars;
  }
  const std::string text = read_file(path);
  if (has_symbol_column(text))
    bars.panel = parse_panel_csv(text, path);
  else
    bars.series = parse_bars_csv(text, path);
  return bars;
}

}  // namespace foxhunt::data
