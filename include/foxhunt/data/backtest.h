#pragma once
/// \file backtest.h
/// Backtest arithmetic for a single instrument: positions in, returns, equity and the usual
/// performance metrics out. Torch-free.
///
/// Conventions (n bars, t = 0..n-1):
/// - Inputs are closes c_0..c_{n-1} and target positions p_0..p_{n-1} in [-1, 1] (-1 fully short,
///   0 flat, 1 fully long). p_t is decided at the close of bar t, using information up to and
///   including bar t, and is held over bar t+1. There is no look-ahead as long as the caller
///   computes p_t from data up to t only.
/// - The strategy's simple return over bar t+1 (t = 0..n-2) is
///       r_{t+1} = p_t * (c_{t+1} / c_t - 1) - cost_t(|p_t - p_{t-1}|),   p_{-1} = 0,
///   so entering the first position costs, and every change of position is charged on the bar
///   that it is held over. cost_t is the cost model's (data/cost_model.h): by default the flat
///   cost_bps / 1e4 per unit of position change; with BacktestOptions::costs also half the
///   quoted spread, fees per notional or per contract and a square-root market impact.
/// - The last position p_{n-1} has no next bar: it earns nothing, costs nothing and does not
///   count in turnover, exposure or hit rate (it is the "current" signal, not a traded one).
/// - The equity curve starts at E_0 = 1 and compounds: E_{t+1} = E_t * (1 + r_{t+1}). A bar
///   return <= -1 (a short losing more than everything) ruins the account: equity becomes 0 and
///   stays 0 (ruin is absorbing, the curve never turns negative).
/// - N = n - 1 is the number of bar returns; "per year" figures scale by periods_per_year / N.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <utility>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/cost_model.h"

namespace foxhunt::data {

/// Settings of the bootstrap statistics: a circular moving-block bootstrap over bar returns (each
/// resample concatenates blocks of `block` consecutive returns, wrapping around the end, from
/// uniformly drawn starts; the same scheme as data/forecast_eval.h). Blocks keep volatility
/// clustering and short-range dependence that an i.i.d. bootstrap would destroy.
struct BootstrapOptions {
  int resamples = 1000;  ///< resamples (>= 1)
  size_t block = 20;     ///< block length in bars (>= 1)
  uint64_t seed = 42;    ///< foxhunt::Rng seed; the same seed draws the same resamples
};

/// Settings of run_backtest.
struct BacktestOptions {
  /// Cost per unit of position change, in basis points of notional (1 bp = 1e-4); >= 0.
  double cost_bps = 1.0;
  /// Bars per year, used to annualise (252 for daily business bars; see infer_periods_per_year).
  double periods_per_year = 252;
  /// The Sharpe interval's bootstrap.
  BootstrapOptions bootstrap = {};
  /// The cost terms beside cost_bps (data/cost_model.h); the defaults add none.
  CostModel costs = {};
};

/// Per-bar series and metrics of one backtest (see the file comment for the conventions).
struct BacktestResult {
  /// Strategy bar returns r_1..r_{n-1} (n-1 values), net of costs.
  std::vector<double> returns;
  /// Equity E_0..E_{n-1} (n values), E_0 = 1.
  std::vector<double> equity;
  /// Drawdown E_t / max_{s<=t} E_s - 1 (n values, each <= 0).
  std::vector<double> drawdown;

