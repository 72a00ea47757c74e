#pragma once
/// \file market_data.h
/// A job's market data, read once into one type: a panel (a CSV with a symbol column), or one
/// series (a bars CSV, or the embedded synthetic default). The one place that decides whether an
/// input file is a panel; a stream read line by line (predict from stdin) asks
/// has_symbol_column of its header instead (panel.h).

#include <optional>
#include <string>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/panel.h"

namespace foxhunt::data {

/// The bars of one input.
struct MarketData {
  std::optional<Panel> panel;  ///< a CSV with a symbol column: its instruments
  BarSeries series;            ///< otherwise the one series (a CSV or the synthetic default)
  /// True for a panel.
  bool is_panel() const { return panel.has_value(); }
};

/// The bars of `path`: a panel when its header has a symbol column, else one series; for an
/// empty path the embedded synthetic default (SyntheticOptions{}). InputError naming the file and
/// line for a bad file, and naming the bar builder for a tape of prints (tape.h).
MarketData load_market_data(const std::string& path);

}  // namespace foxhunt::data
