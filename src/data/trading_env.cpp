#include "foxhunt/data/trading_env.h"

#include <algorithm>
#include <cmath>

#include "foxhunt/core/error.h"

namespace foxhunt::data {

namespace {
constexpr const char* kTradingEnvComponent = "trading_env";
constexpr double kBps = 1e-4;

void check_options(const TradingEnvOptions& o) {
  FOXHUNT_CHECK(o.episode_length >= 0, kTradingEnvComponent, "episode_length must be >= 0, got ",
                o.episode_length);
  FOXHUNT_CHECK(std::isfinite(o.cost_bps) && o.cost_bps >= 0, kTradingEnvComponent,
                "cost_bps must be >= 0, got ", o.cost_bps);
  // > 0: the bundle loader refuses any other scale (serving/bundle.h), so training does too.
  FOXHUNT_CHECK(std::isfinite(o.pnl_scale) && o.pnl_scale > 0, kTradingEnvComponent,
                "pnl_scale must be finite and > 0, got ", o.pnl_scale);
}
}  // namespace

double buy_and_hold_log_return(const std::vector<double>& closes, int64_t begin, int64_t end,
                               double cost_bps) {
  FOXHUNT_CHECK(std::isfinite(cost_bps) && cost_bps >= 0, kTradingEnvComponent,
                "cost_bps must be >= 0, got ", cost_bps);
  FOXHUNT_CHECK(begin >= 0 && begin <= end && end < static_cast<int64_t>(closes.size()),
                kTradingEnvComponent, "buy-and-hold bars [", begin, ", ", end, "] outside [0, ",
                closes.size(), ")");
  return std::log(closes[static_cast<size_t>(end)] / closes[static_cast<size_t>(begin)]) -
         cost_bps * kBps;
}

TradingEnv::TradingEnv(Matrix market, std::vector<double> closes, BarRange range,
                       TradingEnvOptions options, const MarketCostInputs& cost_inputs)
    : TradingEnv(std::move(market), std::move(closes), range, options, 0, cost_inputs) {}

TradingEnv::TradingEnv(Matrix market, std::vector<double> closes, BarRange range,
                       TradingEnvOptions options, int64_t offset,
                       const MarketCostInputs& cost_inputs)
    : market_(std::move(market)),
      closes_(std::move(closes)),
      range_(range),
      offset_(offset),
      options_(options),
      rng_(options.seed) {
  check_options(options_);
  FOXHUNT_CHECK(market_.rows == static_cast<int64_t>(closes_.size()), kTradingEnvComponent,
                "market has ", market_.rows, " rows but there are ", closes_.size(), " closes");
  const int64_t last = offset_ + static_cast<int64_t>(closes_.size());
  FOXHUNT_CHECK(range_.begin >= offset_ && range_.end <= last && range_.size() >= 2,
                kTradingEnvComponent, "bar range [", range_.begin, ", ", range_.end,
                ") needs >= 2 bars inside [", offset_, ", ", last, ")");
  for (double c : closes_)
    FOXHUNT_CHECK(std::isfinite(c) && c > 0, kTradingEnvComponent, "close prices must be > 0, got ",
                  c);
  rates_ = bar_cost_rates(options_.cost_bps, options_.costs, closes_, cost_inputs);
}

namespace {
std::vector<double> closes_in(const MarketDataset& ds, const BarRange& r) {
  std::vector<double> out;
  for (int64_t t = r.begin; t < r.end; ++t)
    out.push_back(ds.series().bars[static_cast<size_t>(t)].close);
  return out;
}

// The cost model's inputs over bars `r`, as the backtest records them for its scored bars
// (serving/backtest.cpp): their volumes, and the log returns ending at the bars before r.begin
// (the last `window` of them: all the volatility's window reads).
MarketCostInputs cost_inputs_in(const MarketDataset& ds, const BarRange& r, int64_t window) {
  const auto& bars = ds.series().bars;
  MarketCostInputs in;
  for (int64_t t = r.begin; t < r.end; ++t)
    in.volumes.push_back(bars[static_cast<size_t>(t)].volume);
  for (int64_t t = std::max<int64_t>(1, r.begin - window); t < r.begin; ++t)
    in.past_returns.push_back(
        std::log(bars[static_cast<size_t>(t)].close / bars[static_cast<size_t>(t) - 1].close));
  return in;
}
}  // namespace

// Copies only the split's rows: several envs over one dataset stay small.
TradingEnv::TradingEnv(const MarketDataset& dataset, Split split, TradingEnvOptions options)
    : TradingEnv(dataset.rl_market_features(dataset.splits().get(split).begin,
                                            dataset.splits().get(split).end),
                 closes_in(dataset, dataset.splits().get(split)), dataset.splits().get(split),
                 options, dataset.splits().get(split).begin,
                 cost_inputs_in(dataset, dataset.splits().get(split), options.costs.window)) {}

int TradingEnv::action_to_position(int64_t action) {
  FOXHUNT_CHECK(action >= 0 && action < kActions, kTradingEnvComponent,
                "action must be 0 (sell), 1 (hold) or 2 (buy), got ", action);
  return static_cast<int>(action) - 1;
}

int64_t TradingEnv::episode_steps() const {
  const int64_t available = range_.size() - 1;  // the last bar has no next return
  return options_.episode_length == 0 ? available : std::min(options_.episode_length, available);
}

int64_t TradingEnv::sequential_episodes() const {
  const int64_t len = episode_steps();
  return (range_.size() - 1 + len - 1) / len;
}

std::vector<float> TradingEnv::start_episode(int64_t start) {
  start_ = start;
  end_ = std::min(start + episode_steps(), range_.end - 1);
  t_ = start;
  done_ = false;
  position_ = 0;
  entry_close_ = 0.0;
  log_equity_ = 0.0;
  total_cost_ = 0.0;
  trades_ = 0;
  equity_curve_.assign(1, 1.0);
  return observation();
}

std::vector<float> TradingEnv::reset(uint64_t seed) {
  rng_.seed(seed);
  next_sequential_ = 0;
  return reset();
}

std::vector<float> TradingEnv::reset() {
  const int64_t len = episode_steps();
  if (options_.random_start) {
    const auto choices = static_cast<uint64_t>(range_.size() - len);  // starts leaving len steps
    return start_episode(range_.begin + static_cast<int64_t>(rng_.uniform_int(choices)));
  }
  if (next_sequential_ >= sequential_episodes()) next_sequential_ = 0;  // wrap around
  return start_episode(range_.begin + len * next_sequential_++);
}

StepResult TradingEnv::step(int64_t action) {
  FOXHUNT_CHECK(!done_, kTradingEnvComponent, "step() after the episode ended: call reset()");
  const int target = action_to_position(action);
  StepResult res;
  // The backtest's charge for this change at this bar (data/cost_model.h); with cost_bps alone,
  // cost_bps * 1e-4 * |change| to the last bit.
  res.cost = trade_cost(rates_[static_cast<size_t>(t_ - offset_)],
                        std::abs(static_cast<double>(target - position_)), options_.costs.notional);
  if (target != position_) {
    ++trades_;
    entry_close_ = close_at(t_);
  }
  position_ = target;
  res.bar_return = std::log(close_at(t_ + 1) / close_at(t_));
  res.reward = position_ * res.bar_return - res.cost;
  log_equity_ += res.reward;
  total_cost_ += res.cost;
  ++t_;
  done_ = t_ >= end_;
  equity_curve_.push_back(equity());
  res.obs = observation();
  res.done = done_;
  res.position = position_;
  res.equity = equity();
  return res;
}

double TradingEnv::unrealized_pnl() const {
  if (position_ == 0) return 0.0;
  return position_ * std::log(close_at(t_) / entry_close_);
}

double TradingEnv::equity() const {
  return std::exp(log_equity_);
}

std::vector<float> TradingEnv::observation() const {
  std::vector<float> obs(static_cast<size_t>(observation_dim()));
  const float* row = market_.row(t_ - offset_);
  std::copy(row, row + market_.cols, obs.begin());
  obs[static_cast<size_t>(market_.cols)] = static_cast<float>(position_);
  obs[static_cast<size_t>(market_.cols + 1)] =
      static_cast<float>(unrealized_pnl() * options_.pnl_scale);
  return obs;
}

double TradingEnv::buy_and_hold_equity() const {
  return std::exp(compare_to_buy_and_hold().buy_and_hold_log_return);
}

BuyAndHoldComparison TradingEnv::compare_to_buy_and_hold() const {
  BuyAndHoldComparison c;
  c.strategy_log_return = log_equity_;
  // One unit bought at the episode's first bar, charged as a step buying it would be (the
  // bars are checked first: before any episode they are outside the env's).
  const double growth = buy_and_hold_log_return(closes_, start_ - offset_, t_ - offset_, 0.0);
  c.buy_and_hold_log_return = growth - trade_cost(rates_[static_cast<size_t>(start_ - offset_)],
                                                  1.0, options_.costs.notional);
  c.excess_log_return = c.strategy_log_return - c.buy_and_hold_log_return;
  return c;
}

}  // namespace foxhunt::data
