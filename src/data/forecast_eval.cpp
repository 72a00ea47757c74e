#include "foxhunt/data/forecast_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <numbers>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/random.h"

namespace foxhunt::data {

namespace {

constexpr const char* kForecastEvalComponent = "forecast_eval";

void check_taus(const std::vector<double>& taus) {
  FOXHUNT_CHECK(!taus.empty(), kForecastEvalComponent,
                "taus: expected at least one quantile level, got none");
  for (size_t k = 0; k < taus.size(); ++k) {
    FOXHUNT_CHECK(taus[k] > 0.0 && taus[k] < 1.0, kForecastEvalComponent, "taus[", k,
                  "]: expected a level strictly inside (0, 1), got ", taus[k]);
    FOXHUNT_CHECK(k == 0 || taus[k] > taus[k - 1], kForecastEvalComponent, "taus[", k,
                  "]: expected levels in strictly increasing order, got ", taus[k], " after ",
                  taus[k - 1]);
  }
}

void check_finite(const std::vector<double>& v, const char* name) {
  for (size_t i = 0; i < v.size(); ++i)
    FOXHUNT_CHECK(std::isfinite(v[i]), kForecastEvalComponent, name, "[", i,
                  "]: expected a finite value, got ", v[i]);
}

void check_outcomes(const std::vector<double>& y) {
  FOXHUNT_CHECK(!y.empty(), kForecastEvalComponent,
                "y: expected at least one realised value, got none");
  check_finite(y, "y");
}

/// `q` must have one row per outcome and one finite value per level.
void check_matrix(const QuantileMatrix& q, size_t n, size_t num_taus, const char* name) {
  FOXHUNT_CHECK(q.size() == n, kForecastEvalComponent, name, ": expected ", n,
                " rows (one per realised value), got ", q.size());
  for (size_t i = 0; i < n; ++i) {
    FOXHUNT_CHECK(q[i].size() == num_taus, kForecastEvalComponent, name, " row ", i, ": expected ",
                  num_taus, " quantiles (one per tau), got ", q[i].size());
    for (size_t k = 0; k < num_taus; ++k)
      FOXHUNT_CHECK(std::isfinite(q[i][k]), kForecastEvalComponent, name, "[", i, "][", k,
                    "]: expected a finite value, got ", q[i][k]);
  }
}

/// pointwise_pinball without the checks (callers have validated).
std::vector<double> pointwise_unchecked(const std::vector<double>& y, const QuantileMatrix& q,
                                        const std::vector<double>& taus) {
  std::vector<double> loss(y.size(), 0.0);
  const double k_inv = 1.0 / static_cast<double>(taus.size());
  for (size_t i = 0; i < y.size(); ++i) {
    double s = 0.0;
    for (size_t k = 0; k < taus.size(); ++k) s += pinball(y[i], q[i][k], taus[k]);
    loss[i] = s * k_inv;
  }
  return loss;
}

double skill_of(double model_loss, double baseline_loss) {
  if (baseline_loss > 0.0) return 1.0 - model_loss / baseline_loss;
  return model_loss == 0.0 ? 0.0 : -std::numeric_limits<double>::infinity();
}

/// Index of the level equal to `tau` (within rounding of decimal literals), if any.
std::optional<size_t> find_level(const std::vector<double>& taus, double tau) {
  for (size_t k = 0; k < taus.size(); ++k)
    if (std::abs(taus[k] - tau) < 1e-9) return k;
  return std::nullopt;
}

/// Fraction of y_i inside [q[i][lo], q[i][hi]].
double coverage_between(const std::vector<double>& y, const QuantileMatrix& q, size_t lo,
                        size_t hi) {
  size_t inside = 0;
  for (size_t i = 0; i < y.size(); ++i) inside += (y[i] >= q[i][lo] && y[i] <= q[i][hi]) ? 1 : 0;
  return static_cast<double>(inside) / static_cast<double>(y.size());
}

/// Shared by baselines (a) and (b): a sorted window slides over past ++ y.
QuantileMatrix rolling_empirical(const std::vector<double>& past, const std::vector<double>& y,
                                 const std::vector<double>& taus, size_t window, bool recentre,
                                 const char* what) {
  check_taus(taus);
  check_finite(past, "past");
  check_finite(y, "y");
  FOXHUNT_CHECK(window >= 1, kForecastEvalComponent, what, ": expected a window >= 1, got ",
                window);
  FOXHUNT_CHECK(!past.empty(), kForecastEvalComponent, what,
                ": expected at least 1 past value (the first forecast has nothing else), got 0");
  const size_t num_past = past.size();
  std::vector<double> win(past.end() - static_cast<std::ptrdiff_t>(std::min(window, num_past)),
                          past.end());
  std::sort(win.begin(), win.end());
  auto history = [&](size_t j) { return j < num_past ? past[j] : y[j - num_past]; };

  QuantileMatrix out(y.size(), std::vector<double>(taus.size()));
  for (size_t i = 0; i < y.size(); ++i) {
    const double centre = recentre ? empirical_quantile(win, 0.5) : 0.0;
    for (size_t k = 0; k < taus.size(); ++k) out[i][k] = empirical_quantile(win, taus[k]) - centre;
    // Only now does y_i join the history: it is the past of forecast i + 1.
    win.insert(std::upper_bound(win.begin(), win.end(), y[i]), y[i]);
    if (win.size() > window) {
      const double old = history(num_past + i - window);
      win.erase(std::lower_bound(win.begin(), win.end(), old));
    }
  }
  return out;
}

}  // namespace

double pinball(double y, double q, double tau) {
  const double d = y - q;
  return std::max(tau * d, (tau - 1.0) * d);
}

namespace {

/// Acklam's approximation for 0 < p <= 0.5 (relative error below 1.2e-9), then one Halley step
/// on the exact CDF 0.5 * erfc(-x / sqrt 2), which is accurate in the lower tail.
double inverse_normal_lower(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  constexpr double kLowTail = 0.02425;
  double x;
  if (p < kLowTail) {
    const double q = std::sqrt(-2.0 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else {
    const double q = p - 0.5;
    const double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  }
  const double e = 0.5 * std::erfc(-x / std::sqrt(2.0)) - p;
  const double u = e * std::sqrt(2.0 * std::numbers::pi) * std::exp(0.5 * x * x);
  return x - u / (1.0 + 0.5 * x * u);
}

}  // namespace

double inverse_normal_cdf(double p) {
  FOXHUNT_CHECK(p > 0.0 && p < 1.0, kForecastEvalComponent,
                "inverse_normal_cdf: expected a probability strictly inside (0, 1), got ", p);
  // Mirror the upper half: 1 - p is exact there, and the lower tail keeps full precision.
  return p <= 0.5 ? inverse_normal_lower(p) : -inverse_normal_lower(1.0 - p);
}

double empirical_quantile(const std::vector<double>& sorted, double tau) {
  FOXHUNT_CHECK(!sorted.empty(), kForecastEvalComponent,
                "empirical_quantile: expected values, got none");
  FOXHUNT_CHECK(tau >= 0.0 && tau <= 1.0, kForecastEvalComponent,
                "empirical_quantile: expected a level in [0, 1], got ", tau);
  const double h = static_cast<double>(sorted.size() - 1) * tau;
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  const double a = sorted[lo], b = sorted[lo + 1];
  if (a == b) return a;  // also keeps equal infinities from turning into NaN
  return a + (h - static_cast<double>(lo)) * (b - a);
}

QuantileScores score_quantiles(const std::vector<double>& y, const QuantileMatrix& q,
                               const std::vector<double>& taus) {
  check_outcomes(y);
  check_taus(taus);
  check_matrix(q, y.size(), taus.size(), "q");
  const size_t n = y.size(), num_taus = taus.size();
  QuantileScores s;
  s.taus = taus;
  s.n = n;
  s.pinball.assign(num_taus, 0.0);
  double abs_sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    abs_sum += std::abs(y[i]);
    for (size_t k = 0; k < num_taus; ++k) s.pinball[k] += pinball(y[i], q[i][k], taus[k]);
  }
  s.q_risk.resize(num_taus);
  for (size_t k = 0; k < num_taus; ++k) {
    s.q_risk[k] =
        abs_sum > 0.0 ? 2.0 * s.pinball[k] / abs_sum : std::numeric_limits<double>::quiet_NaN();
    s.pinball[k] /= static_cast<double>(n);
    s.mean_pinball += s.pinball[k];
  }
  s.mean_pinball /= static_cast<double>(num_taus);
  s.coverage = coverage_between(y, q, 0, num_taus - 1);
  s.nominal_coverage = taus.back() - taus.front();
  return s;
}

nlohmann::json to_json(const QuantileScores& s) {
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, s, taus, pinball, mean_pinball, q_risk, coverage, nominal_coverage, n);
  return j;
}

std::vector<double> pointwise_pinball(const std::vector<double>& y, const QuantileMatrix& q,
                                      const std::vector<double>& taus) {
  check_outcomes(y);
  check_taus(taus);
  check_matrix(q, y.size(), taus.size(), "q");
  return pointwise_unchecked(y, q, taus);
}

QuantileMatrix baseline_rolling_quantiles(const std::vector<double>& past,
                                          const std::vector<double>& y,
                                          const std::vector<double>& taus, size_t window) {
  return rolling_empirical(past, y, taus, window, false, "rolling quantiles baseline");
}

QuantileMatrix baseline_zero_median(const std::vector<double>& past, const std::vector<double>& y,
                                    const std::vector<double>& taus, size_t window) {
  return rolling_empirical(past, y, taus, window, true, "zero-median baseline");
}

QuantileMatrix baseline_gaussian_vol(const std::vector<double>& past, const std::vector<double>& y,
                                     const std::vector<double>& taus, size_t window) {
  check_taus(taus);
  check_finite(past, "past");
  check_finite(y, "y");
  FOXHUNT_CHECK(window >= 2, kForecastEvalComponent,
                "Gaussian volatility baseline: expected a window >= 2 (a standard deviation), got ",
                window);
  FOXHUNT_CHECK(past.size() >= 2, kForecastEvalComponent,
                "Gaussian volatility baseline: expected at least 2 past values, got ", past.size());
  std::vector<double> z(taus.size());
  for (size_t k = 0; k < taus.size(); ++k) z[k] = inverse_normal_cdf(taus[k]);
  const size_t num_past = past.size();
  auto history = [&](size_t j) { return j < num_past ? past[j] : y[j - num_past]; };

  QuantileMatrix out(y.size(), std::vector<double>(taus.size()));
  for (size_t i = 0; i < y.size(); ++i) {
    const size_t end = num_past + i;  // forecast i sees history[0, end)
    const size_t begin = end > window ? end - window : 0;
    const double m = static_cast<double>(end - begin);
    double mean = 0.0;
    for (size_t j = begin; j < end; ++j) mean += history(j);
    mean /= m;
    double ss = 0.0;
    for (size_t j = begin; j < end; ++j) ss += (history(j) - mean) * (history(j) - mean);
    const double sigma = std::sqrt(ss / (m - 1.0));
    for (size_t k = 0; k < taus.size(); ++k) out[i][k] = sigma * z[k];
  }
  return out;
}

QuantileMatrix baseline_unconditional(const std::vector<double>& past, size_t n,
                                      const std::vector<double>& taus) {
  check_taus(taus);
  check_finite(past, "past");
  FOXHUNT_CHECK(!past.empty(), kForecastEvalComponent,
                "unconditional baseline: expected at least 1 past value, got 0");
  std::vector<double> sorted = past;
  std::sort(sorted.begin(), sorted.end());
  std::vector<double> row(taus.size());
  for (size_t k = 0; k < taus.size(); ++k) row[k] = empirical_quantile(sorted, taus[k]);
  return QuantileMatrix(n, row);
}

SkillResult skill_vs(const std::vector<double>& y, const QuantileMatrix& model,
                     const QuantileMatrix& baseline, const std::vector<double>& taus,
                     const std::string& baseline_name, uint64_t seed, int resamples, size_t block) {
  check_outcomes(y);
  check_taus(taus);
  check_matrix(model, y.size(), taus.size(), "model");
  check_matrix(baseline, y.size(), taus.size(), baseline_name.c_str());
  FOXHUNT_CHECK(resamples >= 1, kForecastEvalComponent, "skill_vs: expected resamples >= 1, got ",
                resamples);
  FOXHUNT_CHECK(block >= 1, kForecastEvalComponent, "skill_vs: expected a block length >= 1, got ",
                block);
  const size_t n = y.size();
  const std::vector<double> lm = pointwise_unchecked(y, model, taus);
  const std::vector<double> lb = pointwise_unchecked(y, baseline, taus);
  // Prefix sums: a block's loss is two lookups, so a resample costs n / block steps.
  std::vector<double> cm(n + 1, 0.0), cb(n + 1, 0.0);
  for (size_t i = 0; i < n; ++i) {
    cm[i + 1] = cm[i] + lm[i];
    cb[i + 1] = cb[i] + lb[i];
  }
  SkillResult res;
  res.baseline = baseline_name;
  res.model_loss = cm[n] / static_cast<double>(n);
  res.baseline_loss = cb[n] / static_cast<double>(n);
  res.skill = skill_of(res.model_loss, res.baseline_loss);

  const size_t len = std::min(block, n);
  auto circular_sum = [n](const std::vector<double>& c, size_t start, size_t count) {
    if (start + count <= n) return c[start + count] - c[start];
    return (c[n] - c[start]) + c[start + count - n];
  };
  Rng rng(seed);
  std::vector<double> skills(static_cast<size_t>(resamples));
  for (double& s : skills) {
    double sum_m = 0.0, sum_b = 0.0;
    for (size_t filled = 0; filled < n;) {
      const size_t start = static_cast<size_t>(rng.uniform_int(n));
      const size_t count = std::min(len, n - filled);
      sum_m += circular_sum(cm, start, count);
      sum_b += circular_sum(cb, start, count);
      filled += count;
    }
    s = skill_of(sum_m, sum_b);  // same n points for both: the ratio of sums is of means
  }
  std::sort(skills.begin(), skills.end());
  res.skill_lo = empirical_quantile(skills, 0.025);
  res.skill_hi = empirical_quantile(skills, 0.975);
  return res;
}

nlohmann::json to_json(const SkillResult& s) {
  return {{"baseline", s.baseline},           {"model_loss", s.model_loss},
          {"baseline_loss", s.baseline_loss}, {"skill", s.skill},
          {"skill_lo", s.skill_lo},           {"skill_hi", s.skill_hi}};
}

ForecastEvaluation evaluate_forecast(const std::vector<double>& past, const std::vector<double>& y,
                                     const QuantileMatrix& q, const std::vector<double>& taus,
                                     uint64_t seed, const ForecastEvalOptions& options) {
  ForecastEvaluation ev;
  ev.model = score_quantiles(y, q, taus);  // validates y, q and taus
  check_finite(past, "past");
  FOXHUNT_CHECK(past.size() >= 2, kForecastEvalComponent,
                "evaluate_forecast: expected at least 2 past values before the evaluation window "
                "(the baselines need a history), got ",
                past.size());
  for (size_t a = 0; a < options.vol_windows.size(); ++a)
    for (size_t b = 0; b < a; ++b)
      FOXHUNT_CHECK(options.vol_windows[a] != options.vol_windows[b], kForecastEvalComponent,
                    "vol_windows: expected distinct windows, got ", options.vol_windows[a],
                    " twice (at ", b, " and ", a, ")");

  std::vector<std::pair<std::string, QuantileMatrix>> forecasts;
  const std::string qw = std::to_string(options.quantile_window);
  forecasts.emplace_back("rolling_quantiles_w" + qw,
                         baseline_rolling_quantiles(past, y, taus, options.quantile_window));
  forecasts.emplace_back("zero_median_w" + qw,
                         baseline_zero_median(past, y, taus, options.quantile_window));
  for (size_t w : options.vol_windows)
    forecasts.emplace_back("gaussian_vol_w" + std::to_string(w),
                           baseline_gaussian_vol(past, y, taus, w));
  forecasts.emplace_back("unconditional", baseline_unconditional(past, y.size(), taus));

  size_t best = 0;
  for (size_t b = 0; b < forecasts.size(); ++b) {
    const auto& [name, fq] = forecasts[b];
    ev.baselines.emplace_back(name, score_quantiles(y, fq, taus));
    // One seed for all: every skill is measured on the same resampled points.
    ev.skills.push_back(skill_vs(y, q, fq, taus, name, seed, options.resamples, options.block));
    if (ev.baselines[b].second.mean_pinball < ev.baselines[best].second.mean_pinball) best = b;
  }
  ev.best_baseline = ev.baselines[best].first;
  ev.skill_vs_best = ev.skills[best].skill;
  ev.skill_vs_best_lo = ev.skills[best].skill_lo;
  ev.skill_vs_best_hi = ev.skills[best].skill_hi;
  ev.beats_best_baseline = ev.skill_vs_best >= 0.0;
  ev.significantly_beats_best = ev.skill_vs_best_lo > 0.0;

  const double n = static_cast<double>(y.size());
  for (size_t k = 0; k < taus.size(); ++k) {
    size_t below = 0;
    for (size_t i = 0; i < y.size(); ++i) below += y[i] < q[i][k] ? 1 : 0;
    ev.calibration.emplace_back(taus[k], static_cast<double>(below) / n);
  }
  for (size_t k = 0; k < taus.size() && taus[k] < 0.5; ++k)
    if (const auto hi = find_level(taus, 1.0 - taus[k]))
      ev.central_coverage.emplace_back(1.0 - 2.0 * taus[k], coverage_between(y, q, k, *hi));
  const auto p10 = find_level(taus, 0.1), p90 = find_level(taus, 0.9);
  if (p10 && p90) ev.coverage_p10_p90 = coverage_between(y, q, *p10, *p90);
  return ev;
}

nlohmann::json to_json(const ForecastEvaluation& ev) {
  nlohmann::json baselines = nlohmann::json::object();
  for (const auto& [name, scores] : ev.baselines) baselines[name] = to_json(scores);
  nlohmann::json skills = nlohmann::json::array();
  for (const SkillResult& s : ev.skills) skills.push_back(to_json(s));
  nlohmann::json calibration = nlohmann::json::array();
  for (const auto& [tau, below] : ev.calibration)
    calibration.push_back(nlohmann::json{{"tau", tau}, {"observed_below", below}});
  nlohmann::json central = nlohmann::json::array();
  for (const auto& [nominal, observed] : ev.central_coverage)
    central.push_back(nlohmann::json{{"nominal", nominal}, {"observed", observed}});
  nlohmann::json j = {{"model", to_json(ev.model)},
                      {"baselines", baselines},
                      {"skills", skills},
                      {"calibration", calibration},
                      {"central_coverage", central},
                      {"skill", ev.skill_vs_best},
                      {"skill_lo", ev.skill_vs_best_lo},
                      {"skill_hi", ev.skill_vs_best_hi}};
  FOXHUNT_JSON_FIELDS(j, ev, best_baseline, beats_best_baseline, significantly_beats_best);
  j["coverage_p10_p90"] = json_or_null(ev.coverage_p10_p90);
  return j;
}

}  // namespace foxhunt::data
