#pragma once
/// \file rule_fit.h
/// Fits the ensemble's weights on validation bars — never on bars a backtest scores.
///
/// The ensemble runs bar by bar over the series with the base rule (equal weights), and on the
/// validation bars records each model's signal once every model is ready. Objective: the
/// annualised Sharpe ratio after costs of the combined decision (combine_signals: weights,
/// clamp, dead band) held over the next bar, with run_backtest's arithmetic. Search: every
/// weight vector on the simplex with a grid step (0.1: 286 vectors for four models); ties go
/// to the vector nearest equal weights. The fitted vector w* is shrunk toward equal weights,
/// w = (1 - shrinkage) w* + shrinkage w_equal (shrinkage 0.5 by default): a few hundred
/// validation bars cannot tell four models apart well, and equal weights are the hard baseline
/// to beat out of sample. Weights are written scaled so that equal weights are 1 each.
///
/// One approximation, stated: the RL policies see the position the base rule's ensemble held
/// (their observation carries it), not the one each candidate would have held; re-running the
/// ensemble per candidate would cost 286 runs.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::serving {

/// Settings of fit_decision_rule.
struct RuleFitOptions {
  double grid_step = 0.1;  ///< weight grid step on the simplex, in (0, 1], 1 / step an integer
  double shrinkage = 0.5;  ///< weight of equal weights in the result, in [0, 1]
  double cost_bps = 1.0;   ///< cost charged by the objective (and the forecasters' hurdle)
};

/// The result of a fit: the rule (with `fit` holding the figures below as JSON) and the figures.
struct RuleFit {
  DecisionRule rule;                             ///< the fitted rule
  int64_t bars = 0;                              ///< validation bars scored
  int64_t first_timestamp = 0;                   ///< first validation bar scored
  int64_t last_timestamp = 0;                    ///< last validation bar scored
  double periods_per_year = 0;                   ///< of the validation bars
  std::map<std::string, double> best_weights;    ///< w* (sum 1)
  std::map<std::string, double> weights;         ///< the result (equal weights = 1 each)
  double sharpe_best = 0;                        ///< objective at w*
  double sharpe_equal = 0;                       ///< objective at equal weights
  double sharpe_fitted = 0;                      ///< objective at the result
  std::map<std::string, double> sharpe_alone;    ///< each model alone (weight 1, others 0)
  std::map<std::string, double> exposure_alone;  ///< each model alone: share of bars held
  int64_t candidates = 0;                        ///< weight vectors tried
};

/// {bars, first_timestamp, last_timestamp, periods_per_year, objective, method, shrinkage,
/// grid_step, cost_bps, best_weights, weights, sharpe_best, sharpe_equal, sharpe_fitted,
/// sharpe_alone, exposure_alone, candidates, note}.
nlohmann::json to_json(const RuleFit& f, const RuleFitOptions& options);

/// Fits the weights of `base` on the bars of `series` with timestamps in [first, last] (bars
/// before `first` warm the models up). InputError when fewer than 20 bars there have every model
/// ready, or for bad options.
RuleFit fit_decision_rule(const std::vector<Bundle>& bundles, const data::BarSeries& series,
                          int64_t first, int64_t last, const DecisionRule& base = {},
                          const RuleFitOptions& options = {});

/// One instrument's part of a fit on a panel: the bundles serving it (select_instrument), its
/// bars and its validation range [first, last].
struct RuleFitSegment {
  std::vector<Bundle> bundles;              ///< the models, calibrated for this instrument
  const data::BarSeries* series = nullptr;  ///< its bars (outlives the fit)
  int64_t first = 0;                        ///< first validation timestamp
  int64_t last = 0;                         ///< last validation timestamp
};

/// Fits one set of weights on several instruments: each segment is streamed on its own (its
/// position starts flat) and the objective is the Sharpe of all segments' bar returns pooled
/// (`bars` counts them all; the timestamps span the segments; periods_per_year is that of the
/// segment with the most bars). InputError when the segments have fewer than 20 ready bars in
/// all. One segment: the same as the overload above.
RuleFit fit_decision_rule(const std::vector<RuleFitSegment>& segments,
                          const DecisionRule& base = {}, const RuleFitOptions& options = {});

}  // namespace foxhunt::serving
