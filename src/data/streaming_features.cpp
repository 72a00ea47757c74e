#include "foxhunt/data/streaming_features.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/data/feature_table.h"
#include "rolling_windows.h"

namespace foxhunt::data {

namespace {

constexpr const char* kStreamingFeaturesComponent = "stream";

using rolling::Ema;
using rolling::Extreme;
using rolling::Kind;
using rolling::PairWindow;
using rolling::Ring;
using rolling::Window;

double safe_div(double a, double b) {
  return b > 1e-300 ? a / b : 0.0;
}

double log_ratio(double a, double b) {
  return (a > 0.0 && b > 0.0) ? std::log(a / b) : 0.0;
}

/// The per-bar series the engine computes from each bar (as make_base() and build_bank() in
/// features.cpp write them). Rings keep the recent values of each (as far back as the plan
/// needs); lh and ll feed only rolling extremes, the shadows only their own columns. The
/// variance-ratio series dq_q^2 = (lc - lc q bars ago)^2 follow, one per q.
// clang-format off
enum Series : int {
  kLc, kLh, kLl, kR, kR2, kRPrev, kAbsR, kUp, kGains, kLosses, kGains2, kLosses2, kHl, kHl2, kGk,
  kTr, kCo, kUpper, kLower, kLv, kV, kRvProd, kSvProd, kLtp, kBaseSeries
};
// clang-format on

/// What the engine keeps, derived once from kFeatureTable: which rolling statistics over which
/// series and windows (each shared by every column that reads it), how far back each ring must
/// reach, and, per bank column, its table entry and the indices of the statistics it reads.
struct Plan {
  struct WindowKey {
    int series;
    Kind kind;
    int64_t w;
    bool operator==(const WindowKey&) const = default;
  };
  struct PairKey {
    int x, y;
    int64_t w;
    bool operator==(const PairKey&) const = default;
  };
  struct ExtremeKey {
    int series;
    bool is_max;
    int64_t w;
    bool operator==(const ExtremeKey&) const = default;
  };
  struct SignalKey {  // EMA(span) of emas[fast] - emas[slow]
    int fast, slow;
    int64_t span;
    bool operator==(const SignalKey&) const = default;
  };
  struct HistoryKey {  // recent values of rv (or the vol z-score) of windows[window]
    bool vol_z;
    int window;
    bool operator==(const HistoryKey&) const = default;
  };
  struct Column {
    FeatureSpec f;
    int i0 = -1, i1 = -1, i2 = -1;  // indices of what it reads (meaning depends on the kind)
  };

  std::vector<int64_t> ring_span = std::vector<int64_t>(kBaseSeries, 0);  // per series
  std::vector<int64_t> dq;  // q of the series kBaseSeries + i
  std::vector<WindowKey> windows;
  std::vector<PairKey> pairs;
  std::vector<ExtremeKey> extremes;
  std::vector<int64_t> emas;  // spans of the EMAs of lc
  std::vector<SignalKey> signals;
  std::vector<HistoryKey> histories;
  std::vector<int64_t> history_span;
  std::vector<Column> columns;

  /// The plan of kFeatureTable, built on first use.
  static const Plan& get() {
    static const Plan plan = [] {
      Plan p;
      for (const FeatureSpec& f : kFeatureTable) p.columns.push_back(p.column(f));
      return p;
    }();
    return plan;
  }

 private:
  template <typename T>
  static int index(std::vector<T>& v, const T& key) {
    const auto it = std::find(v.begin(), v.end(), key);
    if (it != v.end()) return static_cast<int>(it - v.begin());
    v.push_back(key);
    return static_cast<int>(v.size()) - 1;
  }
  void need(int series, int64_t span) {
    ring_span[static_cast<size_t>(series)] = std::max(ring_span[static_cast<size_t>(series)], span);
  }
  int window(int series, Kind kind, int64_t w) {
    need(series, w);
    return index(windows, {series, kind, w});
  }
  int sum(int series, int64_t w) { return window(series, Kind::kSum, w); }
  int rv(int64_t w) { return sum(kR2, w); }
  int vol_z(int64_t w) { return window(kLv, Kind::kMoments2, w); }
  int pair(int x, int y, int64_t w) {
    need(x, w);
    need(y, w);
    return index(pairs, {x, y, w});
  }
  int extreme(int series, bool is_max, int64_t w) { return index(extremes, {series, is_max, w}); }
  int ema(int64_t span) { return index(emas, span); }
  int signal(int64_t fast, int64_t slow, int64_t span) {
    return index(signals, {ema(fast), ema(slow), span});
  }
  int history(bool is_vol_z, int64_t w, int64_t span) {
    const int i = index(histories, {is_vol_z, is_vol_z ? vol_z(w) : rv(w)});
    history_span.resize(histories.size(), 0);
    history_span[static_cast<size_t>(i)] = std::max(history_span[static_cast<size_t>(i)], span);
    return i;
  }
  int dq_sq(int64_t q) {
    need(kLc, q);
    const int i = index(dq, q);
    ring_span.resize(static_cast<size_t>(kBaseSeries) + dq.size(), 0);
    return kBaseSeries + i;
  }

