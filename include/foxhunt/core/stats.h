#pragma once
/// \file stats.h
/// Small statistics for benchmarks and reports: exact percentiles, latency summaries, ordinary
/// least squares, Poisson arrival schedules, histograms, and the memory-leak verdict that combines
/// an exact byte balance with a growth trend. Torch-free; every function checks its input and
/// throws foxhunt::InputError("[stats] ...") naming what was expected and what it got.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace foxhunt {

/// The `p`-th percentile (p in [0, 100]) of `values`, interpolating linearly between the two
/// closest ranks: rank h = (n - 1) * p / 100, result x[floor h] + frac(h) * (x[ceil h] -
/// x[floor h]) over the sorted values (numpy's default "linear" method). Takes `values` by value
/// because it sorts them. Throws InputError when `values` is empty or holds a NaN, or when `p` is
/// NaN or outside [0, 100].
double percentile(std::vector<double> values, double p);

/// Summary of a latency sample (any unit; the benches use microseconds).
struct LatencySummary {
  size_t count = 0;   ///< number of samples
  double mean = 0.0;  ///< arithmetic mean
  double min = 0.0;   ///< smallest sample
  double p50 = 0.0;   ///< median
  double p90 = 0.0;   ///< 90th percentile
  double p99 = 0.0;   ///< 99th percentile
  double p999 = 0.0;  ///< 99.9th percentile
  double max = 0.0;   ///< largest sample
};

/// Summarises latencies `us` with one sort and the percentile rule of percentile(). Throws
/// InputError when `us` is empty or holds a NaN.
LatencySummary summarize_latencies(const std::vector<double>& us);

/// {"count", "mean", "min", "p50", "p90", "p99", "p99_9", "max"}.
nlohmann::json to_json(const LatencySummary& s);

/// Latencies of an unbounded run (a feed that never ends) in bounded memory: the first
/// `exact_samples` are kept as they are, and summary() is then summarize_latencies() of them,
/// exactly; past that they move into a histogram of logarithmic buckets (kBucketsPerOctave per
/// power of two) and the percentiles become those buckets' midpoints, within 1 / 512 relative of
/// the sample at the percentile's rank (clamped to [min, max]); count, mean, min and max stay
/// exact. Memory: at most exact_samples doubles, then the fixed histogram alone (128 KiB).
class LatencyRecorder {
 public:
  /// Buckets per power of two (relative bucket width 2^(1/256) - 1 ~ 0.27%).
  static constexpr int kBucketsPerOctave = 256;
  /// Keeps up to `exact_samples` samples exactly (default 65,536: 512 KiB).
  explicit LatencyRecorder(size_t exact_samples = size_t{1} << 16);
  /// Adds one sample; throws InputError on NaN or a negative value (latencies are >= 0).
  void add(double us);
  /// Samples added.
  size_t count() const { return count_; }
  /// Whether the percentiles are still exact (count() <= exact_samples).
  bool exact() const { return histogram_.empty(); }
  /// The summary; throws InputError when no sample was added.
  LatencySummary summary() const;

 private:
  void bin(double us);
  size_t cap_;
  size_t count_ = 0;
  long double sum_ = 0.0L;
  double min_ = 0.0, max_ = 0.0;
  std::vector<double> exact_;        // the samples while count_ <= cap_
  std::vector<uint64_t> histogram_;  // then: [zero bucket, octaves x kBucketsPerOctave]
};

/// Result of an ordinary least-squares fit y = slope * x + intercept.
struct LinearFit {
  double slope = 0.0;      ///< dy/dx
  double intercept = 0.0;  ///< y at x = 0
  double r2 = 0.0;  ///< coefficient of determination 1 - SSres/SStot, clamped to [0, 1]; 1 when
                    ///< y is constant (SStot == 0: the flat line fits exactly)
  size_t n = 0;     ///< number of points
};

/// Ordinary least squares of `y` on `x` (centred sums, for accuracy with large offsets such as
/// byte counts). Throws InputError when the sizes differ, there are fewer than 2 points, a value
/// is not finite, or every x is the same (the slope is undefined).
LinearFit least_squares(const std::vector<double>& x, const std::vector<double>& y);

/// {"slope", "intercept", "r2", "n"}.
nlohmann::json to_json(const LinearFit& f);

/// The running sums of a least-squares line y = slope * x + intercept, for callers that add
/// points one at a time (the planner's and the desk capacity's memory lines). Raw sums, not
/// centred: fine for the few points of a probe ladder; least_squares is the accurate fit.
struct LineSums {
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;

