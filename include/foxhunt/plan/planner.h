#pragma once
/// \file planner.h
/// Batch planner: the largest training batch of a model that fits a memory budget, measured and
/// then verified under the enforced cap, so a returned plan never runs out of memory.
/// Torch-free.
///
/// The step measured is the trainer's own (TrainConfig::step = StepKind::kTrainer, default;
/// train/trainer_step.h): the DQN's update with its target network and replay buffer, PPO's
/// minibatch over a rollout on the device, the forecast trainer's step. Host buffers the trainer
/// declares (replay buffer, environments) are external bytes: part of the fixed bytes of the fit
/// and of every prediction, and counted by the cap in the verification.
///
/// Method (ARCHITECTURE.md, "Memory accounting"):
///  1. Probe: build the trainer once (plan::TrainingProbe), run one real step at
///     batch 1 (gradients and optimizer state come into being), then one probe step at each of
///     `probe_batches` (default 1, 2, 4, 8). Each probe gives the peak of batch + forward +
///     backward (grows with the batch) and the peak of optimizer.step() (does not).
///  2. Fit peak(b) = a + c*b by least squares over the forward+backward peaks (fixed bytes
///     included, so a ~ fixed + per-step constants, c = activation bytes per sample), and a
///     second line the same way over the optimizer-step peaks (fixed + the step's temporaries
///     + the batch, which is still alive). The prediction is the larger of the two lines and
///     the construction peak: at tiny batches the optimizer step (Adam's temporaries) can be the
///     peak, at larger ones forward+backward always is.
///     Why a probe ladder: the true peak is the maximum over the instants of a step of
///     (bytes live then), each linear in b, so peak(b) is convex and piecewise linear. At tiny
///     batches an instant dominated by batch-independent temporaries (e.g. the weight-gradient
///     buffer of the widest layer: 128 KiB for dqn) wins with a small slope; at large batches
///     the instant holding the most activations wins with a larger slope (dqn: ~1.5 KiB/sample
///     below b ~ 100, ~2.8 KiB/sample above). A line through b = 1..8 then under-predicts a
///     4 GB plan by ~40%. So the planner climbs a probe ladder: it adds a probe at four times
///     the largest one and refits over the probes with b >= largest/8 (1, 2, 4, 8 before the
///     ladder, then its top two rungs: probes are deterministic, two points pin a line), until
///     either the largest probe b_L reaches 1/ladder_ratio (default 8) of the batch the fit
///     allows, or the fit's batch-independent bytes beyond the fixed tags, e = a - fixed, are
///     at most 5% of c * b_L. The second test bounds the error: every instant holds the fixed
///     tags, so an instant that overtakes the fitted one beyond b_L has a slope higher by at
///     most e / b_L, and adds at most e / (c * b_L) of the per-sample bytes at any larger b.
///     mamba2 and tft stop at b = 8 (their activations dwarf every constant); dqn and ppo climb
///     to b = 512 (crossover near b = 100), which costs them a few tens of milliseconds.
///  3. Choose the largest b in [min_batch, max_batch] with prediction <= budget * (1 - margin),
///     rounded down to a power of two when asked.
///  4. Verify: with memory::LimitGuard at (live bytes before planning) + budget, build a fresh
///     model and optimizer, run one training step at batch 1 (creates the gradients and the
///     optimizer state) and then one at b: the steady state, whose peak bounds a first step at b
///     (there the gradients appear during backward and the state during optimizer.step(), never
///     all at once with the activations). On foxhunt::OutOfMemoryError probe at b/2 (which the cap
///     allowed), refit over the top rungs and verify the refit's batch, strictly below b
///     ("verification refit"), or halve b when the refit gives no more than b/2 (a power of two
///     stays one; "verification step-down"), down to min_batch; the verified peak is the ledger's
///     peak over the whole verification, construction included.
///  5. Beside it the reference system's closed-form estimate: fixed (parameters + gradients +
///     optimizer state) + b x seq x features x 4 B x 1.2, where seq x features is the number of
///     input elements of one sample (all input tensors; seq = 1 for models without a time axis).
///
/// Batch 1 not fitting (its prediction above budget * (1 - margin), or its verification running
/// out of memory) is a PlanError naming the largest tag at batch 1 and its bytes.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/plan/footprint.h"

namespace foxhunt::plan {

/// The plan is impossible: even the smallest allowed batch does not fit the budget. Carries the
/// largest tag at that batch (e.g. "tft/activations") and its bytes. An OutOfMemoryError, so the
/// CLI exits 1.
class PlanError : public OutOfMemoryError {
 public:
  /// `tag` with `tag_bytes` is the largest line of a footprint of `needed` bytes against `budget`.
  PlanError(const std::string& message, std::string tag, std::uint64_t tag_bytes,
            std::uint64_t needed, std::uint64_t budget)
      : OutOfMemoryError("planner", message, needed, needed, budget),
        tag_(std::move(tag)),
        tag_bytes_(tag_bytes) {}
  /// The largest tag, e.g. "dqn/optimizer".
  const std::string& tag() const noexcept { return tag_; }
  /// Its bytes.
  std::uint64_t tag_bytes() const noexcept { return tag_bytes_; }

