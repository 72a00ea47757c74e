#include "foxhunt/core/stats.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/random.h"

namespace foxhunt {

namespace {

constexpr const char* kStatsComponent = "stats";

/// Index of the first NaN in `v`, or v.size() when there is none.
size_t first_nan(const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return i;
  }
  return v.size();
}

size_t first_non_finite(const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) return i;
  }
  return v.size();
}

void check_p(double p, const char* where) {
  FOXHUNT_CHECK(!std::isnan(p) && p >= 0.0 && p <= 100.0, kStatsComponent, where,
                ": expected a percentile p in [0, 100], got ", p);
}

/// The linear-interpolation percentile of already sorted, non-empty values.
double percentile_sorted(const std::vector<double>& s, double p) {
  const double h = static_cast<double>(s.size() - 1) * p / 100.0;
  const size_t lo = std::min(static_cast<size_t>(std::floor(h)), s.size() - 1);
  const size_t hi = std::min(lo + 1, s.size() - 1);
  const double frac = h - static_cast<double>(lo);
  // Equal neighbours return as they are: inf + frac * (inf - inf) would be NaN.
  if (frac <= 0.0 || s[lo] == s[hi]) return s[lo];
  return s[lo] + frac * (s[hi] - s[lo]);
}

std::string fixed1(double v) {
  return fmt::format("{:.1f}", v);
}

}  // namespace

double percentile(std::vector<double> values, double p) {
  check_p(p, "percentile");
  FOXHUNT_CHECK(!values.empty(), kStatsComponent,
                "percentile: expected at least one value, got none");
  const size_t nan_at = first_nan(values);
  FOXHUNT_CHECK(nan_at == values.size(), kStatsComponent,
                "percentile: expected numbers, got NaN at index ", nan_at, " of ", values.size());
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, p);
}

LatencySummary summarize_latencies(const std::vector<double>& us) {
  FOXHUNT_CHECK(!us.empty(), kStatsComponent,
                "summarize_latencies: expected at least one latency sample, got none");
  const size_t nan_at = first_nan(us);
  FOXHUNT_CHECK(nan_at == us.size(), kStatsComponent,
                "summarize_latencies: expected numbers, got NaN ", "at index ", nan_at, " of ",
                us.size());
  std::vector<double> s = us;
  std::sort(s.begin(), s.end());
  LatencySummary out;
  out.count = s.size();
  // Summed in sorted order (smallest first), which keeps the rounding error of the mean small.
  long double sum = 0.0L;
  for (double v : s) sum += v;
  out.mean = static_cast<double>(sum / static_cast<long double>(s.size()));
  out.min = s.front();
  out.max = s.back();
  out.p50 = percentile_sorted(s, 50.0);
  out.p90 = percentile_sorted(s, 90.0);
  out.p99 = percentile_sorted(s, 99.0);
  out.p999 = percentile_sorted(s, 99.9);
  return out;
}

// The histogram covers [2^kMinExp, 2^kMaxExp); smaller positive values (and 0) go to bucket 0,
// larger ones to the last bucket (max stays exact).
namespace {
constexpr int kMinExp = -20, kMaxExp = 44;
constexpr size_t kBuckets =
    1 + static_cast<size_t>(kMaxExp - kMinExp) * LatencyRecorder::kBucketsPerOctave;

size_t bucket_of(double v) {
  if (!(v >= std::ldexp(1.0, kMinExp))) return 0;
  const double pos = (std::log2(v) - kMinExp) * LatencyRecorder::kBucketsPerOctave;
  return std::min(kBuckets - 1, 1 + static_cast<size_t>(pos));
}

// The geometric midpoint of bucket b (> 0).
double bucket_mid(size_t b) {
  const double lo = kMinExp + static_cast<double>(b - 1) / LatencyRecorder::kBucketsPerOctave;
  return std::exp2(lo + 0.5 / LatencyRecorder::kBucketsPerOctave);
}
}  // namespace

LatencyRecorder::LatencyRecorder(size_t exact_samples) : cap_(exact_samples) {}

