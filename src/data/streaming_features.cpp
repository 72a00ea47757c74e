#include "foxhunt/data/streaming_features.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "foxhunt/core/error.h"
#include "rolling_windows.h"

namespace foxhunt::data {

namespace {

constexpr const char* kComponent = "stream";

using rolling::Ema;
using rolling::Extreme;
using rolling::Kind;
using rolling::PairWindow;
using rolling::Ring;
using rolling::Window;

// Window lengths and spans; they mirror build_bank() in features.cpp, and the streaming equality
// test fails if the two drift apart.
constexpr std::array<int64_t, 13> kVolWindows = {3,  5,  8,  10,  15,  20, 30,
                                                 40, 60, 90, 120, 180, 240};
constexpr std::array<int64_t, 21> kLogretHorizons = {2,  3,  4,  5,  6,  8,   10,  12,  15,  20, 25,
                                                     30, 40, 50, 60, 80, 100, 120, 150, 180, 240};
constexpr std::array<int64_t, 7> kStdWindows = {5, 10, 20, 40, 60, 120, 240};
constexpr std::array<int64_t, 6> kGkWindows = {5, 10, 20, 60, 120, 240};
constexpr std::array<int64_t, 6> kAtrWindows = {5, 7, 14, 20, 28, 60};
constexpr std::array<int64_t, 7> kRangeWindows = {5, 10, 20, 40, 60, 120, 240};
constexpr std::array<int64_t, 7> kSmaWindows = {5, 10, 20, 30, 50, 100, 200};
constexpr std::array<int64_t, 11> kEmaSpans = {5, 8, 10, 12, 17, 20, 26, 35, 50, 100, 200};
constexpr std::array<int64_t, 6> kDistEmaSpans = {5, 10, 20, 50, 100, 200};
constexpr std::array<std::array<int64_t, 2>, 4> kSmaCross = {
    {{5, 20}, {10, 50}, {20, 100}, {50, 200}}};
constexpr std::array<int64_t, 6> kRsiWindows = {5, 7, 9, 14, 21, 28};
constexpr std::array<std::array<int64_t, 3>, 3> kMacd = {{{12, 26, 9}, {5, 35, 5}, {8, 17, 9}}};
constexpr std::array<int64_t, 6> kVolZWindows = {5, 10, 20, 40, 60, 120};
constexpr std::array<int64_t, 5> kVolumeWindows = {5, 10, 20, 60, 120};  // vwret/signed + trends
constexpr std::array<int64_t, 4> kFlowWindows = {5, 10, 20, 60};
constexpr std::array<int64_t, 3> kMomentWindows = {20, 60, 120};  // skew/kurt, autocorr, semi-vol
constexpr std::array<int64_t, 3> kRetZWindows = {20, 60, 240};
constexpr std::array<int64_t, 3> kDrawWindows = {20, 60, 240};
constexpr std::array<int64_t, 3> kTrendWindows = {10, 20, 60};  // efficiency, up fraction
constexpr std::array<int64_t, 2> kBollingerWindows = {20, 50};
constexpr std::array<int64_t, 4> kSharpeWindows = {20, 60, 120, 240};
constexpr std::array<int64_t, 2> kAbsRetVolWindows = {20, 60};
constexpr std::array<int64_t, 2> kCciWindows = {14, 20};
constexpr std::array<int64_t, 2> kExtremeRetWindows = {20, 60};

/// Position of `w` in `ws`; a window that is not configured is a bug (std::logic_error).
template <size_t N>
constexpr size_t pos(const std::array<int64_t, N>& ws, int64_t w) {
  for (size_t i = 0; i < N; ++i)
    if (ws[i] == w) return i;
  throw std::logic_error("window not configured");
}

double safe_div(double a, double b) {
  return b > 1e-300 ? a / b : 0.0;
}

double log_ratio(double a, double b) {
  return (a > 0.0 && b > 0.0) ? std::log(a / b) : 0.0;
}

template <size_t N>
std::vector<Window> windows(const std::array<int64_t, N>& ws, Kind kind) {
  std::vector<Window> out;
  for (int64_t w : ws) out.emplace_back(w, kind);
  return out;
}

template <size_t N>
std::vector<Extreme> extremes(const std::array<int64_t, N>& ws, bool is_max) {
  std::vector<Extreme> out;
  for (int64_t w : ws) out.emplace_back(w, is_max);
  return out;
}

template <size_t N>
std::vector<PairWindow> pairs(const std::array<int64_t, N>& ws) {
  std::vector<PairWindow> out;
  for (int64_t w : ws) out.emplace_back(w);
  return out;
}

void update_all(std::vector<Window>& ws, const Ring& src) {
  for (Window& w : ws) w.update(src);
}

}  // namespace

/// Everything the engine remembers; plain values, so copying it snapshots the engine.
struct StreamingFeatures::State {
  int64_t t = 0;  // bars accepted
  int64_t last_timestamp = 0;
  double lc_first = 0.0, lc_prev = 0.0;

