#include "foxhunt/data/features.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "foxhunt/core/error.h"
#include "foxhunt/data/feature_table.h"

namespace foxhunt::data {

namespace {

using Vec = std::vector<double>;
constexpr double kTwoPi = 6.283185307179586;

/// Per-bar base series the features are built from (all causal by construction).
struct Base {
  int64_t n = 0;
  Vec lc;            // log close
  Vec r;             // close-to-close log return (0 at bar 0)
  Vec hl;            // log(high / low)
  Vec co;            // log(close / open)
  Vec lh;            // log high
  Vec ll;            // log low
  Vec lv;            // log(1 + volume)
  Vec v;             // volume
  Vec tr;            // log true range: log(max(high, prev close) / min(low, prev close))
  Vec upper, lower;  // shadows: log(high / max(open, close)), log(min(open, close) / low)
};

Base make_base(const BarSeries& s) {
  Base b;
  b.n = s.size();
  const size_t n = static_cast<size_t>(b.n);
  for (Vec* v : {&b.lc, &b.r, &b.hl, &b.co, &b.lh, &b.ll, &b.lv, &b.v, &b.tr, &b.upper, &b.lower})
    v->assign(n, 0.0);
  for (size_t t = 0; t < n; ++t) {
    const Bar& bar = s.bars[t];
    b.lc[t] = std::log(bar.close);
    b.lh[t] = std::log(bar.high);
    b.ll[t] = std::log(bar.low);
    b.r[t] = t == 0 ? 0.0 : b.lc[t] - b.lc[t - 1];
    b.hl[t] = b.lh[t] - b.ll[t];
    b.co[t] = b.lc[t] - std::log(bar.open);
    b.v[t] = bar.volume;
    b.lv[t] = std::log1p(bar.volume);
    const double prev = t == 0 ? b.lc[t] : b.lc[t - 1];
    b.tr[t] = std::max(b.lh[t], prev) - std::min(b.ll[t], prev);
    b.upper[t] = b.lh[t] - std::max(b.lc[t], std::log(bar.open));
    b.lower[t] = std::min(b.lc[t], std::log(bar.open)) - b.ll[t];
  }
  return b;
}

/// First index of a window of length w ending at t, truncated at bar 0 during warm-up.
inline int64_t wbegin(int64_t t, int64_t w) {
  return std::max<int64_t>(0, t - w + 1);
}

double wmean(const Vec& x, int64_t t, int64_t w) {
  const int64_t b = wbegin(t, w);
  double s = 0.0;
  for (int64_t i = b; i <= t; ++i) s += x[i];
  return s / static_cast<double>(t - b + 1);
}

double wmean_sq(const Vec& x, int64_t t, int64_t w) {
  const int64_t b = wbegin(t, w);
  double s = 0.0;
  for (int64_t i = b; i <= t; ++i) s += x[i] * x[i];
  return s / static_cast<double>(t - b + 1);
}

/// Mean of the window taken about its first value: x[b] + mean(x[i] - x[b]). Equal to wmean up
/// to rounding, and exactly x[b] when the window is flat, so that the deviations below are exactly
/// 0 there (a plain sum/n can miss the value by an ulp and leave a ~1e-16 variance, which the
/// streaming engine, whose flat-window variance is exactly 0, does not: train and serve agree).
double wmean_shifted(const Vec& x, int64_t t, int64_t w) {
  const int64_t b = wbegin(t, w);
  double s = 0.0;
  for (int64_t i = b; i <= t; ++i) s += x[i] - x[b];
  return x[b] + s / static_cast<double>(t - b + 1);
}

/// Population std over the window (two-pass, about the shifted mean: exactly 0 when flat).
double wstd(const Vec& x, int64_t t, int64_t w) {
  const int64_t b = wbegin(t, w);
  const double m = wmean_shifted(x, t, w);
  double s = 0.0;
  for (int64_t i = b; i <= t; ++i) s += (x[i] - m) * (x[i] - m);
  return std::sqrt(s / static_cast<double>(t - b + 1));
}

double wmax(const Vec& x, int64_t t, int64_t w) {
  double m = x[t];
  for (int64_t i = wbegin(t, w); i <= t; ++i) m = std::max(m, x[i]);
  return m;
}

double wmin(const Vec& x, int64_t t, int64_t w) {
  double m = x[t];
  for (int64_t i = wbegin(t, w); i <= t; ++i) m = std::min(m, x[i]);
  return m;
}

double safe_div(double a, double b) {
  return b > 1e-300 ? a / b : 0.0;
}

/// log(a / b) for non-negative a, b; 0 when either is 0 (undefined ratio).
double log_ratio(double a, double b) {
  return (a > 0.0 && b > 0.0) ? std::log(a / b) : 0.0;
}

/// Pearson correlation of x[i] and y[i] over the window (0 when a variance is 0).
double wcorr(const Vec& x, const Vec& y, int64_t t, int64_t w) {
  const int64_t b = wbegin(t, w);
  const double mx = wmean_shifted(x, t, w), my = wmean_shifted(y, t, w);
  double sxy = 0, sxx = 0, syy = 0;
  for (int64_t i = b; i <= t; ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  return (sxx > 1e-300 && syy > 1e-300) ? sxy / std::sqrt(sxx * syy) : 0.0;
}

/// EMA with alpha = 2 / (span + 1), started at x[0]; causal.
Vec ema(const Vec& x, int64_t span) {
  Vec out(x.size());
  const double a = 2.0 / (static_cast<double>(span) + 1.0);
  for (size_t i = 0; i < x.size(); ++i) out[i] = i == 0 ? x[0] : a * x[i] + (1 - a) * out[i - 1];
  return out;
}

/// Collects named columns; with n = 0 it only records names (used for the name lists).
struct Builder {
  int64_t n = 0;
  std::vector<std::string> names;
  std::vector<Vec> cols;
  void add(const std::string& name, const std::function<double(int64_t)>& f) {
    names.push_back(name);
    Vec c(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
      const double v = f(t);
      // Only absurd inputs (e.g. volumes near DBL_MAX) overflow; keep the matrix finite.
      c[static_cast<size_t>(t)] = std::isfinite(v) ? v : 0.0;
    }
    cols.push_back(std::move(c));
  }
};

/// Per-bar series that several columns share: the plain ones computed up front, the
/// parameterised ones (EMAs, realised vols, MACD lines) once, on first use.
class Derived {
 public:
  explicit Derived(const Base& x) : x_(x) {
    const size_t n = static_cast<size_t>(x.n);
    for (Vec* v : {&gains, &losses, &abs_r, &r_prev, &ltp}) v->assign(n, 0.0);
    for (size_t t = 0; t < n; ++t) {
      gains[t] = std::max(0.0, x.r[t]);
      losses[t] = std::max(0.0, -x.r[t]);
      abs_r[t] = std::abs(x.r[t]);
      if (t > 0) r_prev[t] = x.r[t - 1];
      ltp[t] = (x.lh[t] + x.ll[t] + x.lc[t]) / 3.0;
    }
  }

  Vec gains, losses;  // max(0, r), max(0, -r)
  Vec abs_r;          // |r|
  Vec r_prev;         // r one bar ago (0 at bar 0)
  Vec ltp;            // log typical price (lh + ll + lc) / 3

  /// EMA of the log close with span `span`.
  const Vec& ema_lc(int64_t span) {
    return cached({0, span, 0, 0}, [&] { return ema(x_.lc, span); });
  }
  /// Realised volatility sqrt(mean r^2) over `w` bars.
  const Vec& rv(int64_t w) {
    return cached({1, w, 0, 0}, [&] {
      Vec c(static_cast<size_t>(x_.n));
      for (int64_t t = 0; t < x_.n; ++t) c[t] = std::sqrt(wmean_sq(x_.r, t, w));
      return c;
    });
  }
  /// MACD line EMA(f) - EMA(s) of the log close.
  const Vec& macd_line(int64_t f, int64_t s) {
    return cached({2, f, s, 0}, [&] {
      const Vec &ef = ema_lc(f), &es = ema_lc(s);
      Vec line(static_cast<size_t>(x_.n));
      for (int64_t t = 0; t < x_.n; ++t) line[t] = ef[t] - es[t];
      return line;
    });
  }
  /// EMA(g) of the (f, s) MACD line.
  const Vec& macd_signal(int64_t f, int64_t s, int64_t g) {
    return cached({3, f, s, g}, [&] { return ema(macd_line(f, s), g); });
  }

 private:
  // std::map: a returned reference stays valid while later entries are added.
  template <typename F>
  const Vec& cached(const std::array<int64_t, 4>& key, F&& make) {
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    Vec v = make();
    return cache_.emplace(key, std::move(v)).first->second;
  }

  const Base& x_;
  std::map<std::array<int64_t, 4>, Vec> cache_;
};

double parkinson(const Base& x, int64_t t, int64_t w) {
  return std::sqrt(wmean_sq(x.hl, t, w) / (4.0 * std::log(2.0)));
}

double vol_z(const Base& x, int64_t t, int64_t w) {
  const double sd = wstd(x.lv, t, w);
  return sd > 1e-12 ? (x.lv[t] - wmean(x.lv, t, w)) / sd : 0.0;
}

/// Skewness (or excess kurtosis) of r over the window; 0 when the variance is 0.
double moment_feature(const Vec& r, int64_t t, int64_t w, bool kurt) {
  const int64_t b = wbegin(t, w);
  const double m = wmean(r, t, w);
  double m2 = 0, m3 = 0, m4 = 0;
  for (int64_t i = b; i <= t; ++i) {
    const double d = r[i] - m;
    m2 += d * d;
    m3 += d * d * d;
    m4 += d * d * d * d;
  }
  const double k = static_cast<double>(t - b + 1);
  m2 /= k, m3 /= k, m4 /= k;
  if (m2 <= 1e-300) return 0.0;
  return kurt ? m4 / (m2 * m2) - 3.0 : m3 / std::pow(m2, 1.5);
}

using Column = std::function<double(int64_t)>;

/// The column of table entry `f` as a function of the bar (feature_table.h says what each kind
/// computes); the streaming engine's update() computes the same kinds incrementally.
Column column(const FeatureSpec& f, const Base& x, Derived& d) {
  using K = FeatureKind;
  const Vec& r = x.r;
  const Vec& lc = x.lc;
  const int64_t a = f.a, b = f.b, c = f.c;
  switch (f.kind) {
    case K::kRetLag:
      return [&r, a](int64_t t) { return t >= a ? r[t - a] : 0.0; };
    case K::kLogret:
      return [&lc, a](int64_t t) { return lc[t] - lc[std::max<int64_t>(0, t - a)]; };
    case K::kRealizedVol:
      return [&v = d.rv(a)](int64_t t) { return v[t]; };
    case K::kReturnStd:
      return [&r, a](int64_t t) { return wstd(r, t, a); };
    case K::kParkinson:
      return [&x, a](int64_t t) { return parkinson(x, t, a); };
    case K::kGarmanKlass:
      return [&x, a](int64_t t) {
        const double k = 2.0 * std::log(2.0) - 1.0;
        double s = 0.0;
        const int64_t b0 = wbegin(t, a);
        for (int64_t i = b0; i <= t; ++i) s += 0.5 * x.hl[i] * x.hl[i] - k * x.co[i] * x.co[i];
        return std::sqrt(std::max(0.0, s / static_cast<double>(t - b0 + 1)));
      };
    case K::kAtr:
      return [&x, a](int64_t t) { return wmean(x.tr, t, a); };
    case K::kRangeLag:
      return [&x, a](int64_t t) { return t >= a ? x.hl[t - a] : 0.0; };
    case K::kBodyLag:
      return [&x, a](int64_t t) { return t >= a ? x.co[t - a] : 0.0; };
    case K::kUpperShadow:
      return [&x](int64_t t) { return x.upper[t]; };
    case K::kLowerShadow:
      return [&x](int64_t t) { return x.lower[t]; };
    case K::kRangePos:
      return [&x, a](int64_t t) {
        const double hi = wmax(x.lh, t, a), lo = wmin(x.ll, t, a);
        return hi - lo > 1e-300 ? (x.lc[t] - lo) / (hi - lo) - 0.5 : 0.0;
      };
    case K::kRangeWidth:
      return [&x, a](int64_t t) { return wmax(x.lh, t, a) - wmin(x.ll, t, a); };
    case K::kDistSma:
      return [&lc, a](int64_t t) { return lc[t] - wmean(lc, t, a); };
    case K::kDistEma:
      return [&lc, &e = d.ema_lc(a)](int64_t t) { return lc[t] - e[t]; };
    case K::kSmaCross:
      return [&lc, a, b](int64_t t) { return wmean(lc, t, a) - wmean(lc, t, b); };
    case K::kRsi:
      return [&d, a](int64_t t) {
        const double g = wmean(d.gains, t, a), l = wmean(d.losses, t, a);
        return g + l > 1e-300 ? 2.0 * g / (g + l) - 1.0 : 0.0;
      };
    case K::kMacdLine:
      return [&L = d.macd_line(a, b)](int64_t t) { return L[t]; };
    case K::kMacdSignal:
      return [&S = d.macd_signal(a, b, c)](int64_t t) { return S[t]; };
    case K::kMacdHist:
      return
          [&L = d.macd_line(a, b), &S = d.macd_signal(a, b, c)](int64_t t) { return L[t] - S[t]; };
    case K::kVolZ:
      return [&x, a](int64_t t) { return vol_z(x, t, a); };
    case K::kDlogvolLag:
      return [&x, a](int64_t t) { return t - a >= 1 ? x.lv[t - a] - x.lv[t - a - 1] : 0.0; };
    case K::kVwret:
      return [&x, a](int64_t t) {
        double num = 0, den = 0;
        for (int64_t i = wbegin(t, a); i <= t; ++i) {
          num += x.r[i] * x.v[i];
          den += x.v[i];
        }
        return safe_div(num, den);
      };
    case K::kSignedVol:
      return [&x, a](int64_t t) {
        double num = 0, den = 0;
        for (int64_t i = wbegin(t, a); i <= t; ++i) {
          num += (x.r[i] > 0 ? 1.0 : x.r[i] < 0 ? -1.0 : 0.0) * x.v[i];
          den += x.v[i];
        }
        return safe_div(num, den);
      };
    case K::kSkew:
      return [&r, a](int64_t t) { return moment_feature(r, t, a, false); };
    case K::kKurt:
      return [&r, a](int64_t t) { return moment_feature(r, t, a, true); };
    case K::kAutocorr1:
      return [&r, &d, a](int64_t t) { return wcorr(r, d.r_prev, t, a); };
    case K::kRetZ:
      return [&r, &v = d.rv(a)](int64_t t) { return safe_div(r[t], v[t]); };
    case K::kVolRatio:
      return [&va = d.rv(a), &vb = d.rv(b)](int64_t t) { return log_ratio(va[t], vb[t]); };
    case K::kParkRvRatio:
      return [&x, &v = d.rv(a), a](int64_t t) { return log_ratio(parkinson(x, t, a), v[t]); };
    case K::kDrawdown:
      return [&lc, a](int64_t t) { return lc[t] - wmax(lc, t, a); };
    case K::kDrawup:
      return [&lc, a](int64_t t) { return lc[t] - wmin(lc, t, a); };
    case K::kEfficiency:
      return [&r, a](int64_t t) {
        double s = 0, abs_sum = 0;
        for (int64_t i = wbegin(t, a); i <= t; ++i) {
          s += r[i];
          abs_sum += std::abs(r[i]);
        }
        return safe_div(std::abs(s), abs_sum);
      };
    case K::kUpFrac:
      return [&r, a](int64_t t) {
        const int64_t b0 = wbegin(t, a);
        double up = 0;
        for (int64_t i = b0; i <= t; ++i) up += r[i] > 0 ? 1.0 : 0.0;
        return up / static_cast<double>(t - b0 + 1) - 0.5;
      };
    case K::kBollinger:
      return [&lc, a](int64_t t) {
        const double sd = wstd(lc, t, a);
        return sd > 1e-300 ? (lc[t] - wmean(lc, t, a)) / (2.0 * sd) : 0.0;
      };
    case K::kSharpe:
      return [&r, a](int64_t t) { return safe_div(wmean(r, t, a), wstd(r, t, a)); };
    case K::kVolTrend:
      return [&x, a, b](int64_t t) {
        return std::log((wmean(x.v, t, a) + 1) / (wmean(x.v, t, b) + 1));
      };
    case K::kAbsretVolCorr:
      return [&x, &d, a](int64_t t) { return wcorr(d.abs_r, x.lv, t, a); };
    case K::kCci:
      return [&ltp = d.ltp, a](int64_t t) {
        const double m = wmean(ltp, t, a);
        double md = 0;
        const int64_t b0 = wbegin(t, a);
        for (int64_t i = b0; i <= t; ++i) md += std::abs(ltp[i] - m);
        md /= static_cast<double>(t - b0 + 1);
        return md > 1e-300 ? (ltp[t] - m) / (0.015 * md) / 100.0 : 0.0;
      };
    case K::kMaxRet:
      return [&r, a](int64_t t) { return wmax(r, t, a); };
    case K::kMinRet:
      return [&r, a](int64_t t) { return wmin(r, t, a); };
    case K::kDownsideVol:
      return [&d, a](int64_t t) { return std::sqrt(wmean_sq(d.losses, t, a)); };
    case K::kUpsideVol:
      return [&d, a](int64_t t) { return std::sqrt(wmean_sq(d.gains, t, a)); };
    case K::kRvChange:
      return
          [&v = d.rv(a), b](int64_t t) { return log_ratio(v[t], v[std::max<int64_t>(0, t - b)]); };
    case K::kVarianceRatio:  // q = a, window b
      return [&r, &lc, a, b](int64_t t) {
        double sq = 0, s1 = 0;
        for (int64_t i = wbegin(t, b); i <= t; ++i) {
          const double dq = lc[i] - lc[std::max<int64_t>(0, i - a)];
          sq += dq * dq;
          s1 += r[i] * r[i];
        }
        return s1 > 1e-300 ? sq / (static_cast<double>(a) * s1) - 1.0 : 0.0;
      };
    case K::kSinceHigh:
      return [&lc, a](int64_t t) {
        int64_t best = t;
        for (int64_t i = wbegin(t, a); i <= t; ++i)
          if (lc[i] >= lc[best]) best = i;
        return static_cast<double>(t - best) / static_cast<double>(a);
      };
    case K::kSinceLow:
      return [&lc, a](int64_t t) {
        int64_t best = t;
        for (int64_t i = wbegin(t, a); i <= t; ++i)
          if (lc[i] <= lc[best]) best = i;
        return static_cast<double>(t - best) / static_cast<double>(a);
      };
    case K::kJumpFlag:
      return [&r, &v = d.rv(a)](int64_t t) {
        const double s = v[t];
        return (s > 0 && std::abs(r[t]) > 4.0 * s) ? (r[t] > 0 ? 1.0 : -1.0) : 0.0;
      };
    case K::kVolZLag:
      return [&x, a, b](int64_t t) { return t >= b ? vol_z(x, t - b, a) : 0.0; };
    case K::kRvLag:
      return [&v = d.rv(a), b](int64_t t) { return t >= b ? v[t - b] : 0.0; };
  }
  FOXHUNT_INTERNAL_ASSERT(false, "feature kind ", static_cast<int>(f.kind), " has no batch column");
  return {};
}

/// The bank: one column per kFeatureTable entry, in table order.
void build_bank(Builder& B, const Base& x) {
  Derived d(x);
  for (const FeatureSpec& f : kFeatureTable) B.add(feature_name(f), column(f, x, d));
  FOXHUNT_INTERNAL_ASSERT(static_cast<int64_t>(B.names.size()) == kObservedFeatures,
                          "observed feature count ", B.names.size());
}

int64_t floor_mod(int64_t a, int64_t m) {
  return ((a % m) + m) % m;
}
int64_t floor_div(int64_t a, int64_t m) {
  return (a - floor_mod(a, m)) / m;
}

}  // namespace

Matrix::Matrix(int64_t r, int64_t c) : rows(r), cols(c), data(static_cast<size_t>(r * c), 0.0f) {}

Matrix Matrix::select_columns(const std::vector<int64_t>& columns) const {
  for (int64_t c : columns)
    FOXHUNT_CHECK(c >= 0 && c < cols, "features", "column index ", c, " out of range [0, ", cols,
                  ")");
  Matrix out(rows, static_cast<int64_t>(columns.size()));
  for (int64_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < columns.size(); ++j)
      out.at(r, static_cast<int64_t>(j)) = at(r, columns[j]);
  return out;
}

const std::vector<std::string>& observed_feature_names() {
  static const std::vector<std::string> names = [] {
    Builder b;
    build_bank(b, Base{});
    return b.names;
  }();
  return names;
}

std::vector<std::string> past_feature_names() {
  const auto& all = observed_feature_names();
  return {all.begin(), all.begin() + kPastBankFeatures};
}

const std::vector<std::string>& calendar_feature_names() {
  static const std::vector<std::string> names = {"tod_sin", "tod_cos", "dow_sin", "dow_cos"};
  return names;
}

const std::vector<std::string>& compact_feature_names() {
  // Short-horizon returns and volatility, range, volume, oscillators and trend distances.
  static const std::vector<std::string> names = {
      "ret_lag_0",   "ret_lag_1",    "ret_lag_2",    "ret_lag_3",    "ret_lag_4",
      "ret_lag_5",   "ret_lag_6",    "ret_lag_7",    "logret_5",     "logret_10",
      "logret_20",   "logret_60",    "rv_5",         "rv_20",        "rv_60",
      "parkinson_5", "parkinson_20", "hl_lag_0",     "co_lag_0",     "vol_z_5",
      "vol_z_20",    "vol_z_60",     "rsi_14",       "macd_12_26",   "macd_hist_12_26_9",
      "dist_sma_10", "dist_sma_50",  "dist_sma_200", "range_pos_20", "efficiency_20",
      "skew_60",     "signed_vol_20"};
  return names;
}

const std::vector<int64_t>& compact_feature_columns() {
  static const std::vector<int64_t> cols = [] {
    const auto& all = observed_feature_names();
    std::vector<int64_t> out;
    for (const auto& n : compact_feature_names()) {
      auto it = std::find(all.begin(), all.begin() + kPastBankFeatures, n);
      FOXHUNT_INTERNAL_ASSERT(it != all.begin() + kPastBankFeatures, "unknown compact32 feature ",
                              n);
      out.push_back(it - all.begin());
    }
    FOXHUNT_INTERNAL_ASSERT(static_cast<int64_t>(out.size()) == kCompactFeatures);
    return out;
  }();
  return cols;
}

std::vector<std::string> rl_state_names() {
  std::vector<std::string> out = observed_feature_names();
  for (const auto& n : calendar_feature_names()) out.push_back(n);
  out.push_back("position");
  out.push_back("unrealized_pnl");
  return out;
}

Matrix compute_observed_features(const BarSeries& series) {
  FOXHUNT_CHECK(!series.bars.empty(), "features", "cannot compute features of an empty series (",
                series.source, ")");
  const Base base = make_base(series);
  Builder b;
  b.n = base.n;
  build_bank(b, base);
  Matrix m(base.n, kObservedFeatures);
  for (int64_t c = 0; c < kObservedFeatures; ++c)
    for (int64_t t = 0; t < base.n; ++t) m.at(t, c) = static_cast<float>(b.cols[c][t]);
  return m;
}

std::array<float, 4> calendar_features(int64_t timestamp) {
  const double tod = static_cast<double>(floor_mod(timestamp, 86400)) / 86400.0;
  // 1970-01-01 was a Thursday: Monday = 0 makes it day 3.
  const double dow = static_cast<double>(floor_mod(floor_div(timestamp, 86400) + 3, 7)) / 7.0;
  return {static_cast<float>(std::sin(kTwoPi * tod)), static_cast<float>(std::cos(kTwoPi * tod)),
          static_cast<float>(std::sin(kTwoPi * dow)), static_cast<float>(std::cos(kTwoPi * dow))};
}

Matrix compute_calendar_features(const BarSeries& series) {
  Matrix m(series.size(), kKnownFutureFeatures);
  for (int64_t t = 0; t < series.size(); ++t) {
    const auto f = calendar_features(series.bars[static_cast<size_t>(t)].timestamp);
    std::copy(f.begin(), f.end(), m.row(t));
  }
  return m;
}

Normalizer Normalizer::fit(const Matrix& m, int64_t row_begin, int64_t row_end, double clip) {
  FOXHUNT_CHECK(row_begin >= 0 && row_begin < row_end && row_end <= m.rows, "features",
                "normalizer: need a non-empty row range inside [0, ", m.rows, "), got [", row_begin,
                ", ", row_end, ")");
  FOXHUNT_CHECK(clip >= 0, "features", "normalizer: clip must be >= 0, got ", clip);
  Normalizer nz;
  nz.clip = clip;
  nz.mean.assign(static_cast<size_t>(m.cols), 0.0);
  nz.stddev.assign(static_cast<size_t>(m.cols), 0.0);
  const double count = static_cast<double>(row_end - row_begin);
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int64_t c = 0; c < m.cols; ++c) nz.mean[c] += m.at(r, c);
  for (auto& v : nz.mean) v /= count;
  for (int64_t r = row_begin; r < row_end; ++r)
    for (int64_t c = 0; c < m.cols; ++c) {
      const double d = m.at(r, c) - nz.mean[c];
      nz.stddev[c] += d * d;
    }
  for (auto& v : nz.stddev) {
    v = std::sqrt(v / count);
    if (!(v > 1e-10)) v = 1.0;  // constant column: keep it constant (0) rather than divide by 0
  }
  return nz;
}

void Normalizer::apply_row(float* row, int64_t n) const {
  FOXHUNT_CHECK(n == cols(), "features", "normalizer: fitted on ", cols(), " columns, got ", n);
  for (int64_t c = 0; c < n; ++c) {
    double v = (row[c] - mean[c]) / stddev[c];
    if (clip > 0) v = std::clamp(v, -clip, clip);
    row[c] = static_cast<float>(v);
  }
}

Matrix Normalizer::apply(const Matrix& m) const {
  FOXHUNT_CHECK(m.cols == cols(), "features", "normalizer: fitted on ", cols(),
                " columns, matrix has ", m.cols);
  Matrix out = m;
  for (int64_t r = 0; r < out.rows; ++r) apply_row(out.row(r), out.cols);
  return out;
}

void to_json(nlohmann::json& j, const Normalizer& n) {
  j = nlohmann::json{{"clip", n.clip}, {"mean", n.mean}, {"std", n.stddev}};
}

void from_json(const nlohmann::json& j, Normalizer& n) {
  FOXHUNT_CHECK(j.is_object() && j.contains("mean") && j.contains("std"), "features",
                "normalizer JSON needs keys 'mean' and 'std'");
  try {
    n.mean = j.at("mean").get<std::vector<double>>();
    n.stddev = j.at("std").get<std::vector<double>>();
    n.clip = j.value("clip", 10.0);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("features", std::string("normalizer JSON: ") + e.what());
  }
  FOXHUNT_CHECK(n.mean.size() == n.stddev.size(), "features", "normalizer JSON: ", n.mean.size(),
                " means but ", n.stddev.size(), " stds");
  for (double s : n.stddev)
    FOXHUNT_CHECK(std::isfinite(s) && s > 0, "features", "normalizer JSON: std must be > 0, got ",
                  s);
  for (double m : n.mean)
    FOXHUNT_CHECK(std::isfinite(m), "features", "normalizer JSON: non-finite mean ", m);
  FOXHUNT_CHECK(n.clip >= 0, "features", "normalizer JSON: clip must be >= 0, got ", n.clip);
}

const std::vector<FeatureSet>& feature_sets() {
  static const std::vector<FeatureSet> sets = [] {
    std::vector<int64_t> past(kPastBankFeatures);
    for (int64_t c = 0; c < kPastBankFeatures; ++c) past[static_cast<size_t>(c)] = c;
    return std::vector<FeatureSet>{{"compact32", compact_feature_columns(), kCompactFeatures},
                                   {"past225", past, kPastBankFeatures},
                                   {"calendar", {}, kKnownFutureFeatures},
                                   {"rl_state", {}, kRlStateDim}};
  }();
  return sets;
}

const FeatureSet& feature_set(const std::string& name) {
  const auto& sets = feature_sets();
  for (const auto& s : sets)
    if (s.name == name) return s;
  std::string known;
  for (const auto& s : sets) known += (known.empty() ? "" : ", ") + s.name;
  throw InputError("features", "unknown feature set '" + name + "'; expected one of: " + known);
}

}  // namespace foxhunt::data
