#pragma once
/// \file backtest.h
/// `foxhunt backtest`: the ensemble, and each model alone, run bar by bar through the serving
/// runtime (serving/serving.h) over bars after the training data, then scored with the
/// backtest arithmetic (data/backtest.h) against buy-and-hold, a volatility-targeted
/// buy-and-hold (the rule's target volatility, a 60-bar sample volatility), flat and a seeded
/// random policy, and each forecaster's next-bar quantiles scored against naive baselines
/// (data/forecast_eval.h). Every strategy gets a block-bootstrap Sharpe interval, the
/// probability that it beats buy-and-hold's Sharpe and its break-even cost against
/// buy-and-hold; a model that never takes a position is reported as idle, with the reason.
///
/// Which bars count: the bundles' data fingerprints say where training ended (the latest
/// last_timestamp of the four). Bars up to that time only warm the streaming state up and are
/// never scored (the run says how many it skipped); a --from inside the training range is
/// refused. Scoring also waits until every model is ready (feature warm-up plus its window).
/// No look-ahead: the decision at bar t is the serving runtime's output after bar t, which has
/// seen bars up to t only; it is held over bar t+1.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "foxhunt/core/device.h"
#include "foxhunt/data/backtest.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/forecast_eval.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::serving {

/// What to backtest.
struct BacktestJob {
  std::string bundles;  ///< directory with dqn/ ppo/ mamba2/ tft/ bundles
  std::string data;     ///< bars CSV ("" with `ticks`)
  /// A tape of prints instead of `data` (data/tape.h): its bars are built with the bundles'
  /// recorded spec, or `bar_spec` (tape_bar_spec: a different one is refused), then backtested
  /// as bars are.
  std::string ticks;
  std::optional<data::BarSpec> bar_spec;  ///< with `ticks`: the spec stated (none: recorded)
  data::TapeReadOptions tape_read = {};   ///< with `ticks`: bad prints refused or dropped
  /// Cost per unit of position change, basis points of the notional traded: a change of |dp| in
  /// the position (a fraction of capital) costs |dp| x cost_bps x 1e-4 of capital, on any bar
  /// kind. There is no per-contract fee: a fee F per contract of price P and multiplier M is
  /// F / (P x M) x 1e4 basis points (e.g. $2.50 on an E-mini at 1,650 x $50: ~0.3 bp).
  double cost_bps = 1.0;
  /// Bars per year that annualise the figures (and the rule's volatility targeting, where the
  /// caller sets it there too); 0: inferred from the scored bars (data/calendar.h), or from every
  /// bar fed where the scored ones are too few to show a session.
  double periods_per_year = 0.0;
  std::string from;    ///< first scored bar (Unix seconds or ISO 8601; "" = first after training)
  std::string to;      ///< last bar (inclusive; "" = the end of the data)
  Device device;       ///< "cpu", "cuda", "cuda:N"
  DecisionRule rule;   ///< the ensemble's decision rule
  uint64_t seed = 42;  ///< seed of the random policy and the bootstrap
  /// One series with bundles trained on a panel: the instrument whose calibration serves it
  /// (select_instrument); "" otherwise.
  std::string symbol;
  /// Average the models' explanations (the TFT's variable selection and attention) over the
  /// scored bars (`backtest --report` plots them); one more TFT forward per bar.
  bool explain = false;
  /// The cost terms beside cost_bps (data/cost_model.h: half the spread, fees, square-root
  /// impact at a notional, from the bars' volume); the defaults add none. The forecasters'
  /// hurdle is the linear cost per unit traded: cost_bps + spread_bps / 2 + fee_bps.
  data::CostModel costs;
};

/// Per-forecaster next-bar forecasts over the scored bars (log returns).
struct ForecastPath {
  std::vector<double> taus;                    ///< quantile levels
  std::vector<std::vector<double>> quantiles;  ///< [bar][tau], forecast at bar t for r_{t+1}
  std::vector<double> realized;                ///< r_{t+1} = log(c_{t+1} / c_t)
  data::ForecastEvaluation evaluation;         ///< scores, baselines, skill, calibration
};

/// The forecasters' hurdle of a job: the linear cost per unit traded in basis points,
/// cost_bps + costs.spread_bps / 2 + costs.fee_bps (cost_bps alone by default).
double hurdle_bps(const BacktestJob& job);

/// The warning when `rule` was fitted (`train all`: DecisionRule::fit records its cost model)
/// at other costs than `job` charges, naming each term that differs (an older fit: its linear
/// cost against hurdle_bps(job)). Its no-trade band, dead band and weights were chosen for those
/// costs, so the backtest scores a rule tuned for another market. Empty when they agree or the
/// rule was set by hand.
std::string rule_cost_warning(const DecisionRule& rule, const BacktestJob& job);

