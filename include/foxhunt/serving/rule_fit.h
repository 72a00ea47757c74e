#pragma once
/// \file rule_fit.h
/// Fits the ensemble's decision on validation bars — never on bars a backtest scores — and
/// writes the models' rule only where its edge survives the search that found it.
///
/// The ensemble runs bar by bar over the series with the base rule (equal weights), and on the
/// validation bars records each model's signal, the volatility-targeted long's position and the
/// bar's volume once every model is ready. Objective: the annualised Sharpe ratio after costs
/// (cost_bps and the cost model of `costs`: spread, fees, square-root impact at its notional,
/// data/cost_model.h, charged per unit of position change as run_backtest charges them) of the
/// position the decision takes (decide_position: weights, clamp, dead band, then the no-trade
/// band against the position held) held over the next bar, with run_backtest's arithmetic. The
/// volatility of the impact term warms up on each segment's first bars (no earlier returns).
///
/// The candidates, each a trial:
/// 1. Every weight vector of the models on the simplex with a grid step (0.1: 286 vectors for
///    four models; ties go to the vector nearest equal weights), without a band: the best, w*.
///    Then w* at every other no-trade band of `bands` ({0, 0.05, 0.1, 0.2, 0.3}; ties go to the
///    smaller band): the best, b*. (The band is fitted after the weights, not jointly: jointly, a
///    band lets noise models buy a share of the weights.) It is shrunk
///    toward equal weights, w = (1 - shrinkage) w* + shrinkage w_equal (shrinkage 0.5 by
///    default: a few hundred validation bars cannot tell four models apart well), but the shrunk
///    vector (at b*) is kept only when it scores at least w*'s objective on the fitted bars:
///    shrinkage never makes the written rule worse than the best candidate it came from.
/// 2. With `baselines` (the default): that models' vector mixed with the volatility-targeted
///    long (DecisionRule::vol_target_weight a share b of the total, b on the grid strictly
///    inside (0, 1)) at b*, and the two baselines alone, without a band (as the backtests run
///    them): the volatility-targeted long and flat.
/// The best candidate by the objective is chosen; a baseline wins ties. A candidate that trades
/// on the models must also pass the deflation: its Deflated Sharpe Ratio (data/sharpe_stats.h;
/// N = every trial scored, the skewness and kurtosis of its own bar returns, V below) at least
/// `dsr_threshold` (0.95). V, the variance of the trials' per-bar Sharpe ratios under no skill:
/// by default (DeflationVariance::kSampling) the sampling variance of a per-bar Sharpe ratio
/// with no skill over the T pooled bar returns, 1 / (T - 1) (the PSR's own variance at SR = 0,
/// normal returns): what N independent trials without an edge would scatter by. The paper's
/// estimate, the cross-sectional variance of the trials' Sharpe ratios (kTrials, always recorded
/// as sharpe_variance), assumes the trials are that: on a grid of weight vectors a model with a
/// real edge spreads the candidates' Sharpe ratios by its edge, and the edge deflates itself
/// away (a planted 70%-accurate signal over 1,000 bars: DSR 0.12 with it, 1.00 with 1 / (T - 1)).
/// N counts correlated candidates as independent, which errs on the side of the baseline.
/// Otherwise the rule is the
/// better baseline on the validation bars (flat, or the volatility-targeted long), and the fit
/// says so: `chosen` is "models", "models+vol_target", "vol_target" or "flat", and `reason`
/// says why. A model with no edge then has weight 0, not a share by default.
///
/// The written rule carries its band (DecisionRule::band; 0 for a baseline).
///
/// Weights are written scaled so that their total is the number of models (equal weights are 1
/// each; a mix gives the volatility-targeted long its share of that total); the
/// volatility-targeted long alone has weight 1 and the models 0; flat has every weight 0.
///
/// One approximation, stated: the RL policies see the position the base rule's ensemble held
/// (their observation carries it), not the one each candidate would have held; re-running the
/// ensemble per candidate would cost 286 runs.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::serving {

/// The variance V of the trials' Sharpe ratios in the deflation (see the file comment).
enum class DeflationVariance {
  kSampling,  ///< 1 / (T - 1): a per-bar Sharpe ratio's sampling variance without skill
  kTrials,    ///< the cross-sectional variance of the trials' per-bar Sharpe ratios (the paper's)
};

