#include "foxhunt/plan/planner.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "foxhunt/core/fields.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/core/units.h"
#include "foxhunt/memory/device_memory.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/summary.h"
#include "foxhunt/train/trainer_step.h"
#include "probe_step.h"

namespace foxhunt::plan {

// The ledger, scopes and device counters this area measures with.
using memory::clear_last_refusal;
using memory::cuda_empty_cache;
using memory::cuda_memory_available;
using memory::cuda_stats_backend;
using memory::device_in_use_bytes;
using memory::device_live_bytes;
using memory::device_peak_bytes;
using memory::device_reset_peak;
using memory::DeviceLimitGuard;
using memory::external_bytes;
using memory::MemoryDevice;
using memory::MemoryScope;
using memory::translate_oom;

namespace {

// The reference system's per-element activation factor: 4 bytes (fp32) x 1.2.
constexpr double kReferenceBytesPerElement = 4.0 * 1.2;
// The probe ladder stops once a hidden steeper instant could add at most this fraction.
constexpr double kLadderTolerance = 0.05;
// No plan goes beyond this many samples, whatever the fit says (keeps the arithmetic finite).
constexpr std::int64_t kBatchCeiling = std::int64_t{1} << 40;

std::string hb(std::uint64_t bytes) {
  return human_bytes(static_cast<double>(bytes));
}

std::int64_t floor_pow2(std::int64_t v) {
  std::int64_t p = 1;
  while (p <= v / 2) p *= 2;
  return p;
}

double pct_error(std::uint64_t value, std::uint64_t truth) {
  if (truth == 0) return 0.0;
  return 100.0 * (static_cast<double>(value) - static_cast<double>(truth)) /
         static_cast<double>(truth);
}

void check_options(const PlanOptions& o) {
  FOXHUNT_CHECK(o.budget.bytes > 0, "planner", "budget: expected > 0 bytes, got 0");
  FOXHUNT_CHECK(o.margin >= 0.0 && o.margin < 1.0, "planner",
                "margin: expected a fraction in [0, 1), got ", o.margin);
  FOXHUNT_CHECK(o.min_batch >= 1, "planner", "min-batch: expected >= 1, got ", o.min_batch);
  FOXHUNT_CHECK(o.max_batch >= o.min_batch, "planner", "max-batch: expected >= min-batch (",
                o.min_batch, "), got ", o.max_batch);
  FOXHUNT_CHECK(o.train.seq_len >= 0, "planner", "seq-len: expected >= 0 (0 = model default), got ",
                o.train.seq_len);
  FOXHUNT_CHECK(o.ladder_ratio >= 0, "planner", "ladder ratio: expected >= 0, got ",
                o.ladder_ratio);
  const MemoryDevice dev = o.train.device.resolved();
  FOXHUNT_CHECK(!dev.is_cuda() || cuda_memory_available(), "planner", "device ", o.train.device,
                ": expected a CUDA device, found none (", cuda_stats_backend(), ")");
  std::set<std::int64_t> distinct;
  for (auto b : o.probe_batches) {
    FOXHUNT_CHECK(b >= 1, "planner", "probe batch: expected >= 1, got ", b);
    distinct.insert(b);
  }
  FOXHUNT_CHECK(distinct.size() >= 2, "planner",
                "probe batches: expected at least two distinct sizes, got ", distinct.size());
}

// The tags of the probe model at batch `b`, activations from the fit; returns the largest.
TagBytes largest_tag(const PlanResult& r, std::int64_t b) {
  const std::uint64_t predicted = r.predict(b);
  TrainingFootprint fp = r.fixed;
  const std::uint64_t held = fp.fixed_bytes + fp.external_bytes;
  fp.activation_bytes = predicted > held ? predicted - held : 0;
  TagBytes best;
  for (const auto& t : fp.tags())
    if (t.bytes > best.bytes || best.tag.empty()) best = t;
  return best;
}

[[noreturn]] void throw_does_not_fit(const PlanResult& r, std::int64_t b, const std::string& why) {
  const TagBytes tag = largest_tag(r, b);
  const std::uint64_t needed = r.predict(b);
  throw PlanError(foxhunt::detail::cat("batch ", b, " of ", r.model, " does not fit the budget of ",
                                       hb(r.budget_bytes), " (", r.budget_bytes, " B, ",
                                       r.budget_source, "): ", why, "; predicted peak ", hb(needed),
                                       " (", needed, " B); largest tag ", tag.tag, " = ",
                                       hb(tag.bytes), " (", tag.bytes, " B)"),
                  tag.tag, tag.bytes, needed, r.budget_bytes);
}

}  // namespace

// ---- verification ----------------------------------------------------------------------------

VerifyAttempt verify_batch(const std::string& model, const TrainConfig& config, std::int64_t batch,
                           std::uint64_t budget_bytes, const nlohmann::json& model_options) {
  FOXHUNT_CHECK(batch >= 1, "planner", "verify batch: expected >= 1, got ", batch);
  FOXHUNT_CHECK(budget_bytes > 0, "planner", "verify budget: expected > 0 bytes, got 0");
  VerifyAttempt a;
  a.batch = batch;
  const MemoryDevice dev = config.device.resolved();
  if (dev.is_cuda())
    cuda_empty_cache();  // the CUDA cap bounds reserved bytes: start from allocated
  const std::uint64_t base = device_live_bytes(dev);
  const std::uint64_t in_use0 = device_in_use_bytes(dev);
  const std::uint64_t external0 = external_bytes();
  clear_last_refusal();
  std::uint64_t peak = 0, external = 0;
  try {
    // The cap covers what is in use now plus the budget. On the CPU the trainer's own host
    // buffers (declared as external bytes) count against it like its tensors.
    DeviceLimitGuard cap(dev, in_use0 + budget_bytes);
    device_reset_peak(dev);
    translate_oom([&] {
      torch::manual_seed(config.seed);
      std::unique_ptr<train::TrainerStep> step;
      {
        MemoryScope p(memory::tag_scope(model, memory::Tag::kParameters));
        step = detail::make_step(model, config, model_options);
      }
      external = dev.is_cuda() ? 0 : external_bytes() - external0;
      peak = std::max(peak, detail::beyond(device_peak_bytes(dev), base));
      const auto buckets = detail::make_comm_buckets(step->model(), config, model);
      // A first step at batch 1 creates the gradients and the optimizer state; the step at
      // `batch` is then the steady state, whose peak bounds that of a first step at `batch`
      // (gradients appear during its backward, the state during its optimizer.step()).
      for (int i = 0; i < 2; ++i) {
        const auto s = detail::measured_step(
            *step, model, i == 0 ? 1 : batch,
            i == 0 ? memory::Tag::kGradients : memory::Tag::kActivations, dev);
        peak = std::max(peak, detail::beyond(s.peak, base));
      }
    });
    a.ok = true;
  } catch (const OutOfMemoryError& e) {
    a.ok = false;
    a.error = e.what();
    // The refused allocation never happened: the peak is what was live when it was refused.
    peak = std::max(peak, detail::beyond(device_peak_bytes(dev), base));
  }
  a.peak_bytes = peak + external;
  return a;
}

// ---- PlanResult ------------------------------------------------------------------------------

std::uint64_t PlanResult::predict(std::int64_t b) const {
  const double x = static_cast<double>(b);
  const double v = std::max({fit_a + fit_c * x, step_fit_a + step_fit_c * x,
                             static_cast<double>(construction_peak_bytes + fixed.external_bytes)});
  if (v <= 0) return 0;
  if (v >= static_cast<double>(std::numeric_limits<std::uint64_t>::max() / 2))
    return std::numeric_limits<std::uint64_t>::max() / 2;
  return static_cast<std::uint64_t>(std::ceil(v));
}

std::uint64_t PlanResult::reference_estimate(std::int64_t b) const {
  const double fixed_overhead =
      static_cast<double>(fixed.parameter_bytes + fixed.gradient_bytes + fixed.optimizer_bytes);
  return static_cast<std::uint64_t>(std::llround(
      fixed_overhead + static_cast<double>(b) * static_cast<double>(input_elements_per_sample) *
                           kReferenceBytesPerElement));
}

double PlanResult::predicted_error_pct() const {
  return verified ? pct_error(predicted_peak_bytes, verified_peak_bytes) : 0.0;
}

double PlanResult::reference_error_pct() const {
  return verified ? pct_error(reference_peak_bytes, verified_peak_bytes) : 0.0;
}

nlohmann::json PlanResult::to_json() const {
  nlohmann::json probes_json = nlohmann::json::array();
  for (const auto& p : probes) {
    nlohmann::json& row = probes_json.emplace_back();
    FOXHUNT_JSON_FIELDS(row, p, batch, activation_bytes, step_bytes, peak_bytes);
  }
  nlohmann::json attempts_json = nlohmann::json::array();
  for (const auto& a : attempts) {
    nlohmann::json& row = attempts_json.emplace_back();
    FOXHUNT_JSON_FIELDS(row, a, batch, ok, peak_bytes, error);
  }
  nlohmann::json j = {
      {"step", to_string(train.step)},
      {"step_description", fixed.step},
      {"device", fixed.device},
      {"optimizer", to_string(train.optimizer)},
      {"fixed", fixed.to_json()},
      {"probes", probes_json},
      {"fit",
       {{"a_bytes", fit_a}, {"c_bytes_per_sample", fit_c}, {"min_probe_batch", fit_min_batch}}},
      {"step_fit", {{"a_bytes", step_fit_a}, {"c_bytes_per_sample", step_fit_c}}},
      {"attempts", attempts_json},
      {"reference_error_pct", reference_error_pct()},
      {"predicted_error_pct", predicted_error_pct()}};
  FOXHUNT_JSON_FIELDS(j, *this, model, seq_len, has_time_axis, budget_bytes, budget_source, margin,
                      pow2, min_batch, max_batch, construction_peak_bytes,
                      input_elements_per_sample, budget_batch, chosen_batch, limited_by, verified,
                      reference_peak_bytes, predicted_peak_bytes, verified_peak_bytes, seconds,
                      probe_seconds, verify_seconds);
  return j;
}

std::string PlanResult::report() const {
  std::ostringstream os;
  os << "plan " << model << " on " << fixed.device
     << (fixed.device == "cpu" ? " (ledger)" : " (caching allocator)") << ": "
     << to_string(train.step) << " step (" << fixed.step << "), optimizer "
     << to_string(train.optimizer) << ", ";
  if (has_time_axis)
    os << "seq-len " << seq_len;
  else
    os << "seq-len ignored (" << model << " has no time axis)";
  os << "\n";
  os << fmt::format(
      "budget {} ({} B, {}), margin {:.0f}% (prediction must stay <= {}){}\n", hb(budget_bytes),
      budget_bytes, budget_source, margin * 100.0,
      hb(static_cast<std::uint64_t>(static_cast<double>(budget_bytes) * (1 - margin))),
      pow2 ? ", power-of-two batches" : "");
  os << "fixed tags (measured after a real optimizer step; external = host buffers declared to "
        "the ledger):\n";
  for (const auto& t : fixed.tags()) {
    if (t.tag == model + "/activations" || (t.bytes == 0 && t.tag != model + "/parameters"))
      continue;
    os << fmt::format("  {:<22} {:>12} {:>14} B\n", t.tag, hb(t.bytes), t.bytes);
  }
  os << "probe steps (batch: peak beyond fixed, forward+backward / optimizer step):\n";
  for (const auto& p : probes) {
    os << fmt::format("  b={:<5} {:>12} / {}\n", p.batch, hb(p.activation_bytes), hb(p.step_bytes));
  }
  os << fmt::format(
      "fit over the probes b >= {}: forward+backward peak(b) = {:.0f} B + {:.1f} B x b\n"
      "  optimizer step peak(b) = {:.0f} B + {:.1f} B x b; build peak {}; prediction = the "
      "largest\n",
      fit_min_batch, fit_a, fit_c, step_fit_a, step_fit_c, hb(construction_peak_bytes));
  os << fmt::format("chosen batch: {} (limited by {}", chosen_batch, limited_by);
  if (limited_by == "max-batch clamp")
    os << ": the budget alone would allow " << budget_batch << "; max_batch " << max_batch
       << " stops it";
  else if (limited_by == "power-of-two rounding")
    os << " from " << std::min(budget_batch, max_batch);
  os << ")\n";
  if (verified) {
    os << fmt::format("{:<30} {:>12} {:>16} {:>10}\n", "peak at the chosen batch", "", "bytes",
                      "error");
    auto row = [&](const char* what, std::uint64_t v, const std::string& err) {
      os << fmt::format("  {:<28} {:>12} {:>16} {:>10}\n", what, hb(v), v, err);
    };
    row("reference closed form", reference_peak_bytes,
        fmt::format("{:+.1f}%", reference_error_pct()));
    row("fitted prediction", predicted_peak_bytes, fmt::format("{:+.1f}%", predicted_error_pct()));
    row("verified (real steps, cap)", verified_peak_bytes, "-");
  } else {
    os << fmt::format("  predicted peak {}, reference estimate {} (not verified)\n",
                      hb(predicted_peak_bytes), hb(reference_peak_bytes));
  }
  for (const auto& a : attempts) {
    os << fmt::format("verification: batch {} {} under a cap of {} (peak {})\n", a.batch,
                      a.ok ? "trained (steady-state step)" : "ran out of memory", hb(budget_bytes),
                      hb(a.peak_bytes));
  }
  os << fmt::format("wall time {:.2f} s (probes {:.2f} s, verification {:.2f} s)\n", seconds,
                    probe_seconds, verify_seconds);
  return os.str();
}

// ---- the planner -----------------------------------------------------------------------------

PlanResult plan_batch(const PlanOptions& o) {
  check_options(o);
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult r;
  r.model = o.model;
  r.train = o.train;
  r.budget_bytes = o.budget.bytes;
  r.budget_source = o.budget.source;
  r.margin = o.margin;
  r.pow2 = o.pow2;
  r.min_batch = o.min_batch;
  r.max_batch = o.max_batch;

  const double allowed = static_cast<double>(o.budget.bytes) * (1.0 - o.margin);
  // Least squares of (b, fixed + phase peak) over the probes with b >= the largest/8, for the
  // forward+backward phase and for the optimizer step.
  const auto fit = [&r] {
    std::int64_t largest = 0;
    for (const auto& p : r.probes) largest = std::max(largest, p.batch);
    r.fit_min_batch = std::max<std::int64_t>(1, largest / 8);
    const auto line = [&r](auto phase_bytes, double& a, double& c) {
      LineSums s;
      for (const auto& p : r.probes)
        if (p.batch >= r.fit_min_batch)
          s.add(static_cast<double>(p.batch),
                static_cast<double>(r.fixed.fixed_bytes + r.fixed.external_bytes + phase_bytes(p)));
      FOXHUNT_INTERNAL_ASSERT(s.spread() > 0, "the fit needs two distinct probe batches");
      c = s.slope();
      a = s.intercept(c);
    };
    line([](const ProbeResult& p) { return p.activation_bytes; }, r.fit_a, r.fit_c);
    line([](const ProbeResult& p) { return p.step_bytes; }, r.step_fit_a, r.step_fit_c);
  };
  // The largest batch both lines allow (before clamps; kBatchCeiling when unbounded).
  const auto batch_by_budget = [&]() -> std::int64_t {
    double v = static_cast<double>(kBatchCeiling);
    for (auto [a, c] : {std::pair{r.fit_a, r.fit_c}, std::pair{r.step_fit_a, r.step_fit_c}})
      if (c > 0) v = std::min(v, std::floor((allowed - a) / c));
    if (v >= static_cast<double>(kBatchCeiling)) return kBatchCeiling;
    return std::max<std::int64_t>(0, static_cast<std::int64_t>(v));
  };

  // 1-2. Probe steps on one model instance (freed before the verification), then the ladder.
  {
    TrainConfig warm = o.train;
    warm.batch = 1;
    TrainingProbe probe(o.model, warm, o.model_options, 1);
    r.fixed = probe.footprint();
    r.construction_peak_bytes = probe.construction_peak_bytes();
    r.input_elements_per_sample = probe.input_elements_per_sample();
    std::vector<std::int64_t> first = o.probe_batches;
    std::sort(first.begin(), first.end());
    first.erase(std::unique(first.begin(), first.end()), first.end());
    for (auto b : first) r.probes.push_back(probe.probe(b));
    fit();
    while (o.ladder_ratio > 0) {
      const std::int64_t target = std::min(batch_by_budget(), o.max_batch);
      const std::int64_t largest = r.probes.back().batch;
      if (largest >= target / o.ladder_ratio) break;
      // Batch-independent bytes beyond the fixed tags at the dominant instant. Every instant
      // holds the fixed tags (but for the gradients, below), so an instant that overtakes it
      // beyond `largest` can add at most excess / (c * largest) of the per-sample bytes: stop
      // once that is below 5%.
      // The trainers zero their gradients with set_to_none (LibTorch's default), so an instant
      // inside a step may hold the fixed tags without the gradients: bound from that floor.
      const double floor_bytes =
          static_cast<double>(r.fixed.fixed_bytes + r.fixed.external_bytes -
                              std::min(r.fixed.gradient_bytes, r.fixed.fixed_bytes));
      const double excess = r.fit_a - floor_bytes;
      if (r.fit_c > 0 && excess <= kLadderTolerance * r.fit_c * static_cast<double>(largest)) break;
      r.probes.push_back(probe.probe(4 * largest));
      fit();
    }
    r.fixed.input_bytes = probe.footprint().input_bytes;
    r.fixed.leaked_bytes = probe.footprint().leaked_bytes;
  }
  r.seq_len = r.fixed.seq_len;
  r.has_time_axis = r.seq_len > 0;
  const auto t_probed = std::chrono::steady_clock::now();
  r.probe_seconds = std::chrono::duration<double>(t_probed - t0).count();

  // 3. The largest batch the prediction allows.
  const auto fits = [&](std::int64_t b) { return static_cast<double>(r.predict(b)) <= allowed; };
  if (!fits(o.min_batch)) {
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    throw_does_not_fit(r, o.min_batch,
                       o.margin > 0
                           ? foxhunt::detail::cat("the prediction exceeds budget x (1 - margin) = ",
                                                  hb(static_cast<std::uint64_t>(allowed)))
                           : std::string("the prediction exceeds the budget"));
  }
  std::int64_t b_fit = std::max(o.min_batch, batch_by_budget());
  while (b_fit > o.min_batch && !fits(b_fit)) --b_fit;  // the floors, rounding at the boundary
  r.budget_batch = b_fit;
  std::int64_t b = std::min(b_fit, o.max_batch);
  r.limited_by = b_fit > o.max_batch ? "max-batch clamp" : "budget";
  if (o.pow2) {
    const std::int64_t p = floor_pow2(b);
    if (p < b) {
      if (p < o.min_batch) {
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        throw_does_not_fit(
            r, o.min_batch,
            foxhunt::detail::cat("no power of two in [min-batch ", o.min_batch, ", ", b, "] fits"));
      }
      b = p;
      r.limited_by = "power-of-two rounding";
    }
  }

  // 4. Verify under the enforced cap; halve on OutOfMemoryError.
  if (o.verify) {
    for (;;) {
      VerifyAttempt a = verify_batch(o.model, r.train, b, o.budget.bytes, o.model_options);
      r.attempts.push_back(a);
      if (a.ok) {
        r.verified = true;
        r.verified_peak_bytes = a.peak_bytes;
        break;
      }
      if (b <= o.min_batch) {
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        throw_does_not_fit(r, b, "its training step ran out of memory under the cap: " + a.error);
      }
      const std::int64_t half = std::max(o.min_batch, b / 2);
      // The fit missed a steeper instant between its probes and b (e.g. PPO's rollout, which
      // grows with the batch only beyond n_envs x n_steps). Probe at b/2 -- below the failed
      // batch, so it fits what the cap allowed -- refit over the top rungs and choose again,
      // strictly below the failed batch; halve when the refit gives nothing better.
      std::int64_t next = half;
      const bool probed = std::any_of(r.probes.begin(), r.probes.end(),
                                      [&](const ProbeResult& p) { return p.batch == half; });
      if (!probed && half > r.probes.back().batch) {
        TrainConfig warm = o.train;
        warm.batch = 1;
        TrainingProbe probe(o.model, warm, o.model_options, 1);
        r.probes.push_back(probe.probe(half));
        std::sort(r.probes.begin(), r.probes.end(),
                  [](const ProbeResult& x, const ProbeResult& y) { return x.batch < y.batch; });
        fit();
        std::int64_t refit = std::min({batch_by_budget(), b - 1, o.max_batch});
        while (refit > half && !fits(refit)) --refit;
        if (o.pow2) refit = floor_pow2(std::max<std::int64_t>(refit, 1));
        if (refit > half) next = refit;
      }
      r.limited_by = next > half ? "verification refit" : "verification step-down";
      b = next;
    }
  }
  r.verify_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_probed).count();
  r.chosen_batch = b;
  r.train.batch = b;
  r.predicted_peak_bytes = r.predict(b);
  r.reference_peak_bytes = r.reference_estimate(b);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace foxhunt::plan
