#pragma once
/// \file feature_table.h
/// The vocabulary of the past-observed feature bank (features.h): one table, `kFeatureTable`,
/// lists every column in column order as a kind (what it computes) and up to three parameters
/// (windows, lags, spans). Both the batch bank (`compute_observed_features`) and the streaming
/// engine (`StreamingFeatures`) are generated from it: each walks the table and computes the kind
/// of every entry with the entry's parameters, so the names, the order and the windows cannot
/// differ between train and serve. Adding a column of an existing kind, or changing a window, is
/// one edit in `make_feature_table()` below (plus kObservedFeatures / kPastBankFeatures when the
/// counts change); a new kind also needs a case in each path's switch (the compiler warns when one
/// is missing). Torch-free, constexpr.
///
/// A column's name is its kind's pattern with each '#' replaced by the next parameter:
/// {kRealizedVol, 20} is "rv_20", {kMacdSignal, 12, 26, 9} is "macd_signal_12_26_9". Parameters
/// beyond the pattern's '#' count are used but not named (`jump_flag` reads the 60-bar
/// realised volatility). All windows are truncated at bar 0 during the warm-up, as features.h says.

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "foxhunt/data/features.h"

namespace foxhunt::data {

/// What a bank column computes. r is the one-bar log return, lc/lh/ll the log close/high/low,
/// hl = log(high / low), co = log(close / open), v the volume, lv = log(1 + v); windows (a, b)
/// end at the current bar.
enum class FeatureKind : uint8_t {
  kRetLag,         ///< r a bars ago (0 before bar a)
  kLogret,         ///< lc - lc a bars ago (bar 0 during the warm-up)
  kRealizedVol,    ///< sqrt(mean r^2) over a bars
  kReturnStd,      ///< population std of r over a bars
  kParkinson,      ///< sqrt(mean hl^2 / (4 ln 2)) over a bars
  kGarmanKlass,    ///< sqrt(mean(hl^2 / 2 - (2 ln 2 - 1) co^2)) over a bars, floored at 0
  kAtr,            ///< mean log true range over a bars
  kRangeLag,       ///< hl a bars ago
  kBodyLag,        ///< co a bars ago
  kUpperShadow,    ///< lh - max(lc, log open)
  kLowerShadow,    ///< min(lc, log open) - ll
  kRangePos,       ///< position of lc in the a-bar [min ll, max lh] range, -0.5 .. 0.5
  kRangeWidth,     ///< a-bar max lh - min ll
  kDistSma,        ///< lc - mean lc over a bars
  kDistEma,        ///< lc - EMA(span a) of lc
  kSmaCross,       ///< mean lc over a bars - mean lc over b bars
  kRsi,            ///< 2 gains / (gains + losses) - 1 over a bars
  kMacdLine,       ///< EMA(a) - EMA(b) of lc
  kMacdSignal,     ///< EMA(span c) of the (a, b) MACD line
  kMacdHist,       ///< (a, b) MACD line - its EMA(span c) signal
  kVolZ,           ///< z-score of lv over a bars
  kDlogvolLag,     ///< lv - previous lv, a bars ago
  kVwret,          ///< volume-weighted mean r over a bars
  kSignedVol,      ///< sum sign(r) v / sum v over a bars
  kSkew,           ///< skewness of r over a bars
  kKurt,           ///< excess kurtosis of r over a bars
  kAutocorr1,      ///< correlation of r with the previous r over a bars
  kRetZ,           ///< r / kRealizedVol(a)
  kVolRatio,       ///< log(kRealizedVol(a) / kRealizedVol(b))
  kParkRvRatio,    ///< log(kParkinson(a) / kRealizedVol(a))
  kDrawdown,       ///< lc - max lc over a bars
  kDrawup,         ///< lc - min lc over a bars
  kEfficiency,     ///< |sum r| / sum |r| over a bars
  kUpFrac,         ///< fraction of bars with r > 0 over a bars, minus 0.5
  kBollinger,      ///< (lc - mean lc) / (2 std lc) over a bars
  kSharpe,         ///< mean r / std r over a bars
  kVolTrend,       ///< log((mean v over a + 1) / (mean v over b + 1))
  kAbsretVolCorr,  ///< correlation of |r| with lv over a bars
  kCci,            ///< CCI of the log typical price over a bars, / 100
  kMaxRet,         ///< max r over a bars
  kMinRet,         ///< min r over a bars
  kDownsideVol,    ///< sqrt(mean min(r, 0)^2) over a bars
  kUpsideVol,      ///< sqrt(mean max(r, 0)^2) over a bars
  kRvChange,       ///< log(kRealizedVol(a) / kRealizedVol(a) b bars ago)
  kVarianceRatio,  ///< a-bar-return variance / (a x one-bar variance) - 1 over b bars
  kSinceHigh,      ///< bars since the a-bar max of lc, / a
  kSinceLow,       ///< bars since the a-bar min of lc, / a
  kJumpFlag,       ///< sign(r) when |r| > 4 kRealizedVol(a), else 0
  kVolZLag,        ///< kVolZ(a) b bars ago
  kRvLag,          ///< kRealizedVol(a) b bars ago
};

/// One bank column: its kind and parameters (unused ones are 0).
struct FeatureSpec {
  FeatureKind kind{};  ///< what the column computes
  int32_t a = 0;       ///< first parameter (window, lag or span)
  int32_t b = 0;       ///< second parameter
  int32_t c = 0;       ///< third parameter
};

/// Name pattern of a kind: '#' stands for the next parameter (a, then b, then c).
constexpr std::string_view feature_name_pattern(FeatureKind k) {
  using K = FeatureKind;
  // clang-format off
  switch (k) {
    case K::kRetLag: return "ret_lag_#";
    case K::kLogret: return "logret_#";
    case K::kRealizedVol: return "rv_#";
    case K::kReturnStd: return "std_#";
    case K::kParkinson: return "parkinson_#";
    case K::kGarmanKlass: return "garman_klass_#";
    case K::kAtr: return "atr_#";
    case K::kRangeLag: return "hl_lag_#";
    case K::kBodyLag: return "co_lag_#";
    case K::kUpperShadow: return "upper_shadow";
    case K::kLowerShadow: return "lower_shadow";
    case K::kRangePos: return "range_pos_#";
    case K::kRangeWidth: return "range_#";
    case K::kDistSma: return "dist_sma_#";
    case K::kDistEma: return "dist_ema_#";
    case K::kSmaCross: return "sma_cross_#_#";
    case K::kRsi: return "rsi_#";
    case K::kMacdLine: return "macd_#_#";
    case K::kMacdSignal: return "macd_signal_#_#_#";
    case K::kMacdHist: return "macd_hist_#_#_#";
    case K::kVolZ: return "vol_z_#";
    case K::kDlogvolLag: return "dlogvol_lag_#";
    case K::kVwret: return "vwret_#";
    case K::kSignedVol: return "signed_vol_#";
    case K::kSkew: return "skew_#";
    case K::kKurt: return "kurt_#";
    case K::kAutocorr1: return "autocorr1_#";
    case K::kRetZ: return "ret_z_#";
    case K::kVolRatio: return "vol_ratio_#_#";
    case K::kParkRvRatio: return "park_rv_ratio_#";
    case K::kDrawdown: return "drawdown_#";
    case K::kDrawup: return "drawup_#";
    case K::kEfficiency: return "efficiency_#";
    case K::kUpFrac: return "up_frac_#";
    case K::kBollinger: return "bollinger_#";
    case K::kSharpe: return "sharpe_#";
    case K::kVolTrend: return "vol_trend_#_#";
    case K::kAbsretVolCorr: return "absret_vol_corr_#";
    case K::kCci: return "cci_#";
    case K::kMaxRet: return "max_ret_#";
    case K::kMinRet: return "min_ret_#";
    case K::kDownsideVol: return "downside_vol_#";
    case K::kUpsideVol: return "upside_vol_#";
    case K::kRvChange: return "rv_change_#_#";
    case K::kVarianceRatio: return "variance_ratio_#_#";
    case K::kSinceHigh: return "since_high_#";
    case K::kSinceLow: return "since_low_#";
    case K::kJumpFlag: return "jump_flag";
    case K::kVolZLag: return "vol_z_#_lag_#";
    case K::kRvLag: return "rv_#_lag_#";
  }
  // clang-format on
  return "";  // not reached: every kind has a case (-Wswitch names a missing one)
}

/// The column name of `f`: its pattern with the parameters written in ("rv_20").
inline std::string feature_name(const FeatureSpec& f) {
  std::string out;
  const std::array<int32_t, 3> params = {f.a, f.b, f.c};
  size_t next = 0;
  for (char ch : feature_name_pattern(f.kind)) {
    if (ch == '#')
      out += std::to_string(params[next++]);
    else
      out += ch;
  }
  return out;
}

namespace detail {

/// Appends table entries at compile time (used by make_feature_table only).
struct FeatureTableWriter {
  std::array<FeatureSpec, kObservedFeatures> specs{};
  int64_t n = 0;

