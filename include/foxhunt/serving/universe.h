#pragma once
/// \file universe.h
/// A synthetic universe for load and capacity runs (`stress --instruments`, `budget
/// --instruments`): N instruments with a bar at every timestamp, on a common clock. One seeded
/// synthetic series is read by each instrument from its own starting bar (so their histories,
/// and so their features, differ) at its own price level; at the series' end an instrument
/// starts another lap with its price path kept continuous.

#include <cstdint>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/serving/desk.h"

namespace foxhunt::serving {

/// N synthetic instruments "SYN00000", "SYN00001", ...
class SyntheticUniverse {
 public:
  /// `instruments` >= 1 (InputError otherwise), bars from a synthetic series seeded with `seed`.
  SyntheticUniverse(uint64_t seed, int64_t instruments);
  /// The next timestamp's bars, one per instrument, in symbol order.
  std::vector<SymbolBar> next();
  /// The next timestamp: every instrument moves on, but only the first `first` (clamped to
  /// [0, size()]) get their bar built and returned (a desk that warms a few instruments up and
  /// copies them: Desk::replicate).
  std::vector<SymbolBar> next(int64_t first);
  /// The symbol of instrument `k` (0 <= k < size(); InputError otherwise).
  const std::string& symbol(int64_t k) const;
  /// The timestamp of the last next() (before the first: one step before it).
  int64_t timestamp() const { return t_; }
  /// Number of instruments.
  int64_t size() const { return static_cast<int64_t>(cursors_.size()); }

 private:
  struct Cursor {
    std::string symbol;
    size_t i;
    double factor;
  };
  std::vector<data::Bar> base_;
  std::vector<Cursor> cursors_;
  int64_t step_ = 60;
  int64_t t_ = 0;
};

}  // namespace foxhunt::serving
