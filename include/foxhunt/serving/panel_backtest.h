#pragma once
/// \file panel_backtest.h
/// `foxhunt backtest` on a panel (data/panel.h): every symbol backtested as backtest.h does for
/// one series (the ensemble, each model alone, buy-and-hold, flat, random; forecasters against
/// naive baselines), then each strategy as a portfolio across the symbols. One stream serves
/// them all: the symbols go through the same desks one timestamp at a time (a single series is
/// this stream on a panel of one), each symbol's numbers those of its single-series backtest.
///
/// Portfolio rule (equal risk): symbol s gets weight w_s = (1 / sigma_s) / sum_k (1 / sigma_k),
/// where sigma_s is the standard deviation of its log returns over the bars before its first
/// scored bar (known when scoring starts: no look-ahead). At each timestamp of the union of the
/// symbols' scored bars, the portfolio's return is sum_s w_s r_s, with r_s the symbol's net
/// strategy return over that bar (0 for a symbol without one then: a holiday of its market).
/// Turnover and costs are the weighted sums of the symbols'; the other metrics come from the
/// portfolio's returns (data::fill_return_metrics), annualised at the symbols' median bar rate.
/// Each portfolio strategy also gets its bootstrap Sharpe interval and, on paired resamples, the
/// probability that it beats the buy-and-hold portfolio; the break-even cost needs one price
/// series and is given per symbol only.
///
/// Pooled forecaster scores: over every symbol's scored points, the mean pinball loss of the
/// model and of each symbol's best naive baseline (points-weighted), skill = 1 - model /
/// baseline, and the P10-P90 coverage (points-weighted).
///
/// A symbol with too few bars after the training data is left out with the reason (`skipped`);
/// InputError when none is left.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "foxhunt/data/backtest.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/serving/backtest.h"

namespace foxhunt::serving {

/// One forecaster scored over every symbol.
struct PooledForecast {
  int64_t symbols = 0;          ///< symbols scored
  int64_t points = 0;           ///< forecasts scored
  double model_pinball = 0;     ///< points-weighted mean pinball loss
  double baseline_pinball = 0;  ///< points-weighted best-baseline pinball loss
  double skill = 0;             ///< 1 - model / baseline
  double coverage_p10_p90 = 0;  ///< points-weighted P10-P90 coverage
};

/// The result of a panel backtest.
struct PanelBacktestRun {
  std::string data;                                       ///< the CSV
  std::vector<std::string> symbols;                       ///< backtested symbols, panel order
  std::map<std::string, std::string> skipped;             ///< symbol -> why it was left out
  std::map<std::string, BacktestRun> runs;                ///< per symbol
  std::map<std::string, double> sigma;                    ///< pre-scoring return stdev per symbol
  std::map<std::string, double> weights;                  ///< portfolio weights (sum 1)
  std::vector<int64_t> timestamps;                        ///< the portfolio's bars (union)
  std::vector<std::string> order;                         ///< strategies, display order
  std::map<std::string, data::BacktestResult> portfolio;  ///< per strategy
  std::map<std::string, PooledForecast> pooled;           ///< per forecaster

  /// {data, symbols, skipped, weights, sigma, portfolio: {strategy: metrics}, pooled:
  /// {model: ...}, per_symbol: {symbol: BacktestRun::to_json()}}.
  nlohmann::json to_json() const;
  /// Terminal tables: the portfolio, then one line per symbol and strategy.
  std::string table() const;
  /// The portfolio's part of table(): weights, each strategy's line, the pooled forecasts.
  std::string portfolio_table() const;
};

/// Backtests every symbol of `panel` with `bundles` (see the file comment).
/// The panel's verdict (`foxhunt backtest` exits 1 on it): every forecaster's pooled skill over
/// the symbols is >= 0 against each symbol's best naive baseline. One line per forecaster that
/// falls short; empty when the run passes.
std::vector<std::string> forecaster_gate_failures(const PanelBacktestRun& run);

PanelBacktestRun run_panel_backtest(const std::vector<Bundle>& bundles, const data::Panel& panel,
                                    const BacktestJob& job, std::ostream& log);

}  // namespace foxhunt::serving
