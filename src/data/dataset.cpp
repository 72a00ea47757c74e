#include "foxhunt/data/dataset.h"

#include <algorithm>
#include <cmath>

#include "foxhunt/core/error.h"
#include "foxhunt/core/random.h"
#include "foxhunt/data/flow_features.h"

namespace foxhunt::data {

namespace {
constexpr const char* kDatasetComponent = "dataset";
}

const char* split_name(Split split) {
  static constexpr const char* kNames[] = {"train", "validation", "test"};
  return kNames[static_cast<int>(split)];
}

const BarRange& SplitRanges::get(Split split) const {
  switch (split) {
    case Split::kTrain:
      return train;
    case Split::kValidation:
      return validation;
    case Split::kTest:
      return test;
  }
  FOXHUNT_INTERNAL_ASSERT(false, "bad split");
  return train;
}

namespace {

// chronological_split; `source` ("" for none) names the bars in errors.
SplitRanges split_bars(int64_t num_bars, int64_t warmup, const SplitOptions& o,
                       const std::string& source) {
  const std::string where = source.empty() ? std::string() : "'" + source + "': ";
  FOXHUNT_CHECK(o.train > 0 && o.validation >= 0 && o.test >= 0 &&
                    std::abs(o.train + o.validation + o.test - 1.0) < 1e-6,
                kDatasetComponent, "split fractions must be >= 0 (train > 0) and sum to 1, got ",
                o.train, " + ", o.validation, " + ", o.test);
  FOXHUNT_CHECK(warmup >= 0, kDatasetComponent, "warmup must be >= 0, got ", warmup);
  FOXHUNT_CHECK(num_bars > warmup + 2, kDatasetComponent, where,
                "need more than warmup + 2 = ", warmup + 2,
                " bars to split into training, validation and test, got ", num_bars);
  const int64_t usable = num_bars - warmup;
  const auto n_train = static_cast<int64_t>(std::floor(static_cast<double>(usable) * o.train));
  const auto n_val = static_cast<int64_t>(std::floor(static_cast<double>(usable) * o.validation));
  SplitRanges s;
  s.train = {warmup, warmup + n_train};
  s.validation = {s.train.end, s.train.end + n_val};
  s.test = {s.validation.end, num_bars};
  FOXHUNT_CHECK(s.train.size() > 0 && (o.validation == 0 || s.validation.size() > 0) &&
                    (o.test == 0 || s.test.size() > 0),
                kDatasetComponent, where, "series of ", num_bars, " bars (", usable,
                " after warm-up) is too short for split ", o.train, "/", o.validation, "/", o.test);
  return s;
}

}  // namespace

SplitRanges chronological_split(int64_t num_bars, int64_t warmup, const SplitOptions& o) {
  return split_bars(num_bars, warmup, o, "");
}

SplitRanges chronological_split(const BarSeries& series, int64_t warmup, const SplitOptions& o) {
  return split_bars(series.size(), warmup, o, series.source);
}

SplitCuts panel_split_cuts(const Panel& panel, int64_t warmup, const SplitOptions& o) {
  FOXHUNT_CHECK(o.train > 0 && o.validation > 0 && o.test > 0 &&
                    std::abs(o.train + o.validation + o.test - 1.0) < 1e-6,
                kDatasetComponent, "panel split fractions must be > 0 and sum to 1, got ", o.train,
                " + ", o.validation, " + ", o.test);
  FOXHUNT_CHECK(warmup >= 0, kDatasetComponent, "warmup must be >= 0, got ", warmup);
  std::vector<int64_t> usable;
  for (const auto& ps : panel.symbols)
    for (size_t i = static_cast<size_t>(warmup); i < ps.series.bars.size(); ++i)
      usable.push_back(ps.series.bars[i].timestamp);
  std::sort(usable.begin(), usable.end());
  usable.erase(std::unique(usable.begin(), usable.end()), usable.end());
  FOXHUNT_CHECK(usable.size() >= 3, kDatasetComponent, "'", panel.source,
                "': expected a symbol with more than ", warmup + 2,
                " bars (the feature warm-up plus three splits), got ", usable.size(),
                " usable dates over ", panel.size(), " symbols");
  const auto n = static_cast<double>(usable.size());
  const auto at = [&](double f) {
    const auto k = static_cast<size_t>(std::floor(n * f));
    return usable[std::clamp<size_t>(k, 1, usable.size() - 1)];
  };
  SplitCuts c;
  c.validation_begin = at(o.train);
  c.test_begin = std::max(at(o.train + o.validation), c.validation_begin + 1);
  return c;
}

SplitRanges split_at_cuts(const BarSeries& series, int64_t warmup, const SplitCuts& cuts) {
  FOXHUNT_CHECK(cuts.validation_begin < cuts.test_begin, kDatasetComponent,
                "cut dates: expected validation_begin < test_begin, got ",
                format_timestamp(cuts.validation_begin), " and ",
                format_timestamp(cuts.test_begin));
  const auto& bars = series.bars;
  const auto first_at = [&](int64_t t) {
    return static_cast<int64_t>(
        std::lower_bound(bars.begin(), bars.end(), t,
                         [](const Bar& b, int64_t v) { return b.timestamp < v; }) -
        bars.begin());
  };
  SplitRanges s;
  const int64_t n = series.size();
  s.train = {warmup, std::max(warmup, first_at(cuts.validation_begin))};
  s.validation = {s.train.end, std::max(s.train.end, first_at(cuts.test_begin))};
  s.test = {s.validation.end, std::max(s.validation.end, n)};
  const char* empty = s.train.size() <= 0        ? "training"
                      : s.validation.size() <= 0 ? "validation"
                      : s.test.size() <= 0       ? "test"
                                                 : nullptr;
  FOXHUNT_CHECK(
      empty == nullptr, kDatasetComponent, "'", series.source,
      "': the panel's common cut dates (validation from ", format_timestamp(cuts.validation_begin),
      ", test from ", format_timestamp(cuts.test_begin), ") leave its ", empty ? empty : "",
      " split empty: its ", n, " bars run from ",
      n > 0 ? format_timestamp(bars.front().timestamp) : std::string("-"), " to ",
      n > 0 ? format_timestamp(bars.back().timestamp) : std::string("-"), " with a warm-up of ",
      warmup, " bars; leave the symbol out or give it more history");
  return s;
}

MarketDataset::MarketDataset(BarSeries series, DatasetOptions options)
    : series_(std::move(series)), options_(options) {
  FOXHUNT_CHECK(options_.target_scale > 0 && std::isfinite(options_.target_scale),
                kDatasetComponent, "target_scale must be > 0, got ", options_.target_scale);
  validate_bars(series_);
  splits_ = options_.cuts ? split_at_cuts(series_, options_.warmup, *options_.cuts)
                          : chronological_split(series_, options_.warmup, options_.split);
  // The bank, then the flow columns of bars built from a tape (flow_features.h).
  raw_ = compute_market_features(series_);
  calendar_ = compute_calendar_features(series_);
  // Statistics from training rows only: later bars must not shape the inputs of earlier ones.
  normalizer_ = Normalizer::fit(raw_, splits_.train.begin, splits_.train.end, options_.clip);
  normalized_ = normalizer_.apply(raw_);
  target_vol_ = parse_target_vol(options_.target_vol_feature, "target_vol_feature");
  FOXHUNT_CHECK(target_vol_.window <= options_.warmup, kDatasetComponent, "target_vol_feature '",
                options_.target_vol_feature, "': expected a window <= the warm-up of ",
                options_.warmup, " bars");
}

namespace {
// The digits after `prefix` in `name` as an integer in [lo, hi], or -1.
int64_t suffix_number(const std::string& name, const std::string& prefix, int64_t lo, int64_t hi) {
  const std::string digits = name.substr(prefix.size());
  if (digits.empty() || digits.size() > 6 ||
      !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return -1;
  const int64_t v = std::stoll(digits);
  return v >= lo && v <= hi ? v : -1;
}
}  // namespace

TargetVol parse_target_vol(const std::string& name, const std::string& what) {
  TargetVol v;
  if (name.empty()) return v;
  if (name.rfind(kAbsRetMeanPrefix, 0) == 0) {
    v.window = suffix_number(name, kAbsRetMeanPrefix, 1, kFeatureWarmup);
    FOXHUNT_CHECK(v.window > 0, kDatasetComponent, what, ": expected ", kAbsRetMeanPrefix,
                  "<W> with 1 <= W <= ", kFeatureWarmup, ", got '", name, "'");
    return v;
  }
  if (name.rfind(kAbsRetEwmPrefix, 0) == 0) {
    v.halflife = suffix_number(name, kAbsRetEwmPrefix, 1, 1000);
    FOXHUNT_CHECK(v.halflife > 0, kDatasetComponent, what, ": expected ", kAbsRetEwmPrefix,
                  "<H> with a half-life 1 <= H <= 1000 bars, got '", name, "'");
    v.window = kAbsRetEwmWindow;
    return v;
  }
  const auto& names = observed_feature_names();
  FOXHUNT_CHECK(std::find(names.begin(), names.end(), name) != names.end(), kDatasetComponent, what,
                ": expected a feature-bank column (e.g. rv_20), ", kAbsRetMeanPrefix, "<W> or ",
                kAbsRetEwmPrefix, "<H> (e.g. absret_ewm_20), got '", name, "'");
  v.column = bank_column(name, what);
  return v;
}

double absret_divisor(const TargetVol& vol, const float* returns, int64_t count) {
  FOXHUNT_CHECK(count >= 1 && count <= std::max<int64_t>(vol.window, 1), kDatasetComponent,
                "absret volatility: expected 1..", vol.window, " returns, got ", count);
  double sum = 0.0, weights = 0.0;
  // Weight of the i-th most recent return: 2^(-i / H); equal weights without a half-life.
  const double decay = vol.halflife > 0 ? std::exp2(-1.0 / static_cast<double>(vol.halflife)) : 1.0;
  double w = std::pow(decay, static_cast<double>(count - 1));  // the oldest one's
  for (int64_t i = 0; i < count; ++i, w /= decay) {
    sum += w * std::fabs(static_cast<double>(returns[i]));
    weights += w;
  }
  return std::max(sum / weights, kMinTargetVol);
}

int64_t bank_column(const std::string& name, const std::string& what) {
  const auto& names = observed_feature_names();
  const auto it = std::find(names.begin(), names.end(), name);
  FOXHUNT_CHECK(it != names.end(), kDatasetComponent, what,
                ": expected a column of the feature bank (", "e.g. rv_20), got '", name, "'");
  return static_cast<int64_t>(it - names.begin());
}

double MarketDataset::target_divisor(int64_t anchor) const {
  if (!target_vol_.enabled()) return 1.0;
  FOXHUNT_CHECK(anchor >= 0 && anchor < size(), kDatasetComponent, "anchor ", anchor,
                " outside [0, ", size(), ")");
  return target_divisor_at(target_vol_, raw_, anchor);
}

double target_divisor_at(const TargetVol& vol, const Matrix& raw, int64_t anchor) {
  if (!vol.enabled()) return 1.0;
  FOXHUNT_CHECK(anchor >= 0 && anchor < raw.rows, kDatasetComponent, "anchor ", anchor,
                " outside [0, ", raw.rows, ")");
  if (vol.column >= 0)
    return std::max(static_cast<double>(raw.row(anchor)[vol.column]), kMinTargetVol);
  static const int64_t ret = bank_column("ret_lag_0", "absret volatility");
  const int64_t w = std::min(vol.window, anchor + 1);
  std::vector<float> last(static_cast<size_t>(w));
  for (int64_t i = 0; i < w; ++i) last[static_cast<size_t>(i)] = raw.row(anchor - w + 1 + i)[ret];
  return absret_divisor(vol, last.data(), w);
}

double MarketDataset::log_return(int64_t bar) const {
  FOXHUNT_CHECK(bar >= 1 && bar < size(), kDatasetComponent, "return of bar ", bar,
                " is undefined (valid 1..", size() - 1, ")");
  return std::log(series_.bars[static_cast<size_t>(bar)].close /
                  series_.bars[static_cast<size_t>(bar - 1)].close);
}

std::vector<int64_t> MarketDataset::anchors(Split split, const WindowSpec& spec) const {
  FOXHUNT_CHECK(spec.past >= 1 && spec.horizon >= 1, kDatasetComponent,
                "window needs past >= 1 and horizon >= 1, got past ", spec.past, ", horizon ",
                spec.horizon);
  const BarRange& range = splits_.get(split);
  // Targets r_{t+1..t+h} inside [begin, end) and inputs t-past+1.. after the warm-up.
  const int64_t first = std::max(range.begin - 1, options_.warmup + spec.past - 1);
  const int64_t last = range.end - 1 - spec.horizon;
  std::vector<int64_t> out;
  for (int64_t t = first; t <= last; ++t) out.push_back(t);
  return out;
}

void MarketDataset::check_window(int64_t anchor, const WindowSpec& spec) const {
  FOXHUNT_CHECK(spec.past >= 1 && spec.horizon >= 0, kDatasetComponent, "bad window past ",
                spec.past, ", horizon ", spec.horizon);
  FOXHUNT_CHECK(anchor - spec.past + 1 >= options_.warmup && anchor + spec.horizon < size(),
                kDatasetComponent, "window anchor ", anchor, " with past ", spec.past,
                " and horizon ", spec.horizon, " needs bars [", anchor - spec.past + 1, ", ",
                anchor + spec.horizon, "] inside [warmup ", options_.warmup, ", ", size() - 1, "]");
}

void MarketDataset::fill_past(int64_t anchor, const WindowSpec& spec,
                              const std::vector<int64_t>& columns, float* out) const {
  check_window(anchor, spec);
  const auto width = static_cast<int64_t>(columns.size());
  for (int64_t c : columns)
    FOXHUNT_CHECK(c >= 0 && c < normalized_.cols, kDatasetComponent, "feature column ", c,
                  " outside the bank [0, ", normalized_.cols, ")");
  for (int64_t i = 0; i < spec.past; ++i) {
    const float* row = normalized_.row(anchor - spec.past + 1 + i);
    for (int64_t j = 0; j < width; ++j) out[i * width + j] = row[columns[j]];
  }
}

void MarketDataset::fill_future_calendar(int64_t anchor, const WindowSpec& spec, float* out) const {
  check_window(anchor, spec);
  for (int64_t k = 0; k < spec.horizon; ++k) {
    const float* cal = calendar_.row(anchor + 1 + k);
    std::copy(cal, cal + kKnownFutureFeatures, out + k * kKnownFutureFeatures);
  }
}

void MarketDataset::fill_target(int64_t anchor, const WindowSpec& spec, float* out) const {
  check_window(anchor, spec);
  const double scale = options_.target_scale / target_divisor(anchor);
  for (int64_t k = 0; k < spec.horizon; ++k)
    out[k] = static_cast<float>(log_return(anchor + 1 + k) * scale);
}

void MarketDataset::fill_rl_market(int64_t bar, float* out) const {
  FOXHUNT_CHECK(bar >= 0 && bar < size(), kDatasetComponent, "bar ", bar, " outside [0, ", size(),
                ")");
  const float* row = normalized_.row(bar);
  std::copy(row, row + normalized_.cols, out);
  const float* cal = calendar_.row(bar);
  std::copy(cal, cal + kKnownFutureFeatures, out + normalized_.cols);
}

Matrix MarketDataset::rl_market_features(int64_t begin, int64_t end) const {
  FOXHUNT_CHECK(begin >= 0 && begin <= end && end <= size(), kDatasetComponent, "bar range [",
                begin, ", ", end, ") outside [0, ", size(), "]");
  Matrix m(end - begin, rl_market_width());
  for (int64_t t = begin; t < end; ++t) fill_rl_market(t, m.row(t - begin));
  return m;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& anchors,
                                               int64_t batch_size, bool shuffle, uint64_t seed,
                                               bool drop_last) {
  FOXHUNT_CHECK(batch_size >= 1, kDatasetComponent, "batch_size must be >= 1, got ", batch_size);
  std::vector<int64_t> order = anchors;
  if (shuffle) {
    Rng rng(seed);
    rng.shuffle(order);
  }
  std::vector<std::vector<int64_t>> batches;
  for (size_t i = 0; i < order.size(); i += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(order.size(), i + static_cast<size_t>(batch_size));
    if (drop_last && end - i < static_cast<size_t>(batch_size)) break;
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(i),
                         order.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return batches;
}

}  // namespace foxhunt::data
