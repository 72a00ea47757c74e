#pragma once
/// \file vol_target.h
/// The volatility-targeted long (the backtests' `vol_target` baseline,
/// data::volatility_target_positions) one close at a time, for the serving runtime: a decision
/// rule can hold it as a baseline (serving/serving.h, DecisionRule::vol_target_weight). The state
/// is a fixed ring of the last kVolTargetWindow log returns (no heap), and the arithmetic is that
/// of volatility_target_positions with its default window, so the streamed positions equal the
/// batch ones on the same closes. Torch-free.

#include <array>
#include <cstddef>
#include <cstdint>

namespace foxhunt::data {

/// The window (log returns) of the volatility estimate: volatility_target_positions' default.
inline constexpr size_t kVolTargetWindow = 60;

/// Streaming volatility_target_positions (see the file comment).
class VolatilityTargetStream {
 public:
  /// Adds the next close. InputError for a close that is not finite and > 0 (the state is then
  /// unchanged).
  void push(double close);
  /// The position after the last close: min(1, target / (sigma * sqrt(periods_per_year))), sigma
  /// the sample standard deviation of the last (at most kVolTargetWindow) log returns; 1 when
  /// sigma is 0; 0 while fewer than 2 returns are known. InputError for a target or
  /// periods_per_year not finite and > 0.
  double position(double target_volatility, double periods_per_year) const;
  /// Log returns seen so far.
  int64_t returns_seen() const { return seen_; }

 private:
  std::array<double, kVolTargetWindow> ring_{};  // ring_[seen_ % window] is the next slot
  double last_close_ = 0.0;
  int64_t seen_ = 0;
};

}  // namespace foxhunt::data
