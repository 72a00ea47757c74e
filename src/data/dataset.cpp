#include "foxhunt/data/dataset.h"

#include <algorithm>
#include <cmath>

#include "foxhunt/core/error.h"
#include "foxhunt/core/random.h"

namespace foxhunt::data {

namespace {
constexpr const char* kComponent = "dataset";
}

const char* split_name(Split split) {
  static constexpr const char* kNames[] = {"train", "validation", "test"};
  return kNames[static_cast<int>(split)];
}

Split split_from_name(const std::string& name) {
  if (name == "train") return Split::kTrain;
  if (name == "validation" || name == "val") return Split::kValidation;
  if (name == "test") return Split::kTest;
  throw InputError(kComponent, "unknown split '" + name + "' (expected train, validation, test)");
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

SplitRanges chronological_split(int64_t num_bars, int64_t warmup, const SplitOptions& o) {
  FOXHUNT_CHECK(o.train > 0 && o.validation >= 0 && o.test >= 0 &&
                    std::abs(o.train + o.validation + o.test - 1.0) < 1e-6,
                kComponent, "split fractions must be >= 0 (train > 0) and sum to 1, got ", o.train,
                " + ", o.validation, " + ", o.test);
  FOXHUNT_CHECK(warmup >= 0, kComponent, "warmup must be >= 0, got ", warmup);
  FOXHUNT_CHECK(num_bars > warmup + 2, kComponent, "need more than warmup + 2 = ", warmup + 2,
                " bars to split, got ", num_bars);
  const int64_t usable = num_bars - warmup;
  const auto n_train = static_cast<int64_t>(std::floor(static_cast<double>(usable) * o.train));
  const auto n_val = static_cast<int64_t>(std::floor(static_cast<double>(usable) * o.validation));
  SplitRanges s;
  s.train = {warmup, warmup + n_train};
  s.validation = {s.train.end, s.train.end + n_val};
  s.test = {s.validation.end, num_bars};
  FOXHUNT_CHECK(s.train.size() > 0 && (o.validation == 0 || s.validation.size() > 0) &&
                    (o.test == 0 || s.test.size() > 0),
                kComponent, "series of ", num_bars, " bars (", usable,
                " after warm-up) is too short for split ", o.train, "/", o.validation, "/", o.test);
  return s;
}

MarketDataset::MarketDataset(BarSeries series, DatasetOptions options)
    : series_(std::move(series)), options_(options) {
  FOXHUNT_CHECK(options_.target_scale > 0 && std::isfinite(options_.target_scale), kComponent,
                "target_scale must be > 0, got ", options_.target_scale);
  validate_bars(series_);
  splits_ = chronological_split(series_.size(), options_.warmup, options_.split);
  raw_ = compute_observed_features(series_);
  calendar_ = compute_calendar_features(series_);
  // Statistics from training rows only: later bars must not shape the inputs of earlier ones.
  normalizer_ = Normalizer::fit(raw_, splits_.train.begin, splits_.train.end, options_.clip);
  normalized_ = normalizer_.apply(raw_);
  if (!options_.target_vol_feature.empty())
    target_vol_column_ = bank_column(options_.target_vol_feature, "target_vol_feature");
}

int64_t bank_column(const std::string& name, const std::string& what) {
  const auto& names = observed_feature_names();
  const auto it = std::find(names.begin(), names.end(), name);
  FOXHUNT_CHECK(it != names.end(), kComponent, what, ": expected a column of the feature bank (",
                "e.g. rv_20), got '", name, "'");
  return static_cast<int64_t>(it - names.begin());
}

double MarketDataset::target_divisor(int64_t anchor) const {
  if (target_vol_column_ < 0) return 1.0;
  FOXHUNT_CHECK(anchor >= 0 && anchor < size(), kComponent, "anchor ", anchor, " outside [0, ",
                size(), ")");
  return std::max(static_cast<double>(raw_.row(anchor)[target_vol_column_]), kMinTargetVol);
}

double MarketDataset::log_return(int64_t bar) const {
  FOXHUNT_CHECK(bar >= 1 && bar < size(), kComponent, "return of bar ", bar,
                " is undefined (valid 1..", size() - 1, ")");
  return std::log(series_.bars[static_cast<size_t>(bar)].close /
                  series_.bars[static_cast<size_t>(bar - 1)].close);
}

std::vector<int64_t> MarketDataset::anchors(Split split, const WindowSpec& spec) const {
  FOXHUNT_CHECK(spec.past >= 1 && spec.horizon >= 1, kComponent,
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
  FOXHUNT_CHECK(spec.past >= 1 && spec.horizon >= 0, kComponent, "bad window past ", spec.past,
                ", horizon ", spec.horizon);
  FOXHUNT_CHECK(anchor - spec.past + 1 >= options_.warmup && anchor + spec.horizon < size(),
                kComponent, "window anchor ", anchor, " with past ", spec.past, " and horizon ",
                spec.horizon, " needs bars [", anchor - spec.past + 1, ", ", anchor + spec.horizon,
                "] inside [warmup ", options_.warmup, ", ", size() - 1, "]");
}

void MarketDataset::fill_past(int64_t anchor, const WindowSpec& spec,
                              const std::vector<int64_t>& columns, float* out) const {
  check_window(anchor, spec);
  const auto width = static_cast<int64_t>(columns.size());
  for (int64_t c : columns)
    FOXHUNT_CHECK(c >= 0 && c < normalized_.cols, kComponent, "feature column ", c,
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
  FOXHUNT_CHECK(bar >= 0 && bar < size(), kComponent, "bar ", bar, " outside [0, ", size(), ")");
  const float* row = normalized_.row(bar);
  std::copy(row, row + kObservedFeatures, out);
  const float* cal = calendar_.row(bar);
  std::copy(cal, cal + kKnownFutureFeatures, out + kObservedFeatures);
}

Matrix MarketDataset::rl_market_features(int64_t begin, int64_t end) const {
  FOXHUNT_CHECK(begin >= 0 && begin <= end && end <= size(), kComponent, "bar range [", begin, ", ",
                end, ") outside [0, ", size(), "]");
  Matrix m(end - begin, kRlMarketFeatures);
  for (int64_t t = begin; t < end; ++t) fill_rl_market(t, m.row(t - begin));
  return m;
}

std::vector<std::vector<int64_t>> make_batches(const std::vector<int64_t>& anchors,
                                               int64_t batch_size, bool shuffle, uint64_t seed,
                                               bool drop_last) {
  FOXHUNT_CHECK(batch_size >= 1, kComponent, "batch_size must be >= 1, got ", batch_size);
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
