#pragma once
// The streaming half of every backtest (private to serving): the ensemble and each model alone
// run over the symbols of a panel through desks, one BacktestRun per symbol. A single series is a
// panel of one (stream_backtest); a panel backtest scores each symbol's run, then the portfolio
// (panel_backtest.cpp).

#include <exception>
#include <ostream>
#include <string>
#include <vector>

#include "foxhunt/data/panel.h"
#include "foxhunt/serving/backtest.h"
#include "foxhunt/serving/bundle.h"

namespace foxhunt::serving::detail {

// One symbol's streamed run (not yet finished: finish_stream), or why it was left out before
// streaming: an InputError (a symbol a panel bundle was not trained on, a bad job).
struct SymbolStream {
  std::string symbol;
  BacktestRun run;
  std::exception_ptr error;
};

// Streams every symbol of `panel` (see backtest.h: stream_backtest), in the panel's order.
// Symbols whose decision rules resolve alike (the same periods_per_year for the ensemble and
// each model alone) share one set of desks and are streamed together, one timestamp at a time;
// each instrument is forwarded alone (DeskOptions::max_batch 1) through its own models' streams,
// so that its numbers are those of a desk of one, bit for bit.
std::vector<SymbolStream> stream_symbols(const std::vector<Bundle>& bundles,
                                         const data::Panel& panel, const BacktestJob& job);

// The end of one symbol's stream: InputError for fewer than 3 scored bars; logs the bars that
// only warmed up inside the training range; the forecasters' quantile levels.
void finish_stream(BacktestRun& run, const std::vector<Bundle>& bundles, const BacktestJob& job,
                   std::ostream& log);

}  // namespace foxhunt::serving::detail
