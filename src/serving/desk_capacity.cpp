#include "foxhunt/serving/desk_capacity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/universe.h"

namespace foxhunt::serving {

namespace {

constexpr const char* kDeskCapacityComponent = "desk";
// The ledger scope the measured desks run under: their models' scopes are its children.
constexpr const char* kCapacityScope = "desk_capacity";

// The ledger scope of `model`'s steps in a measured desk (the calling thread's scope path).
std::string model_scope(const std::string& model) {
  const std::string prefix = memory::current_scope();
  return (prefix.empty() ? std::string() : prefix + "/") + kCapacityScope + "/" + model;
}

// What is live before any desk: the weights and the kernels' forms of them.
uint64_t held_bytes(const DeskCapacity& c) {
  return c.weights_bytes + c.derived_bytes;
}

// One desk of `n` instruments through its warm-up and `timestamps` more; under a ledger cap of
// `room` bytes above what is live now when `room` > 0. Only the first `distinct` instruments run
// the warm-up bar by bar; the others then copy their state (Desk::replicate), and all `n` run the
// measured timestamps.
DeskRun run_desk(const std::vector<Bundle>& bundles, int64_t n, int64_t distinct, uint64_t weights,
                 uint64_t room, const DeskCapacityOptions& o) {
  DeskRun r;
  r.instruments = n;
  r.distinct = std::clamp<int64_t>(distinct, 1, n);
  int64_t warm = 0;  // Desk::warmup_bars()
  for (const auto& b : bundles) warm = std::max(warm, b.warmup + b.model->spec().window + 1);
  if (o.progress)
    o.progress(fmt::format(
        "desk: {} instruments{}, {} ({} instrument-bars)", n,
        r.distinct < n ? fmt::format(" ({} warmed up, the rest copies)", r.distinct)
                       : std::string(),
        room > 0 ? "verified under the cap" : "measured", r.distinct * warm + n * o.timestamps));
  const auto t0 = std::chrono::steady_clock::now();
  memory::reset_peak();
  const uint64_t live0 = memory::live_bytes();
  // The models run one by one, each under its own ledger scope: a concurrent desk's peak depends
  // on how the scheduler happens to overlap the models' batches (it moved the line by 20% under
  // load), a serial one's does not. The overlap is then bounded from above: every model at its
  // own peak at once (see overlap_bytes).
  DeskOptions serial;
  serial.parallel = false;
  serial.memory_scopes = true;
  std::vector<std::string> scopes;
  std::vector<uint64_t> scope_live0;
  for (const auto& b : bundles) {
    scopes.push_back(model_scope(b.name()));
    scope_live0.push_back(memory::scope_stats(scopes.back()).live_bytes);
  }
  {
    memory::MemoryScope measured(kCapacityScope);
    std::optional<memory::LimitGuard> cap;
    if (room > 0) cap.emplace(live0 + memory::external_bytes() + room);
    try {
      Desk desk(bundles, {}, serial);
      SyntheticUniverse universe(o.seed, n);
      for (int64_t i = 0; i < warm; ++i) {
        auto bars = universe.next(r.distinct);
        desk.on_timestamp(universe.timestamp(), bars);
      }
      std::vector<std::vector<std::string>> copies(static_cast<size_t>(r.distinct));
      for (int64_t k = r.distinct; k < n; ++k)
        copies[static_cast<size_t>(k % r.distinct)].push_back(universe.symbol(k));
      for (int64_t k = 0; k < r.distinct; ++k)
        if (!copies[static_cast<size_t>(k)].empty())
          desk.replicate(universe.symbol(k), copies[static_cast<size_t>(k)]);
      for (int64_t i = 0; i < o.timestamps; ++i) {
        auto bars = universe.next();
        desk.on_timestamp(universe.timestamp(), bars);
      }
      r.state_bytes = desk.state_bytes();
    } catch (...) {
      memory::rethrow_if_oom(std::current_exception());  // typed refusal, or the original
      throw;
    }
  }
  // Each model's transient peak above what its scope held before; all but the largest (already
  // inside the serial peak) are added as if every model peaked at once.
  uint64_t sum = 0, largest = 0;
  for (size_t m = 0; m < scopes.size(); ++m) {
    const auto st = memory::scope_stats(scopes[m]);
    const uint64_t transient = st.peak_bytes > scope_live0[m] ? st.peak_bytes - scope_live0[m] : 0;
    sum += transient;
    largest = std::max(largest, transient);
  }
  r.overlap_bytes = sum - largest;
  r.forward_peak_bytes = memory::peak_bytes() - live0 + r.overlap_bytes;
  r.bytes = weights + r.state_bytes + r.forward_peak_bytes;
  // Under a cap the serial run fitted; the models' overlap must fit too.
  if (room > 0 && r.state_bytes + r.forward_peak_bytes > room)
    throw OutOfMemoryError(
        kDeskCapacityComponent,
        fmt::format("desk of {} instruments: state {} + forwards {} (of which {} the models' "
                    "overlap) exceed the room {}",
                    n, human_bytes(double(r.state_bytes)),
                    human_bytes(double(r.forward_peak_bytes)), human_bytes(double(r.overlap_bytes)),
                    human_bytes(double(room))),
        r.state_bytes + r.forward_peak_bytes,
        r.state_bytes + r.forward_peak_bytes - r.overlap_bytes, room);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// A refused run at `n`.
DeskRun refused_run(int64_t n) {
  DeskRun r;
  r.instruments = n;
  r.refused = true;
  return r;
}

// Least squares of (instruments, bytes) over the runs with instruments >= the largest / 8 (the
// planner's rule: the small desks' fixed costs do not bend the slope); slope >= 1 byte.
void fit_line(const std::vector<DeskRun>& runs, double& fixed, double& slope) {
  int64_t largest = 0;
  for (const auto& r : runs) largest = std::max(largest, r.instruments);
  LineSums s;
  for (const auto& r : runs)
    if (r.instruments >= std::max<int64_t>(1, largest / 8))
      s.add(static_cast<double>(r.instruments), static_cast<double>(r.bytes));
  const bool defined = s.spread() > 0;
  slope = defined ? std::max(1.0, s.slope()) : std::max(1.0, s.sy / std::max(s.sx, 1.0));
  fixed = defined ? s.intercept(slope) : 0.0;
}

// The largest n the line allows within `room` bytes, in [0, limit].
int64_t line_max(double fixed, double slope, double room, int64_t limit) {
  const double n = std::floor((room - fixed) / slope);
  return n <= 0 ? 0 : n >= static_cast<double>(limit) ? limit : static_cast<int64_t>(n);
}

uint64_t line_at(double fixed, double slope, int64_t n) {
  return static_cast<uint64_t>(std::max(0.0, fixed + slope * static_cast<double>(n)));
}

// Verifies `n` under the cap, lowering it by 5% on each refusal (12 tries at most); fills
// c.verified, c.verify_attempts and c.max_instruments.
void verify_max(const std::vector<Bundle>& bundles, int64_t n, int64_t distinct, uint64_t cap_room,
                const DeskCapacityOptions& o, DeskCapacity& c) {
  const uint64_t held = held_bytes(c);
  while (n >= 1 && c.verify_attempts < 12) {
    ++c.verify_attempts;
    try {
      c.verified = run_desk(bundles, n, distinct, held, cap_room, o);
      break;
    } catch (const OutOfMemoryError&) {
      c.verified = refused_run(n);
      n = std::min(n - 1, static_cast<int64_t>(std::floor(static_cast<double>(n) * 0.95)));
    }
  }
  c.max_instruments = c.verified.refused || c.verified.instruments == 0 ? 0 : n;
}

// Every desk warmed up in full: the asked universe and a probe give the line, a desk at its
// prediction refines it, then the verification.
void measure_exhaustive(const std::vector<Bundle>& bundles, const DeskCapacityOptions& o,
                        double room, uint64_t cap_room, DeskCapacity& c) {
  const uint64_t held = held_bytes(c);
  const int64_t all = o.max_instruments_limit;
  c.probe = run_desk(bundles, o.probe_instruments, all, held, 0, o);
  c.asked = run_desk(bundles, o.instruments, all, held, 0, o);
  c.state_bytes_per_instrument = c.asked.state_bytes / static_cast<uint64_t>(o.instruments);
  c.asked_fits = static_cast<double>(c.asked.bytes) <= room;
  // The line through two runs, refined once by an uncapped run at its prediction (the forwards'
  // peak grows faster than linearly once the four models' batches overlap in time).
  fit_line({c.probe, c.asked}, c.fixed_bytes, c.bytes_per_instrument);
  c.asked_predicted_bytes = line_at(c.fixed_bytes, c.bytes_per_instrument, o.instruments);
  int64_t n = line_max(c.fixed_bytes, c.bytes_per_instrument, room, o.max_instruments_limit);
  if (n > o.instruments) {
    const DeskRun at = run_desk(bundles, n, all, held, 0, o);
    fit_line({c.asked, at}, c.fixed_bytes, c.bytes_per_instrument);
    n = line_max(c.fixed_bytes, c.bytes_per_instrument, room, o.max_instruments_limit);
  }
  verify_max(bundles, n, all, cap_room, o, c);
}

// The fit (see the header): small desks, the ladder, the asked universe and the maximum verified
// under the cap, with copied instruments beyond `distinct_instruments`.
void measure_fit(const std::vector<Bundle>& bundles, const DeskCapacityOptions& o, double room,
                 uint64_t cap_room, DeskCapacity& c) {
  const uint64_t held = held_bytes(c);
  const int64_t distinct = o.distinct_instruments;
  std::vector<int64_t> sizes = o.fit_instruments;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  for (int64_t n : sizes) c.fit_runs.push_back(run_desk(bundles, n, distinct, held, 0, o));
  const auto refit = [&] {
    fit_line(c.fit_runs, c.fixed_bytes, c.bytes_per_instrument);
    return line_max(c.fixed_bytes, c.bytes_per_instrument, room, o.max_instruments_limit);
  };
  int64_t n = refit();
  // The ladder: the forwards' peak may bend upwards beyond small desks (the models' batches
  // overlapping in time), so measure up to 1/8 of the prediction (uncapped: an eighth of the
  // room at most).
  while (c.fit_runs.back().instruments * 8 < n &&
         c.fit_runs.back().instruments * 4 <= o.max_instruments_limit) {
    c.fit_runs.push_back(
        run_desk(bundles, c.fit_runs.back().instruments * 4, distinct, held, 0, o));
    n = refit();
  }
  c.probe = c.fit_runs.back();
  c.asked_predicted_bytes = line_at(c.fixed_bytes, c.bytes_per_instrument, o.instruments);
  // The asked universe, under the cap: does it fit?
  try {
    c.asked = run_desk(bundles, o.instruments, distinct, held, cap_room, o);
    c.asked_fits = static_cast<double>(c.asked.bytes) <= room;
  } catch (const OutOfMemoryError&) {
    c.asked = refused_run(o.instruments);
    c.asked_fits = false;
  }
  const DeskRun& per = c.asked.refused ? c.fit_runs.back() : c.asked;
  c.state_bytes_per_instrument = per.state_bytes / static_cast<uint64_t>(per.instruments);
  // The asked universe, measured, is a point of the line too.
  if (!c.asked.refused && c.asked.instruments > c.fit_runs.back().instruments) {
    std::vector<DeskRun> runs = c.fit_runs;
    runs.push_back(c.asked);
    fit_line(runs, c.fixed_bytes, c.bytes_per_instrument);
    n = line_max(c.fixed_bytes, c.bytes_per_instrument, room, o.max_instruments_limit);
  }
  // The asked universe ran under the cap: verified already, and a lower bound of the maximum.
  if (!c.asked.refused && n <= o.instruments) {
    n = o.instruments;
    c.verified = c.asked;
    c.verify_attempts = 1;
    c.max_instruments = n;
    return;
  }
  verify_max(bundles, n, distinct, cap_room, o, c);
}

}  // namespace

void to_json(nlohmann::json& j, const DeskRun& r) {
  FOXHUNT_JSON_FIELDS(j, r, instruments, bytes, state_bytes, forward_peak_bytes, overlap_bytes,
                      refused, seconds, distinct);
}

nlohmann::json DeskCapacity::to_json() const {
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, *this, budget_source, budget_bytes, headroom_required_bytes, models,
                      weights_bytes, derived_bytes, method, asked, probe, fit_runs,
                      state_bytes_per_instrument, bytes_per_instrument, fixed_bytes,
                      asked_predicted_bytes, predicted_bytes, predicted_error_pct, max_instruments,
                      verified, verify_attempts, asked_fits, ok, seconds);
  return j;
}

std::string DeskCapacity::table() const {
  const auto hb = [](double b) { return human_bytes(b); };
  std::string out =
      asked.refused
          ? fmt::format(
                "desk of {} instruments: refused under the cap (the fitted line predicts "
                "{}): DOES NOT FIT",
                asked.instruments, hb(double(asked_predicted_bytes)))
          : fmt::format(
                "desk of {} instruments: {} (weights {} + {} kernel forms, state {} = {} per "
                "instrument, forwards peak {}): {}",
                asked.instruments, hb(double(asked.bytes)), hb(double(weights_bytes)),
                hb(double(derived_bytes)), hb(double(asked.state_bytes)),
                hb(double(state_bytes_per_instrument)), hb(double(asked.forward_peak_bytes)),
                asked_fits ? "fits" : "DOES NOT FIT");
  out += fmt::format(" the budget {} ({}) with {} headroom\n", hb(double(budget_bytes)),
                     budget_source, hb(double(headroom_required_bytes)));
  out += fmt::format(
      "max_instruments: {} ({} per instrument + {} fixed, {}; verified under the cap: {} in {} "
      "attempt{}; the line predicted {}, {:+.1f}%)\n",
      max_instruments, hb(bytes_per_instrument), hb(fixed_bytes),
      method == "fit" ? fmt::format("fitted on {} desks up to {} instruments", fit_runs.size(),
                                    probe.instruments)
                      : std::string("exhaustive"),
      hb(double(verified.bytes)), verify_attempts, verify_attempts == 1 ? "" : "s",
      hb(double(predicted_bytes)), predicted_error_pct);
  out += fmt::format("measured in {:.1f} s\n", seconds);
  return out;
}

DeskCapacity measure_desk_capacity(const std::vector<Bundle>& bundles,
                                   const DeskCapacityOptions& o) {
  FOXHUNT_CHECK(!bundles.empty(), kDeskCapacityComponent, "capacity: expected at least one bundle");
  FOXHUNT_CHECK(o.instruments >= 2, kDeskCapacityComponent, "instruments: expected >= 2, got ",
                o.instruments);
  FOXHUNT_CHECK(!o.exhaustive || (o.probe_instruments >= 1 && o.probe_instruments < o.instruments),
                kDeskCapacityComponent, "probe instruments: expected in [1, ", o.instruments,
                "), got ", o.probe_instruments);
  FOXHUNT_CHECK(
      o.exhaustive || (!o.fit_instruments.empty() &&
                       *std::min_element(o.fit_instruments.begin(), o.fit_instruments.end()) >= 1),
      kDeskCapacityComponent, "fit instruments: expected desk sizes >= 1, got ",
      o.fit_instruments.size(), " sizes");
  FOXHUNT_CHECK(o.distinct_instruments >= 1, kDeskCapacityComponent,
                "distinct instruments: expected >= 1, got ", o.distinct_instruments);
  FOXHUNT_CHECK(o.timestamps >= 1, kDeskCapacityComponent, "timestamps: expected >= 1, got ",
                o.timestamps);
  FOXHUNT_CHECK(o.budget.bytes > o.headroom_bytes, kDeskCapacityComponent, "budget ",
                human_bytes(double(o.budget.bytes)), " (", o.budget.source,
                "): expected more than the headroom ", human_bytes(double(o.headroom_bytes)));
  for (const auto& b : bundles)
    FOXHUNT_CHECK(models::module_device(b.model->module()).is_cpu(), kDeskCapacityComponent,
                  "capacity is measured on the CPU ledger; model '", b.name(), "' is on ",
                  models::module_device(b.model->module()).str());
  memory::install_ledger();
  const auto t0 = std::chrono::steady_clock::now();
  DeskCapacity c;
  c.budget_source = o.budget.source;
  c.budget_bytes = o.budget.bytes;
  c.headroom_required_bytes = o.headroom_bytes;
  for (const auto& b : bundles) {
    c.models.push_back(b.name());
    c.weights_bytes += static_cast<uint64_t>(b.model->parameter_bytes() + b.model->buffer_bytes());
  }
  // The serving kernels' forms of the weights (transposed copies, folded biases) are built by
  // a model's first forwards and kept with it: a priming desk builds them, so that every measured
  // desk starts from the same live bytes, and they count with the weights.
  {
    DeskCapacityOptions quiet = o;
    quiet.progress = nullptr;
    const uint64_t before = memory::live_bytes();
    // A batch of several instruments: some forms are built only past batch 1 (the transposed
    // weights of the batched kernels).
    const int64_t n = std::max<int64_t>(8, o.distinct_instruments);
    (void)run_desk(bundles, n, n, 0, 0, quiet);
    const uint64_t after = memory::live_bytes();
    // What the models' steps keep under their scopes (also when an earlier measurement in this
    // process built the forms), or at least what the priming desk left live.
    uint64_t kept = 0;
    for (const auto& b : bundles) kept += memory::scope_stats(model_scope(b.name())).live_bytes;
    c.derived_bytes = std::max(kept, after > before ? after - before : 0);
  }
  const uint64_t held = held_bytes(c);
  const double room = static_cast<double>(o.budget.bytes - o.headroom_bytes);
  // The cap of the verifications: the room less what is live before the desk.
  const auto cap_room =
      static_cast<uint64_t>(room) - std::min<uint64_t>(held, static_cast<uint64_t>(room));
  c.method = o.exhaustive ? "exhaustive" : "fit";
  if (o.exhaustive)
    measure_exhaustive(bundles, o, room, cap_room, c);
  else
    measure_fit(bundles, o, room, cap_room, c);
  c.predicted_bytes = line_at(c.fixed_bytes, c.bytes_per_instrument, c.max_instruments);
  if (c.max_instruments >= 1 && c.verified.bytes > 0)
    c.predicted_error_pct = 100.0 *
                            (static_cast<double>(c.predicted_bytes) - double(c.verified.bytes)) /
                            static_cast<double>(c.verified.bytes);
  c.ok = c.asked_fits && c.max_instruments >= 1;
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

std::vector<Bundle> default_bundles(uint64_t seed) {
  data::SyntheticOptions synth;
  synth.seed = seed;
  synth.bars = 2000;
  const data::MarketDataset ds(data::generate_synthetic(synth));
  torch::manual_seed(seed);
  std::vector<Bundle> out;
  for (const auto& name : models::model_names()) {
    Bundle b;
    b.model = std::shared_ptr<models::Model>(models::make_model(name));
    b.normalizer = ds.normalizer();
    b.warmup = ds.options().warmup;
    b.data = fingerprint(ds.series());
    b.data.source = "synthetic(seed=" + std::to_string(seed) + ")";
    b.training = {{"note", "untrained default model"}};
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace foxhunt::serving
