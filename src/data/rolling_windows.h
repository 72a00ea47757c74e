#pragma once
/// \file rolling_windows.h
/// Private to the data area: the O(1)-per-bar rolling statistics the streaming feature engine
/// (streaming_features.cpp) keeps: rings of recent values, sliding sums and shifted moments,
/// sliding correlations, rolling max/min and EMAs. Torch-free.

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace foxhunt::data::rolling {

/// The last values of one per-bar series in a power-of-two ring; back(k) is the value k bars ago.
class Ring {
 public:
  /// Keeps at least `span` + 1 values (back(0) .. back(span)).
  explicit Ring(int64_t span) {
    size_t cap = 1;
    while (cap < static_cast<size_t>(span) + 1) cap <<= 1;
    buf_.assign(cap, 0.0);
    mask_ = cap - 1;
  }
  /// Appends the newest value (overwriting the oldest kept one).
  void push(double x) { buf_[count_++ & mask_] = x; }
  /// Values pushed so far.
  int64_t count() const { return static_cast<int64_t>(count_); }
  /// The value pushed k bars before the newest (k <= span).
  double back(int64_t k) const { return buf_[(count_ - 1 - static_cast<uint64_t>(k)) & mask_]; }
  /// Bytes of its buffer on the heap.
  size_t heap_bytes() const { return buf_.capacity() * sizeof(double); }

 private:
  std::vector<double> buf_;
  uint64_t mask_ = 0;
  uint64_t count_ = 0;
};

/// What a Window keeps: the plain sum (and sum |x|, the guard's yardstick), or shifted central
/// moments up to order 2 or 4.
enum class Kind { kSum, kMoments2, kMoments4 };

/// Sliding statistics of the last `w` values of a Ring (fewer during the first w bars: the batch
/// windows are truncated at bar 0).
///
/// Moment kinds sum d = x - K, with the shift K the window mean at the last re-summation, so a
/// variance comes from small deviations instead of the cancellation-prone E[x^2] - E[x]^2 (log
/// prices are ~4.6 with a spread of ~1e-3). Add/subtract updates drift by rounding; every w bars,
/// and early when a departed value dominated the sums (a term added since the last re-summation
/// exceeds 2^16 times the current sum |x|, d^2 or d^4: a jump just left the window), the sums are
/// rebuilt from the ring in the batch's order. That costs O(w) per w bars: O(1) amortised.
class Window {
 public:
  /// A window of the last `w` values keeping the statistics of `kind`.
  Window(int64_t w, Kind kind) : w_(w), kind_(kind) {}

  /// Takes src.back(0) in and, once the window is full, src.back(w) out.
  void update(const Ring& src) {
    const double x = src.back(0);
    const bool first = src.count() == 1;
    if (first && moments()) shift_ = x;
    run_ = (!first && x == last_) ? run_ + 1 : 1;
    last_ = x;
    add(x);
    nonzero_ += x != 0.0;
    if (src.count() > w_) {
      const double old = src.back(w_);
      remove(old);
      nonzero_ -= old != 0.0;
    } else {
      ++n_;
    }
    // A departed value that dwarfed what is left would leave its rounding error behind; an
    // overflowed sum (volumes near DBL_MAX) would stay inf/NaN after the value left.
    if (++since_ >= w_ || peak_ > kGuard * lead() || !std::isfinite(lead())) recompute(src);
    if (!moments() && nonzero_ == 0) s_ = {}, peak_ = 0.0;  // exact zero, as the batch sums give
  }

  /// Values in the window.
  int64_t size() const { return n_; }
  /// Sum of the window (sum kinds).
  double sum() const { return s_[0]; }
  /// Mean of the window.
  double mean() const {
    if (!moments()) return s_[0] / static_cast<double>(n_);
    return all_equal() ? last_ : shift_ + s_[0] / static_cast<double>(n_);
  }
  /// Population variance (moment kinds).
  double m2() const {
    if (all_equal()) return 0.0;
    const double n = static_cast<double>(n_), c = s_[0] / n;
    return std::max(0.0, s_[1] / n - c * c);
  }
  /// Third central moment / n (kMoments4).
  double m3() const {
    if (all_equal()) return 0.0;
    const double n = static_cast<double>(n_), c = s_[0] / n;
    return s_[2] / n - 3.0 * c * (s_[1] / n) + 2.0 * c * c * c;
  }
  /// Fourth central moment / n (kMoments4).
  double m4() const {
    if (all_equal()) return 0.0;
    const double n = static_cast<double>(n_), c = s_[0] / n;
    return s_[3] / n - 4.0 * c * (s_[2] / n) + 6.0 * c * c * (s_[1] / n) - 3.0 * c * c * c * c;
  }

 private:
  static constexpr double kGuard = 65536.0;

  bool moments() const { return kind_ == Kind::kMoments2 || kind_ == Kind::kMoments4; }
  bool all_equal() const { return run_ >= n_; }
  // The non-negative sum the guard compares the peak term with: sum |x| or sum d^2 or sum d^4.
  double lead() const { return kind_ == Kind::kMoments4 ? s_[3] : s_[1]; }

  // Powers are written as the batch writes them (d * d * d), so re-summed values match it.
  void add(double x) {
    if (!moments()) {
      s_[0] += x;
      s_[1] += std::abs(x);
      peak_ = std::max(peak_, std::abs(x));
      return;
    }
    const double d = x - shift_;
    s_[0] += d;
    s_[1] += d * d;
    if (kind_ == Kind::kMoments4) {
      s_[2] += d * d * d;
      s_[3] += d * d * d * d;
      peak_ = std::max(peak_, d * d * d * d);
    } else {
      peak_ = std::max(peak_, d * d);
    }
  }
  void remove(double x) {
    if (!moments()) {
      s_[0] -= x;
      s_[1] -= std::abs(x);
      return;
    }
    const double d = x - shift_;
    s_[0] -= d;
    s_[1] -= d * d;
    if (kind_ == Kind::kMoments4) {
      s_[2] -= d * d * d;
      s_[3] -= d * d * d * d;
    }
  }
  void recompute(const Ring& src) {
    since_ = 0;
    peak_ = 0.0;
    s_ = {};
    if (moments()) {
      double s = 0.0;
      for (int64_t k = n_ - 1; k >= 0; --k) s += src.back(k);
      shift_ = s / static_cast<double>(n_);
    }
    for (int64_t k = n_ - 1; k >= 0; --k) add(src.back(k));
  }

  int64_t w_;
  Kind kind_;
  int64_t n_ = 0;        // values in the window
  int64_t since_ = 0;    // updates since the last re-summation
  int64_t run_ = 0;      // trailing run of identical values
  int64_t nonzero_ = 0;  // non-zero values in the window
  double shift_ = 0.0;
  double last_ = 0.0;
  double peak_ = 0.0;  // largest leading-power term added since the last re-summation
  std::array<double, 4> s_{};
};

/// Sliding Pearson correlation of two series over the last `w` bars (same scheme as Window).
class PairWindow {
 public:
  /// A window of the last `w` pairs.
  explicit PairWindow(int64_t w) : w_(w) {}

  /// Takes (xs.back(0), ys.back(0)) in and, once the window is full, the pair w bars back out.
  void update(const Ring& xs, const Ring& ys) {
    const double x = xs.back(0), y = ys.back(0);
    const bool first = xs.count() == 1;
    if (first) kx_ = x, ky_ = y;
    run_x_ = (!first && x == last_x_) ? run_x_ + 1 : 1;
    run_y_ = (!first && y == last_y_) ? run_y_ + 1 : 1;
    last_x_ = x, last_y_ = y;
    add(x, y, 1.0);
    if (xs.count() > w_) {
      add(xs.back(w_), ys.back(w_), -1.0);
    } else {
      ++n_;
    }
    if (++since_ >= w_ || peak_x_ > kGuard * sxx_ || peak_y_ > kGuard * syy_ ||
        !std::isfinite(sxx_ + syy_ + sxy_))
      recompute(xs, ys);
  }

  /// Correlation of the window; 0 when either variance is 0 (as the batch wcorr).
  double corr() const {
    if (run_x_ >= n_ || run_y_ >= n_) return 0.0;
    const double n = static_cast<double>(n_), cx = sx_ / n, cy = sy_ / n;
    const double vxx = sxx_ - n * cx * cx, vyy = syy_ - n * cy * cy, vxy = sxy_ - n * cx * cy;
    return (vxx > 1e-300 && vyy > 1e-300) ? vxy / std::sqrt(vxx * vyy) : 0.0;
  }

 private:
  static constexpr double kGuard = 65536.0;

  // sign is +1 or -1, so sign * term is exact and removal subtracts exactly what was added.
  void add(double x, double y, double sign) {
    const double dx = x - kx_, dy = y - ky_;
    sx_ += sign * dx;
    sy_ += sign * dy;
    sxx_ += sign * (dx * dx);
    syy_ += sign * (dy * dy);
    sxy_ += sign * (dx * dy);
    if (sign > 0) {
      peak_x_ = std::max(peak_x_, dx * dx);
      peak_y_ = std::max(peak_y_, dy * dy);
    }
  }
  void recompute(const Ring& xs, const Ring& ys) {
    double mx = 0.0, my = 0.0;
    for (int64_t k = n_ - 1; k >= 0; --k) mx += xs.back(k), my += ys.back(k);
    kx_ = mx / static_cast<double>(n_);
    ky_ = my / static_cast<double>(n_);
    sx_ = sy_ = sxx_ = syy_ = sxy_ = peak_x_ = peak_y_ = 0.0;
    since_ = 0;
    for (int64_t k = n_ - 1; k >= 0; --k) add(xs.back(k), ys.back(k), 1.0);
  }

  int64_t w_;
  int64_t n_ = 0, since_ = 0, run_x_ = 0, run_y_ = 0;
  double kx_ = 0.0, ky_ = 0.0, last_x_ = 0.0, last_y_ = 0.0;
  double sx_ = 0.0, sy_ = 0.0, sxx_ = 0.0, syy_ = 0.0, sxy_ = 0.0, peak_x_ = 0.0, peak_y_ = 0.0;
};

/// Rolling max (or min) over the last `w` bars: a monotone deque of (bar, value) in a fixed ring.
/// Equal values evict older ones, so index() is the latest bar holding the extreme (as the batch
/// `>=` / `<=` scans of since_high/since_low pick).
class Extreme {
 public:
  /// The max (is_max) or min of the last `w` bars.
  Extreme(int64_t w, bool is_max) : w_(w), is_max_(is_max) {
    size_t cap = 1;
    while (cap < static_cast<size_t>(w) + 1) cap <<= 1;
    buf_.resize(cap);
    mask_ = cap - 1;
  }

  /// Takes the value `x` of bar `t` (bars in increasing order).
  void update(int64_t t, double x) {
    while (tail_ != head_) {
      const double b = buf_[(tail_ - 1) & mask_].second;
      if (is_max_ ? b > x : b < x) break;
      --tail_;
    }
    buf_[tail_++ & mask_] = {t, x};
    while (buf_[head_ & mask_].first <= t - w_) ++head_;
  }
  /// The extreme of the window.
  double value() const { return buf_[head_ & mask_].second; }
  /// The latest bar holding it.
  int64_t index() const { return buf_[head_ & mask_].first; }
  /// Bytes of its buffer on the heap.
  size_t heap_bytes() const { return buf_.capacity() * sizeof(buf_[0]); }

 private:
  int64_t w_;
  bool is_max_;
  std::vector<std::pair<int64_t, double>> buf_;
  uint64_t mask_ = 0, head_ = 0, tail_ = 0;
};

/// EMA with alpha = 2 / (span + 1), started at the first value (as features.cpp ema()).
struct Ema {
  double a = 0.0;        ///< smoothing factor 2 / (span + 1)
  double value = 0.0;    ///< the EMA after the last update
  bool started = false;  ///< whether a value was seen
  /// An EMA with span `span`.
  explicit Ema(int64_t span) : a(2.0 / (static_cast<double>(span) + 1.0)) {}
  /// Takes the next value in and returns the updated EMA.
  double update(double x) {
    value = started ? a * x + (1 - a) * value : x;
    started = true;
    return value;
  }
};

}  // namespace foxhunt::data::rolling