  /// The statistics table entry `f` reads (what update() computes for its kind).
  Column column(const FeatureSpec& f) {
    using K = FeatureKind;
    const int64_t a = f.a, b = f.b;
    Column c{f};
    switch (f.kind) {
      case K::kRetLag:
        need(kR, a);
        break;
      case K::kLogret:
        need(kLc, a);
        break;
      case K::kRealizedVol:
        c.i0 = rv(a);
        break;
      case K::kReturnStd:
      case K::kSkew:
      case K::kKurt:
      case K::kSharpe:
        c.i0 = window(kR, Kind::kMoments4, a);
        break;
      case K::kParkinson:
        c.i0 = sum(kHl2, a);
        break;
      case K::kGarmanKlass:
        c.i0 = sum(kGk, a);
        break;
      case K::kAtr:
        c.i0 = sum(kTr, a);
        break;
      case K::kRangeLag:
        need(kHl, a);
        break;
      case K::kBodyLag:
        need(kCo, a);
        break;
      case K::kUpperShadow:
      case K::kLowerShadow:
        break;
      case K::kRangePos:
      case K::kRangeWidth:
        c.i0 = extreme(kLh, true, a);
        c.i1 = extreme(kLl, false, a);
        break;
      case K::kDistSma:
      case K::kBollinger:
        c.i0 = window(kLc, Kind::kMoments2, a);
        break;
      case K::kDistEma:
        c.i0 = ema(a);
        break;
      case K::kSmaCross:
        c.i0 = window(kLc, Kind::kMoments2, a);
        c.i1 = window(kLc, Kind::kMoments2, b);
        break;
      case K::kRsi:
        c.i0 = sum(kGains, a);
        c.i1 = sum(kLosses, a);
        break;
      case K::kMacdLine:
        c.i0 = ema(a);
        c.i1 = ema(b);
        break;
      case K::kMacdSignal:
      case K::kMacdHist:
        c.i0 = ema(a);
        c.i1 = ema(b);
        c.i2 = signal(a, b, f.c);
        break;
      case K::kVolZ:
        c.i0 = vol_z(a);
        break;
      case K::kDlogvolLag:
        need(kLv, a + 1);
        break;
      case K::kVwret:
        c.i0 = sum(kRvProd, a);
        c.i1 = sum(kV, a);
        break;
      case K::kSignedVol:
        c.i0 = sum(kSvProd, a);
        c.i1 = sum(kV, a);
        break;
      case K::kAutocorr1:
        need(kR, 1);  // r_prev is read from the r ring
        c.i0 = pair(kR, kRPrev, a);
        break;
      case K::kRetZ:
      case K::kJumpFlag:
        c.i0 = rv(a);
        break;
      case K::kVolRatio:
        c.i0 = rv(a);
        c.i1 = rv(b);
        break;
      case K::kParkRvRatio:
        c.i0 = sum(kHl2, a);
        c.i1 = rv(a);
        break;
      case K::kDrawdown:
      case K::kSinceHigh:
        c.i0 = extreme(kLc, true, a);
        break;
      case K::kDrawup:
      case K::kSinceLow:
        c.i0 = extreme(kLc, false, a);
        break;
      case K::kEfficiency:
        c.i0 = sum(kR, a);
        c.i1 = sum(kAbsR, a);
        break;
      case K::kUpFrac:
        c.i0 = sum(kUp, a);
        break;
      case K::kVolTrend:
        c.i0 = sum(kV, a);
        c.i1 = sum(kV, b);
        break;
      case K::kAbsretVolCorr:
        c.i0 = pair(kAbsR, kLv, a);
        break;
      case K::kCci:
        need(kLtp, a);
        break;
      case K::kMaxRet:
        c.i0 = extreme(kR, true, a);
        break;
      case K::kMinRet:
        c.i0 = extreme(kR, false, a);
        break;
      case K::kDownsideVol:
        c.i0 = sum(kLosses2, a);
        break;
      case K::kUpsideVol:
        c.i0 = sum(kGains2, a);
        break;
      case K::kRvChange:
        c.i0 = history(false, a, b);
        break;
      case K::kVarianceRatio:  // q = a over b bars
        c.i0 = sum(dq_sq(a), b);
        c.i1 = rv(b);
        break;
      case K::kVolZLag:
        c.i0 = history(true, a, b);
        break;
      case K::kRvLag:
        c.i0 = history(false, a, b);
        break;
    }
    return c;
  }
};

}  // namespace

/// Everything the engine remembers; plain values, so copying it snapshots the engine.
struct StreamingFeatures::State {
  const Plan* plan = &Plan::get();
  int64_t t = 0;  // bars accepted
  int64_t last_timestamp = 0;
  double lc_first = 0.0, lc_prev = 0.0;
  std::array<double, kBaseSeries> now{};  // the base series at the last bar

