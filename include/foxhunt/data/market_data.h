#pragma once
/// \file market_data.h
/// A job's market data, read once into one type: a panel (a CSV with a symbol column), or one
/// series (a bars CSV, or the embedded synthetic default). The one place that decides whether an
/// input file is a panel; a stream read line by line (predict from stdin) asks
/// has_symbol_column of its header instead (panel.h).

#include <optional>
#include <string>
#include <string_view>

#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/data/tape.h"

namespace foxhunt::data {

/// The bars of one input.
struct MarketData {
  std::optional<Panel> panel;  ///< a CSV with a symbol column: its instruments
  BarSeries series;            ///< otherwise the one series (a CSV or the synthetic default)
  /// Bars built from a tape of prints (load_tape_market_data): their spec. None: plain bars.
  std::optional<BarSpec> bar_spec;
  /// Built from a tape: the prints its reader dropped (TapeBadPrintPolicy::kDrop).
  TapeDrops dropped;
  /// True for a panel.
  bool is_panel() const { return panel.has_value(); }
  /// True for bars built from a tape: every series carries its flow (BarSeries::flow), so the
  /// datasets built from them add the flow feature columns (flow_features.h).
  bool has_flow() const;
};

/// The bars of `path`: a panel when its header has a symbol column, else one series; for an
/// empty path the embedded synthetic default (SyntheticOptions{}). InputError naming the file and
/// line for a bad file, and naming the bar builder for a tape of prints (tape.h).
MarketData load_market_data(const std::string& path);

/// load_market_data of a file's `text` already read (`source` names it in messages).
MarketData parse_market_data(std::string_view text, const std::string& source);

/// The bars of a tape: `spec`'s bars of every print (build_tape_bars), each with its flow, as one
/// series for a tape without a symbol column, or (time bars only) a panel for one with it
/// (build_tape_panel; its InputError names the tape and the spec for other kinds). `bar_spec` and
/// `dropped` are set. InputError for a tape without prints.
MarketData tape_market_data(const Tape& tape, const BarSpec& spec);

/// tape_market_data of the tape CSV at `path`, read with `read` (its bad-print policy and epoch
/// unit). The library entry point of training and backtesting on a tape: jobs take the result
/// as their preloaded market data. InputError naming the file for a bad tape, and for a bar CSV
/// given as a tape.
MarketData load_tape_market_data(const std::string& path, const BarSpec& spec,
                                 const TapeReadOptions& read = {});

}  // namespace foxhunt::data
