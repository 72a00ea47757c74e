#pragma once
/// \file cost_model.h
/// What a desk pays to trade, and the no-trade band that saves it. Torch-free.
///
/// A position p is a fraction of the account's notional N (currency; CostModel::notional). A
/// trade at the close of bar t changes the position by x = |p_t - p_{t-1}| and costs, in return
/// units (a fraction of N; run_backtest charges it on the return of bar t+1, which the new
/// position is held over):
///
///     cost_t(x) = x * ( cost_bps / 1e4                       the flat cost (--cost-bps)
///                     + s_t / 2                              half the quoted spread
///                     + fee_bps / 1e4                        a fee per notional traded
///                     + fee_per_contract / (c_t * m)         a fee per contract
///                     + k * sigma_t * sqrt(q_t / ADV_t) )    square-root market impact
///
/// - s_t: the relative quoted spread (ask - bid) / mid at bar t. Where per-bar quotes are given
///   (MarketCostInputs::spreads, e.g. from a tape's bid and ask) they are used; otherwise the
///   fixed CostModel::spread_bps (a bar CSV carries no quotes: `foxhunt backtest --spread-bps`).
/// - c_t the close, m the contract multiplier (units of the instrument per contract; 1 for a
///   share), so one contract is c_t * m of notional and x N / (c_t m) contracts are traded.
/// - q_t = x N / (c_t m), the contracts traded; ADV_t the mean volume (bar volume, in contracts)
///   of the last `window` bars up to and including t; q_t / ADV_t is the participation rate.
///   For daily bars ADV_t is the average daily volume; for intraday bars it is the average bar
///   volume and sigma_t the per-bar volatility (the square-root law over the trade's horizon).
/// - sigma_t: the sample standard deviation of the last `window` log returns known at t
///   (MarketCostInputs::past_returns, then the closes'); with fewer than 2 known, that of the
///   series' first `window` returns (a warm-up estimate). k = impact_k, 1 by default (the
///   square-root law's coefficient is of order one in the empirical studies: Almgren et al.
///   2005, Toth et al. 2011); window 20 bars.
/// - Impact needs a size: with notional 0 (the default) none is charged. Bars without volume
///   (ADV_t = 0, a close-only series) charge no impact and leave capacity unknown.
///
/// The defaults (no spread, no fee, no notional) leave the flat cost_bps alone: the results of
/// a backtest without these options are those of the flat cost.
///
/// Capacity (the notional at which the edge is eaten): over the traded bars, the edge before
/// impact E = sum_t p_t g_{t+1} - sum_t x_t (linear costs), g the bar's simple price change, and
/// the impact at notional N is sqrt(N) * I with I = sum_t k sigma_t x_t^1.5 / sqrt(c_t m ADV_t).
/// The impact equals the edge at N* = (E / I)^2 (0 when E <= 0; unknown when I = 0: no trade,
/// no volume or k = 0). Sums, not compounded, as total_cost.
///
/// The no-trade band: the position moves to the target only when |target - current| > band,
/// else it stays (apply_no_trade_band). Band 0 trades every change. The serving runtime's
/// decision (serving/serving.h, DecisionRule::band) and the rule fit use this one function.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <vector>

namespace foxhunt::data {

/// The cost terms beside the flat cost_bps (see the file comment); the defaults add nothing.
struct CostModel {
  /// Fixed quoted spread (ask - bid) / mid, basis points; half of it is paid per unit traded.
  /// Per-bar quotes (MarketCostInputs::spreads) replace it where given. >= 0.
  double spread_bps = 0.0;
  /// Fee per notional traded, basis points (>= 0).
  double fee_bps = 0.0;
  /// Fee per contract traded, in the price's currency (>= 0).
  double fee_per_contract = 0.0;
  /// Units of the instrument per contract (> 0; 1 for shares, 50 for an E-mini S&P 500).
  double contract_multiplier = 1.0;
  /// The account's notional, in the price's currency, that a position of 1 is (>= 0); 0: no
  /// market impact is charged (capacity is still reported).
  double notional = 0.0;
  /// k of the square-root impact k * sigma * sqrt(participation) (>= 0; 0 turns impact off).
  double impact_k = 1.0;
  /// Bars of the volatility and the average volume of the impact term (>= 2).
  int64_t window = 20;
};

/// Per-bar market inputs of the cost model, one value per close, each optional (empty).
struct MarketCostInputs {
  /// Traded volume per bar, in contracts (the bars' volume); empty: no impact, no capacity.
  std::vector<double> volumes;
  /// Relative quoted spread (ask - bid) / mid per bar, a fraction; NaN where unknown (the fixed
  /// spread_bps then applies); empty: spread_bps throughout.
  std::vector<double> spreads;
  /// Log returns before the first close (they seed the volatility's window).
  std::vector<double> past_returns;
};

/// What a trade at one bar costs per unit traded: linear + impact * sqrt(x * notional).
struct BarCostRates {
  double flat = 0.0;    ///< cost_bps / 1e4
  double spread = 0.0;  ///< s_t / 2
  double fees = 0.0;    ///< fee_bps / 1e4 + fee_per_contract / (c_t m)
  /// k sigma_t / sqrt(c_t m ADV_t); 0 without volume. Times sqrt(x N): impact per unit traded.
  double impact = 0.0;
  /// flat + spread + fees: the part that does not depend on the size.
  double linear() const { return flat + spread + fees; }
};

/// InputError "[costs] ..." for a negative or non-finite term, a multiplier not > 0 or a window
/// < 2; `flat_bps` is the flat cost beside the model.
void check_cost_model(double flat_bps, const CostModel& model);

/// Each bar's cost rates (file comment) for trades at `closes`. InputError for a bad model (as
/// check_cost_model), inputs whose sizes differ from the closes, a negative or non-finite volume
/// or spread (NaN spreads excepted), or a close not finite and > 0.
std::vector<BarCostRates> bar_cost_rates(double flat_bps, const CostModel& model,
                                         const std::vector<double>& closes,
                                         const MarketCostInputs& inputs = {});

/// Cost of trading `traded` (= |p_t - p_{t-1}| >= 0) at a bar with `rates`, at `notional`:
/// traded * (linear + impact * sqrt(traded * notional)), in return units. run_backtest, the rule
/// fit and the RL trading env (data/trading_env.h) all charge this one function.
inline double trade_cost(const BarCostRates& rates, double traded, double notional) {
  double impact = 0.0;
  if (rates.impact > 0.0 && notional > 0.0 && traded > 0.0)
    impact = rates.impact * std::sqrt(traded * notional);
  return traded * (rates.linear() + impact);
}

/// The notional at which the impact eats the edge: (edge / impact_per_sqrt_notional)^2 (file
/// comment); 0 when edge <= 0; nullopt when impact_per_sqrt_notional is not > 0.
std::optional<double> capacity_notional(double edge_before_impact, double impact_per_sqrt_notional);

/// The position after one decision: `target` when |target - current| > band, else `current`.
double apply_no_trade_band(double target, double current, double band);

/// The positions of a path of targets under the band, starting flat (p_{-1} = 0).
std::vector<double> apply_no_trade_band(const std::vector<double>& targets, double band);

/// {spread_bps, fee_bps, fee_per_contract, contract_multiplier, notional, impact_k, window}.
nlohmann::json to_json(const CostModel& model);

}  // namespace foxhunt::data
