#include "foxhunt/data/vol_target.h"

#include <algorithm>
#include <cmath>

#include "foxhunt/core/error.h"

namespace foxhunt::data {

namespace {

constexpr const char* kVolTargetComponent = "vol_target";

}  // namespace

void VolatilityTargetStream::push(double close) {
  FOXHUNT_CHECK(std::isfinite(close) && close > 0, kVolTargetComponent,
                "close: expected a finite price > 0, got ", close);
  if (last_close_ > 0.0) {
    ring_[static_cast<size_t>(seen_) % kVolTargetWindow] = std::log(close / last_close_);
    ++seen_;
  }
  last_close_ = close;
}

double VolatilityTargetStream::position(double target_volatility, double periods_per_year) const {
  FOXHUNT_CHECK(std::isfinite(target_volatility) && target_volatility > 0, kVolTargetComponent,
                "target volatility: expected an annual volatility > 0, got ", target_volatility);
  FOXHUNT_CHECK(std::isfinite(periods_per_year) && periods_per_year > 0, kVolTargetComponent,
                "periods_per_year: expected a finite number > 0, got ", periods_per_year);
  if (seen_ < 2) return 0.0;
  // Oldest to newest, as volatility_target_positions sums them (the same rounding).
  const size_t k = static_cast<size_t>(std::min<int64_t>(seen_, kVolTargetWindow));
  const size_t first = static_cast<size_t>(seen_) - k;
  double sum = 0.0;
  for (size_t i = 0; i < k; ++i) sum += ring_[(first + i) % kVolTargetWindow];
  const double mean = sum / static_cast<double>(k);
  double ss = 0.0;
  for (size_t i = 0; i < k; ++i) {
    const double d = ring_[(first + i) % kVolTargetWindow] - mean;
    ss += d * d;
  }
  const double sigma = std::sqrt(ss / static_cast<double>(k - 1)) * std::sqrt(periods_per_year);
  return sigma > 0 ? std::min(1.0, target_volatility / sigma) : 1.0;
}

}  // namespace foxhunt::data
