// The seeded synthetic generator of bars.h (the product's embedded default data) and what is
// computed over a series: validation, log returns, autocorrelation and the summary.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "bar_csv.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/random.h"
#include "foxhunt/data/bars.h"

namespace foxhunt::data {

using csv::check_bar_values;
using csv::kBarsComponent;

namespace {

double round_to_tick(double price, double tick) {
  if (tick <= 0.0) return price;
  // Dividing by an integral 1/tick (1e-4 -> 10000) lands on the double nearest the decimal
  // price, so the CSV shows 99.8766 rather than 99.87660000000001.
  const double inv = std::round(1.0 / tick);
  const double rounded = std::abs(inv * tick - 1.0) < 1e-12 ? std::round(price * inv) / inv
                                                            : std::round(price / tick) * tick;
  return std::max(tick, rounded);
}

}  // namespace

void validate_bars(const BarSeries& series) {
  const std::string name = series.source.empty() ? std::string("series") : series.source;
  FOXHUNT_CHECK(!series.bars.empty(), kBarsComponent, name, ": empty series: no bars");
  FOXHUNT_CHECK(series.flow.empty() || series.flow.size() == series.bars.size(), kBarsComponent,
                name, ": expected a flow for each of the ", series.bars.size(),
                " bars (or none), got ", series.flow.size());
  for (size_t i = 0; i < series.bars.size(); ++i) {
    const std::string prefix = name + ": bar " + std::to_string(i) + ": ";
    check_bar_values(series.bars[i], prefix);
    if (i > 0)
      FOXHUNT_CHECK(series.bars[i].timestamp > series.bars[i - 1].timestamp, kBarsComponent, prefix,
                    "timestamp ", series.bars[i].timestamp, " is not after the previous one ",
                    series.bars[i - 1].timestamp);
    if (series.close_only) {
      const Bar& b = series.bars[i];
      FOXHUNT_CHECK(b.open == b.close && b.high == b.close && b.low == b.close, kBarsComponent,
                    prefix, "close-only series needs open = high = low = close");
    }
  }
}

std::vector<double> log_returns(const BarSeries& series) {
  std::vector<double> r(series.bars.size(), 0.0);
  for (size_t i = 1; i < series.bars.size(); ++i)
    r[i] = std::log(series.bars[i].close / series.bars[i - 1].close);
  return r;
}

BarSeries generate_synthetic(const SyntheticOptions& o, std::vector<int>* regimes_out) {
  constexpr const char* c = "bars";
  FOXHUNT_CHECK(o.bars >= 1, c, "synthetic: bars must be >= 1, got ", o.bars);
  FOXHUNT_CHECK(o.bar_seconds >= 1, c, "synthetic: bar_seconds must be >= 1, got ", o.bar_seconds);
  FOXHUNT_CHECK(
      o.start_timestamp >= 0 &&
          o.bars <= (std::numeric_limits<int64_t>::max() - o.start_timestamp) / o.bar_seconds,
      c, "synthetic: start_timestamp ", o.start_timestamp, " + bars ", o.bars, " x bar_seconds ",
      o.bar_seconds, " overflows int64");
  FOXHUNT_CHECK(std::isfinite(o.initial_price) && o.initial_price > 0, c,
                "synthetic: initial_price must be > 0, got ", o.initial_price);
  FOXHUNT_CHECK(o.tick_size >= 0 && o.tick_size < o.initial_price, c,
                "synthetic: tick_size must be in [0, initial_price), got ", o.tick_size);
  FOXHUNT_CHECK(!o.regimes.empty(), c, "synthetic: at least one regime is required");
  for (const Regime& r : o.regimes)
    FOXHUNT_CHECK(std::isfinite(r.drift) && std::isfinite(r.volatility) && r.volatility > 0 &&
                      r.volatility < 0.5,
                  c, "synthetic: regime volatility must be in (0, 0.5), got ", r.volatility);
  FOXHUNT_CHECK(o.regime_persistence >= 0 && o.regime_persistence <= 1, c,
                "synthetic: regime_persistence must be in [0, 1], got ", o.regime_persistence);
  FOXHUNT_CHECK(o.garch_alpha >= 0 && o.garch_beta >= 0 && o.garch_alpha + o.garch_beta < 1, c,
                "synthetic: need garch_alpha, garch_beta >= 0 and alpha + beta < 1, got ",
                o.garch_alpha, " + ", o.garch_beta);
  FOXHUNT_CHECK(o.jump_probability >= 0 && o.jump_probability <= 1, c,
                "synthetic: jump_probability must be in [0, 1], got ", o.jump_probability);
  FOXHUNT_CHECK(std::isfinite(o.jump_mean) && o.jump_volatility >= 0 && o.jump_volatility < 1, c,
                "synthetic: jump_volatility must be in [0, 1), got ", o.jump_volatility);
  FOXHUNT_CHECK(o.wick >= 0 && o.wick < 100, c, "synthetic: wick must be in [0, 100), got ",
                o.wick);
  FOXHUNT_CHECK(o.base_volume >= 0 && o.volume_u_amplitude >= 0 &&
                    o.volume_return_sensitivity >= 0 && o.volume_noise >= 0 && o.volume_noise < 5,
                c, "synthetic: volume parameters must be >= 0 (noise < 5)");

  Rng rng(o.seed);
  BarSeries series;
  series.source = "synthetic(seed=" + std::to_string(o.seed) + ")";
  series.bars.reserve(static_cast<size_t>(o.bars));
  if (regimes_out) regimes_out->assign(static_cast<size_t>(o.bars), 0);

  const int n_regimes = static_cast<int>(o.regimes.size());
  int regime = 0;
  double h = 1.0;       // GARCH variance multiplier, long-run mean 1
  double z_prev = 0.0;  // previous standardised diffusive shock
  double price = round_to_tick(o.initial_price, o.tick_size);
  const double omega = 1.0 - o.garch_alpha - o.garch_beta;
  // Normalises the U profile to mean 1 over a day: mean of (2f-1)^2 on [0,1) is 1/3.
  const double u_norm = 1.0 + o.volume_u_amplitude / 3.0;
  const double noise_mean_fix = -0.5 * o.volume_noise * o.volume_noise;

  for (int64_t i = 0; i < o.bars; ++i) {
    if (i > 0) {
      // Markov switching: stay with probability `persistence`, else jump to another regime.
      const double u = rng.uniform();
      if (n_regimes > 1 && u >= o.regime_persistence) {
        const int other = static_cast<int>(rng.uniform_int(static_cast<uint64_t>(n_regimes - 1)));
        regime = other >= regime ? other + 1 : other;
      }
      h = omega + o.garch_alpha * z_prev * z_prev + o.garch_beta * h;
    }
    const Regime& reg = o.regimes[static_cast<size_t>(regime)];
    const double sigma = reg.volatility * std::sqrt(h);
    const double z = rng.normal();
    double r = reg.drift + sigma * z;
    if (rng.uniform() < o.jump_probability) r += o.jump_mean + o.jump_volatility * rng.normal();
    z_prev = z;

    Bar b;
    b.timestamp = o.start_timestamp + i * o.bar_seconds;
    b.open = price;
    b.close = round_to_tick(price * std::exp(r), o.tick_size);
    const double up = std::abs(rng.normal()) * o.wick * sigma;
    const double down = std::abs(rng.normal()) * o.wick * sigma;
    const double body_hi = std::max(b.open, b.close);
    const double body_lo = std::min(b.open, b.close);
    b.high = std::max(body_hi, round_to_tick(body_hi * std::exp(up), o.tick_size));
    b.low = std::min(body_lo, round_to_tick(body_lo * std::exp(-down), o.tick_size));

    // Volume: U-shaped over the time of day, higher on large moves, log-normal noise.
    const int64_t sec_of_day = ((b.timestamp % 86400) + 86400) % 86400;
    const double f = static_cast<double>(sec_of_day) / 86400.0;
    const double u_shape =
        (1.0 + o.volume_u_amplitude * (2.0 * f - 1.0) * (2.0 * f - 1.0)) / u_norm;
    const double surprise = std::abs(r - reg.drift) / reg.volatility;
    const double noise = std::exp(noise_mean_fix + o.volume_noise * rng.normal());
    b.volume = std::round(o.base_volume * u_shape * (1.0 + o.volume_return_sensitivity * surprise) *
                          noise / (1.0 + o.volume_return_sensitivity * 0.7978845608));
    series.bars.push_back(b);
    price = b.close;
    if (regimes_out) (*regimes_out)[static_cast<size_t>(i)] = regime;
  }
  return series;
}

double autocorrelation(const std::vector<double>& x, int64_t lag) {
  const int64_t n = static_cast<int64_t>(x.size());
  if (lag < 0 || n - lag < 2) return 0.0;
  double mean = 0.0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(n);
  double den = 0.0, num = 0.0;
  for (int64_t i = 0; i < n; ++i) den += (x[i] - mean) * (x[i] - mean);
  for (int64_t i = lag; i < n; ++i) num += (x[i] - mean) * (x[i - lag] - mean);
  return den > 0.0 ? num / den : 0.0;
}

BarSummary summarize_bars(const BarSeries& series) {
  FOXHUNT_CHECK(!series.bars.empty(), kBarsComponent, series.source, ": empty series: no bars");
  const auto& bars = series.bars;
  BarSummary s;
  s.rows = series.size();
  s.first_timestamp = bars.front().timestamp;
  s.last_timestamp = bars.back().timestamp;
  s.close_only = series.close_only;
  s.first_close = bars.front().close;
  s.last_close = bars.back().close;
  s.min_close = s.max_close = bars.front().close;
  for (const Bar& b : bars) {
    s.min_close = std::min(s.min_close, b.close);
    s.max_close = std::max(s.max_close, b.close);
    s.total_volume += b.volume;
  }
  s.total_log_return = std::log(s.last_close / s.first_close);
  if (bars.size() >= 2) {
    std::vector<int64_t> gaps(bars.size() - 1);
    for (size_t i = 1; i < bars.size(); ++i)
      gaps[i - 1] = bars[i].timestamp - bars[i - 1].timestamp;
    std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
    s.median_bar_seconds = gaps[gaps.size() / 2];

    const auto all = log_returns(series);
    const std::vector<double> r(all.begin() + 1, all.end());
    double sum = 0.0;
    s.min_log_return = s.max_log_return = r.front();
    for (double v : r) {
      sum += v;
      s.min_log_return = std::min(s.min_log_return, v);
      s.max_log_return = std::max(s.max_log_return, v);
    }
    s.mean_log_return = sum / static_cast<double>(r.size());
    if (r.size() >= 2) {
      double ss = 0.0;
      for (double v : r) ss += (v - s.mean_log_return) * (v - s.mean_log_return);
      s.std_log_return = std::sqrt(ss / static_cast<double>(r.size() - 1));
    }
    std::vector<double> abs_r(r.size());
    for (size_t i = 0; i < r.size(); ++i) abs_r[i] = std::abs(r[i]);
    s.abs_return_autocorr = autocorrelation(abs_r, 1);
  }
  return s;
}

}  // namespace foxhunt::data
