#pragma once
/// \file trading_env.h
/// A single-instrument trading environment for the RL policies. Torch-free (observations are
/// std::vector<float>; train/batches.h stacks them).
///
/// Mechanics, per step at bar t (the agent sees bar t's close and features):
/// - action 0 / 1 / 2 = sell / hold / buy sets the target position -1 / 0 / +1 (hold = flat);
/// - cost = the cost model's cost_t(|new position - old position|) (data/cost_model.h: the flat
///   cost_bps, half the spread, fees, square-root impact at the options' notional), the very
///   function run_backtest charges, on this bar's rates: a policy trains under the costs that
///   score it. With only cost_bps (the default model) it is cost_bps * 1e-4 * |change| (a flip
///   from -1 to +1 costs 2 units);
/// - reward = new position * r_{t+1} - cost, with r_{t+1} = log(close_{t+1} / close_t): a
///   log-growth reward, so equity = exp(sum of rewards) starting from 1;
/// - observation = market features of the current bar (254 from a MarketDataset), then the
///   position, then the unrealised PnL = position * log(close_t / entry close) * pnl_scale.
/// Episodes are windows of `episode_length` steps inside the env's bar range: random starts drawn
/// from the env's seeded stream, or sequential windows (for evaluation) that tile the range.
///
/// The cost rates are computed once per env (bar_cost_rates over its closes). Over a dataset's
/// split their inputs are recorded as `foxhunt backtest` records them for its scored bars: the
/// bars' volumes, and the log returns that end before the split's first bar (the last `window`
/// of them) seeding the volatility. An env over a split and a backtest scoring the same bars
/// therefore charge the same cost for the same position path.

#include <cstdint>
#include <vector>

#include "foxhunt/core/random.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/features.h"

namespace foxhunt::data {

/// Options of the trading environment.
struct TradingEnvOptions {
  /// Steps per episode (0 = from the start to the end of the range).
  int64_t episode_length = 512;
  /// Transaction cost in basis points of notional per unit of |position change| (the flat
  /// term of the cost model; `foxhunt train --cost-bps`).
  double cost_bps = 1.0;
  /// The cost terms beside cost_bps (data/cost_model.h: half the spread, fees, square-root
  /// impact at a notional); the defaults add none. `foxhunt train all` also fits its rule under
  /// cost_bps and these terms.
  CostModel costs = {};
  /// Random episode starts (training) or sequential windows through the range (evaluation).
  bool random_start = true;
  /// Scale of the unrealised PnL in the observation (100 = percent of log return).
  double pnl_scale = 100.0;
  /// Seed of the start-drawing stream (reset(seed) reseeds it).
  uint64_t seed = 0;
};

/// What one step returns.
struct StepResult {
  std::vector<float> obs;   ///< observation at the new bar
  double reward = 0.0;      ///< position * next log return - cost
  bool done = false;        ///< the episode ended with this step
  int position = 0;         ///< position held over the step (-1, 0, +1)
  double cost = 0.0;        ///< transaction cost charged on this step
  double bar_return = 0.0;  ///< log return of the bar stepped over
  double equity = 1.0;      ///< exp(cumulative reward) after the step
};

/// Strategy vs buy-and-hold over the same bars.
struct BuyAndHoldComparison {
  double strategy_log_return = 0.0;      ///< sum of rewards
  double buy_and_hold_log_return = 0.0;  ///< log(close_end / close_start) - one entry cost
  double excess_log_return = 0.0;        ///< strategy minus buy-and-hold
};

/// Log growth of buying one unit at close[begin] (paying cost_bps once) and holding to close[end].
/// (TradingEnv::compare_to_buy_and_hold charges the entry with its cost model instead.)
double buy_and_hold_log_return(const std::vector<double>& closes, int64_t begin, int64_t end,
                               double cost_bps);

/// The trading environment.
class TradingEnv {
 public:
  /// Number of discrete actions (sell, hold, buy).
  static constexpr int64_t kActions = 3;

