#include "foxhunt/serving/desk_capacity.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/universe.h"

namespace foxhunt::serving {

namespace {

constexpr const char* kDeskCapacityComponent = "desk";

// One desk of `n` instruments through its warm-up and `timestamps` more; under a ledger cap of
// `room` bytes above what is live now when `room` > 0.
DeskRun run_desk(const std::vector<Bundle>& bundles, int64_t n, uint64_t weights, uint64_t room,
                 const DeskCapacityOptions& o) {
  DeskRun r;
  r.instruments = n;
  int64_t steps = 0;  // Desk::warmup_bars() + the measured timestamps
  for (const auto& b : bundles) steps = std::max(steps, b.warmup + b.model->spec().window + 1);
  steps += o.timestamps;
  if (o.progress)
    o.progress("desk: " + std::to_string(n) + " instruments" +
               (room > 0 ? ", verified under the cap" : ", measured") + " (" +
               std::to_string(n * steps) + " instrument-bars)");
  const auto t0 = std::chrono::steady_clock::now();
  memory::reset_peak();
  const uint64_t live0 = memory::live_bytes();
  {
    std::optional<memory::LimitGuard> cap;
    if (room > 0) cap.emplace(live0 + memory::external_bytes() + room);
    try {
      Desk desk(bundles);
      SyntheticUniverse universe(o.seed, n);
      for (int64_t i = 0; i < steps; ++i) {
        auto bars = universe.next();
        desk.on_timestamp(universe.timestamp(), bars);
      }
      r.state_bytes = desk.state_bytes();
    } catch (...) {
      memory::rethrow_if_oom(std::current_exception());  // typed refusal, or the original
      throw;
    }
  }
  r.forward_peak_bytes = memory::peak_bytes() - live0;
  r.bytes = weights + r.state_bytes + r.forward_peak_bytes;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace

void to_json(nlohmann::json& j, const DeskRun& r) {
  FOXHUNT_JSON_FIELDS(j, r, instruments, bytes, state_bytes, forward_peak_bytes, refused, seconds);
}

nlohmann::json DeskCapacity::to_json() const {
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, *this, budget_source, budget_bytes, headroom_required_bytes, models,
                      weights_bytes, asked, probe, state_bytes_per_instrument, bytes_per_instrument,
                      max_instruments, verified, verify_attempts, asked_fits, ok, seconds);
  return j;
}

std::string DeskCapacity::table() const {
  return fmt::format(
             "desk of {} instruments: {} (weights {}, state {} = {} per instrument, "
             "forwards peak {}): {} the budget {} ({}) with {} headroom\n",
             asked.instruments, human_bytes(static_cast<double>(asked.bytes)),
             human_bytes(static_cast<double>(weights_bytes)),
             human_bytes(static_cast<double>(asked.state_bytes)),
             human_bytes(static_cast<double>(state_bytes_per_instrument)),
             human_bytes(static_cast<double>(asked.forward_peak_bytes)),
             asked_fits ? "fits" : "DOES NOT FIT", human_bytes(double(budget_bytes)), budget_source,
             human_bytes(double(headroom_required_bytes))) +
         fmt::format(
             "max_instruments: {} ({} per instrument measured; verified under the cap: {} in "
             "{} attempt{})\n",
             max_instruments, human_bytes(bytes_per_instrument),
             human_bytes(static_cast<double>(verified.bytes)), verify_attempts,
             verify_attempts == 1 ? "" : "s");
}

DeskCapacity measure_desk_capacity(const std::vector<Bundle>& bundles,
                                   const DeskCapacityOptions& o) {
  FOXHUNT_CHECK(!bundles.empty(), kDeskCapacityComponent, "capacity: expected at least one bundle");
  FOXHUNT_CHECK(o.instruments >= 2, kDeskCapacityComponent, "instruments: expected >= 2, got ",
                o.instruments);
  FOXHUNT_CHECK(o.probe_instruments >= 1 && o.probe_instruments < o.instruments,
                kDeskCapacityComponent, "probe instruments: expected in [1, ", o.instruments,
                "), got ", o.probe_instruments);
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
  c.probe = run_desk(bundles, o.probe_instruments, c.weights_bytes, 0, o);
  c.asked = run_desk(bundles, o.instruments, c.weights_bytes, 0, o);
  c.state_bytes_per_instrument = c.asked.state_bytes / static_cast<uint64_t>(o.instruments);
  c.bytes_per_instrument =
      std::max(1.0, (static_cast<double>(c.asked.bytes) - static_cast<double>(c.probe.bytes)) /
                        static_cast<double>(o.instruments - o.probe_instruments));
  const double room = static_cast<double>(o.budget.bytes - o.headroom_bytes);
  c.asked_fits = static_cast<double>(c.asked.bytes) <= room;
  // Predicted from two runs (the line through them), refined once by an uncapped run at the
  // prediction (the forwards' peak grows faster than linearly once the four models' batches
  // overlap in time), then verified under the cap; each refusal lowers it by 5%.
  const auto predict = [&](const DeskRun& a, const DeskRun& b) {
    const double slope = std::max(1.0, (static_cast<double>(b.bytes) - double(a.bytes)) /
                                           static_cast<double>(b.instruments - a.instruments));
    const double fixed = static_cast<double>(a.bytes) - slope * double(a.instruments);
    const auto n = static_cast<int64_t>(std::floor((room - fixed) / slope));
    return std::clamp<int64_t>(n, 0, o.max_instruments_limit);
  };
  int64_t n = predict(c.probe, c.asked);
  if (n > o.instruments) {
    const DeskRun at = run_desk(bundles, n, c.weights_bytes, 0, o);
    n = predict(c.asked, at);
  }
  const auto cap_room = static_cast<uint64_t>(room) -
                        std::min<uint64_t>(c.weights_bytes, static_cast<uint64_t>(room));
  while (n >= 1 && c.verify_attempts < 12) {
    ++c.verify_attempts;
    try {
      c.verified = run_desk(bundles, n, c.weights_bytes, cap_room, o);
      break;
    } catch (const OutOfMemoryError&) {
      c.verified = DeskRun{};
      c.verified.instruments = n;
      c.verified.refused = true;
      n = std::min(n - 1, static_cast<int64_t>(std::floor(static_cast<double>(n) * 0.95)));
    }
  }
  c.max_instruments = c.verified.refused || c.verified.instruments == 0 ? 0 : n;
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