 private:
  std::string tag_;
  std::uint64_t tag_bytes_;
};

/// What to plan.
struct PlanOptions {
  /// Registry name of the model.
  std::string model = "dqn";
  /// Model options (as for models::make_model).
  nlohmann::json model_options = nlohmann::json::object();
  /// Optimizer, window (seq_len 0 = model default) and seed; `batch` is ignored.
  TrainConfig train;
  /// The budget (e.g. a device profile's usable bytes) and its source for reports.
  memory::Budget budget;
  /// Fraction of the budget kept free for the prediction: pick peak <= budget * (1 - margin).
  double margin = 0.1;
  /// Round the batch down to a power of two.
  bool pow2 = false;
  /// Smallest batch allowed (a plan below it is a PlanError).
  std::int64_t min_batch = 1;
  /// Largest batch allowed. The small models (dqn, ppo) would otherwise pick hundreds of
  /// thousands of samples on a 4 GB card; the clamp keeps a plan a sensible training batch.
  std::int64_t max_batch = 65536;
  /// Batch sizes of the first probe steps (at least two distinct values).
  std::vector<std::int64_t> probe_batches = {1, 2, 4, 8};
  /// Keep quadrupling the largest probe until it is >= 1/ladder_ratio of the planned batch
  /// (0 = probe only probe_batches).
  std::int64_t ladder_ratio = 8;
  /// Run the verification under the cap (off only for measurements of the fit itself).
  bool verify = true;
};

/// One verification attempt.
struct VerifyAttempt {
  std::int64_t batch = 0;        ///< batch tried
  bool ok = false;               ///< trained two steps under the cap
  std::uint64_t peak_bytes = 0;  ///< ledger peak over the attempt (up to the refusal if !ok)
  std::string error;             ///< the OutOfMemoryError message when !ok
};

/// A plan.
struct PlanResult {
  std::string model;               ///< registry name
  TrainConfig train;               ///< as planned (batch = the chosen batch)
  std::int64_t seq_len = 0;        ///< window used (0 = the model has no time axis)
  bool has_time_axis = false;      ///< false: seq_len was ignored
  std::uint64_t budget_bytes = 0;  ///< the budget
  std::string budget_source;       ///< where it came from
  double margin = 0;               ///< as asked
  bool pow2 = false;               ///< as asked
  std::int64_t min_batch = 1;      ///< as asked
  std::int64_t max_batch = 0;      ///< as asked

  TrainingFootprint fixed;  ///< fixed tags of the probe model (after its warm step)
  std::uint64_t construction_peak_bytes = 0;  ///< peak while building the model
  std::vector<ProbeResult> probes;  ///< every probe step, in order (first ones, then the ladder)
  std::int64_t fit_min_batch = 0;   ///< the fit used the probes with batch >= this
  double fit_a = 0;                 ///< intercept of peak(b) = a + c*b (bytes)
  double fit_c = 0;                 ///< slope: activation bytes per sample
  double step_fit_a = 0;            ///< intercept of the optimizer-step line (fixed + temporaries)
  double step_fit_c = 0;  ///< its slope: the batch's bytes per sample (alive during the step)
  std::int64_t input_elements_per_sample = 0;  ///< seq x features of the reference estimate

  std::int64_t budget_batch = 0;  ///< largest batch the fit allows (before clamps and rounding)
  std::int64_t chosen_batch = 0;  ///< the plan (verified when verify was on)
  std::string limited_by;         ///< "budget", "max-batch clamp", "power-of-two rounding",
                                  ///< "verification refit" or "verification step-down"
  std::vector<VerifyAttempt> attempts;  ///< verification attempts, in order
  bool verified = false;                ///< chosen_batch trained under the cap

  std::uint64_t predicted_peak_bytes = 0;  ///< the fit's prediction at chosen_batch
  std::uint64_t reference_peak_bytes = 0;  ///< the reference closed form at chosen_batch
  std::uint64_t verified_peak_bytes = 0;   ///< measured under the cap at chosen_batch (0 if not)
  double seconds = 0;                      ///< wall time of the whole plan
  double probe_seconds = 0;                ///< of which the probe steps (ladder included)
  double verify_seconds = 0;               ///< of which the verification attempts

  /// The fit's prediction at batch `b`.
  std::uint64_t predict(std::int64_t b) const;
  /// The reference system's estimate at batch `b`.
  std::uint64_t reference_estimate(std::int64_t b) const;
  /// (predicted - verified) / verified in percent (0 when not verified).
  double predicted_error_pct() const;
  /// (reference - verified) / verified in percent (0 when not verified).
  double reference_error_pct() const;
  /// JSON with every field.
  nlohmann::json to_json() const;
  /// A human report: fixed tags, fit, the three peaks side by side with errors, the choice.
  std::string report() const;
};

/// Plans the training batch of `options.model`. Throws InputError for bad options, PlanError
/// when even min_batch does not fit.
PlanResult plan_batch(const PlanOptions& options);

/// Builds a fresh trainer (config.step) under a cap of live_bytes() + external_bytes() +
/// `budget_bytes` and runs its training step (footprint.h) at batch 1, then at `batch`; the
/// attempt's peak includes the external bytes the trainer declared; returns the attempt (ok = false
/// on an OutOfMemoryError, which is caught). Used by plan_batch and by tests to check a plan.
VerifyAttempt verify_batch(const std::string& model, const TrainConfig& config, std::int64_t batch,
                           std::uint64_t budget_bytes, const nlohmann::json& model_options = {});

}  // namespace foxhunt::plan