void LatencyRecorder::add(double us) {
  FOXHUNT_CHECK(!std::isnan(us) && us >= 0.0, kStatsComponent,
                "LatencyRecorder: expected a latency >= 0, got ", us, " (sample ", count_, ")");
  if (count_ == 0 || us < min_) min_ = us;
  if (count_ == 0 || us > max_) max_ = us;
  ++count_;
  sum_ += us;
  if (histogram_.empty() && exact_.size() < cap_) {
    exact_.push_back(us);
    return;
  }
  if (histogram_.empty()) {  // the cap is reached: the kept samples move into the histogram
    histogram_.assign(kBuckets, 0);
    for (double v : exact_) bin(v);
    std::vector<double>().swap(exact_);
  }
  bin(us);
}

void LatencyRecorder::bin(double us) {
  ++histogram_[bucket_of(us)];
}

LatencySummary LatencyRecorder::summary() const {
  FOXHUNT_CHECK(count_ > 0, kStatsComponent,
                "LatencyRecorder: expected at least one latency sample, got none");
  if (histogram_.empty()) return summarize_latencies(exact_);
  LatencySummary out;
  out.count = count_;
  out.mean = static_cast<double>(sum_ / static_cast<long double>(count_));
  out.min = min_;
  out.max = max_;
  // The bucket holding rank floor((n - 1) p / 100), as percentile() would pick its lower rank.
  const auto at = [&](double p) {
    const auto rank =
        static_cast<uint64_t>(std::floor(static_cast<double>(count_ - 1) * p / 100.0));
    uint64_t seen = 0;
    for (size_t b = 0; b < histogram_.size(); ++b) {
      seen += histogram_[b];
      if (seen > rank) return b == 0 ? min_ : std::clamp(bucket_mid(b), min_, max_);
    }
    return max_;
  };
  out.p50 = at(50.0);
  out.p90 = at(90.0);
  out.p99 = at(99.0);
  out.p999 = at(99.9);
  return out;
}

nlohmann::json to_json(const LatencySummary& s) {
  return {{"count", s.count}, {"mean", s.mean}, {"min", s.min},    {"p50", s.p50},
          {"p90", s.p90},     {"p99", s.p99},   {"p99_9", s.p999}, {"max", s.max}};
}

LinearFit least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  FOXHUNT_CHECK(x.size() == y.size(), kStatsComponent,
                "least_squares: expected x and y of one size, ", "got ", x.size(), " x values and ",
                y.size(), " y values");
  FOXHUNT_CHECK(x.size() >= 2, kStatsComponent, "least_squares: expected at least 2 points, got ",
                x.size());
  const size_t bad_x = first_non_finite(x);
  FOXHUNT_CHECK(bad_x == x.size(), kStatsComponent, "least_squares: expected finite x, got ",
                x[bad_x], " at index ", bad_x);
  const size_t bad_y = first_non_finite(y);
  FOXHUNT_CHECK(bad_y == y.size(), kStatsComponent, "least_squares: expected finite y, got ",
                y[bad_y], " at index ", bad_y);
  const bool x_constant = std::all_of(x.begin(), x.end(), [&](double v) { return v == x.front(); });
  FOXHUNT_CHECK(!x_constant, kStatsComponent,
                "least_squares: expected at least two distinct x values, ", "got all ", x.size(),
                " equal to ", x.front(), " (the slope is undefined)");

  const double n = static_cast<double>(x.size());
  double mx = 0.0, my = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    mx += x[i];
    my += y[i];
  }
  mx /= n;
  my /= n;
  double sxx = 0.0, sxy = 0.0, syy = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double dx = x[i] - mx, dy = y[i] - my;
    sxx += dx * dx;
    sxy += dx * dy;
    syy += dy * dy;
  }
  // Distinct x can still give sxx == 0 when the differences underflow (e.g. 1e-300 apart).
  FOXHUNT_CHECK(sxx > 0.0 && std::isfinite(sxx), kStatsComponent,
                "least_squares: expected x values with a representable spread, got a sum of ",
                "squared deviations of ", sxx);

  LinearFit fit;
  fit.n = x.size();
  const bool y_constant = std::all_of(y.begin(), y.end(), [&](double v) { return v == y.front(); });
  if (y_constant) {
    // Exactly flat: the line y = const fits every point, so r2 = 1 by definition (SStot == 0).
    // Handled apart because a rounded mean would leave tiny nonzero residuals.
    fit.slope = 0.0;
    fit.intercept = y.front();
    fit.r2 = 1.0;
    return fit;
  }
  fit.slope = sxy / sxx;
  fit.intercept = my - fit.slope * mx;
  double ss_res = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double r = y[i] - (fit.slope * (x[i] - mx) + my);
    ss_res += r * r;
  }
  fit.r2 = syy > 0.0 ? std::clamp(1.0 - ss_res / syy, 0.0, 1.0) : 1.0;
  return fit;
}