  std::vector<Ring> rings;  // per series (Plan::ring_span)
  std::vector<Window> windows;
  std::vector<PairWindow> pairs;
  std::vector<Extreme> extremes;
  std::vector<Ema> emas, signals;
  std::vector<Ring> histories;  // earlier outputs reused as lags

  bool flow_on = false;  // bars come with their flow: the row ends with the flow columns
  FlowFeatures flow;     // inline: its rings are part of the state's fixed bytes
  std::array<float, kObservedFeatures + kFlowFeatures> row{};

  explicit State(bool with_flow) : flow_on(with_flow) {
    const Plan& p = *plan;
    for (int64_t span : p.ring_span) rings.emplace_back(span);
    for (const auto& k : p.windows) windows.emplace_back(k.w, k.kind);
    for (const auto& k : p.pairs) pairs.emplace_back(k.w);
    for (const auto& k : p.extremes) extremes.emplace_back(k.w, k.is_max);
    for (int64_t span : p.emas) emas.emplace_back(span);
    for (const auto& k : p.signals) signals.emplace_back(k.span);
    for (int64_t span : p.history_span) histories.emplace_back(span);
  }

  size_t bytes() const {
    size_t n = sizeof(State);
    for (const auto& r : rings) n += r.heap_bytes();
    for (const auto& r : histories) n += r.heap_bytes();
    for (const auto& e : extremes) n += e.heap_bytes();
    n += rings.capacity() * sizeof(Ring) + histories.capacity() * sizeof(Ring);
    n += extremes.capacity() * sizeof(Extreme) + windows.capacity() * sizeof(Window);
    n += pairs.capacity() * sizeof(PairWindow);
    n += (emas.capacity() + signals.capacity()) * sizeof(Ema);
    return n;
  }

  double rv(int i) const { return std::sqrt(windows[static_cast<size_t>(i)].mean()); }
  double vol_z(int i) const {
    const Window& m = windows[static_cast<size_t>(i)];
    const double sd = std::sqrt(m.m2());
    return sd > 1e-12 ? (now[kLv] - m.mean()) / sd : 0.0;
  }
  double lc_lag(int64_t h) const { return t >= h ? rings[kLc].back(h) : lc_first; }
  double value(const Plan::Column& c) const;
};

StreamingFeatures::StreamingFeatures() : StreamingFeatures(false) {}
StreamingFeatures::StreamingFeatures(bool flow) : state_(std::make_unique<State>(flow)) {}
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
  state_ = std::make_unique<State>(state_->flow_on);
}

bool StreamingFeatures::has_flow() const {
  return state_->flow_on;
}

int64_t StreamingFeatures::width() const {
  return market_feature_width(state_->flow_on);
}

size_t StreamingFeatures::state_bytes() const {
  return sizeof(StreamingFeatures) + state_->bytes();
}

int64_t StreamingFeatures::bars_seen() const {
  return state_->t;
}

int64_t StreamingFeatures::last_timestamp() const {
  FOXHUNT_CHECK(state_->t > 0, kStreamingFeaturesComponent,
                "no bar yet: last_timestamp needs an accepted bar");
  return state_->last_timestamp;
}

