#include "foxhunt/serving/universe.h"

#include <fmt/format.h>

#include <algorithm>

#include "foxhunt/core/error.h"

namespace foxhunt::serving {

SyntheticUniverse::SyntheticUniverse(uint64_t seed, int64_t instruments) {
  FOXHUNT_CHECK(instruments >= 1, "desk", "instruments: expected >= 1, got ", instruments);
  data::SyntheticOptions o;
  o.seed = seed;
  o.bars = 4096;
  base_ = data::generate_synthetic(o).bars;
  step_ = base_[1].timestamp - base_[0].timestamp;
  t_ = base_[0].timestamp;
  const auto n = static_cast<int64_t>(base_.size());
  for (int64_t k = 0; k < instruments; ++k) {
    std::string name = fmt::format("SYN{:05}", k);
    // Starts spread over the series (7919 is prime), price levels 1.00 .. 1.96.
    cursors_.push_back(
        {name, static_cast<size_t>((k * 7919) % n), 1.0 + 0.01 * static_cast<double>(k % 97)});
  }
}

std::vector<SymbolBar> SyntheticUniverse::next() {
  return next(size());
}

const std::string& SyntheticUniverse::symbol(int64_t k) const {
  FOXHUNT_CHECK(k >= 0 && k < size(), "desk", "universe symbol: expected an index in [0, ", size(),
                "), got ", k);
  return cursors_[static_cast<size_t>(k)].symbol;
}

std::vector<SymbolBar> SyntheticUniverse::next(int64_t first) {
  t_ += step_;
  const auto built = static_cast<size_t>(std::clamp<int64_t>(first, 0, size()));
  std::vector<SymbolBar> out;
  out.reserve(built);
  for (size_t k = 0; k < cursors_.size(); ++k) {
    auto& c = cursors_[k];
    if (c.i == base_.size()) {  // another lap, the price path continuous
      c.factor *= base_.back().close / base_.front().open;
      c.i = 0;
    }
    if (k >= built) {
      ++c.i;
      continue;
    }
    data::Bar b = base_[c.i++];
    b.timestamp = t_;
    b.open *= c.factor;
    b.high *= c.factor;
    b.low *= c.factor;
    b.close *= c.factor;
    out.push_back({c.symbol, b});
  }
  return out;
}

}  // namespace foxhunt::serving