nlohmann::json to_json(const LinearFit& f) {
  return {{"slope", f.slope}, {"intercept", f.intercept}, {"r2", f.r2}, {"n", f.n}};
}

std::vector<double> poisson_arrivals(double rate_per_s, double duration_s, uint64_t seed) {
  FOXHUNT_CHECK(std::isfinite(rate_per_s) && rate_per_s > 0.0, kStatsComponent,
                "poisson_arrivals: expected a finite rate > 0 per second, got ", rate_per_s);
  FOXHUNT_CHECK(std::isfinite(duration_s) && duration_s > 0.0, kStatsComponent,
                "poisson_arrivals: expected a finite duration > 0 seconds, got ", duration_s);
  constexpr double kMaxExpected = 1e8;  // 800 MB of doubles: a typo, not a benchmark
  const double expected = rate_per_s * duration_s;
  FOXHUNT_CHECK(expected <= kMaxExpected, kStatsComponent, "poisson_arrivals: expected at most ",
                kMaxExpected, " arrivals (rate * duration), got ", rate_per_s, " /s * ", duration_s,
                " s = ", expected);
  Rng rng(seed);
  std::vector<double> out;
  // Mean + 4 sigma of the count: one allocation in almost every run.
  out.reserve(static_cast<size_t>(expected + 4.0 * std::sqrt(expected) + 16.0));
  double t = 0.0;
  while (true) {
    t += -std::log(rng.uniform_open0()) / rate_per_s;
    if (!(t < duration_s)) break;
    out.push_back(t);
  }
  return out;
}

Histogram histogram(const std::vector<double>& values, int bins, bool log_scale) {
  FOXHUNT_CHECK(bins >= 1 && bins <= 1000000, kStatsComponent,
                "histogram: expected bins in [1, 1000000], got ", bins);
  FOXHUNT_CHECK(!values.empty(), kStatsComponent,
                "histogram: expected at least one value, got none");
  const size_t bad = first_non_finite(values);
  FOXHUNT_CHECK(bad == values.size(), kStatsComponent, "histogram: expected finite values, got ",
                values[bad], " at index ", bad, " of ", values.size());
  const auto [min_it, max_it] = std::minmax_element(values.begin(), values.end());
  double lo = *min_it, hi = *max_it;
  FOXHUNT_CHECK(std::isfinite(hi - lo), kStatsComponent,
                "histogram: expected a value range that fits ", "in a double, got [", lo, ", ", hi,
                "]");

  Histogram h;
  h.log_scale = log_scale && lo > 0.0;
  const size_t nb = static_cast<size_t>(bins);
  h.edges.resize(nb + 1);
  if (h.log_scale) {
    double llo = std::log10(lo), lhi = std::log10(hi);
    if (llo == lhi) {
      llo -= 0.5;
      lhi += 0.5;
    }
    const double w = (lhi - llo) / static_cast<double>(nb);
    for (size_t i = 0; i <= nb; ++i) h.edges[i] = std::pow(10.0, llo + w * static_cast<double>(i));
    if (lo != hi) {
      // Exact ends: pow(10, log10(v)) need not return v, and the max must land in the last bin.
      h.edges.front() = lo;
      h.edges.back() = hi;
    }
  } else {
    if (lo == hi) {
      lo -= 0.5;
      hi += 0.5;
    }
    const double w = (hi - lo) / static_cast<double>(nb);
    for (size_t i = 0; i <= nb; ++i) h.edges[i] = lo + w * static_cast<double>(i);
    h.edges.back() = hi;
  }
  h.counts.assign(nb, 0);
  // Binary search over the stored edges (not a division) so a value on an edge always lands in
  // the bin the edges say, whatever the rounding of the edge arithmetic.
  for (double v : values) {
    const auto it = std::upper_bound(h.edges.begin(), h.edges.end(), v);
    size_t bin = static_cast<size_t>(it - h.edges.begin());
    bin = bin == 0 ? 0 : bin - 1;
    h.counts[std::min(bin, nb - 1)] += 1;
  }
  return h;
}

