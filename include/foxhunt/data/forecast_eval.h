#pragma once
/// \file forecast_eval.h
/// Evaluation of probabilistic (quantile) forecasts: pinball loss, normalised q-risk, coverage
/// and calibration, naive baselines that use only the past, and the skill of a model against
/// them with a block-bootstrap interval. Torch-free.
///
/// Shapes and conventions:
/// - y_0..y_{n-1} are the realised values of the evaluation window (e.g. next-bar returns).
/// - A quantile forecast is a matrix Q with n rows and K columns: Q[i][k] forecasts the tau_k
///   quantile of y_i. The levels tau_0 < ... < tau_{K-1} lie strictly inside (0, 1).
/// - Crossing quantiles (Q[i][k] > Q[i][k+1]) are scored as given, not sorted: a model that
///   crosses pays for it in coverage and pinball loss.
/// - Baselines forecast y_i from `past` (realised values before the window) followed by
///   y_0..y_{i-1}: strictly the past, never y_i itself.
/// - Empirical quantiles interpolate linearly between order statistics (Hyndman-Fan type 7, the
///   numpy default): for sorted x_0..x_{m-1}, h = (m - 1) * tau, Q = x_{floor h} +
///   (h - floor h) * (x_{floor h + 1} - x_{floor h}).
/// Invalid input throws InputError "[forecast_eval] ..." naming what was expected, what was
/// received and where.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace foxhunt::data {

/// A quantile forecast: row i holds the forecast quantiles of y_i, one per level.
using QuantileMatrix = std::vector<std::vector<double>>;

/// Pinball (quantile) loss of forecast `q` at level `tau` for the outcome `y`:
/// max(tau * (y - q), (tau - 1) * (y - q)). Its expectation is minimised by the true quantile.
double pinball(double y, double q, double tau);

/// Inverse of the standard normal CDF (Acklam's rational approximation refined by one Halley
/// step on erfc, accurate to about 1e-15). Throws InputError unless 0 < p < 1.
double inverse_normal_cdf(double p);

/// Type-7 empirical quantile of `sorted` (ascending, non-empty) at level `tau` in [0, 1].
double empirical_quantile(const std::vector<double>& sorted, double tau);

/// Scores of one quantile forecast over an evaluation window.
struct QuantileScores {
  /// The quantile levels scored.
  std::vector<double> taus;
  /// Mean pinball loss per level (same order as taus).
  std::vector<double> pinball;
  /// Mean of `pinball` over the levels (equal to the mean over all points and levels).
  double mean_pinball = 0.0;
  /// Normalised quantile risk per level, 2 * sum_i pinball_i / sum_i |y_i| (the q-risk of the
  /// Temporal Fusion Transformer paper); NaN (JSON null) when every y is 0.
  std::vector<double> q_risk;
  /// Fraction of y_i inside [Q[i][0], Q[i][K-1]] (the lowest and highest levels, inclusive).
  double coverage = 0.0;
  /// tau_{K-1} - tau_0, what `coverage` should be for a calibrated forecast.
  double nominal_coverage = 0.0;
  /// Number of points scored.
  size_t n = 0;
};

/// Scores the forecast `q` (n rows of taus.size() values) of `y` (n values). Throws InputError
/// for an empty y, a row count or row width that does not match, taus not strictly increasing
/// in (0, 1), or a non-finite value.
QuantileScores score_quantiles(const std::vector<double>& y, const QuantileMatrix& q,
                               const std::vector<double>& taus);

/// JSON with keys taus, pinball, mean_pinball, q_risk, coverage, nominal_coverage, n.
nlohmann::json to_json(const QuantileScores& scores);

/// Mean pinball loss over the levels, per point: element i is
/// mean_k pinball(y_i, q[i][k], taus[k]). Validates like score_quantiles.
std::vector<double> pointwise_pinball(const std::vector<double>& y, const QuantileMatrix& q,
                                      const std::vector<double>& taus);

/// Baseline (a): rolling empirical quantiles. The forecast of y_i is the type-7 empirical
/// quantile of the last `window` values of past ++ y_0..y_{i-1} (fewer while less history
/// exists). Needs a non-empty `past` and window >= 1.
QuantileMatrix baseline_rolling_quantiles(const std::vector<double>& past,
                                          const std::vector<double>& y,
                                          const std::vector<double>& taus, size_t window = 250);

/// Baseline (b): "no change" with an empirical spread. The rolling quantiles of baseline (a)
/// re-centred so that the median is 0: Q_tau = rolling Q_tau - rolling median. For returns this
/// is the persistence forecast (median 0) with the recent spread of outcomes around it.
QuantileMatrix baseline_zero_median(const std::vector<double>& past, const std::vector<double>& y,
                                    const std::vector<double>& taus, size_t window = 250);

/// Baseline (c): rolling-volatility Gaussian. Mean 0 and sigma = the sample standard deviation
/// (n - 1 denominator) of the last `window` values of past ++ y_0..y_{i-1}: Q_tau = sigma *
/// inverse_normal_cdf(tau). Needs at least 2 past values and window >= 2.
QuantileMatrix baseline_gaussian_vol(const std::vector<double>& past, const std::vector<double>& y,
                                     const std::vector<double>& taus, size_t window = 20);

