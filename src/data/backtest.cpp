#include "foxhunt/data/backtest.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "foxhunt/core/error.h"
#include "foxhunt/core/random.h"

namespace foxhunt::data {

namespace {

constexpr const char* kComponent = "backtest";

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
  FOXHUNT_CHECK(std::isfinite(ppy) && ppy > 0.0, kComponent,
                "periods_per_year: expected a finite number > 0, got ", ppy);
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
                            const BacktestOptions& options) {
  const size_t n = closes.size();
  FOXHUNT_CHECK(positions.size() == n, kComponent, "expected as many positions as closes, got ",
                positions.size(), " positions for ", n, " closes");
  FOXHUNT_CHECK(n >= 2, kComponent, "expected at least 2 closes (one bar return), got ", n);
  FOXHUNT_CHECK(std::isfinite(options.cost_bps) && options.cost_bps >= 0.0, kComponent,
                "cost_bps: expected a finite number >= 0, got ", options.cost_bps);
  check_periods_per_year(options.periods_per_year);
  for (size_t t = 0; t < n; ++t) {
    FOXHUNT_CHECK(std::isfinite(closes[t]) && closes[t] > 0.0, kComponent, "closes[", t,
                  "]: expected a finite price > 0, got ", closes[t]);
    // The negated form also rejects NaN.
    FOXHUNT_CHECK(positions[t] >= -1.0 && positions[t] <= 1.0, kComponent, "positions[", t,
                  "]: expected a value in [-1, 1], got ", positions[t]);
  }

  BacktestResult res;
  res.bars = static_cast<int64_t>(n);
  res.cost_bps = options.cost_bps;
  res.periods_per_year = options.periods_per_year;
  const size_t num_returns = n - 1;
  const double cost_rate = options.cost_bps / 1e4;
  res.returns.resize(num_returns);

  double prev_position = 0.0;  // p_{-1}: the account starts flat
  std::vector<bool> held(num_returns);
  for (size_t t = 0; t + 1 < n; ++t) {
    const double p = positions[t];
    const double change = std::abs(p - prev_position);
    const double cost = cost_rate * change;
    res.returns[t] = p * (closes[t + 1] / closes[t] - 1.0) - cost;
    res.turnover += change;
    res.total_cost += cost;
    held[t] = p != 0.0;
    prev_position = p;
  }
  fill_return_metrics(res, held);
  return res;
}

void fill_return_metrics(BacktestResult& res, const std::vector<bool>& held) {
  const size_t num_returns = res.returns.size();
  FOXHUNT_CHECK(num_returns >= 1 && held.size() == num_returns, kComponent,
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
}

nlohmann::json to_json(const BacktestResult& r, bool include_series) {
  nlohmann::json j = {{"total_return", r.total_return},
                      {"annualized_return", r.annualized_return},
                      {"volatility", r.volatility},
                      {"sharpe", r.sharpe},
                      {"sortino", r.sortino},
                      {"max_drawdown", r.max_drawdown},
                      {"max_drawdown_duration_bars", r.max_drawdown_duration_bars},
                      {"turnover", r.turnover},
                      {"turnover_per_year", r.turnover_per_year},
                      {"hit_rate", r.hit_rate},
                      {"exposure", r.exposure},
                      {"total_cost", r.total_cost},
                      {"bars", r.bars},
                      {"cost_bps", r.cost_bps},
                      {"periods_per_year", r.periods_per_year}};
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
  const size_t n = timestamps_ms.size();
  FOXHUNT_CHECK(n >= 2, kComponent, "infer_periods_per_year: expected at least 2 timestamps, got ",
                n);
  std::vector<int64_t> gaps(n - 1);
  for (size_t i = 1; i < n; ++i) {
    FOXHUNT_CHECK(timestamps_ms[i] > timestamps_ms[i - 1], kComponent,
                  "infer_periods_per_year: expected strictly increasing timestamps, got ",
                  timestamps_ms[i], " at index ", i, " after ", timestamps_ms[i - 1]);
    gaps[i - 1] = timestamps_ms[i] - timestamps_ms[i - 1];
  }
  constexpr double kDayMs = 86'400'000.0;
  constexpr double kYearMs = 365.25 * kDayMs;
  const double span = static_cast<double>(timestamps_ms.back() - timestamps_ms.front());
  if (span >= 30.0 * kDayMs) return static_cast<double>(n - 1) / (span / kYearMs);
  // Too short to see weekends and holidays: the typical spacing is all there is.
  const size_t mid = gaps.size() / 2;
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(mid), gaps.end());
  double median = static_cast<double>(gaps[mid]);
  if (gaps.size() % 2 == 0) {
    const int64_t lower = *std::max_element(gaps.begin(), gaps.begin() + mid);
    median = 0.5 * (median + static_cast<double>(lower));
  }
  return kYearMs / median;
}

double infer_periods_per_year(const BarSeries& series) {
  std::vector<int64_t> ms;
  ms.reserve(series.bars.size());
  for (const Bar& b : series.bars) ms.push_back(b.timestamp * 1000);
  return infer_periods_per_year(ms);
}

}  // namespace foxhunt::data