nlohmann::json to_json(const Histogram& h) {
  return {{"edges", h.edges}, {"counts", h.counts}, {"log_scale", h.log_scale}};
}

LeakVerdict leak_verdict(const std::vector<double>& inferences,
                         const std::vector<double>& live_bytes, int64_t baseline_bytes,
                         int64_t final_bytes, double threshold_bytes_per_1k) {
  FOXHUNT_CHECK(inferences.size() == live_bytes.size(), kStatsComponent,
                "leak_verdict: expected one live-bytes sample per inference count, got ",
                inferences.size(), " inference counts and ", live_bytes.size(), " samples");
  const size_t bad_x = first_non_finite(inferences);
  FOXHUNT_CHECK(bad_x == inferences.size(), kStatsComponent,
                "leak_verdict: expected finite inference counts, got ", inferences[bad_x],
                " at index ", bad_x);
  const size_t bad_y = first_non_finite(live_bytes);
  FOXHUNT_CHECK(bad_y == live_bytes.size(), kStatsComponent,
                "leak_verdict: expected finite live-bytes samples, got ", live_bytes[bad_y],
                " at index ", bad_y);
  FOXHUNT_CHECK(std::isfinite(threshold_bytes_per_1k) && threshold_bytes_per_1k >= 0.0,
                kStatsComponent,
                "leak_verdict: expected a finite threshold >= 0 bytes per 1k inferences, got ",
                threshold_bytes_per_1k);

  LeakVerdict v;
  v.samples = inferences.size();
  v.threshold = threshold_bytes_per_1k;
  FOXHUNT_CHECK(!__builtin_sub_overflow(final_bytes, baseline_bytes, &v.residual_bytes),
                kStatsComponent,
                "leak_verdict: expected final - baseline bytes to fit in int64, got ", final_bytes,
                " - ", baseline_bytes);
  v.exact_ok = v.residual_bytes == 0;
  std::string not_measured;
  if (v.samples < 3) {
    not_measured = "not measured: fewer than 3 samples";
  } else if (std::all_of(inferences.begin(), inferences.end(),
                         [&](double x) { return x == inferences.front(); })) {
    not_measured = "not measured: all samples at one inference count";
  } else {
    const LinearFit fit = least_squares(inferences, live_bytes);
    v.measured = true;
    v.slope_bytes_per_1k = fit.slope * 1000.0;
    v.r2 = fit.r2;
  }
  v.trend_ok = v.measured && v.slope_bytes_per_1k <= v.threshold;
  v.leak_detected = !v.measured || !v.exact_ok || !v.trend_ok;

  std::vector<std::string> parts;
  if (!v.exact_ok) parts.push_back(detail::cat("leak: ", v.residual_bytes, " bytes not returned"));
  if (!v.measured) {
    parts.push_back(not_measured);
  } else if (!v.trend_ok) {
    parts.push_back("leak: slope " + fixed1(v.slope_bytes_per_1k) + " B/1k > threshold " +
                    fixed1(v.threshold) + " B/1k");
  }
  if (parts.empty()) {
    v.verdict = "no leak";
  } else {
    for (size_t i = 0; i < parts.size(); ++i) v.verdict += (i ? "; " : "") + parts[i];
  }
  return v;
}

nlohmann::json to_json(const LeakVerdict& v) {
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, v, measured, samples, exact_ok, residual_bytes, slope_bytes_per_1k, r2,
                      trend_ok, leak_detected, verdict);
  j["threshold_bytes_per_1k"] = v.threshold;
  return j;
}

}  // namespace foxhunt