void StreamingFeatures::check(const Bar& b, const BarFlow* flow) const {
  const int64_t i = state_->t;
  const std::array<std::pair<const char*, double>, 4> prices = {
      {{"open", b.open}, {"high", b.high}, {"low", b.low}, {"close", b.close}}};
  for (const auto& [name, v] : prices) {
    FOXHUNT_CHECK(std::isfinite(v), kStreamingFeaturesComponent, "bar ", i, ": expected a finite ",
                  name, ", got ", v);
    FOXHUNT_CHECK(v > 0.0, kStreamingFeaturesComponent, "bar ", i, ": expected ", name,
                  " > 0, got ", v);
  }
  FOXHUNT_CHECK(std::isfinite(b.volume) && b.volume >= 0.0, kStreamingFeaturesComponent, "bar ", i,
                ": expected a finite volume >= 0, got ", b.volume);
  FOXHUNT_CHECK(b.high >= b.low, kStreamingFeaturesComponent, "bar ", i,
                ": expected high >= low, got high ", b.high, " < low ", b.low);
  FOXHUNT_CHECK(b.open >= b.low && b.open <= b.high, kStreamingFeaturesComponent, "bar ", i,
                ": expected open in [low ", b.low, ", high ", b.high, "], got ", b.open);
  FOXHUNT_CHECK(b.close >= b.low && b.close <= b.high, kStreamingFeaturesComponent, "bar ", i,
                ": expected close in [low ", b.low, ", high ", b.high, "], got ", b.close);
  FOXHUNT_CHECK(i == 0 || b.timestamp > state_->last_timestamp, kStreamingFeaturesComponent, "bar ",
                i, ": expected a timestamp after the previous bar's ", state_->last_timestamp,
                ", got ", b.timestamp);
  FOXHUNT_CHECK((flow != nullptr) == state_->flow_on, kStreamingFeaturesComponent, "bar ", i,
                state_->flow_on ? ": expected the bar's flow (features of bars built from a tape, "
                                  "flow_features.h), got a bar without one"
                                : ": expected a plain bar (features without flow columns), got a "
                                  "bar with a flow");
  if (flow) state_->flow.check(b, *flow);
}

bool StreamingFeatures::try_update(const Bar& bar, std::string* why, const BarFlow* flow) {
  try {
    update(bar, flow);
    return true;
  } catch (const InputError& e) {
    if (why) *why = e.what();
    return false;
  }
}

const std::vector<std::string>& StreamingFeatures::column_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Plan::Column& c : Plan::get().columns) out.push_back(feature_name(c.f));
    return out;
  }();
  return names;
}

std::span<const float> StreamingFeatures::row() const {
  FOXHUNT_CHECK(state_->t > 0, kStreamingFeaturesComponent,
                "no bar yet: the feature row needs an accepted bar");
  return {state_->row.data(), static_cast<size_t>(width())};
}

std::array<float, 4> StreamingFeatures::calendar() const {
  return calendar_features(last_timestamp());
}

void StreamingFeatures::normalized_row(const Normalizer& nz, std::vector<float>& out) const {
  const auto r = row();
  out.assign(r.begin(), r.end());
  nz.apply_row(out.data(), width());
}

void StreamingFeatures::rl_market_row(const Normalizer& nz, std::vector<float>& out) const {
  normalized_row(nz, out);
  const auto cal = calendar();
  out.insert(out.end(), cal.begin(), cal.end());
}