  // Per-bar series; the span is the longest lag or window that reads them.
  Ring lc{240}, r{240}, r2{240}, r_prev{120}, abs_r{60}, up{60};
  Ring gains{28}, losses{28}, gains2{120}, losses2{120};
  Ring hl{14}, hl2{240}, gk{240}, tr{60}, co{4}, lv{120}, v{120}, rv_prod{60}, sv_prod{60};
  Ring ltp{20}, dq5sq{60}, dq10sq{120};
  Ring rv20{5}, rv60{20}, vol_z20{5};  // earlier outputs reused as lags

  std::vector<Window> sum_r2 = windows(kVolWindows, Kind::kSum);
  std::vector<Window> mom_r = windows(kStdWindows, Kind::kMoments4);
  std::vector<Window> sum_hl2 = windows(kVolWindows, Kind::kSum);
  std::vector<Window> sum_gk = windows(kGkWindows, Kind::kSum);
  std::vector<Window> sum_tr = windows(kAtrWindows, Kind::kSum);
  std::vector<Window> mom_lc = windows(kSmaWindows, Kind::kMoments2);
  std::vector<Window> mom_lv = windows(kVolZWindows, Kind::kMoments2);
  std::vector<Window> sum_v = windows(kVolumeWindows, Kind::kSum);
  std::vector<Window> sum_rv = windows(kFlowWindows, Kind::kSum);
  std::vector<Window> sum_sv = windows(kFlowWindows, Kind::kSum);
  std::vector<Window> sum_r = windows(kTrendWindows, Kind::kSum);
  std::vector<Window> sum_abs_r = windows(kTrendWindows, Kind::kSum);
  std::vector<Window> sum_up = windows(kTrendWindows, Kind::kSum);
  std::vector<Window> sum_gains = windows(kRsiWindows, Kind::kSum);
  std::vector<Window> sum_losses = windows(kRsiWindows, Kind::kSum);
  std::vector<Window> sum_gains2 = windows(kMomentWindows, Kind::kSum);
  std::vector<Window> sum_losses2 = windows(kMomentWindows, Kind::kSum);
  Window sum_dq5sq{60, Kind::kSum}, sum_dq10sq{120, Kind::kSum};
  std::vector<PairWindow> autocorr = pairs(kMomentWindows);
  std::vector<PairWindow> absret_vol = pairs(kAbsRetVolWindows);

  std::vector<Extreme> max_lh = extremes(kRangeWindows, true);
  std::vector<Extreme> min_ll = extremes(kRangeWindows, false);
  std::vector<Extreme> max_lc = extremes(kDrawWindows, true);
  std::vector<Extreme> min_lc = extremes(kDrawWindows, false);
  std::vector<Extreme> max_r = extremes(kExtremeRetWindows, true);
  std::vector<Extreme> min_r = extremes(kExtremeRetWindows, false);

  std::vector<Ema> ema_lc = [] {
    std::vector<Ema> e;
    for (int64_t s : kEmaSpans) e.emplace_back(s);
    return e;
  }();
  std::vector<Ema> macd_signal = {Ema(kMacd[0][2]), Ema(kMacd[1][2]), Ema(kMacd[2][2])};

