#pragma once
/// \file desk_capacity.h
/// How many instruments a desk (desk.h) can serve within a memory budget: `foxhunt budget
/// --instruments N`. Measured, not summed: a desk of N synthetic instruments (universe.h) runs
/// through the warm-up and a few timestamps under the CPU ledger, and its bytes are the models'
/// weights plus the instruments' state (declared to the ledger) plus the peak of everything the
/// batched forwards allocated. A second, small desk gives the bytes per instrument; the largest
/// universe that leaves the required headroom is then predicted and VERIFIED the way the planner
/// verifies batches: that desk runs under the enforced cap (budget - headroom), and a refused
/// allocation (OutOfMemoryError) lowers it by 5% and tries again.
///
/// CPU only today: on a GPU the state stays in host memory while weights and forwards are on the
/// card, a split this measurement does not make yet (InputError for a CUDA device).

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/units.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/serving/bundle.h"

namespace foxhunt::serving {

/// What to measure.
struct DeskCapacityOptions {
  /// The budget: by default the reference card's usable bytes.
  memory::Budget budget = memory::Budget::of_profile(memory::kReferenceProfile);
  /// Free memory required beside the desk (as `budget`'s headroom).
  uint64_t headroom_bytes = 500 * kMiB;
  /// The universe measured (>= 2).
  int64_t instruments = 64;
  /// The small universe that, with `instruments`, gives the bytes per instrument (>= 1, less
  /// than `instruments`).
  int64_t probe_instruments = 8;
  /// Timestamps served after every model is ready.
  int64_t timestamps = 2;
  /// Seed of the synthetic universe.
  uint64_t seed = 42;
  /// Upper bound of max_instruments.
  int64_t max_instruments_limit = 1000000;
  /// Told about each desk run before it starts ("desk: 13691 instruments under the cap ..."); a
  /// large universe takes minutes (every instrument warms up: ~10 us per instrument-bar).
  std::function<void(const std::string&)> progress;
};

/// One measured desk.
struct DeskRun {
  int64_t instruments = 0;          ///< universe size
  uint64_t bytes = 0;               ///< weights + state + forward peak
  uint64_t state_bytes = 0;         ///< every instrument's state (ledger external tag)
  uint64_t forward_peak_bytes = 0;  ///< ledger peak above the start of the run
  bool refused = false;             ///< an allocation was refused under the cap
  double seconds = 0;               ///< wall time
};
/// JSON form of every field.
void to_json(nlohmann::json& j, const DeskRun& r);

/// The result.
struct DeskCapacity {
  std::string budget_source;                ///< "<profile> usable" or who gave the bytes
  uint64_t budget_bytes = 0;                ///< the budget
  uint64_t headroom_required_bytes = 0;     ///< as asked
  std::vector<std::string> models;          ///< the served models
  uint64_t weights_bytes = 0;               ///< parameters + buffers of the served models
  DeskRun asked;                            ///< the asked universe, uncapped
  DeskRun probe;                            ///< the small universe, uncapped
  uint64_t state_bytes_per_instrument = 0;  ///< asked.state_bytes / instruments
  double bytes_per_instrument = 0;          ///< (asked.bytes - probe.bytes) / (difference in size)
  int64_t max_instruments = 0;              ///< the largest universe verified under the cap
  DeskRun verified;                         ///< the run at max_instruments under the cap
  int64_t verify_attempts = 0;              ///< capped runs tried (each refusal lowers by 5%)
  bool asked_fits = false;                  ///< asked.bytes + headroom <= budget
  bool ok = false;                          ///< asked_fits and max_instruments was verified
  double seconds = 0;                       ///< wall time
  /// Every field.
  nlohmann::json to_json() const;
  /// A few lines for the terminal.
  std::string table() const;
};

/// Measures the desk of `bundles` (see the file comment). InputError for bad options or bundles
/// on a CUDA device.
DeskCapacity measure_desk_capacity(const std::vector<Bundle>& bundles,
                                   const DeskCapacityOptions& options);

/// Untrained default models of every catalog entry (seeded), with a normaliser fitted on a
/// synthetic series: bundles for capacity and load runs without trained ones.
std::vector<Bundle> default_bundles(uint64_t seed);

}  // namespace foxhunt::serving
