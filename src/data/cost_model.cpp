#include "foxhunt/data/cost_model.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"

namespace foxhunt::data {

namespace {

constexpr const char* kCostModelComponent = "costs";

void check_term(const char* name, double v) {
  FOXHUNT_CHECK(std::isfinite(v) && v >= 0.0, kCostModelComponent, name,
                ": expected a finite number >= 0, got ", v);
}

// Sample standard deviation of x[begin, end) (n - 1 denominator); 0 for fewer than 2.
double stdev_of(const std::vector<double>& x, size_t begin, size_t end) {
  if (end < begin + 2) return 0.0;
  double s = 0.0;
  for (size_t i = begin; i < end; ++i) s += x[i];
  const double mean = s / static_cast<double>(end - begin);
  double ss = 0.0;
  for (size_t i = begin; i < end; ++i) ss += (x[i] - mean) * (x[i] - mean);
  return std::sqrt(ss / static_cast<double>(end - begin - 1));
}

}  // namespace

void check_cost_model(double flat_bps, const CostModel& m) {
  check_term("cost_bps", flat_bps);
  check_term("spread_bps", m.spread_bps);
  check_term("fee_bps", m.fee_bps);
  check_term("fee_per_contract", m.fee_per_contract);
  check_term("notional", m.notional);
  check_term("impact_k", m.impact_k);
  FOXHUNT_CHECK(std::isfinite(m.contract_multiplier) && m.contract_multiplier > 0.0,
                kCostModelComponent, "contract_multiplier: expected a finite number > 0, got ",
                m.contract_multiplier);
  FOXHUNT_CHECK(m.window >= 2, kCostModelComponent, "window: expected at least 2 bars, got ",
                m.window);
}

std::vector<BarCostRates> bar_cost_rates(double flat_bps, const CostModel& m,
                                         const std::vector<double>& closes,
                                         const MarketCostInputs& in) {
  check_cost_model(flat_bps, m);
  const size_t n = closes.size();
  FOXHUNT_CHECK(in.volumes.empty() || in.volumes.size() == n, kCostModelComponent,
                "volumes: expected one per close (", n, ") or none, got ", in.volumes.size());
  FOXHUNT_CHECK(in.spreads.empty() || in.spreads.size() == n, kCostModelComponent,
                "spreads: expected one per close (", n, ") or none, got ", in.spreads.size());
  for (size_t t = 0; t < n; ++t) {
    FOXHUNT_CHECK(std::isfinite(closes[t]) && closes[t] > 0.0, kCostModelComponent, "closes[", t,
                  "]: expected a finite price > 0, got ", closes[t]);
    if (!in.volumes.empty())
      FOXHUNT_CHECK(std::isfinite(in.volumes[t]) && in.volumes[t] >= 0.0, kCostModelComponent,
                    "volumes[", t, "]: expected a finite volume >= 0, got ", in.volumes[t]);
    if (!in.spreads.empty())
      FOXHUNT_CHECK(
          std::isnan(in.spreads[t]) || (std::isfinite(in.spreads[t]) && in.spreads[t] >= 0),
          kCostModelComponent, "spreads[", t,
          "]: expected a relative spread >= 0 (or NaN: unknown), got ", in.spreads[t]);
  }
  const auto window = static_cast<size_t>(m.window);
  // Every log return known so far: the past ones, then the closes' (returns[k] known at bar
  // t once k < past + t).
  std::vector<double> returns = in.past_returns;
  const size_t past = returns.size();
  for (size_t t = 1; t < n; ++t) returns.push_back(std::log(closes[t] / closes[t - 1]));
  const double warmup_sigma = stdev_of(returns, past, std::min(returns.size(), past + window));

  std::vector<BarCostRates> out(n);
  double volume_sum = 0.0;
  for (size_t t = 0; t < n; ++t) {
    auto& r = out[t];
    r.flat = flat_bps * 1e-4;
    const bool quoted = !in.spreads.empty() && !std::isnan(in.spreads[t]);
    r.spread = 0.5 * (quoted ? in.spreads[t] : m.spread_bps * 1e-4);
    r.fees = m.fee_bps * 1e-4 + m.fee_per_contract / (closes[t] * m.contract_multiplier);
    if (in.volumes.empty() || m.impact_k == 0.0) continue;
    // The mean volume of the last `window` bars up to and including t (a running sum).
    volume_sum += in.volumes[t];
    if (t >= window) volume_sum -= in.volumes[t - window];
    const double adv = volume_sum / static_cast<double>(std::min(t + 1, window));
    if (!(adv > 0.0)) continue;
    const size_t known = past + t;
    const double sigma =
        known >= 2 ? stdev_of(returns, known - std::min(known, window), known) : warmup_sigma;
    r.impact = m.impact_k * sigma / std::sqrt(closes[t] * m.contract_multiplier * adv);
  }
  return out;
}

std::optional<double> capacity_notional(double edge, double impact) {
  if (!(impact > 0.0) || !std::isfinite(impact)) return std::nullopt;
  if (!(edge > 0.0)) return 0.0;
  return (edge / impact) * (edge / impact);
}

double apply_no_trade_band(double target, double current, double band) {
  return std::abs(target - current) > band ? target : current;
}

std::vector<double> apply_no_trade_band(const std::vector<double>& targets, double band) {
  std::vector<double> out(targets.size());
  double current = 0.0;
  for (size_t t = 0; t < targets.size(); ++t)
    current = out[t] = apply_no_trade_band(targets[t], current, band);
  return out;
}

nlohmann::json to_json(const CostModel& m) {
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, m, spread_bps, fee_bps, fee_per_contract, contract_multiplier, notional,
                      impact_k, window);
  return j;
}

}  // namespace foxhunt::data