double StreamingFeatures::State::value(const Plan::Column& c) const {
  using K = FeatureKind;
  const int64_t a = c.f.a, b = c.f.b;
  const auto win = [&](int i) -> const Window& { return windows[static_cast<size_t>(i)]; };
  const auto ext = [&](int i) -> const Extreme& { return extremes[static_cast<size_t>(i)]; };
  const auto ema = [&](int i) { return emas[static_cast<size_t>(i)].value; };
  const auto hist = [&](int i) -> const Ring& { return histories[static_cast<size_t>(i)]; };
  const auto ring = [&](Series x) -> const Ring& { return rings[x]; };
  const double lc = now[kLc], r = now[kR];
  switch (c.f.kind) {
    case K::kRetLag:
      return t >= a ? ring(kR).back(a) : 0.0;
    case K::kLogret:
      return lc - lc_lag(a);
    case K::kRealizedVol:
      return rv(c.i0);  // mean() = sum / count, as wmean_sq
    case K::kReturnStd:
      return std::sqrt(win(c.i0).m2());
    case K::kParkinson:
      return std::sqrt(win(c.i0).mean() / (4.0 * std::log(2.0)));
    case K::kGarmanKlass:
      return std::sqrt(std::max(0.0, win(c.i0).mean()));
    case K::kAtr:
      return win(c.i0).mean();
    case K::kRangeLag:
      return t >= a ? ring(kHl).back(a) : 0.0;
    case K::kBodyLag:
      return t >= a ? ring(kCo).back(a) : 0.0;
    case K::kUpperShadow:
      return now[kUpper];
    case K::kLowerShadow:
      return now[kLower];
    case K::kRangePos: {
      const double hi = ext(c.i0).value(), lo = ext(c.i1).value();
      return hi - lo > 1e-300 ? (lc - lo) / (hi - lo) - 0.5 : 0.0;
    }
    case K::kRangeWidth:
      return ext(c.i0).value() - ext(c.i1).value();
    case K::kDistSma:
      return lc - win(c.i0).mean();
    case K::kDistEma:
      return lc - ema(c.i0);
    case K::kSmaCross:
      return win(c.i0).mean() - win(c.i1).mean();
    case K::kRsi: {
      const double g = win(c.i0).mean(), l = win(c.i1).mean();
      return g + l > 1e-300 ? 2.0 * g / (g + l) - 1.0 : 0.0;
    }
    case K::kMacdLine:
      return ema(c.i0) - ema(c.i1);
    case K::kMacdSignal:
      return signals[static_cast<size_t>(c.i2)].value;
    case K::kMacdHist:
      return (ema(c.i0) - ema(c.i1)) - signals[static_cast<size_t>(c.i2)].value;
    case K::kVolZ:
      return vol_z(c.i0);
    case K::kDlogvolLag:
      return t - a >= 1 ? ring(kLv).back(a) - ring(kLv).back(a + 1) : 0.0;
    case K::kVwret:
    case K::kSignedVol:
      return safe_div(win(c.i0).sum(), win(c.i1).sum());
    case K::kSkew:
    case K::kKurt: {
      const Window& m = win(c.i0);
      const double m2 = m.m2();
      if (m2 <= 1e-300) return 0.0;
      return c.f.kind == K::kSkew ? m.m3() / std::pow(m2, 1.5) : m.m4() / (m2 * m2) - 3.0;
    }
    case K::kAutocorr1:
    case K::kAbsretVolCorr:
      return pairs[static_cast<size_t>(c.i0)].corr();
    case K::kRetZ:
      return safe_div(r, rv(c.i0));
    case K::kVolRatio:
      return log_ratio(rv(c.i0), rv(c.i1));
    case K::kParkRvRatio:
      return log_ratio(std::sqrt(win(c.i0).mean() / (4.0 * std::log(2.0))), rv(c.i1));
    case K::kDrawdown:
    case K::kDrawup:
      return lc - ext(c.i0).value();
    case K::kEfficiency:
      return safe_div(std::abs(win(c.i0).sum()), win(c.i1).sum());
    case K::kUpFrac:
      return win(c.i0).mean() - 0.5;
    case K::kBollinger: {
      const Window& m = win(c.i0);
      const double sd = std::sqrt(m.m2());
      return sd > 1e-300 ? (lc - m.mean()) / (2.0 * sd) : 0.0;
    }
    case K::kSharpe:
      return safe_div(win(c.i0).mean(), std::sqrt(win(c.i0).m2()));
    case K::kVolTrend:
      return std::log((win(c.i0).mean() + 1) / (win(c.i1).mean() + 1));
    case K::kCci: {
      // The mean absolute deviation around the moving mean has no O(1) update; the windows are
      // short (14, 20), so a direct pass in the batch's order costs a fixed ~2w reads.
      const Ring& ltp = ring(kLtp);
      const int64_t n = std::min(t + 1, a);
      double m = 0.0, md = 0.0;
      for (int64_t k = n - 1; k >= 0; --k) m += ltp.back(k);
      m /= static_cast<double>(n);
      for (int64_t k = n - 1; k >= 0; --k) md += std::abs(ltp.back(k) - m);
      md /= static_cast<double>(n);
      return md > 1e-300 ? (ltp.back(0) - m) / (0.015 * md) / 100.0 : 0.0;
    }
    case K::kMaxRet:
    case K::kMinRet:
      return ext(c.i0).value();
    case K::kDownsideVol:
    case K::kUpsideVol:
      return std::sqrt(win(c.i0).mean());
    case K::kRvChange:
      return log_ratio(hist(c.i0).back(0), hist(c.i0).back(std::min(t, b)));
    case K::kVarianceRatio: {  // q = a over b bars
      const double s1 = win(c.i1).sum();
      return s1 > 1e-300 ? win(c.i0).sum() / (static_cast<double>(a) * s1) - 1.0 : 0.0;
    }
    case K::kSinceHigh:
    case K::kSinceLow:
      return static_cast<double>(t - ext(c.i0).index()) / static_cast<double>(a);
    case K::kJumpFlag: {
      const double sd = rv(c.i0);
      return (sd > 0 && std::abs(r) > 4.0 * sd) ? (r > 0 ? 1.0 : -1.0) : 0.0;
    }
    case K::kVolZLag:
    case K::kRvLag:
      return t >= b ? hist(c.i0).back(b) : 0.0;
  }
  FOXHUNT_INTERNAL_ASSERT(false, "feature kind ", static_cast<int>(c.f.kind),
                          " has no streaming value");
  return 0.0;
}