  /// E_{n-1} - 1.
  double total_return = 0.0;
  /// Geometric annualised return E_{n-1}^(periods_per_year / N) - 1 (-1 after ruin).
  double annualized_return = 0.0;
  /// Sample standard deviation of the bar returns times sqrt(periods_per_year) (0 when N < 2).
  double volatility = 0.0;
  /// mean(r) / stdev(r) * sqrt(periods_per_year), risk-free rate 0; 0 when stdev is 0 or N < 2.
  double sharpe = 0.0;
  /// 2.5% and 97.5% quantiles of the annualised Sharpe over block-bootstrap resamples of the bar
  /// returns (BootstrapOptions): a 95% interval.
  double sharpe_lo = 0.0;
  double sharpe_hi = 0.0;  ///< see sharpe_lo
  /// Non-annualised figures, for windows too short to annualise honestly: the mean bar return
  /// and mean / stdev of the bar returns (sharpe = sharpe_per_bar * sqrt(periods_per_year)).
  double mean_return_per_bar = 0.0;
  double sharpe_per_bar = 0.0;  ///< see mean_return_per_bar
  /// Probabilistic Sharpe Ratio against a benchmark Sharpe of 0 (data/sharpe_stats.h): the
  /// probability that the true Sharpe ratio is above 0, given sharpe_per_bar over the bar returns
  /// and their skewness and kurtosis. 0.5 without variation.
  double psr = 0.0;
  /// Deflated Sharpe Ratio (data/sharpe_stats.h) for a strategy chosen by a search that recorded
  /// its trials (the fitted decision rule: serving/rule_fit.h); unset otherwise.
  std::optional<double> dsr;
  /// True when fewer bar returns than periods_per_year were scored: annualised figures then
  /// extrapolate less than a year (a Sharpe of -61 over 1,000 minute bars says little).
  bool short_window = false;
  /// Against a reference strategy (buy-and-hold in `foxhunt backtest`; compare_to_reference):
  /// the bootstrap probability that this strategy's Sharpe beats the reference's, on paired
  /// resamples (the same blocks of bars for both). Unset for the reference itself.
  std::optional<double> prob_beats_reference;
  /// The cost (bps) at which this strategy's total return falls to the reference's at the same
  /// cost (break_even_cost_bps). Unset for the reference itself and when it beats the reference
  /// at every cost up to 1,000 bps; 0 when it does not beat it even without costs.
  std::optional<double> break_even_cost_bps;
  /// True when break_even_cost_bps is unset because it beats the reference at every cost (a
  /// strategy that trades no more than the reference and earns more).
  bool beats_reference_at_any_cost = false;
  /// mean(r) / sqrt(mean(min(r, 0)^2)) * sqrt(periods_per_year); 0 when no bar return is
  /// negative (the downside deviation is 0), as sharpe is 0 without variation.
  double sortino = 0.0;
  /// Minimum of `drawdown` (<= 0; -0.2 is a 20% fall from a previous peak).
  double max_drawdown = 0.0;
  /// Longest run of consecutive bars with equity below its previous peak (a run still open at
  /// the end counts up to the last bar).
  int64_t max_drawdown_duration_bars = 0;
  /// Sum of |p_t - p_{t-1}| for t = 0..n-2, including the first entry from p_{-1} = 0.
  double turnover = 0.0;
  /// turnover / N * periods_per_year.
  double turnover_per_year = 0.0;
  /// Among the bars held with a non-zero position, the fraction whose net return is > 0;
  /// 0 when no bar holds a position.
  double hit_rate = 0.0;
  /// Fraction of the N held bars with p_t != 0.
  double exposure = 0.0;
  /// Sum of the per-bar cost deductions cost_t(|p_t - p_{t-1}|) (in return units, not
  /// compounded): the costs paid, cost_flat + cost_spread + cost_fees + cost_impact.
  double total_cost = 0.0;
  double cost_flat = 0.0;    ///< the flat cost_bps part of total_cost
  double cost_spread = 0.0;  ///< the half-spread part of total_cost
  double cost_fees = 0.0;    ///< the fees (per notional and per contract) part of total_cost
  double cost_impact = 0.0;  ///< the market-impact part of total_cost (0 without a notional)
  /// Sum of p_t * (c_{t+1} / c_t - 1): the return before any cost (not compounded).
  double gross_return = 0.0;
  /// The notional (in the price's currency) at which the square-root impact eats the edge
  /// before impact (data/cost_model.h: capacity_notional); unset without volume, trades or k.
  std::optional<double> capacity;
  /// The cost terms used beside cost_bps.
  CostModel cost_model;
  /// Number of bars n (closes given).
  int64_t bars = 0;
  /// The cost used, in basis points.
  double cost_bps = 0.0;
  /// The annualisation factor used.
  double periods_per_year = 0.0;
};

/// Runs the backtest of `positions` on `closes`. Throws InputError "[backtest] ..." when the sizes
/// differ, n < 2, a close is not finite and > 0, a position is NaN or outside [-1, 1], the cost
/// is negative or not finite, or periods_per_year is not finite and > 0; messages name the index.
/// `market` gives the per-bar volumes, quoted spreads and past returns of the cost model
/// (bar_cost_rates' InputErrors for bad ones).
BacktestResult run_backtest(const std::vector<double>& closes, const std::vector<double>& positions,
                            const BacktestOptions& options = {},
                            const MarketCostInputs& market = {});

/// Fills every series and metric of `res` from its bar returns `res.returns` (net of costs)
/// and `res.periods_per_year`, as run_backtest does; `held[t]` says whether return t was earned
/// with a position (hit rate, exposure). `turnover` and `total_cost` are kept as given (so
/// turnover_per_year follows them). For returns that come from no single price series: a
/// portfolio of several instruments' strategy returns. InputError for no returns, a flag count
/// that differs, or a bad periods_per_year.
void fill_return_metrics(BacktestResult& res, const std::vector<bool>& held,
                         const BootstrapOptions& bootstrap = {});

/// 95% interval (2.5% and 97.5% quantiles) of the annualised Sharpe over block-bootstrap
/// resamples of `returns`. {0, 0} for fewer than 2 returns. InputError for bad options.
std::pair<double, double> sharpe_interval(const std::vector<double>& returns,
                                          double periods_per_year,
                                          const BootstrapOptions& options = {});

/// Fraction of paired block-bootstrap resamples (the same bars drawn for both) in which the
/// Sharpe of `returns` is strictly above that of `reference`. InputError when the sizes differ,
/// there are fewer than 2 returns, or the options are bad.
double prob_sharpe_beats(const std::vector<double>& returns, const std::vector<double>& reference,
                         const BootstrapOptions& options = {});

/// Break-even cost, in basis points, of `positions` against `reference_positions` on `closes`
/// (run_backtest's conventions): the cost k at which the strategy's total log return
/// sum_t log(1 + p_t g_t - k |p_t - p_{t-1}|) equals the reference's at the same k (g_t the bar's
/// price change). Found by bisection on [0, 1,000] bps (to 1e-6 bps): a strategy that trades more
/// than the reference loses its lead as the cost grows. 0 when it does not beat the reference
/// even at zero cost; nullopt when it still beats it at 1,000 bps. InputError as run_backtest.
std::optional<double> break_even_cost_bps(const std::vector<double>& closes,
                                          const std::vector<double>& positions,
                                          const std::vector<double>& reference_positions);

/// Fills res.prob_beats_reference, break_even_cost_bps and beats_reference_at_any_cost of a
/// strategy from its positions against the reference's (both run with run_backtest on `closes`).
void compare_to_reference(BacktestResult& res, const BacktestResult& reference,
                          const std::vector<double>& closes, const std::vector<double>& positions,
                          const std::vector<double>& reference_positions,
                          const BootstrapOptions& bootstrap = {});

/// Volatility-targeted buy-and-hold, the baseline practitioners use: long min(1, target /
/// (sigma_t * sqrt(periods_per_year))) at bar t, sigma_t the sample standard deviation of the
/// last `window` log returns up to and including bar t (no look-ahead). `past_returns` are the
/// log returns before the first close (they seed the window); flat while fewer than 2 returns
/// are known. InputError for a target or periods_per_year not > 0, window < 2 or a bad close.
std::vector<double> volatility_target_positions(const std::vector<double>& past_returns,
                                                const std::vector<double>& closes,
                                                double target_volatility, double periods_per_year,
                                                size_t window = 60);

/// The metrics as JSON (snake_case keys: total_return, annualized_return, volatility, sharpe,
/// sharpe_lo, sharpe_hi, sortino, max_drawdown, max_drawdown_duration_bars, turnover,
/// turnover_per_year, hit_rate, exposure, total_cost, cost_flat, cost_spread, cost_fees,
/// cost_impact, gross_return, capacity (null when unset), cost_model, mean_return_per_bar,
/// sharpe_per_bar, short_window, psr, dsr and prob_beats_buy_and_hold and break_even_cost_bps
/// (null when unset), bars, cost_bps, periods_per_year); with `include_series` also the arrays
/// returns, equity and drawdown.
nlohmann::json to_json(const BacktestResult& result, bool include_series = false);

/// Annualised Sharpe ratio of bar returns (sample stdev, risk-free 0); 0 when fewer than two
/// returns or zero stdev.
double sharpe_ratio(const std::vector<double>& returns, double periods_per_year);

/// Annualised Sortino ratio: mean / sqrt(mean(min(r, 0)^2)) * sqrt(periods_per_year); 0 when no
/// return is negative or `returns` is empty.
double sortino_ratio(const std::vector<double>& returns, double periods_per_year);

/// n positions of 1 (always fully long).
std::vector<double> buy_and_hold_positions(size_t n);

/// n positions of 0 (never in the market).
std::vector<double> flat_positions(size_t n);

/// n positions drawn uniformly from {-1, 0, 1} with foxhunt::Rng(seed) (same seed, same list).
std::vector<double> random_positions(size_t n, uint64_t seed);

/// Bars per year of a series from its timestamps (Unix milliseconds, strictly increasing, at
/// least two): infer_calendar(timestamps_ms).value (data/calendar.h, whose file comment is the
/// rule: bars / years over 30 days or more; a short intraday span by its sessions, bars per
/// session x 252; otherwise 365.25 days / the median spacing).
/// Throws InputError for fewer than two timestamps or a timestamp not above the previous one.
double infer_periods_per_year(const std::vector<int64_t>& timestamps_ms);

/// infer_periods_per_year of a bar series (whose timestamps are Unix seconds).
double infer_periods_per_year(const BarSeries& series);

}  // namespace foxhunt::data
