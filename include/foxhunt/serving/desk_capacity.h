#pragma once
/// \file desk_capacity.h
/// How many instruments a desk (desk.h) can serve within a memory budget: `foxhunt budget
/// --instruments N`. Measured, not summed: a desk of n synthetic instruments (universe.h) runs
/// through the warm-up and a few timestamps under the CPU ledger, and its bytes are the models'
/// weights plus the instruments' state (declared to the ledger) plus the peak of everything the
/// batched forwards allocated. The models run one by one, each under its own ledger scope, and
/// their concurrent overlap is added as every model at its own peak at once: the same bytes on a
/// loaded machine as on an idle one (a concurrent run's overlap depends on the scheduler).
///
/// Fitted (the default), as the batch planner (plan/planner.h) fits batches: desks of 1, 2, 4
/// and 8 instruments, then a ladder x4 while the largest is under 1/8 of the predicted maximum,
/// give a least-squares line bytes(n) = fixed + per instrument x n over the desks of n >= the
/// largest / 8; the maximum is where the line meets budget - headroom. Only `distinct_instruments`
/// instruments of a desk go through the warm-up bar by bar; the others copy a warmed-up one's
/// state (Desk::replicate) and every instrument then runs the measured timestamps, so a desk
/// costs its last timestamps, not n x warm-up bars. The asked N and the predicted maximum are
/// then VERIFIED the same way under the enforced cap (budget - headroom - weights): a refused
/// allocation (OutOfMemoryError) lowers the maximum by 5% and tries again. Seconds where the
/// exhaustive measurement took minutes; `predicted_error_pct` is the line against the verified
/// bytes.
///
/// Exhaustive (`exhaustive`, `budget --exhaustive`): every desk warms every instrument up (~10 us
/// per instrument-bar: minutes for 10,000s): the asked N and a probe universe give the line,
/// refined once by a desk at its prediction, then verified under the cap as above.
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
  /// Warm every instrument of every desk up (minutes; the reference the fit is checked against)
  /// instead of the fit (see the file comment).
  bool exhaustive = false;
  /// Fit: the desk sizes measured first (each >= 1), before the ladder.
  std::vector<int64_t> fit_instruments = {1, 2, 4, 8};
  /// Fit: instruments of a desk warmed up bar by bar (>= 1); the others copy their state.
  int64_t distinct_instruments = 8;
  /// Told about each desk run before it starts ("desk: 13691 instruments under the cap ..."); a
  /// large universe takes minutes (every instrument warms up: ~10 us per instrument-bar).
  std::function<void(const std::string&)> progress;
};

/// One measured desk.
struct DeskRun {
  int64_t instruments = 0;   ///< universe size
  uint64_t bytes = 0;        ///< weights (+ derived) + state + forward peak
  uint64_t state_bytes = 0;  ///< every instrument's state (ledger external tag)
  /// Ledger peak above the start of the run, the models run one by one, plus overlap_bytes.
  uint64_t forward_peak_bytes = 0;
  /// The models' transient peaks but the largest: a concurrent desk's worst case, every model at
  /// its own peak at once (deterministic, unlike the overlap a concurrent run happens to reach).
  uint64_t overlap_bytes = 0;
  bool refused = false;  ///< an allocation was refused under the cap
  double seconds = 0;    ///< wall time
  int64_t distinct = 0;  ///< instruments warmed up bar by bar (the others: copies of them)
};
/// JSON form of every field.
void to_json(nlohmann::json& j, const DeskRun& r);

/// The result.
struct DeskCapacity {
  std::string budget_source;             ///< "<profile> usable" or who gave the bytes
  uint64_t budget_bytes = 0;             ///< the budget
  uint64_t headroom_required_bytes = 0;  ///< as asked
  std::vector<std::string> models;       ///< the served models
  uint64_t weights_bytes = 0;            ///< parameters + buffers of the served models
  /// The serving kernels' forms of the weights the models keep once they served a bar
  /// (transposed copies, folded biases), measured by a priming desk (what the models' steps keep
  /// under their ledger scopes, "desk_capacity/<model>"); counted with the weights.
  uint64_t derived_bytes = 0;
  std::string method;  ///< "fit" or "exhaustive"
  DeskRun asked;       ///< the asked universe (fit: under the cap, refused when it does not fit)
  DeskRun probe;       ///< exhaustive: the small universe, uncapped; fit: the largest fitted desk
  std::vector<DeskRun> fit_runs;            ///< fit: the desks the line was fitted on, uncapped
  uint64_t state_bytes_per_instrument = 0;  ///< state bytes of one instrument
  double bytes_per_instrument = 0;          ///< the line's slope
  double fixed_bytes = 0;                   ///< the line's value at 0 instruments
  uint64_t asked_predicted_bytes = 0;       ///< the line at the asked universe
  uint64_t predicted_bytes = 0;             ///< the line at max_instruments
  double predicted_error_pct = 0;  ///< (predicted_bytes - verified.bytes) / verified.bytes, %
  int64_t max_instruments = 0;     ///< the largest universe verified under the cap
  DeskRun verified;                ///< the run at max_instruments under the cap
  int64_t verify_attempts = 0;     ///< capped runs tried (each refusal lowers by 5%)
  bool asked_fits = false;         ///< asked.bytes + headroom <= budget
  bool ok = false;                 ///< asked_fits and max_instruments was verified
  double seconds = 0;              ///< wall time
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