std::span<const float> StreamingFeatures::update(const Bar& bar, const BarFlow* flow) {
  check(bar, flow);  // before any state changes: a rejected bar leaves the engine as it was
  State& s = *state_;
  const Plan& p = *s.plan;
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
  const double prev = t == 0 ? lc : s.lc_prev;
  const double gain = std::max(0.0, r), loss = std::max(0.0, -r);
  const double gk_k = 2.0 * std::log(2.0) - 1.0;
  auto& x = s.now;
  x[kLc] = lc;
  x[kLh] = lh;
  x[kLl] = ll;
  x[kR] = r;
  x[kR2] = r * r;
  x[kRPrev] = t == 0 ? 0.0 : s.rings[kR].back(0);  // read before r is pushed
  x[kAbsR] = std::abs(r);
  x[kUp] = r > 0 ? 1.0 : 0.0;
  x[kGains] = gain;
  x[kLosses] = loss;
  x[kGains2] = gain * gain;
  x[kLosses2] = loss * loss;
  x[kHl] = hl;
  x[kHl2] = hl * hl;
  x[kGk] = 0.5 * hl * hl - gk_k * co * co;
  x[kTr] = std::max(lh, prev) - std::min(ll, prev);
  x[kCo] = co;
  x[kUpper] = lh - std::max(lc, lopen);
  x[kLower] = std::min(lc, lopen) - ll;
  x[kLv] = std::log1p(bar.volume);
  x[kV] = bar.volume;
  x[kRvProd] = r * bar.volume;
  x[kSvProd] = (r > 0 ? 1.0 : r < 0 ? -1.0 : 0.0) * bar.volume;
  x[kLtp] = (lh + ll + lc) / 3.0;
  for (int i = 0; i < kBaseSeries; ++i) s.rings[static_cast<size_t>(i)].push(x[i]);
  for (size_t i = 0; i < p.dq.size(); ++i) {
    const double dq = lc - s.lc_lag(p.dq[i]);
    s.rings[kBaseSeries + i].push(dq * dq);
  }

  // Every rolling statistic the plan asks for, then the earlier outputs kept as lags.
  for (size_t i = 0; i < s.windows.size(); ++i)
    s.windows[i].update(s.rings[static_cast<size_t>(p.windows[i].series)]);
  for (size_t i = 0; i < s.pairs.size(); ++i)
    s.pairs[i].update(s.rings[static_cast<size_t>(p.pairs[i].x)],
                      s.rings[static_cast<size_t>(p.pairs[i].y)]);
  for (size_t i = 0; i < s.extremes.size(); ++i)
    s.extremes[i].update(t, x[static_cast<size_t>(p.extremes[i].series)]);
  for (Ema& e : s.emas) e.update(lc);
  for (size_t i = 0; i < s.signals.size(); ++i)
    s.signals[i].update(s.emas[static_cast<size_t>(p.signals[i].fast)].value -
                        s.emas[static_cast<size_t>(p.signals[i].slow)].value);
  for (size_t i = 0; i < s.histories.size(); ++i) {
    const Plan::HistoryKey& h = p.histories[i];
    s.histories[i].push(h.vol_z ? s.vol_z(h.window) : s.rv(h.window));
  }

  // The bank, one column per kFeatureTable entry, in table order.
  for (size_t c = 0; c < p.columns.size(); ++c) {
    const double v = s.value(p.columns[c]);
    s.row[c] = static_cast<float>(std::isfinite(v) ? v : 0.0);
  }
  if (flow) {  // checked above: cannot throw
    const auto columns = s.flow.update(bar, *flow);
    std::copy(columns.begin(), columns.end(), s.row.begin() + kObservedFeatures);
  }

  s.lc_prev = lc;
  s.last_timestamp = bar.timestamp;
  s.t = t + 1;
  return row();
}

}  // namespace foxhunt::data
