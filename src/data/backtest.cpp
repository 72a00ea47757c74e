#include "foxhunt/data/backtest.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <tuple>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/random.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/data/calendar.h"
#include "foxhunt/data/sharpe_stats.h"

namespace foxhunt::data {

namespace {

constexpr const char* kBacktestComponent = "backtest";

double mean_of(const std::vector<double>& x) {
  double s = 0.0;
  for (double v : x) s += v;
  return x.empty() ? 0.0 : s / static_cast<double>(x.size());
}

/// Sample standard deviation (n - 1 denominator, two passes for accuracy); 0 when n < 2.
double sample_stdev(const std::vector<double>& x) {
  if (x.size() < 2) return 0.0;
  const double m = mean_of(x);
  double ss = 0.0;
  for (double v : x) ss += (v - m) * (v - m);
  return std::sqrt(ss / static_cast<double>(x.size() - 1));
}

void check_periods_per_year(double ppy) {
  FOXHUNT_CHECK(std::isfinite(ppy) && ppy > 0.0, kBacktestComponent,
                "periods_per_year: expected a finite number > 0, got ", ppy);
}

void check_bootstrap(const BootstrapOptions& o) {
  FOXHUNT_CHECK(o.resamples >= 1, kBacktestComponent, "bootstrap: expected resamples >= 1, got ",
                o.resamples);
  FOXHUNT_CHECK(o.block >= 1, kBacktestComponent, "bootstrap: expected a block length >= 1, got ",
                o.block);
}

// mean / sample stdev of per-bar sums (n, sum, sum of squares); 0 without variation.
double sharpe_of_sums(double n, double sum, double sum_sq) {
  if (n < 2) return 0.0;
  const double mean = sum / n;
  const double var = (sum_sq - n * mean * mean) / (n - 1);
  return var > 1e-300 ? mean / std::sqrt(var) : 0.0;
}

// Draws the circular-block resamples of n points: calls visit(start, count) for each block of
// one resample, then done() once per resample.
template <class Visit, class Done>
void block_resamples(size_t n, const BootstrapOptions& o, Visit visit, Done done) {
  Rng rng(o.seed);
  const size_t len = std::min(o.block, n);
  for (int r = 0; r < o.resamples; ++r) {
    for (size_t filled = 0; filled < n;) {
      const size_t start = static_cast<size_t>(rng.uniform_int(n));
      const size_t count = std::min(len, n - filled);
      visit(start, count);
      filled += count;
    }
    done();
  }
}

// Total log wealth of positions at cost k (fraction per unit of position change); -inf on ruin.
double log_wealth(const std::vector<double>& closes, const std::vector<double>& p, double k) {
  double w = 0.0, prev = 0.0;
  for (size_t t = 0; t + 1 < closes.size(); ++t) {
    const double r = p[t] * (closes[t + 1] / closes[t] - 1.0) - k * std::abs(p[t] - prev);
    prev = p[t];
    if (r <= -1.0) return -std::numeric_limits<double>::infinity();
    w += std::log1p(r);
  }
  return w;
}

}  // namespace

double sharpe_ratio(const std::vector<double>& returns, double periods_per_year) {
  check_periods_per_year(periods_per_year);
  const double sd = sample_stdev(returns);
  if (!(sd > 0.0)) return 0.0;
  return mean_of(returns) / sd * std::sqrt(periods_per_year);
}

double sortino_ratio(const std::vector<double>& returns, double periods_per_year) {
  check_periods_per_year(periods_per_year);
  if (returns.empty()) return 0.0;
  double down = 0.0;
  for (double r : returns) down += r < 0.0 ? r * r : 0.0;
  // Downside deviation about 0 (the target return), over all bars, not only the losing ones.
  const double dd = std::sqrt(down / static_cast<double>(returns.size()));
  if (!(dd > 0.0)) return 0.0;
  return mean_of(returns) / dd * std::sqrt(periods_per_year);
}

BacktestResult run_backtest(const std::vector<double>& closes, const std::vector<double>& positions,
                            const BacktestOptions& options, const MarketCostInputs& market) {
  const size_t n = closes.size();
  FOXHUNT_CHECK(positions.size() == n, kBacktestComponent,
                "expected as many positions as closes, got ", positions.size(), " positions for ",
                n, " closes");
  FOXHUNT_CHECK(n >= 2, kBacktestComponent, "expected at least 2 closes (one bar return), got ", n);
  FOXHUNT_CHECK(std::isfinite(options.cost_bps) && options.cost_bps >= 0.0, kBacktestComponent,
                "cost_bps: expected a finite number >= 0, got ", options.cost_bps);
  check_periods_per_year(options.periods_per_year);
  for (size_t t = 0; t < n; ++t) {
    FOXHUNT_CHECK(std::isfinite(closes[t]) && closes[t] > 0.0, kBacktestComponent, "closes[", t,
                  "]: expected a finite price > 0, got ", closes[t]);
    // The negated form also rejects NaN.
    FOXHUNT_CHECK(positions[t] >= -1.0 && positions[t] <= 1.0, kBacktestComponent, "positions[", t,
                  "]: expected a value in [-1, 1], got ", positions[t]);
  }
  const auto rates = bar_cost_rates(options.cost_bps, options.costs, closes, market);

  BacktestResult res;
  res.bars = static_cast<int64_t>(n);
  res.cost_bps = options.cost_bps;
  res.cost_model = options.costs;
  res.periods_per_year = options.periods_per_year;
  const size_t num_returns = n - 1;
  const double notional = options.costs.notional;
  res.returns.resize(num_returns);

  double prev_position = 0.0;            // p_{-1}: the account starts flat
  double edge = 0.0, impact_unit = 0.0;  // capacity's E and I (cost_model.h)
  std::vector<bool> held(num_returns);
  for (size_t t = 0; t + 1 < n; ++t) {
    const double p = positions[t];
    const double change = std::abs(p - prev_position);
    const auto& r = rates[t];
    const double cost = trade_cost(r, change, notional);
    const double gross = p * (closes[t + 1] / closes[t] - 1.0);
    res.returns[t] = gross - cost;
    res.turnover += change;
    res.total_cost += cost;
    res.cost_flat += change * r.flat;
    res.cost_spread += change * r.spread;
    res.cost_fees += change * r.fees;
    res.gross_return += gross;
    edge += gross - change * r.linear();
    impact_unit += r.impact * change * std::sqrt(change);
    held[t] = p != 0.0;
    prev_position = p;
  }
  res.cost_impact = res.total_cost - res.cost_flat - res.cost_spread - res.cost_fees;
  if (notional == 0.0) res.cost_impact = 0.0;  // exactly: no rounding residue
  res.capacity = capacity_notional(edge, impact_unit);
  fill_return_metrics(res, held, options.bootstrap);
  return res;
}

void fill_return_metrics(BacktestResult& res, const std::vector<bool>& held,
                         const BootstrapOptions& bootstrap) {
  const size_t num_returns = res.returns.size();
  FOXHUNT_CHECK(num_returns >= 1 && held.size() == num_returns, kBacktestComponent,
                "expected at least one bar return and one held flag per return, got ", num_returns,
                " returns and ", held.size(), " flags");
  check_periods_per_year(res.periods_per_year);
  res.bars = static_cast<int64_t>(num_returns + 1);
  res.equity.assign(num_returns + 1, 1.0);
  res.drawdown.assign(num_returns + 1, 0.0);
  res.max_drawdown = 0.0;
  res.max_drawdown_duration_bars = 0;
  int64_t held_bars = 0, wins = 0;
  double peak = 1.0;
  int64_t run = 0;
  for (size_t t = 0; t < num_returns; ++t) {
    const double r = res.returns[t];
    if (held[t]) {
      ++held_bars;
      if (r > 0.0) ++wins;
    }
    const double e = std::max(0.0, res.equity[t] * (1.0 + r));  // ruin is absorbing
    res.equity[t + 1] = e;
    peak = std::max(peak, e);
    res.drawdown[t + 1] = e / peak - 1.0;
    res.max_drawdown = std::min(res.max_drawdown, res.drawdown[t + 1]);
    run = res.drawdown[t + 1] < 0.0 ? run + 1 : 0;
    res.max_drawdown_duration_bars = std::max(res.max_drawdown_duration_bars, run);
  }
  const double big_n = static_cast<double>(num_returns);
  const double ppy = res.periods_per_year;
  const double end = res.equity.back();
  res.total_return = end - 1.0;
  res.annualized_return = end > 0.0 ? std::pow(end, ppy / big_n) - 1.0 : -1.0;
  res.volatility = sample_stdev(res.returns) * std::sqrt(ppy);
  res.sharpe = sharpe_ratio(res.returns, ppy);
  res.sortino = sortino_ratio(res.returns, ppy);
  res.turnover_per_year = res.turnover / big_n * ppy;
  res.hit_rate = held_bars > 0 ? static_cast<double>(wins) / static_cast<double>(held_bars) : 0.0;
  res.exposure = static_cast<double>(held_bars) / big_n;
  res.mean_return_per_bar = mean_of(res.returns);
  const double sd = sample_stdev(res.returns);
  res.sharpe_per_bar = sd > 0.0 ? res.mean_return_per_bar / sd : 0.0;
  res.short_window = big_n < ppy;
  std::tie(res.sharpe_lo, res.sharpe_hi) = sharpe_interval(res.returns, ppy, bootstrap);
  res.psr = probabilistic_sharpe_ratio(sharpe_sample(res.returns));
}

std::pair<double, double> sharpe_interval(const std::vector<double>& returns,
                                          double periods_per_year,
                                          const BootstrapOptions& options) {
  check_periods_per_year(periods_per_year);
  check_bootstrap(options);
  const size_t n = returns.size();
  if (n < 2) return {0.0, 0.0};
  // Prefix sums: a block's sums are two lookups each.
  std::vector<double> c1(n + 1, 0.0), c2(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) {
    c1[i + 1] = c1[i] + returns[i];
    c2[i + 1] = c2[i] + returns[i] * returns[i];
  }
  auto circular = [n](const std::vector<double>& c, size_t start, size_t count) {
    if (start + count <= n) return c[start + count] - c[start];
    return (c[n] - c[start]) + c[start + count - n];
  };
  std::vector<double> sharpes;
  sharpes.reserve(static_cast<size_t>(options.resamples));
  double s1 = 0.0, s2 = 0.0;
  block_resamples(
      n, options,
      [&](size_t start, size_t count) {
        s1 += circular(c1, start, count);
        s2 += circular(c2, start, count);
      },
      [&] {
        sharpes.push_back(sharpe_of_sums(static_cast<double>(n), s1, s2) *
                          std::sqrt(periods_per_year));
        s1 = s2 = 0.0;
      });
  return {percentile(sharpes, 2.5), percentile(sharpes, 97.5)};
}

double prob_sharpe_beats(const std::vector<double>& returns, const std::vector<double>& reference,
                         const BootstrapOptions& options) {
  check_bootstrap(options);
  const size_t n = returns.size();
  FOXHUNT_CHECK(n >= 2 && reference.size() == n, kBacktestComponent,
                "prob_sharpe_beats: expected two return series of the same length >= 2, got ", n,
                " and ", reference.size());
  double a1 = 0, a2 = 0, b1 = 0, b2 = 0;
  int wins = 0;
  block_resamples(
      n, options,
      [&](size_t start, size_t count) {
        for (size_t k = 0; k < count; ++k) {
          const size_t i = (start + k) % n;
          a1 += returns[i];
          a2 += returns[i] * returns[i];
          b1 += reference[i];
          b2 += reference[i] * reference[i];
        }
      },
      [&] {
        const double nn = static_cast<double>(n);
        wins += sharpe_of_sums(nn, a1, a2) > sharpe_of_sums(nn, b1, b2);
        a1 = a2 = b1 = b2 = 0.0;
      });
  return static_cast<double>(wins) / static_cast<double>(options.resamples);
}

std::optional<double> break_even_cost_bps(const std::vector<double>& closes,
                                          const std::vector<double>& positions,
                                          const std::vector<double>& reference_positions) {
  // run_backtest validates closes and positions (and names the index of a bad one).
  run_backtest(closes, positions);
  run_backtest(closes, reference_positions);
  auto lead = [&](double bps) {
    const double a = log_wealth(closes, positions, bps * 1e-4);
    const double b = log_wealth(closes, reference_positions, bps * 1e-4);
    if (std::isinf(a) && std::isinf(b)) return 0.0;  // both ruined: neither leads
    return a - b;
  };
  // 1,000 bps (10% per unit of position change) is beyond any real cost; above it a single
  // entry can ruin buy-and-hold, which says nothing about a strategy.
  constexpr double kMaxBps = 1000.0;
  if (!(lead(0.0) > 0.0)) return 0.0;
  if (lead(kMaxBps) > 0.0) return std::nullopt;
  double lo = 0.0, hi = kMaxBps;
  while (hi - lo > 1e-6) {
    const double mid = 0.5 * (lo + hi);
    (lead(mid) > 0.0 ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

void compare_to_reference(BacktestResult& res, const BacktestResult& reference,
                          const std::vector<double>& closes, const std::vector<double>& positions,
                          const std::vector<double>& reference_positions,
                          const BootstrapOptions& bootstrap) {
  res.prob_beats_reference = prob_sharpe_beats(res.returns, reference.returns, bootstrap);
  res.break_even_cost_bps = break_even_cost_bps(closes, positions, reference_positions);
  res.beats_reference_at_any_cost = !res.break_even_cost_bps.has_value();
}

std::vector<double> volatility_target_positions(const std::vector<double>& past_returns,
                                                const std::vector<double>& closes,
                                                double target_volatility, double periods_per_year,
                                                size_t window) {
  check_periods_per_year(periods_per_year);
  FOXHUNT_CHECK(std::isfinite(target_volatility) && target_volatility > 0, kBacktestComponent,
                "volatility target: expected an annual volatility > 0, got ", target_volatility);
  FOXHUNT_CHECK(window >= 2, kBacktestComponent, "volatility target: expected a window >= 2, got ",
                window);
  std::vector<double> returns = past_returns;  // every log return known so far
  std::vector<double> out(closes.size(), 0.0);
  for (size_t t = 0; t < closes.size(); ++t) {
    FOXHUNT_CHECK(std::isfinite(closes[t]) && closes[t] > 0, kBacktestComponent, "close ", t,
                  ": expected a finite price > 0, got ", closes[t]);
    if (t > 0) returns.push_back(std::log(closes[t] / closes[t - 1]));
    if (returns.size() < 2) continue;
    const size_t k = std::min(window, returns.size());
    const std::vector<double> last(returns.end() - static_cast<std::ptrdiff_t>(k), returns.end());
    const double sigma = sample_stdev(last) * std::sqrt(periods_per_year);
    out[t] = sigma > 0 ? std::min(1.0, target_volatility / sigma) : 1.0;
  }
  return out;
}

nlohmann::json to_json(const BacktestResult& r, bool include_series) {
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, r, total_return, annualized_return, volatility, sharpe, sharpe_lo,
                      sharpe_hi, mean_return_per_bar, sharpe_per_bar, short_window, sortino,
                      max_drawdown, max_drawdown_duration_bars, turnover, turnover_per_year,
                      hit_rate, exposure, total_cost, cost_flat, cost_spread, cost_fees,
                      cost_impact, gross_return, bars, cost_bps, periods_per_year);
  j["capacity"] = json_or_null(r.capacity);
  j["cost_model"] = to_json(r.cost_model);
  // The reference of a single-series backtest is buy and hold.
  j["prob_beats_buy_and_hold"] = json_or_null(r.prob_beats_reference);
  j["break_even_cost_bps"] = json_or_null(r.break_even_cost_bps);
  j["beats_buy_and_hold_at_any_cost"] = r.beats_reference_at_any_cost;
  j["psr"] = r.psr;
  j["dsr"] = json_or_null(r.dsr);
  if (include_series) {
    j["returns"] = r.returns;
    j["equity"] = r.equity;
    j["drawdown"] = r.drawdown;
  }
  return j;
}

std::vector<double> buy_and_hold_positions(size_t n) {
  return std::vector<double>(n, 1.0);
}

std::vector<double> flat_positions(size_t n) {
  return std::vector<double>(n, 0.0);
}

std::vector<double> random_positions(size_t n, uint64_t seed) {
  Rng rng(seed);
  std::vector<double> p(n);
  for (double& v : p) v = static_cast<double>(rng.uniform_int(3)) - 1.0;
  return p;
}

double infer_periods_per_year(const std::vector<int64_t>& timestamps_ms) {
  return infer_calendar(timestamps_ms).value;
}

double infer_periods_per_year(const BarSeries& series) {
  return infer_calendar(series).value;
}

}  // namespace foxhunt::data