/// The result of a backtest.
struct BacktestRun {
  std::string data;                    ///< the CSV
  int64_t bars_in_file = 0;            ///< bars read
  int64_t training_end = 0;            ///< last training bar's time (Unix seconds)
  int64_t skipped_training_bars = 0;   ///< bars at or before training_end (warm-up only)
  int64_t warmup_bars = 0;             ///< bars fed before the first scored bar
  int64_t first_timestamp = 0;         ///< first scored bar
  int64_t last_timestamp = 0;          ///< last scored bar
  double periods_per_year = 0;         ///< given, else inferred from the timestamps
  std::string periods_per_year_basis;  ///< how, in words (data::PeriodsPerYear::describe())
  std::vector<int64_t> timestamps;     ///< scored bars
  /// The warm-up's bars (fed before the first scored bar): with `timestamps`, the calendar where
  /// the scored bars are too few to show a session.
  std::vector<int64_t> warmup_timestamps;
  std::vector<double> closes;   ///< scored bars' closes
  std::vector<double> volumes;  ///< scored bars' volumes (the cost model's ADV)
  /// Positions per strategy: "ensemble", each model name, "buy_and_hold", "flat", "random".
  std::map<std::string, std::vector<double>> positions;
  /// Backtest of each strategy.
  std::map<std::string, data::BacktestResult> results;
  /// Forecasters' next-bar forecasts and their evaluation.
  std::map<std::string, ForecastPath> forecasts;
  /// The strategies in display order.
  std::vector<std::string> order;
  /// Each model's largest |signal| over the scored bars (run alone).
  std::map<std::string, double> max_abs_signal;
  /// Models that never took a position over the scored bars (exposure 0), with the reason.
  std::map<std::string, std::string> idle;
  /// Fewer bar returns than periods_per_year were scored (annualised figures extrapolate).
  bool short_window = false;
  /// The decision rule the strategies ran (its cost and periods_per_year resolved).
  DecisionRule rule;
  /// Log returns of the bars before the first scored bar (the baselines' history).
  std::vector<double> past_returns;
  /// True once score_backtest has run (baselines, results, forecast evaluations filled).
  bool scored = false;
  /// With BacktestJob::explain: per model, the sums of its explanations over the scored bars
  /// and their count (explanation_mean divides).
  std::map<std::string, models::Explanation> explanation_sums;
  std::map<std::string, int64_t> explained_bars;  ///< see explanation_sums
  /// The mean explanation of `model` over the scored bars (empty when none was recorded).
  models::Explanation explanation_mean(const std::string& model) const;

  /// Every metric: {data, bars, training_end, ..., short_window, note, rule, strategies: {name:
  /// metrics}, idle: {model: reason}, forecasters: {name: evaluation + skill + coverage_p10_p90},
  /// explain: {model: mean explanation (explanation_json) + bars} when explained}.
  nlohmann::json to_json() const;
  /// Terminal tables.
  std::string table() const;
};

/// Runs the job (a bars CSV, or a tape's bars). Throws InputError for bad input (missing
/// bundles, unreadable data, --from inside the training range, no bars after training, a bar
/// spec other than the bundles').
BacktestRun run_backtest_job(const BacktestJob& job, std::ostream& log);

/// The ensemble and every strategy on an already loaded series and bundles (what
/// run_backtest_job does after reading its inputs): stream_backtest then score_backtest.
BacktestRun run_backtest_on(const std::vector<Bundle>& bundles, const data::BarSeries& series,
                            const BacktestJob& job, std::ostream& log);

/// The streaming half: runs the ensemble and each model alone bar by bar and records, per scored
/// bar, the timestamp, close, each model strategy's position and each forecaster's quantiles
/// (one per scored bar), with the warm-up's past_returns, the rule and max_abs_signal. Runs of
/// consecutive ranges can be joined (walk-forward: jobs/walk_forward.h) before scoring. The
/// series is streamed as a panel of one instrument (the one its bundles were selected for, else
/// "series"): the panel backtest's own stream (panel_backtest.h), one path for both.
BacktestRun stream_backtest(const std::vector<Bundle>& bundles, const data::BarSeries& series,
                            const BacktestJob& job, std::ostream& log);

/// Adds one bar's explanation of `model` to the run's sums (stream_backtest does, with explain).
void add_explanation(BacktestRun& run, const std::string& model, const models::Explanation& e);

/// The scoring half: the baselines' positions, every strategy's backtest and statistics against
/// buy-and-hold, the idle models and the forecasters' evaluations (the forecast at the last bar
/// has no outcome and is dropped). InputError for a run already scored or inconsistent sizes.
void score_backtest(BacktestRun& run, const BacktestJob& job);

/// The verdict `foxhunt backtest` exits 1 on (and validate's backtest step): every forecaster's
/// next-bar quantiles beat its best naive baseline on the scored bars (skill >= 0). One line per
/// forecaster that does not, naming its skill and the baseline ("tft: skill -1.20% vs
/// rolling_quantiles_w250"); empty when the run passes (a run without forecasters passes).
std::vector<std::string> forecaster_gate_failures(const BacktestRun& run);

}  // namespace foxhunt::serving
