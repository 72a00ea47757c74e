#include "foxhunt/data/sharpe_stats.h"

#include <cmath>

#include "foxhunt/core/error.h"
#include "foxhunt/data/forecast_eval.h"

namespace foxhunt::data {

namespace {

constexpr const char* kSharpeStatsComponent = "sharpe_stats";

void check_sample(const SharpeSample& s) {
  FOXHUNT_CHECK(s.observations >= 1, kSharpeStatsComponent,
                "expected at least 1 observation behind a Sharpe ratio, got ", s.observations);
  FOXHUNT_CHECK(std::isfinite(s.sharpe) && std::isfinite(s.skewness), kSharpeStatsComponent,
                "expected a finite Sharpe ratio and skewness, got ", s.sharpe, " and ", s.skewness);
  FOXHUNT_CHECK(std::isfinite(s.kurtosis) && s.kurtosis >= 1.0, kSharpeStatsComponent,
                "kurtosis: expected a finite value >= 1 (not excess: 3 for normal returns), got ",
                s.kurtosis);
}

}  // namespace

SharpeSample sharpe_sample(const std::vector<double>& returns) {
  FOXHUNT_CHECK(!returns.empty(), kSharpeStatsComponent,
                "expected at least one return to measure a Sharpe ratio on, got none");
  const double n = static_cast<double>(returns.size());
  double sum = 0.0;
  for (size_t i = 0; i < returns.size(); ++i) {
    FOXHUNT_CHECK(std::isfinite(returns[i]), kSharpeStatsComponent, "return ", i,
                  ": expected a finite number, got ", returns[i]);
    sum += returns[i];
  }
  const double mean = sum / n;
  double m2 = 0.0, m3 = 0.0, m4 = 0.0;
  for (double r : returns) {
    const double d = r - mean, d2 = d * d;
    m2 += d2;
    m3 += d2 * d;
    m4 += d2 * d2;
  }
  SharpeSample s;
  s.observations = static_cast<int64_t>(returns.size());
  if (returns.size() < 2 || !(m2 > 0.0)) return s;
  s.sharpe = mean / std::sqrt(m2 / (n - 1.0));
  m2 /= n;
  m3 /= n;
  m4 /= n;
  s.skewness = m3 / std::pow(m2, 1.5);
  s.kurtosis = m4 / (m2 * m2);
  return s;
}

double normal_cdf(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0));
}

double probabilistic_sharpe_ratio(const SharpeSample& s, double benchmark) {
  check_sample(s);
  FOXHUNT_CHECK(std::isfinite(benchmark), kSharpeStatsComponent,
                "benchmark: expected a finite per-bar Sharpe ratio, got ", benchmark);
  const double diff = s.sharpe - benchmark;
  const double var = 1.0 - s.skewness * s.sharpe + (s.kurtosis - 1.0) / 4.0 * s.sharpe * s.sharpe;
  if (s.observations < 2 || diff == 0.0) return 0.5;
  if (!(var > 0.0)) return diff > 0.0 ? 1.0 : 0.0;
  return normal_cdf(diff * std::sqrt(static_cast<double>(s.observations - 1)) / std::sqrt(var));
}

double expected_max_sharpe(const SharpeTrials& t) {
  FOXHUNT_CHECK(t.trials >= 1, kSharpeStatsComponent, "trials: expected >= 1, got ", t.trials);
  FOXHUNT_CHECK(std::isfinite(t.sharpe_variance) && t.sharpe_variance >= 0, kSharpeStatsComponent,
                "sharpe_variance: expected a finite value >= 0, got ", t.sharpe_variance);
  if (t.trials == 1) return 0.0;  // Phi^-1(0): the approximation is for N >> 1
  const double n = static_cast<double>(t.trials);
  const double z = (1.0 - kEulerGamma) * inverse_normal_cdf(1.0 - 1.0 / n) +
                   kEulerGamma * inverse_normal_cdf(1.0 - 1.0 / (n * std::exp(1.0)));
  return std::sqrt(t.sharpe_variance) * z;
}

double deflated_sharpe_ratio(const SharpeSample& s, const SharpeTrials& t) {
  return probabilistic_sharpe_ratio(s, expected_max_sharpe(t));
}

double sample_variance(const std::vector<double>& values) {
  if (values.size() < 2) return 0.0;
  double sum = 0.0;
  for (double v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double ss = 0.0;
  for (double v : values) ss += (v - mean) * (v - mean);
  return ss / static_cast<double>(values.size() - 1);
}

}  // namespace foxhunt::data