  std::array<float, kObservedFeatures> row{};
};

StreamingFeatures::StreamingFeatures() : state_(std::make_unique<State>()) {}
StreamingFeatures::~StreamingFeatures() = default;
StreamingFeatures::StreamingFeatures(const StreamingFeatures& other)
    : state_(std::make_unique<State>(*other.state_)) {}
StreamingFeatures& StreamingFeatures::operator=(const StreamingFeatures& other) {
  if (this != &other) state_ = std::make_unique<State>(*other.state_);
  return *this;
}
StreamingFeatures::StreamingFeatures(StreamingFeatures&&) noexcept = default;
StreamingFeatures& StreamingFeatures::operator=(StreamingFeatures&&) noexcept = default;

void StreamingFeatures::reset() {
  state_ = std::make_unique<State>();
}

int64_t StreamingFeatures::bars_seen() const {
  return state_->t;
}

int64_t StreamingFeatures::last_timestamp() const {
  FOXHUNT_CHECK(state_->t > 0, kComponent, "no bar yet: last_timestamp needs an accepted bar");
  return state_->last_timestamp;
}

void StreamingFeatures::check(const Bar& b) const {
  const int64_t i = state_->t;
  const std::array<std::pair<const char*, double>, 4> prices = {
      {{"open", b.open}, {"high", b.high}, {"low", b.low}, {"close", b.close}}};
  for (const auto& [name, v] : prices) {
    FOXHUNT_CHECK(std::isfinite(v), kComponent, "bar ", i, ": expected a finite ", name, ", got ",
                  v);
    FOXHUNT_CHECK(v > 0.0, kComponent, "bar ", i, ": expected ", name, " > 0, got ", v);
  }
  FOXHUNT_CHECK(std::isfinite(b.volume) && b.volume >= 0.0, kComponent, "bar ", i,
                ": expected a finite volume >= 0, got ", b.volume);
  FOXHUNT_CHECK(b.high >= b.low, kComponent, "bar ", i, ": expected high >= low, got high ", b.high,
                " < low ", b.low);
  FOXHUNT_CHECK(b.open >= b.low && b.open <= b.high, kComponent, "bar ", i,
                ": expected open in [low ", b.low, ", high ", b.high, "], got ", b.open);
  FOXHUNT_CHECK(b.close >= b.low && b.close <= b.high, kComponent, "bar ", i,
                ": expected close in [low ", b.low, ", high ", b.high, "], got ", b.close);
  FOXHUNT_CHECK(i == 0 || b.timestamp > state_->last_timestamp, kComponent, "bar ", i,
                ": expected a timestamp after the previous bar's ", state_->last_timestamp,
                ", got ", b.timestamp);
}

bool StreamingFeatures::try_update(const Bar& bar, std::string* why) {
  try {
    update(bar);
    return true;
  } catch (const InputError& e) {
    if (why) *why = e.what();
    return false;
  }
}

std::span<const float> StreamingFeatures::row() const {
  FOXHUNT_CHECK(state_->t > 0, kComponent, "no bar yet: the feature row needs an accepted bar");
  return state_->row;
}

std::array<float, 4> StreamingFeatures::calendar() const {
  return calendar_features(last_timestamp());
}

void StreamingFeatures::normalized_row(const Normalizer& nz, std::vector<float>& out) const {
  const auto r = row();
  out.assign(r.begin(), r.end());
  nz.apply_row(out.data(), kObservedFeatures);
}

void StreamingFeatures::rl_market_row(const Normalizer& nz, std::vector<float>& out) const {
  normalized_row(nz, out);
  const auto cal = calendar();
  out.insert(out.end(), cal.begin(), cal.end());
}

std::span<const float> StreamingFeatures::update(const Bar& bar) {
  check(bar);  // before any state changes: a rejected bar leaves the engine as it was
  State& s = *state_;
  const int64_t t = s.t;

  // Base series, written exactly as make_base() in features.cpp writes them.
  const double lc = std::log(bar.close);
  const double lh = std::log(bar.high);
  const double ll = std::log(bar.low);
  const double lopen = std::log(bar.open);
  if (t == 0) s.lc_first = lc;
  const double r = t == 0 ? 0.0 : lc - s.lc_prev;
  const double hl = lh - ll;
  const double co = lc - lopen;
  const double lv = std::log1p(bar.volume);
  const double prev = t == 0 ? lc : s.lc_prev;
  const double tr = std::max(lh, prev) - std::min(ll, prev);
  const double upper = lh - std::max(lc, lopen);
  const double lower = std::min(lc, lopen) - ll;
  const double gain = std::max(0.0, r), loss = std::max(0.0, -r);
  const double gk_k = 2.0 * std::log(2.0) - 1.0;

  s.lc.push(lc);
  s.r.push(r);
  s.r2.push(r * r);
  s.r_prev.push(t == 0 ? 0.0 : s.r.back(1));
  s.abs_r.push(std::abs(r));
  s.up.push(r > 0 ? 1.0 : 0.0);
  s.gains.push(gain);
  s.losses.push(loss);
  s.gains2.push(gain * gain);
  s.losses2.push(loss * loss);
  s.hl.push(hl);
  s.hl2.push(hl * hl);
  s.gk.push(0.5 * hl * hl - gk_k * co * co);
  s.tr.push(tr);
  s.co.push(co);
  s.lv.push(lv);
  s.v.push(bar.volume);
  s.rv_prod.push(r * bar.volume);
  s.sv_prod.push((r > 0 ? 1.0 : r < 0 ? -1.0 : 0.0) * bar.volume);
  s.ltp.push((lh + ll + lc) / 3.0);
  const auto lc_lag = [&](int64_t h) { return t >= h ? s.lc.back(h) : s.lc_first; };
  const double dq5 = lc - lc_lag(5), dq10 = lc - lc_lag(10);
  s.dq5sq.push(dq5 * dq5);
  s.dq10sq.push(dq10 * dq10);

  update_all(s.sum_r2, s.r2);
  update_all(s.mom_r, s.r);
  update_all(s.sum_hl2, s.hl2);
  update_all(s.sum_gk, s.gk);
  update_all(s.sum_tr, s.tr);
  update_all(s.mom_lc, s.lc);
  update_all(s.mom_lv, s.lv);
  update_all(s.sum_v, s.v);
  update_all(s.sum_rv, s.rv_prod);
  update_all(s.sum_sv, s.sv_prod);
  update_all(s.sum_r, s.r);
  update_all(s.sum_abs_r, s.abs_r);
  update_all(s.sum_up, s.up);
  update_all(s.sum_gains, s.gains);
  update_all(s.sum_losses, s.losses);
  update_all(s.sum_gains2, s.gains2);
  update_all(s.sum_losses2, s.losses2);
  s.sum_dq5sq.update(s.dq5sq);
  s.sum_dq10sq.update(s.dq10sq);
  for (auto& p : s.autocorr) p.update(s.r, s.r_prev);
  for (auto& p : s.absret_vol) p.update(s.abs_r, s.lv);
  for (auto& e : s.max_lh) e.update(t, lh);
  for (auto& e : s.min_ll) e.update(t, ll);
  for (auto& e : s.max_lc) e.update(t, lc);
  for (auto& e : s.min_lc) e.update(t, lc);
  for (auto& e : s.max_r) e.update(t, r);
  for (auto& e : s.min_r) e.update(t, r);
  for (auto& e : s.ema_lc) e.update(lc);

  const auto rv = [&](int64_t w) {
    return std::sqrt(s.sum_r2[pos(kVolWindows, w)].mean());  // mean() = sum / count, as wmean_sq
  };
  const auto park = [&](size_t i) {
    return std::sqrt(s.sum_hl2[i].mean() / (4.0 * std::log(2.0)));
  };
  const auto lc_mean = [&](int64_t w) { return s.mom_lc[pos(kSmaWindows, w)].mean(); };
  const auto ema = [&](int64_t span) { return s.ema_lc[pos(kEmaSpans, span)].value; };
  const auto vol_z = [&](int64_t w) {
    const Window& m = s.mom_lv[pos(kVolZWindows, w)];
    const double sd = std::sqrt(m.m2());
    return sd > 1e-12 ? (lv - m.mean()) / sd : 0.0;
  };
  s.rv20.push(rv(20));
  s.rv60.push(rv(60));
  s.vol_z20.push(vol_z(20));

  // The bank, column by column in build_bank() order.
  size_t c = 0;
  const auto put = [&](double v) { s.row[c++] = static_cast<float>(std::isfinite(v) ? v : 0.0); };
  // (A) return lags, (B) multi-horizon returns, (C) realised vol, (D) return std.
  for (int64_t k = 0; k < 20; ++k) put(t >= k ? s.r.back(k) : 0.0);
  for (int64_t h : kLogretHorizons) put(lc - lc_lag(h));
  for (size_t i = 0; i < kVolWindows.size(); ++i) put(std::sqrt(s.sum_r2[i].mean()));
  for (size_t i = 0; i < kStdWindows.size(); ++i) put(std::sqrt(s.mom_r[i].m2()));
  // (E) Parkinson, (F) Garman-Klass, (G) ATR.
  for (size_t i = 0; i < kVolWindows.size(); ++i) put(park(i));
  for (size_t i = 0; i < kGkWindows.size(); ++i) put(std::sqrt(std::max(0.0, s.sum_gk[i].mean())));
  for (size_t i = 0; i < kAtrWindows.size(); ++i) put(s.sum_tr[i].mean());
  // (H) range lags, (I) body lags, (J) shadows.
  for (int64_t k = 0; k < 10; ++k) put(t >= k ? s.hl.back(k) : 0.0);
  for (int64_t k = 0; k < 5; ++k) put(t >= k ? s.co.back(k) : 0.0);
  put(upper);
  put(lower);
  // (K) range position, (L) range width.
  for (size_t i = 0; i < kRangeWindows.size(); ++i) {
    const double hi = s.max_lh[i].value(), lo = s.min_ll[i].value();
    put(hi - lo > 1e-300 ? (lc - lo) / (hi - lo) - 0.5 : 0.0);
  }
  for (size_t i = 0; i < kRangeWindows.size(); ++i) put(s.max_lh[i].value() - s.min_ll[i].value());
  // (M) SMA distances, (N) EMA distances, (O) SMA crossovers.
  for (int64_t w : kSmaWindows) put(lc - lc_mean(w));
  for (int64_t span : kDistEmaSpans) put(lc - ema(span));
  for (const auto& [a, b] : kSmaCross) put(lc_mean(a) - lc_mean(b));
  // (P) RSI.
  for (size_t i = 0; i < kRsiWindows.size(); ++i) {
    const double g = s.sum_gains[i].mean(), l = s.sum_losses[i].mean();
    put(g + l > 1e-300 ? 2.0 * g / (g + l) - 1.0 : 0.0);
  }
  // (Q) MACD line, signal, histogram.
  for (size_t i = 0; i < kMacd.size(); ++i) {
    const double line = ema(kMacd[i][0]) - ema(kMacd[i][1]);
    const double signal = s.macd_signal[i].update(line);
    put(line);
    put(signal);
    put(line - signal);
  }
  // (R) log-volume z-scores, (S) log-volume changes.
  for (int64_t w : kVolZWindows) put(vol_z(w));
  for (int64_t k = 0; k < 5; ++k) put(t - k >= 1 ? s.lv.back(k) - s.lv.back(k + 1) : 0.0);
  // (T) volume-weighted returns, (U) signed-volume imbalance.
  for (size_t i = 0; i < kFlowWindows.size(); ++i)
    put(safe_div(s.sum_rv[i].sum(), s.sum_v[pos(kVolumeWindows, kFlowWindows[i])].sum()));
  for (size_t i = 0; i < kFlowWindows.size(); ++i)
    put(safe_div(s.sum_sv[i].sum(), s.sum_v[pos(kVolumeWindows, kFlowWindows[i])].sum()));
  // (V) skewness and excess kurtosis.
  for (int64_t w : kMomentWindows) {
    const Window& m = s.mom_r[pos(kStdWindows, w)];
    const double m2 = m.m2();
    put(m2 <= 1e-300 ? 0.0 : m.m3() / std::pow(m2, 1.5));
    put(m2 <= 1e-300 ? 0.0 : m.m4() / (m2 * m2) - 3.0);
  }
  // (W) lag-1 autocorrelation, (X) vol-scaled returns, (Y) vol ratios.
  for (const auto& p : s.autocorr) put(p.corr());
  for (int64_t w : kRetZWindows) put(safe_div(r, rv(w)));
  put(log_ratio(rv(5), rv(60)));
  put(log_ratio(rv(20), rv(240)));
  put(log_ratio(rv(10), rv(120)));
  put(log_ratio(park(pos(kVolWindows, 20)), rv(20)));
  // (Z) drawdown / run-up, (AA) efficiency, (AB) up fraction.
  for (size_t i = 0; i < kDrawWindows.size(); ++i) {
    put(lc - s.max_lc[i].value());
    put(lc - s.min_lc[i].value());
  }
  for (size_t i = 0; i < kTrendWindows.size(); ++i)
    put(safe_div(std::abs(s.sum_r[i].sum()), s.sum_abs_r[i].sum()));
  for (size_t i = 0; i < kTrendWindows.size(); ++i) put(s.sum_up[i].mean() - 0.5);
  // (AC) Bollinger position, (AD) Sharpe-like ratios, (AE) volume trends.
  for (int64_t w : kBollingerWindows) {
    const Window& m = s.mom_lc[pos(kSmaWindows, w)];
    const double sd = std::sqrt(m.m2());
    put(sd > 1e-300 ? (lc - m.mean()) / (2.0 * sd) : 0.0);
  }
  for (int64_t w : kSharpeWindows) {
    const Window& m = s.mom_r[pos(kStdWindows, w)];
    put(safe_div(m.mean(), std::sqrt(m.m2())));
  }
  const auto v_mean = [&](int64_t w) { return s.sum_v[pos(kVolumeWindows, w)].mean(); };
  put(std::log((v_mean(5) + 1) / (v_mean(60) + 1)));
  put(std::log((v_mean(20) + 1) / (v_mean(120) + 1)));
  // (AF) |return|-volume correlation.
  for (const auto& p : s.absret_vol) put(p.corr());
  // (AG) CCI: the mean absolute deviation around the moving mean has no O(1) update; the windows
  // are short (14, 20), so a direct pass in the batch's order costs a fixed ~2w reads.
  for (int64_t w : kCciWindows) {
    const int64_t n = std::min(t + 1, w);
    double m = 0.0, md = 0.0;
    for (int64_t k = n - 1; k >= 0; --k) m += s.ltp.back(k);
    m /= static_cast<double>(n);
    for (int64_t k = n - 1; k >= 0; --k) md += std::abs(s.ltp.back(k) - m);
    md /= static_cast<double>(n);
    put(md > 1e-300 ? (s.ltp.back(0) - m) / (0.015 * md) / 100.0 : 0.0);
  }
  // (AH) extreme returns, (AI) downside and (AJ) upside semi-volatility.
  for (size_t i = 0; i < kExtremeRetWindows.size(); ++i) {
    put(s.max_r[i].value());
    put(s.min_r[i].value());
  }
  for (size_t i = 0; i < kMomentWindows.size(); ++i) put(std::sqrt(s.sum_losses2[i].mean()));
  for (size_t i = 0; i < kMomentWindows.size(); ++i) put(std::sqrt(s.sum_gains2[i].mean()));
  // (AK) vol changes, (AL) variance ratios.
  put(log_ratio(s.rv20.back(0), s.rv20.back(std::min<int64_t>(t, 5))));
  put(log_ratio(s.rv60.back(0), s.rv60.back(std::min<int64_t>(t, 20))));
  {
    const double s1 = s.sum_r2[pos(kVolWindows, 60)].sum();
    put(s1 > 1e-300 ? s.sum_dq5sq.sum() / (5.0 * s1) - 1.0 : 0.0);
    const double s1b = s.sum_r2[pos(kVolWindows, 120)].sum();
    put(s1b > 1e-300 ? s.sum_dq10sq.sum() / (10.0 * s1b) - 1.0 : 0.0);
  }
  // (AM) bars since the 60-bar high / low, (AN) jump flag.
  put(static_cast<double>(t - s.max_lc[pos(kDrawWindows, 60)].index()) / 60.0);
  put(static_cast<double>(t - s.min_lc[pos(kDrawWindows, 60)].index()) / 60.0);
  {
    const double sd = rv(60);
    put((sd > 0 && std::abs(r) > 4.0 * sd) ? (r > 0 ? 1.0 : -1.0) : 0.0);
  }
  FOXHUNT_INTERNAL_ASSERT(c == static_cast<size_t>(kTftPastFeatures), "TFT feature count ", c);
  // RL extras: longer return and range lags, lagged volume z-score and realised vol.
  for (int64_t k = 20; k < 30; ++k) put(t >= k ? s.r.back(k) : 0.0);
  for (int64_t k = 10; k < 15; ++k) put(t >= k ? s.hl.back(k) : 0.0);
  for (int64_t k = 1; k <= 5; ++k) put(t >= k ? s.vol_z20.back(k) : 0.0);
  for (int64_t k = 1; k <= 5; ++k) put(t >= k ? s.rv20.back(k) : 0.0);
  FOXHUNT_INTERNAL_ASSERT(c == static_cast<size_t>(kObservedFeatures), "bank count ", c);

  s.lc_prev = lc;
  s.last_timestamp = bar.timestamp;
  s.t = t + 1;
  return s.row;
}

}  // namespace foxhunt::data