  constexpr void add(FeatureKind k, int32_t a = 0, int32_t b = 0, int32_t c = 0) {
    if (n >= kObservedFeatures) throw "feature table: more entries than kObservedFeatures";
    specs[static_cast<size_t>(n++)] = FeatureSpec{k, a, b, c};
  }
  /// One column of kind `k` per parameter.
  constexpr void each(FeatureKind k, std::initializer_list<int32_t> params) {
    for (int32_t p : params) add(k, p);
  }
  /// Columns k(first), k(first + 1), ..., k(last).
  constexpr void range(FeatureKind k, int32_t first, int32_t last) {
    for (int32_t p = first; p <= last; ++p) add(k, p);
  }
  /// For each parameter, one column of each kind in `kinds` (interleaved: skew_20, kurt_20, ...).
  constexpr void each(std::initializer_list<FeatureKind> kinds,
                      std::initializer_list<int32_t> params) {
    for (int32_t p : params)
      for (FeatureKind k : kinds) add(k, p);
  }
};

/// The bank, in column order. The letters are the groups the documentation refers to.
constexpr std::array<FeatureSpec, kObservedFeatures> make_feature_table() {
  using K = FeatureKind;
  FeatureTableWriter t;
  const std::initializer_list<int32_t> vol_windows = {3,  5,  8,  10,  15,  20, 30,
                                                      40, 60, 90, 120, 180, 240};
  const std::initializer_list<int32_t> range_windows = {5, 10, 20, 40, 60, 120, 240};
  // (A) 20 lagged one-bar log returns, (B) 21 multi-horizon log returns.
  t.range(K::kRetLag, 0, 19);
  t.each(K::kLogret,
         {2, 3, 4, 5, 6, 8, 10, 12, 15, 20, 25, 30, 40, 50, 60, 80, 100, 120, 150, 180, 240});
  // (C) 13 realised volatilities, (D) 7 demeaned return stds.
  t.each(K::kRealizedVol, vol_windows);
  t.each(K::kReturnStd, {5, 10, 20, 40, 60, 120, 240});
  // (E) 13 Parkinson and (F) 6 Garman-Klass volatilities, (G) 6 average true ranges.
  t.each(K::kParkinson, vol_windows);
  t.each(K::kGarmanKlass, {5, 10, 20, 60, 120, 240});
  t.each(K::kAtr, {5, 7, 14, 20, 28, 60});
  // (H) 10 lagged high-low ranges, (I) 5 lagged bodies, (J) 2 shadows.
  t.range(K::kRangeLag, 0, 9);
  t.range(K::kBodyLag, 0, 4);
  t.add(K::kUpperShadow);
  t.add(K::kLowerShadow);
  // (K) 7 positions of the close in the rolling range, (L) 7 range widths.
  t.each(K::kRangePos, range_windows);
  t.each(K::kRangeWidth, range_windows);
  // (M) 7 SMA distances, (N) 6 EMA distances, (O) 4 SMA crossovers.
  t.each(K::kDistSma, {5, 10, 20, 30, 50, 100, 200});
  t.each(K::kDistEma, {5, 10, 20, 50, 100, 200});
  for (auto [a, b] : {std::array<int32_t, 2>{5, 20}, {10, 50}, {20, 100}, {50, 200}})
    t.add(K::kSmaCross, a, b);
  // (P) 6 RSI-like oscillators, (Q) 3 MACD triples: line, signal, histogram.
  t.each(K::kRsi, {5, 7, 9, 14, 21, 28});
  for (auto [f, s, g] : {std::array<int32_t, 3>{12, 26, 9}, {5, 35, 5}, {8, 17, 9}}) {
    t.add(K::kMacdLine, f, s);
    t.add(K::kMacdSignal, f, s, g);
    t.add(K::kMacdHist, f, s, g);
  }
  // (R) 6 log-volume z-scores, (S) 5 lagged log-volume changes.
  t.each(K::kVolZ, {5, 10, 20, 40, 60, 120});
  t.range(K::kDlogvolLag, 0, 4);
  // (T) 4 volume-weighted mean returns, (U) 4 signed-volume imbalances.
  t.each(K::kVwret, {5, 10, 20, 60});
  t.each(K::kSignedVol, {5, 10, 20, 60});
  // (V) 3 skewness / excess kurtosis pairs, (W) 3 lag-1 autocorrelations.
  t.each({K::kSkew, K::kKurt}, {20, 60, 120});
  t.each(K::kAutocorr1, {20, 60, 120});
  // (X) 3 volatility-scaled returns, (Y) 4 volatility ratios.
  t.each(K::kRetZ, {20, 60, 240});
  t.add(K::kVolRatio, 5, 60);
  t.add(K::kVolRatio, 20, 240);
  t.add(K::kVolRatio, 10, 120);
  t.add(K::kParkRvRatio, 20);
  // (Z) 3 drawdown / run-up pairs, (AA) 3 efficiency ratios, (AB) 3 up-bar fractions.
  t.each({K::kDrawdown, K::kDrawup}, {20, 60, 240});
  t.each(K::kEfficiency, {10, 20, 60});
  t.each(K::kUpFrac, {10, 20, 60});
  // (AC) 2 Bollinger positions, (AD) 4 Sharpe-like ratios, (AE) 2 volume trends.
  t.each(K::kBollinger, {20, 50});
  t.each(K::kSharpe, {20, 60, 120, 240});
  t.add(K::kVolTrend, 5, 60);
  t.add(K::kVolTrend, 20, 120);
  // (AF) 2 |return|-volume correlations, (AG) 2 CCI-like oscillators, (AH) 2 max / min pairs.
  t.each(K::kAbsretVolCorr, {20, 60});
  t.each(K::kCci, {14, 20});
  t.each({K::kMaxRet, K::kMinRet}, {20, 60});
  // (AI) 3 downside and (AJ) 3 upside semi-volatilities, (AK) 2 volatility changes.
  t.each(K::kDownsideVol, {20, 60, 120});
  t.each(K::kUpsideVol, {20, 60, 120});
  t.add(K::kRvChange, 20, 5);
  t.add(K::kRvChange, 60, 20);
  // (AL) 2 variance ratios (q, window), (AM) 2 bars since the high / low, (AN) the jump flag.
  t.add(K::kVarianceRatio, 5, 60);
  t.add(K::kVarianceRatio, 10, 120);
  t.add(K::kSinceHigh, 60);
  t.add(K::kSinceLow, 60);
  t.add(K::kJumpFlag, 60);
  if (t.n != kPastBankFeatures)
    throw "feature table: the past225 columns must be kPastBankFeatures";
  // The RL state's extra columns: longer lags of key features.
  t.range(K::kRetLag, 20, 29);
  t.range(K::kRangeLag, 10, 14);
  for (int32_t k = 1; k <= 5; ++k) t.add(K::kVolZLag, 20, k);
  for (int32_t k = 1; k <= 5; ++k) t.add(K::kRvLag, 20, k);
  if (t.n != kObservedFeatures) throw "feature table: the bank must have kObservedFeatures";
  return t.specs;
}

}  // namespace detail

/// Every bank column, in column order: the first kPastBankFeatures are the "past225"
/// inputs, the rest the RL state's longer lags. `observed_feature_names()` are their names.
inline constexpr std::array<FeatureSpec, kObservedFeatures> kFeatureTable =
    detail::make_feature_table();

}  // namespace foxhunt::data