  /// Env over bars `range` of per-bar market features (`market.rows` == closes.size(); any width,
  /// 254 in the product) and close prices. The range needs at least 2 bars. `cost_inputs` are
  /// the cost model's per-close volumes and spreads and the log returns before the first close
  /// (bar_cost_rates' InputErrors for bad ones).
  TradingEnv(Matrix market, std::vector<double> closes, BarRange range,
             TradingEnvOptions options = {}, const MarketCostInputs& cost_inputs = {});

  /// Env over one split of a dataset: observations are the 256-d RL state; the cost inputs are
  /// the split's volumes and the returns before it (file comment).
  TradingEnv(const MarketDataset& dataset, Split split, TradingEnvOptions options = {});

  /// Target position of an action: 0 -> -1, 1 -> 0, 2 -> +1. Throws InputError otherwise.
  static int action_to_position(int64_t action);

  /// Observation width: market features + 2.
  int64_t observation_dim() const { return market_.cols + 2; }
  /// Host bytes of this environment's copy of its bars (features and closes), outside LibTorch.
  std::uint64_t host_bytes() const {
    return market_.data.size() * sizeof(float) + closes_.size() * sizeof(double) +
           rates_.size() * sizeof(BarCostRates);
  }
  /// Options in use.
  const TradingEnvOptions& options() const { return options_; }
  /// Bars the env runs over.
  const BarRange& range() const { return range_; }

  /// Reseeds the start stream (and rewinds sequential mode to the first window), then starts an
  /// episode. Returns the first observation.
  std::vector<float> reset(uint64_t seed);
  /// Starts the next episode (next random start, or the next sequential window).
  std::vector<float> reset();
  /// Applies an action; throws InputError for a bad action or when the episode is over.
  StepResult step(int64_t action);

  /// Current observation.
  std::vector<float> observation() const;
  /// Current bar index.
  int64_t bar() const { return t_; }
  /// First bar of the episode.
  int64_t episode_start() const { return start_; }
  /// Bar at which the episode ends (done when bar() reaches it).
  int64_t episode_end() const { return end_; }
  /// Steps taken in this episode.
  int64_t steps() const { return t_ - start_; }
  /// True once the episode is over (or before the first reset).
  bool done() const { return done_; }
  /// Current position (-1, 0, +1).
  int position() const { return position_; }
  /// position * log(close_t / entry close), unscaled.
  double unrealized_pnl() const;
  /// exp(cumulative reward).
  double equity() const;
  /// Equity after each step of the episode, starting with 1.0 at reset.
  const std::vector<double>& equity_curve() const { return equity_curve_; }
  /// Sum of costs charged in this episode (log-return units).
  double total_cost() const { return total_cost_; }
  /// Position changes in this episode.
  int64_t trades() const { return trades_; }
  /// Number of sequential windows that tile the range.
  int64_t sequential_episodes() const;
  /// Equity of buy-and-hold from the episode start to the current bar (its entry charged by the
  /// same cost model).
  double buy_and_hold_equity() const;
  /// This episode so far against buy-and-hold over the same bars.
  BuyAndHoldComparison compare_to_buy_and_hold() const;

 private:
  // `market`/`closes` hold bars [offset, offset + rows); bar indices stay absolute.
  TradingEnv(Matrix market, std::vector<double> closes, BarRange range, TradingEnvOptions options,
             int64_t offset, const MarketCostInputs& cost_inputs);
  double close_at(int64_t bar) const { return closes_[static_cast<size_t>(bar - offset_)]; }
  std::vector<float> start_episode(int64_t start);
  int64_t episode_steps() const;

  Matrix market_;
  std::vector<double> closes_;
  std::vector<BarCostRates> rates_;  // per close: the cost model's rates (bar_cost_rates)
  BarRange range_;
  int64_t offset_ = 0;
  TradingEnvOptions options_;
  Rng rng_;
  int64_t next_sequential_ = 0;
  int64_t start_ = 0, end_ = 0, t_ = 0;
  bool done_ = true;
  int position_ = 0;
  double entry_close_ = 0.0;
  double log_equity_ = 0.0;
  double total_cost_ = 0.0;
  int64_t trades_ = 0;
  std::vector<double> equity_curve_;
};

}  // namespace foxhunt::data