/// Settings of fit_decision_rule.
struct RuleFitOptions {
  double grid_step = 0.1;  ///< weight grid step on the simplex, in (0, 1], 1 / step an integer
  double shrinkage = 0.5;  ///< weight of equal weights in the shrunk vector, in [0, 1]
  double cost_bps = 1.0;   ///< cost charged by the objective (and the forecasters' hurdle)
  /// The baselines (flat, the volatility-targeted long, its mixes with the models) are
  /// candidates, and the deflation gate applies; false: the models' vector alone (step 1).
  bool baselines = true;
  /// Deflated Sharpe Ratio a candidate trading on the models needs to be written, in [0, 1]:
  /// below it the best baseline is (0.95: a 5% chance that the search found its Sharpe in
  /// noise; 0 turns the gate off).
  double dsr_threshold = 0.95;
  /// V of the deflation.
  DeflationVariance deflation_variance = DeflationVariance::kSampling;
  /// The no-trade bands fitted with the weights (each in [0, 1], at least one; every band is
  /// a trial per weight vector).
  std::vector<double> bands = {0.0, 0.05, 0.1, 0.2, 0.3};
  /// The cost terms beside cost_bps that the objective charges (data/cost_model.h). The
  /// forecasters' hurdle (DecisionRule::cost_bps of the recording run and of the written rule) is
  /// the linear cost per unit traded, cost_bps + spread_bps / 2 + fee_bps.
  data::CostModel costs = {};
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
  double sharpe_best = 0;                        ///< objective at w* with its band b*
  double sharpe_equal = 0;                       ///< objective at equal weights, band 0
  double sharpe_fitted = 0;                      ///< objective at the result
  std::map<std::string, double> sharpe_alone;    ///< each model alone (weight 1), band 0
  std::map<std::string, double> exposure_alone;  ///< each model alone: share of bars held
  int64_t candidates = 0;                        ///< weight vectors tried on the simplex
  int64_t band_candidates = 0;                   ///< no-trade bands tried per weight vector
  double band = 0;                               ///< the written rule's no-trade band
  double best_band = 0;                          ///< b*: the band of w*
  /// The objective of w* at each band of the search (keyed by the band, "%.4g").
  std::map<std::string, double> sharpe_band;
  /// Of the written rule on the validation bars: position change per year and the costs paid
  /// per year (return units), after the band.
  double turnover_per_year = 0;
  double cost_per_year = 0;  ///< see turnover_per_year
  /// What the written rule holds: "models", "models+vol_target", "vol_target" or "flat".
  std::string chosen;
  std::string reason;            ///< why it was chosen, in words
  double vol_target_weight = 0;  ///< the written rule's DecisionRule::vol_target_weight
  double sharpe_shrunk = 0;      ///< objective at the shrunk vector (step 1)
  bool shrinkage_kept = false;   ///< the shrunk vector scored no worse than w* and was kept
  double sharpe_models = 0;      ///< objective at the models' vector kept by step 1
  double sharpe_vol_target = 0;  ///< objective of the volatility-targeted long alone
  double sharpe_flat = 0;        ///< objective of flat (0)
  std::map<std::string, double> sharpe_mix;  ///< per share b of the volatility-targeted long
  int64_t trials = 0;                        ///< every candidate scored (N of the deflation)
  double sharpe_variance = 0;                ///< variance of the trials' per-bar Sharpe ratios
  double dsr_variance = 0;                   ///< V the deflation used (options.deflation_variance)
  double dsr_candidate = 0;                  ///< DSR of the best candidate trading on the models
  /// Of the written rule's bar returns on the validation bars: per-bar Sharpe, skewness,
  /// kurtosis (not excess), PSR against 0 and DSR against the search (data/sharpe_stats.h).
  double sharpe_per_bar = 0;
  double skewness = 0;  ///< see sharpe_per_bar
  double kurtosis = 3;  ///< see sharpe_per_bar
  double psr = 0;       ///< see sharpe_per_bar
  double dsr = 0;       ///< see sharpe_per_bar
};

/// {bars, first_timestamp, last_timestamp, periods_per_year, objective, method, shrinkage,
/// grid_step, cost_bps, costs (the cost model), bands, baselines, dsr_threshold, band,
/// best_band, band_candidates, sharpe_band, turnover_per_year, cost_per_year, best_weights,
/// weights, sharpe_best,
/// sharpe_equal, sharpe_fitted, sharpe_alone, exposure_alone, candidates, chosen, reason,
/// vol_target_weight, sharpe_shrunk, shrinkage_kept, sharpe_models, sharpe_vol_target,
/// sharpe_flat, sharpe_mix, trials, sharpe_variance, dsr_variance, deflation_variance
/// ("sampling" | "trials"), dsr_candidate, sharpe_per_bar, skewness,
/// kurtosis, psr, dsr, note}.
nlohmann::json to_json(const RuleFit& f, const RuleFitOptions& options);

/// Fits the weights of `base` on the bars of `series` with timestamps in [first, last] (bars
/// before `first` warm the models up). InputError when fewer than 20 bars there have every model
/// ready, or for bad options.
RuleFit fit_decision_rule(const std::vector<Bundle>& bundles, const data::BarSeries& series,
                          int64_t first, int64_t last, const DecisionRule& base = {},
                          const RuleFitOptions& options = {});

/// One segment's validation bars as the fit reads them: per bar with every model ready, the
/// models' signals (one per model, the same models in the same order on every bar), the
/// volatility-targeted long's position (BarDecision::vol_target) and the close.
struct RuleFitBars {
  std::vector<std::vector<ModelSignal>> signals;  ///< per bar, one per model
  std::vector<double> vol_target;                 ///< per bar, the baseline's position
  std::vector<double> closes;                     ///< per bar
  std::vector<int64_t> timestamps;                ///< per bar, Unix seconds, increasing
  /// Per bar, the traded volume (the impact term's ADV); empty: no impact is charged.
  std::vector<double> volumes;
};

/// The fit itself on recorded bars (what the overloads above and below record by streaming the
/// ensemble): the candidates, the deflation and the written rule (file comment). `base` gives
/// every setting but the weights (its periods_per_year resolved or not; the rule is written as
/// given). InputError for sizes that differ, models that change between bars, fewer than 20
/// bars in all or bad options.
RuleFit fit_decision_rule(const std::vector<RuleFitBars>& recorded, const DecisionRule& base = {},
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

/// The Deflated Sharpe Ratio of bar returns `returns` (a backtest of `rule`) against the search
/// that fitted the rule, as its `fit` recorded it (trials, dsr_variance); nullopt for a rule
/// without those figures (hand-set, or fitted before they were recorded) or no returns.
std::optional<double> fitted_rule_dsr(const DecisionRule& rule, const std::vector<double>& returns);

}  // namespace foxhunt::serving