  /// Adds the point (x, y).
  void add(double x, double y) {
    n += 1;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  /// n * sum(x^2) - sum(x)^2: > 0 once two distinct x were added (the slope is defined).
  double spread() const { return n * sxx - sx * sx; }
  /// The least-squares slope (needs spread() > 0).
  double slope() const { return (n * sxy - sx * sy) / spread(); }
  /// The intercept of the line of slope `slope` through the mean point (needs n > 0).
  double intercept(double slope) const { return (sy - slope * sx) / n; }
};

/// Arrival times (seconds from 0, increasing, all < `duration_s`) of a Poisson process with
/// `rate_per_s` arrivals per second: cumulative sums of exponential inter-arrival gaps
/// -log(u) / rate with u from foxhunt::Rng(seed).uniform_open0(), so a seed gives the same
/// schedule on every platform. Throws InputError when the rate or the duration is not a finite
/// positive number, or when rate * duration exceeds 1e8 expected arrivals (a memory guard).
std::vector<double> poisson_arrivals(double rate_per_s, double duration_s, uint64_t seed);

/// A histogram: bin i counts values in [edges[i], edges[i + 1]); the last bin also holds
/// edges.back() (the maximum). edges.size() == counts.size() + 1.
struct Histogram {
  std::vector<double> edges;     ///< bins + 1 increasing bin boundaries
  std::vector<uint64_t> counts;  ///< count per bin
  bool log_scale = false;        ///< true when the edges are equal-width in log10 space
};

/// Histogram of `values` with `bins` equal-width bins covering [min, max], or equal-width bins in
/// log10 space when `log_scale` is set and every value is > 0 (otherwise linear bins, and
/// Histogram::log_scale says which was used). When every value is the same the range is widened
/// around it (by +-0.5, or by a factor sqrt(10) for log bins) so the bins have a width. Throws
/// InputError when `values` is empty or holds a non-finite value, or `bins` is not in
/// [1, 1000000].
Histogram histogram(const std::vector<double>& values, int bins, bool log_scale = false);

/// {"edges", "counts", "log_scale"}.
nlohmann::json to_json(const Histogram& h);

/// Verdict of a memory-leak check that combines two signals:
/// - exact: the allocator's live bytes after the run equal the baseline before it;
/// - trend: the least-squares slope of live bytes against the inference count, in bytes per 1,000
///   inferences, stays at or under a threshold (a leak that is returned at teardown still grows).
/// A series too short to fit (fewer than 3 samples, or all at one inference count) is "not
/// measured" and counts as a leak: callers treat leak_detected (and so an unmeasured check) as a
/// failure, so a missing measurement can never pass as "no leak".
struct LeakVerdict {
  bool measured = false;            ///< the trend could be fitted (>= 3 samples, distinct x)
  size_t samples = 0;               ///< number of (inferences, live bytes) samples
  bool exact_ok = false;            ///< final_bytes == baseline_bytes
  int64_t residual_bytes = 0;       ///< final_bytes - baseline_bytes
  double slope_bytes_per_1k = 0.0;  ///< growth in bytes per 1,000 inferences (0 when unmeasured)
  double r2 = 0.0;                  ///< r2 of the trend fit (informational; 0 when unmeasured)
  double threshold = 0.0;           ///< the allowed slope in bytes per 1,000 inferences
  bool trend_ok = false;            ///< measured && slope_bytes_per_1k <= threshold
  bool leak_detected = true;        ///< !measured || !exact_ok || !trend_ok
  std::string verdict;  ///< "no leak", or the failing signals joined by "; ": "leak: N bytes not
                        ///< returned", "leak: slope X B/1k > threshold T B/1k", "not measured:
                        ///< fewer than 3 samples", "not measured: all samples at one inference
                        ///< count"
};

/// Judges a leak check from samples of live bytes (`live_bytes[i]` after `inferences[i]`
/// inferences) and the live bytes before (`baseline_bytes`) and after (`final_bytes`) the run,
/// against `threshold_bytes_per_1k`. Throws InputError when the sample vectors differ in size,
/// hold a non-finite value, or the threshold is negative or not finite.
LeakVerdict leak_verdict(const std::vector<double>& inferences,
                         const std::vector<double>& live_bytes, int64_t baseline_bytes,
                         int64_t final_bytes, double threshold_bytes_per_1k);

/// {"measured", "samples", "exact_ok", "residual_bytes", "slope_bytes_per_1k", "r2",
///  "threshold_bytes_per_1k", "trend_ok", "leak_detected", "verdict"}.
nlohmann::json to_json(const LeakVerdict& v);

}  // namespace foxhunt
