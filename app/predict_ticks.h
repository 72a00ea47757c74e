#pragma once
// foxhunt predict --ticks: a tape served live, a decision each time a bar closes (library:
// serving/tape_stream.h). Kept apart from cmd_predict.cpp, which parses the flags.

#include <cstdint>
#include <string>

#include "foxhunt/core/device.h"
#include "foxhunt/serving/serving.h"
#include "tape_flags.h"

namespace foxhunt::cli {

/// What predict --ticks needs from predict's flags.
struct TickPredictArgs {
  std::string bundles;       ///< --bundles
  TapeFlags tape;            ///< --ticks (a path or - for stdin), --bar, --on-bad, --epoch-unit
  std::string symbol;        ///< --symbol: a one-symbol tape's instrument for panel bundles
  int64_t from = INT64_MIN;  ///< --from (Unix seconds)
  Device device;             ///< --device
  bool skip_bad = false;     ///< --skip-bad-bars
  bool serial = false;       ///< --serial
  bool json = false;         ///< --json
};

/// Streams the tape through the ensemble in `a.bundles` (a desk for a tape with a symbol
/// column) with `rule` (periods_per_year already set when the user stated it). Prints one line
/// per decision (JSON lines under --json, with the closing print's time and the latency from its
/// arrival), then the figures on stderr. Returns the exit code.
int predict_ticks(const TickPredictArgs& a, const serving::DecisionRule& rule);

}  // namespace foxhunt::cli
