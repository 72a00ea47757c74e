#pragma once
/// \file sharpe_stats.h
/// How much a Sharpe ratio says: the Probabilistic Sharpe Ratio (Bailey & López de Prado, "The
/// Sharpe Ratio Efficient Frontier", Journal of Risk 15(2), 2012) and the Deflated Sharpe Ratio
/// (Bailey & López de Prado, "The Deflated Sharpe Ratio: Correcting for Selection Bias, Backtest
/// Overfitting and Non-Normality", Journal of Portfolio Management 40(5), 2014). Torch-free.
///
/// Units: every Sharpe ratio here is per bar (mean / standard deviation of the bar returns, not
/// annualised), as in the papers; annualise a benchmark by dividing by sqrt(periods_per_year).
///
/// - PSR(SR*) = Phi( (SR - SR*) sqrt(n - 1) / sqrt(1 - g3 SR + (g4 - 1) / 4 SR^2) ): the
///   probability that the true Sharpe ratio exceeds the benchmark SR*, given the observed SR over
///   n returns with skewness g3 and kurtosis g4 (not excess: 3 for normal returns). Negative skew
///   and fat tails widen the Sharpe ratio's sampling error, so they lower the PSR.
/// - SR0 = sqrt(V) ((1 - gamma) Phi^-1(1 - 1/N) + gamma Phi^-1(1 - 1/(N e))): the expected
///   maximum of N Sharpe ratios with true value 0 and cross-sectional variance V (gamma the
///   Euler-Mascheroni constant). DSR = PSR(SR0): the probability that the best of N trials has a
///   true Sharpe ratio above what the search would have found in noise. N counts every candidate
///   tried (correlated candidates make it conservative: fewer independent trials would deflate
///   less).
///
/// Invalid input throws InputError "[sharpe_stats] ..." naming what was expected and received.

#include <cstdint>
#include <vector>

namespace foxhunt::data {

/// The Euler-Mascheroni constant.
inline constexpr double kEulerGamma = 0.57721566490153286061;

/// The sample a Sharpe ratio was measured on.
struct SharpeSample {
  double sharpe = 0.0;       ///< observed Sharpe ratio per bar (not annualised)
  int64_t observations = 0;  ///< bar returns it was measured on (>= 1)
  double skewness = 0.0;     ///< skewness of the returns (0 for normal returns)
  double kurtosis = 3.0;     ///< kurtosis of the returns, not excess (3 for normal returns)
};

/// The search a Sharpe ratio was selected by.
struct SharpeTrials {
  int64_t trials = 1;            ///< candidates tried, N (>= 1)
  double sharpe_variance = 0.0;  ///< variance of their per-bar Sharpe ratios, V (>= 0)
};

/// Moments of bar returns, with the estimators the papers use: the Sharpe ratio with the sample
/// standard deviation (n - 1, as data::sharpe_ratio), skewness m3 / m2^1.5 and kurtosis m4 / m2^2
/// from the central moments m_k = mean((r - mean)^k). Without variation (m2 = 0, or fewer than
/// two returns) the Sharpe ratio is 0 and the skewness and kurtosis are the normal 0 and 3.
/// InputError for no returns or a non-finite one.
SharpeSample sharpe_sample(const std::vector<double>& returns);

/// The standard normal CDF, 0.5 erfc(-x / sqrt 2).
double normal_cdf(double x);

/// PSR(benchmark) of `s` (see the file comment); `benchmark` per bar. When the variance term is
/// not > 0 (for moments of real data only at g4 = 1 + g3^2, a two-point distribution; below it
/// for moments that no distribution has) the sampling error is taken as 0: 1 above the
/// benchmark, 0 below, 0.5 at it. With a single observation (sqrt(n - 1) = 0) it
/// is 0.5. InputError for observations < 1, a non-finite input or a kurtosis below 1.
double probabilistic_sharpe_ratio(const SharpeSample& s, double benchmark = 0.0);

/// SR0 of the file comment: the expected maximum per-bar Sharpe ratio of `t.trials` candidates
/// with no skill; 0 for a single trial (nothing was selected). InputError for trials < 1 or a
/// negative or non-finite variance.
double expected_max_sharpe(const SharpeTrials& t);

/// DSR = PSR(SR0) of the best of `t` (see the file comment).
double deflated_sharpe_ratio(const SharpeSample& s, const SharpeTrials& t);

/// Sample variance (n - 1) of `values`; 0 for fewer than two. Used for V over the trials.
double sample_variance(const std::vector<double>& values);

}  // namespace foxhunt::data