/// Unconditional baseline: the empirical quantiles of all of `past`, the same for each of the
/// `n` points (it never learns from the evaluation window). Needs a non-empty `past`.
QuantileMatrix baseline_unconditional(const std::vector<double>& past, size_t n,
                                      const std::vector<double>& taus);

/// Skill of a model's forecast against one baseline's, on the mean pinball loss.
struct SkillResult {
  /// Name of the baseline.
  std::string baseline;
  /// Mean pinball loss of the model (over points and levels).
  double model_loss = 0.0;
  /// Mean pinball loss of the baseline.
  double baseline_loss = 0.0;
  /// 1 - model_loss / baseline_loss: > 0 beats the baseline, 1 is a perfect forecast. When the
  /// baseline loss is 0: 0 if the model loss is 0 too, else -infinity (JSON null).
  double skill = 0.0;
  /// Lower end of the 95% bootstrap percentile interval of `skill`.
  double skill_lo = 0.0;
  /// Upper end of the 95% bootstrap percentile interval of `skill`.
  double skill_hi = 0.0;
};

/// Skill of `model` against `baseline` (both n x taus.size()) on outcomes `y`, with a 95%
/// interval from a circular moving-block bootstrap over time: each resample concatenates blocks
/// of `block` consecutive points (wrapping around the end) from uniformly drawn starts until it
/// has n points, because forecast errors are autocorrelated; both forecasts are scored on the
/// same resampled points and the skill is recomputed per resample; the interval is the 2.5% and
/// 97.5% empirical quantiles. Deterministic for a seed; the resampled points depend only on
/// (seed, n, block, resamples), so calls with the same seed share them. Throws InputError for
/// resamples < 1, block < 1 and what score_quantiles rejects.
SkillResult skill_vs(const std::vector<double>& y, const QuantileMatrix& model,
                     const QuantileMatrix& baseline, const std::vector<double>& taus,
                     const std::string& baseline_name, uint64_t seed, int resamples = 1000,
                     size_t block = 20);

/// JSON with keys baseline, model_loss, baseline_loss, skill, skill_lo, skill_hi.
nlohmann::json to_json(const SkillResult& skill);

/// Settings of evaluate_forecast.
struct ForecastEvalOptions {
  /// Window of the rolling empirical baselines (a) and (b).
  size_t quantile_window = 250;
  /// Windows of the rolling-volatility Gaussian baselines (c), one baseline each.
  std::vector<size_t> vol_windows = {20, 60};
  /// Bootstrap resamples per skill.
  int resamples = 1000;
  /// Bootstrap block length in points.
  size_t block = 20;
};

/// A model's forecast scored and compared with every naive baseline.
struct ForecastEvaluation {
  /// Scores of the model.
  QuantileScores model;
  /// Scores of each baseline, by name: "rolling_quantiles_w<W>", "zero_median_w<W>",
  /// "gaussian_vol_w<W>" per volatility window, "unconditional".
  std::vector<std::pair<std::string, QuantileScores>> baselines;
  /// Skill of the model against each baseline (same order as `baselines`).
  std::vector<SkillResult> skills;
  /// The baseline with the lowest mean pinball loss (the first one on a tie).
  std::string best_baseline;
  /// Skill against the best baseline.
  double skill_vs_best = 0.0;
  /// Lower end of its 95% bootstrap interval.
  double skill_vs_best_lo = 0.0;
  /// Upper end of its 95% bootstrap interval.
  double skill_vs_best_hi = 0.0;
  /// skill_vs_best >= 0: the model does at least as well as the best naive baseline.
  bool beats_best_baseline = false;
  /// skill_vs_best_lo > 0: it does better and the bootstrap interval excludes "no better".
  bool significantly_beats_best = false;
  /// Per level: (tau, fraction of y_i strictly below Q[i][k]); tau for a calibrated forecast.
  std::vector<std::pair<double, double>> calibration;
  /// For each symmetric pair of levels (tau, 1 - tau), tau < 0.5, from the outermost pair in:
  /// (nominal central coverage 1 - 2 tau, observed fraction of y_i in [Q_tau, Q_{1-tau}]).
  std::vector<std::pair<double, double>> central_coverage;
  /// The model's coverage between its 0.1 and 0.9 quantiles, when both levels are present.
  std::optional<double> coverage_p10_p90;
};

/// Scores `q` (the model's forecast of `y`) and every baseline built from `past` ++ y, computes
/// the skills (all with `seed`, hence on the same resamples) and the calibration. Needs at least
/// 2 values in `past` (the Gaussian baseline's first standard deviation). Throws InputError for
/// what the parts reject.
ForecastEvaluation evaluate_forecast(const std::vector<double>& past, const std::vector<double>& y,
                                     const QuantileMatrix& q, const std::vector<double>& taus,
                                     uint64_t seed, const ForecastEvalOptions& options = {});

/// JSON with keys model, baselines (name -> scores), skills, best_baseline, skill, skill_lo,
/// skill_hi, beats_best_baseline, significantly_beats_best, coverage_p10_p90 (null when the
/// levels 0.1 and 0.9 are not both present), calibration (array of {tau, observed_below}) and
/// central_coverage (array of {nominal, observed}).
nlohmann::json to_json(const ForecastEvaluation& evaluation);

}  // namespace foxhunt::data
