#include "foxhunt/data/features.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "foxhunt/core/error.h"

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

std::string nm(const char* prefix, int64_t a) {
  return std::string(prefix) + std::to_string(a);
}
std::string nm(const char* prefix, int64_t a, int64_t b) {
  return nm(prefix, a) + "_" + std::to_string(b);
}

void build_bank(Builder& B, const Base& x) {
  const Vec& r = x.r;
  const Vec& lc = x.lc;
  const int64_t n = x.n;
  const std::vector<int64_t> vol_windows = {3, 5, 8, 10, 15, 20, 30, 40, 60, 90, 120, 180, 240};
  const std::vector<int64_t> range_windows = {5, 10, 20, 40, 60, 120, 240};

  // (A) 20 lagged one-bar log returns.
  for (int64_t k = 0; k < 20; ++k)
    B.add(nm("ret_lag_", k), [&, k](int64_t t) { return t >= k ? r[t - k] : 0.0; });
  // (B) 21 multi-horizon log returns log(c_t / c_{t-h}).
  for (int64_t h :
       {2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 180, 240})
    B.add(nm("logret_", h), [&, h](int64_t t) { return lc[t] - lc[std::max<int64_t>(0, t - h)]; });
  // (C) 13 realised volatilities sqrt(mean r^2).
  for (int64_t w : vol_windows)
    B.add(nm("rv_", w), [&, w](int64_t t) { return std::sqrt(wmean_sq(r, t, w)); });
  // (D) 7 demeaned return std.
  for (int64_t w : {5, 10, 20, 40, 60, 120, 240})
    B.add(nm("std_", w), [&, w](int64_t t) { return wstd(r, t, w); });
  // (E) 13 Parkinson range volatilities.
  for (int64_t w : vol_windows)
    B.add(nm("parkinson_", w),
          [&, w](int64_t t) { return std::sqrt(wmean_sq(x.hl, t, w) / (4.0 * std::log(2.0))); });
  // (F) 6 Garman-Klass volatilities.
  for (int64_t w : {5, 10, 20, 60, 120, 240})
    B.add(nm("garman_klass_", w), [&, w](int64_t t) {
      const double k = 2.0 * std::log(2.0) - 1.0;
      double s = 0.0;
      const int64_t b = wbegin(t, w);
      for (int64_t i = b; i <= t; ++i) s += 0.5 * x.hl[i] * x.hl[i] - k * x.co[i] * x.co[i];
      return std::sqrt(std::max(0.0, s / static_cast<double>(t - b + 1)));
    });
  // (G) 6 average true ranges (log units).
  for (int64_t w : {5, 7, 14, 20, 28, 60})
    B.add(nm("atr_", w), [&, w](int64_t t) { return wmean(x.tr, t, w); });
  // (H) 10 lagged high-low ranges, (I) 5 lagged bodies, (J) 2 shadows.
  for (int64_t k = 0; k < 10; ++k)
    B.add(nm("hl_lag_", k), [&, k](int64_t t) { return t >= k ? x.hl[t - k] : 0.0; });
  for (int64_t k = 0; k < 5; ++k)
    B.add(nm("co_lag_", k), [&, k](int64_t t) { return t >= k ? x.co[t - k] : 0.0; });
  B.add("upper_shadow", [&](int64_t t) { return x.upper[t]; });
  B.add("lower_shadow", [&](int64_t t) { return x.lower[t]; });
  // (K) 7 positions of the close in the rolling high-low range (-0.5 .. 0.5), (L) 7 range widths.
  for (int64_t w : range_windows)
    B.add(nm("range_pos_", w), [&, w](int64_t t) {
      const double hi = wmax(x.lh, t, w), lo = wmin(x.ll, t, w);
      return hi - lo > 1e-300 ? (lc[t] - lo) / (hi - lo) - 0.5 : 0.0;
    });
  for (int64_t w : range_windows)
    B.add(nm("range_", w), [&, w](int64_t t) { return wmax(x.lh, t, w) - wmin(x.ll, t, w); });
  // (M) 7 distances to simple moving averages of log price.
  for (int64_t w : {5, 10, 20, 30, 50, 100, 200})
    B.add(nm("dist_sma_", w), [&, w](int64_t t) { return lc[t] - wmean(lc, t, w); });
  // (N) 6 distances to EMAs of log price.
  std::unordered_map<int64_t, Vec> emas;
  for (int64_t s : {5, 8, 10, 12, 17, 20, 26, 35, 50, 100, 200}) emas[s] = ema(lc, s);
  for (int64_t s : {5, 10, 20, 50, 100, 200})
    B.add(nm("dist_ema_", s), [&, s](int64_t t) { return lc[t] - emas.at(s)[t]; });
  // (O) 4 moving-average crossovers.
  for (auto [a, b] :
       std::vector<std::pair<int64_t, int64_t>>{{5, 20}, {10, 50}, {20, 100}, {50, 200}})
    B.add(nm("sma_cross_", a, b),
          [&, a, b](int64_t t) { return wmean(lc, t, a) - wmean(lc, t, b); });
  // (P) 6 RSI-like oscillators mapped to [-1, 1].
  Vec gains(static_cast<size_t>(n)), losses(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    gains[t] = std::max(0.0, r[t]);
    losses[t] = std::max(0.0, -r[t]);
  }
  for (int64_t w : {5, 7, 9, 14, 21, 28})
    B.add(nm("rsi_", w), [&, w](int64_t t) {
      const double g = wmean(gains, t, w), l = wmean(losses, t, w);
      return g + l > 1e-300 ? 2.0 * g / (g + l) - 1.0 : 0.0;
    });
  // (Q) 3 MACD-like triples: line, signal, histogram (log price units).
  std::vector<Vec> macd_store;
  macd_store.reserve(6);
  for (auto [f, s, g] : std::vector<std::array<int64_t, 3>>{{12, 26, 9}, {5, 35, 5}, {8, 17, 9}}) {
    Vec line(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) line[t] = emas.at(f)[t] - emas.at(s)[t];
    macd_store.push_back(line);
    macd_store.push_back(ema(line, g));
    const Vec& L = macd_store[macd_store.size() - 2];
    const Vec& S = macd_store.back();
    B.add(nm("macd_", f, s), [&L](int64_t t) { return L[t]; });
    B.add(nm("macd_signal_", f, s) + "_" + std::to_string(g), [&S](int64_t t) { return S[t]; });
    B.add(nm("macd_hist_", f, s) + "_" + std::to_string(g),
          [&L, &S](int64_t t) { return L[t] - S[t]; });
  }
  // (R) 6 log-volume z-scores.
  auto vol_z = [&](int64_t t, int64_t w) {
    const double sd = wstd(x.lv, t, w);
    return sd > 1e-12 ? (x.lv[t] - wmean(x.lv, t, w)) / sd : 0.0;
  };
  for (int64_t w : {5, 10, 20, 40, 60, 120})
    B.add(nm("vol_z_", w), [&, w](int64_t t) { return vol_z(t, w); });
  // (S) 5 lagged log-volume changes.
  for (int64_t k = 0; k < 5; ++k)
    B.add(nm("dlogvol_lag_", k),
          [&, k](int64_t t) { return t - k >= 1 ? x.lv[t - k] - x.lv[t - k - 1] : 0.0; });
  // (T) 4 volume-weighted mean returns, (U) 4 signed-volume imbalances.
  for (int64_t w : {5, 10, 20, 60})
    B.add(nm("vwret_", w), [&, w](int64_t t) {
      double num = 0, den = 0;
      for (int64_t i = wbegin(t, w); i <= t; ++i) {
        num += r[i] * x.v[i];
        den += x.v[i];
      }
      return safe_div(num, den);
    });
  for (int64_t w : {5, 10, 20, 60})
    B.add(nm("signed_vol_", w), [&, w](int64_t t) {
      double num = 0, den = 0;
      for (int64_t i = wbegin(t, w); i <= t; ++i) {
        num += (r[i] > 0 ? 1.0 : r[i] < 0 ? -1.0 : 0.0) * x.v[i];
        den += x.v[i];
      }
      return safe_div(num, den);
    });
  // (V) 6 return skewness / excess kurtosis.
  auto moment_feature = [&](int64_t t, int64_t w, bool kurt) {
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
  };
  for (int64_t w : {20, 60, 120}) {
    B.add(nm("skew_", w), [&, w](int64_t t) { return moment_feature(t, w, false); });
    B.add(nm("kurt_", w), [&, w](int64_t t) { return moment_feature(t, w, true); });
  }
  // (W) 3 lag-1 return autocorrelations.
  Vec r_prev(static_cast<size_t>(n), 0.0);
  for (int64_t t = 1; t < n; ++t) r_prev[t] = r[t - 1];
  for (int64_t w : {20, 60, 120})
    B.add(nm("autocorr1_", w), [&, w](int64_t t) { return wcorr(r, r_prev, t, w); });
  // Realised-vol columns reused by ratios and lags below.
  std::unordered_map<int64_t, Vec> rv;
  for (int64_t w : {5, 10, 20, 60, 120, 240}) {
    Vec c(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) c[t] = std::sqrt(wmean_sq(r, t, w));
    rv[w] = std::move(c);
  }
  // (X) 3 volatility-scaled returns.
  for (int64_t w : {20, 60, 240})
    B.add(nm("ret_z_", w), [&, w](int64_t t) { return safe_div(r[t], rv.at(w)[t]); });
  // (Y) 4 volatility ratios (log).
  B.add("vol_ratio_5_60", [&](int64_t t) { return log_ratio(rv.at(5)[t], rv.at(60)[t]); });
  B.add("vol_ratio_20_240", [&](int64_t t) { return log_ratio(rv.at(20)[t], rv.at(240)[t]); });
  B.add("vol_ratio_10_120", [&](int64_t t) { return log_ratio(rv.at(10)[t], rv.at(120)[t]); });
  B.add("park_rv_ratio_20", [&](int64_t t) {
    return log_ratio(std::sqrt(wmean_sq(x.hl, t, 20) / (4.0 * std::log(2.0))), rv.at(20)[t]);
  });
  // (Z) 6 drawdowns from the rolling max / run-ups from the rolling min of log close.
  for (int64_t w : {20, 60, 240}) {
    B.add(nm("drawdown_", w), [&, w](int64_t t) { return lc[t] - wmax(lc, t, w); });
    B.add(nm("drawup_", w), [&, w](int64_t t) { return lc[t] - wmin(lc, t, w); });
  }
  // (AA) 3 efficiency ratios |sum r| / sum |r|, (AB) 3 fractions of up bars (centred).
  for (int64_t w : {10, 20, 60})
    B.add(nm("efficiency_", w), [&, w](int64_t t) {
      double s = 0, a = 0;
      for (int64_t i = wbegin(t, w); i <= t; ++i) {
        s += r[i];
        a += std::abs(r[i]);
      }
      return safe_div(std::abs(s), a);
    });
  for (int64_t w : {10, 20, 60})
    B.add(nm("up_frac_", w), [&, w](int64_t t) {
      const int64_t b = wbegin(t, w);
      double up = 0;
      for (int64_t i = b; i <= t; ++i) up += r[i] > 0 ? 1.0 : 0.0;
      return up / static_cast<double>(t - b + 1) - 0.5;
    });
  // (AC) 2 Bollinger %b-like positions of log price.
  for (int64_t w : {20, 50})
    B.add(nm("bollinger_", w), [&, w](int64_t t) {
      const double sd = wstd(lc, t, w);
      return sd > 1e-300 ? (lc[t] - wmean(lc, t, w)) / (2.0 * sd) : 0.0;
    });
  // (AD) 4 Sharpe-like drift / volatility ratios.
  for (int64_t w : {20, 60, 120, 240})
    B.add(nm("sharpe_", w), [&, w](int64_t t) { return safe_div(wmean(r, t, w), wstd(r, t, w)); });
  // (AE) 2 volume trends.
  B.add("vol_trend_5_60",
        [&](int64_t t) { return std::log((wmean(x.v, t, 5) + 1) / (wmean(x.v, t, 60) + 1)); });
  B.add("vol_trend_20_120",
        [&](int64_t t) { return std::log((wmean(x.v, t, 20) + 1) / (wmean(x.v, t, 120) + 1)); });
  // (AF) 2 |return|-volume correlations.
  Vec abs_r(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) abs_r[t] = std::abs(r[t]);
  for (int64_t w : {20, 60})
    B.add(nm("absret_vol_corr_", w), [&, w](int64_t t) { return wcorr(abs_r, x.lv, t, w); });
  // (AG) 2 CCI-like oscillators on the log typical price (scaled by 1/100).
  Vec ltp(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) ltp[t] = (x.lh[t] + x.ll[t] + lc[t]) / 3.0;
  for (int64_t w : {14, 20})
    B.add(nm("cci_", w), [&, w](int64_t t) {
      const double m = wmean(ltp, t, w);
      double md = 0;
      const int64_t b = wbegin(t, w);
      for (int64_t i = b; i <= t; ++i) md += std::abs(ltp[i] - m);
      md /= static_cast<double>(t - b + 1);
      return md > 1e-300 ? (ltp[t] - m) / (0.015 * md) / 100.0 : 0.0;
    });
  // (AH) 4 extreme returns.
  for (int64_t w : {20, 60}) {
    B.add(nm("max_ret_", w), [&, w](int64_t t) { return wmax(r, t, w); });
    B.add(nm("min_ret_", w), [&, w](int64_t t) { return wmin(r, t, w); });
  }
  // (AI) 3 downside and (AJ) 3 upside semi-volatilities.
  for (int64_t w : {20, 60, 120})
    B.add(nm("downside_vol_", w), [&, w](int64_t t) { return std::sqrt(wmean_sq(losses, t, w)); });
  for (int64_t w : {20, 60, 120})
    B.add(nm("upside_vol_", w), [&, w](int64_t t) { return std::sqrt(wmean_sq(gains, t, w)); });
  // (AK) 2 volatility changes.
  B.add("rv_change_20_5",
        [&](int64_t t) { return log_ratio(rv.at(20)[t], rv.at(20)[std::max<int64_t>(0, t - 5)]); });
  B.add("rv_change_60_20", [&](int64_t t) {
    return log_ratio(rv.at(60)[t], rv.at(60)[std::max<int64_t>(0, t - 20)]);
  });
  // (AL) 2 variance ratios (q-bar vs one-bar variance, minus 1; ~0 for a random walk).
  for (auto [q, w] : std::vector<std::pair<int64_t, int64_t>>{{5, 60}, {10, 120}})
    B.add(nm("variance_ratio_", q, w), [&, q, w](int64_t t) {
      double sq = 0, s1 = 0;
      for (int64_t i = wbegin(t, w); i <= t; ++i) {
        const double dq = lc[i] - lc[std::max<int64_t>(0, i - q)];
        sq += dq * dq;
        s1 += r[i] * r[i];
      }
      return s1 > 1e-300 ? sq / (static_cast<double>(q) * s1) - 1.0 : 0.0;
    });
  // (AM) 2 bars since the rolling 60-bar high / low (fraction of the window).
  B.add("since_high_60", [&](int64_t t) {
    int64_t best = t;
    for (int64_t i = wbegin(t, 60); i <= t; ++i)
      if (lc[i] >= lc[best]) best = i;
    return static_cast<double>(t - best) / 60.0;
  });
  B.add("since_low_60", [&](int64_t t) {
    int64_t best = t;
    for (int64_t i = wbegin(t, 60); i <= t; ++i)
      if (lc[i] <= lc[best]) best = i;
    return static_cast<double>(t - best) / 60.0;
  });
  // (AN) 1 jump flag: sign of a return larger than 4 x the 60-bar realised volatility.
  B.add("jump_flag", [&](int64_t t) {
    const double s = rv.at(60)[t];
    return (s > 0 && std::abs(r[t]) > 4.0 * s) ? (r[t] > 0 ? 1.0 : -1.0) : 0.0;
  });
  FOXHUNT_INTERNAL_ASSERT(static_cast<int64_t>(B.names.size()) == kTftPastFeatures,
                          "TFT feature count ", B.names.size());

  // ---- 25 extra columns for the RL state: longer lags of key features. ----
  for (int64_t k = 20; k < 30; ++k)
    B.add(nm("ret_lag_", k), [&, k](int64_t t) { return t >= k ? r[t - k] : 0.0; });
  for (int64_t k = 10; k < 15; ++k)
    B.add(nm("hl_lag_", k), [&, k](int64_t t) { return t >= k ? x.hl[t - k] : 0.0; });
  for (int64_t k = 1; k <= 5; ++k)
    B.add(nm("vol_z_20_lag_", k), [&, k](int64_t t) { return t >= k ? vol_z(t - k, 20) : 0.0; });
  for (int64_t k = 1; k <= 5; ++k)
    B.add(nm("rv_20_lag_", k), [&, k](int64_t t) { return t >= k ? rv.at(20)[t - k] : 0.0; });
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

std::vector<std::string> tft_feature_names() {
  const auto& all = observed_feature_names();
  return {all.begin(), all.begin() + kTftPastFeatures};
}

const std::vector<std::string>& calendar_feature_names() {
  static const std::vector<std::string> names = {"tod_sin", "tod_cos", "dow_sin", "dow_cos"};
  return names;
}

const std::vector<std::string>& mamba2_feature_names() {
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

const std::vector<int64_t>& mamba2_feature_columns() {
  static const std::vector<int64_t> cols = [] {
    const auto& all = observed_feature_names();
    std::vector<int64_t> out;
    for (const auto& n : mamba2_feature_names()) {
      auto it = std::find(all.begin(), all.begin() + kTftPastFeatures, n);
      FOXHUNT_INTERNAL_ASSERT(it != all.begin() + kTftPastFeatures, "unknown mamba2 feature ", n);
      out.push_back(it - all.begin());
    }
    FOXHUNT_INTERNAL_ASSERT(static_cast<int64_t>(out.size()) == kMamba2Features);
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

const FeatureSet& feature_set(const std::string& name) {
  static const std::vector<FeatureSet> sets = [] {
    std::vector<int64_t> tft(kTftPastFeatures);
    for (int64_t c = 0; c < kTftPastFeatures; ++c) tft[static_cast<size_t>(c)] = c;
    return std::vector<FeatureSet>{{"mamba2", mamba2_feature_columns(), kMamba2Features},
                                   {"tft_past", tft, kTftPastFeatures},
                                   {"calendar", {}, kKnownFutureFeatures},
                                   {"rl_state", {}, kRlStateDim}};
  }();
  for (const auto& s : sets)
    if (s.name == name) return s;
  std::string known;
  for (const auto& s : sets) known += (known.empty() ? "" : ", ") + s.name;
  throw InputError("features", "unknown feature set '" + name + "'; expected one of: " + known);
}

}  // namespace foxhunt::data
