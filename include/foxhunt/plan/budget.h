#pragma once
/// \file budget.h
/// Budget validator: loads every model of the registry, measures each one's serving footprint
/// with the ledger, and checks it against a per-model target, the device budget and a required
/// headroom. Torch-free.
///
/// A model's memory = parameters + buffers + the larger peak inference activations of batch 1
/// and the serving batch (default 64, the batch `foxhunt validate` checks), in eval mode under
/// c10::InferenceMode, fp32 (the only precision every model has today). Activations include the
/// input tensors. The total is the sum over the models: all of them loaded at once, each at its
/// own peak (conservative: they never run a forward at the same instant in one thread).
///
/// Units: the reference system's targets are in "MB" of 2^20 bytes (what torch's memory reports
/// divide by); here they are MiB, and bytes everywhere in JSON.
///
/// Deployment views (measured, not summed guesses): "serving" = the four models resident with
/// their serving-batch forwards running on four threads at once (the ledger's peak over that
/// run); "training" = the largest peak of any one model's trainer step (train/trainer_step.h, at
/// the training batch); "mixed" = serving + that training peak (four models serving while one
/// trains). Each passes when budget - bytes >= the required headroom. Each row also carries the
/// reference system's claimed footprint and claimed / measured.
///
/// Devices: "cpu" measures with the ledger, uncapped (an over-budget model is a FAIL row, not an
/// exception). "cuda[:N]" measures allocated bytes on the card under the budget enforced as the
/// caching allocator's memory fraction, and adds the two tags only a GPU has (device_memory.h):
/// workspace (reserved - allocated after the runs) and context (NVML used - reserved, at idle),
/// reported beside the profile's assumed context reserve. A step past the cap there ends the
/// run with foxhunt::OutOfMemoryError.
///
/// Verdicts: a model passes when memory <= target and memory <= budget; the run passes when every
/// model passes, total <= budget, budget - total >= the required headroom and every view passes.
///
/// Targets file (JSON), values in MiB (> 0), any subset of the registry's models:
///   {"targets_mib": {"dqn": 150, "tft": 200}}
/// or in bytes: {"targets_bytes": {"dqn": 157286400}} (not both). Unknown models or keys, wrong
/// types, non-positive values and unreadable or malformed files are InputError naming the file
/// and the entry.

#include <cstdint>
#include <initializer_list>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "foxhunt/core/device.h"
#include "foxhunt/core/units.h"
#include "foxhunt/memory/device_memory.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/plan/footprint.h"

namespace foxhunt::plan {

/// Default per-model serving targets in bytes on `device`: each model's catalog entry
/// (models/catalog.h: twice its fp32 batch-64 footprint measured when set, on the CPU and on
/// CUDA, where the fused CPU kernels do not run; the measurements are cited there). A change that
/// doubles a model's memory fails. (The reference system's targets, 150/200/500/200 MiB, were
/// 5-400x the measured values and could not fail; pass them with --targets to compare.)
std::map<std::string, std::uint64_t> default_targets(
    const memory::MemoryDevice& device = memory::MemoryDevice{});

/// The reference system's claimed serving footprints in bytes (its README, "MB" = MiB): dqn 6,
/// ppo 145, mamba2 164, tft 125 (its INT8 TFT); total 440 and headroom 3,656 on a 4 GB card.
std::map<std::string, std::uint64_t> reference_claims();

/// One deployment scenario checked against the budget and the required headroom.
struct DeploymentView {
  std::string name;                 ///< "serving", "training" or "mixed"
  std::string description;          ///< what is resident and running
  std::uint64_t bytes = 0;          ///< measured peak
  std::int64_t headroom_bytes = 0;  ///< budget - bytes
  bool ok = false;                  ///< headroom_bytes >= the required headroom
};

/// Parses a targets document (see the file comment) over `base` (usually default_targets()).
/// `where` names the source in errors.
std::map<std::string, std::uint64_t> targets_from_json(const nlohmann::json& j,
                                                       const std::string& where,
                                                       std::map<std::string, std::uint64_t> base);

/// Reads a targets file over default_targets(). Errors are InputError naming the file.
std::map<std::string, std::uint64_t> load_targets(
    const std::string& path, const memory::MemoryDevice& device = memory::MemoryDevice{});

/// Serving precision per model (registry name -> precision; a model absent is kFp32).
struct PrecisionMap : std::map<std::string, models::Precision> {
  using std::map<std::string, models::Precision>::map;
  /// The precision of `model`: its entry, kFp32 when it has none.
  models::Precision of(const std::string& model) const;
};

/// What to validate.
struct BudgetOptions {
  /// The budget: by default the reference card's usable bytes (Budget::of_profile).
  memory::Budget budget = memory::Budget::of_profile(memory::kReferenceProfile);
  /// Free memory required after all models: 500 MiB by default.
  std::uint64_t headroom_bytes = 500 * kMiB;
  /// Per-model targets in bytes (registry name -> bytes), over default_targets(device).
  std::map<std::string, std::uint64_t> targets;
  /// The serving batch measured beside batch 1.
  std::int64_t serving_batch = 64;
  /// Seed of the models and the synthetic batches.
  std::uint64_t seed = 42;
  /// Measure the three deployment views (serving all four at once, training, mixed).
  bool deployment_views = true;
  /// Training batch of the training and mixed views (the trainers' default, 64).
  std::int64_t training_batch = 64;
  /// Device measured: "cpu" (the ledger) or "cuda[:N]" (the caching allocator, capped).
  Device device;
  /// Serving precision per model (absent = kFp32; the TFT also has kInt8, models/tft_int8.h).
  /// Training views stay fp32: QAT trains fp32 master weights.
  PrecisionMap precision;
};

/// Parses "tft=int8" (comma-separated pairs) into a precision map; InputError naming the pair
/// for an unknown model, a precision the model lacks, or a malformed pair.
PrecisionMap parse_precisions(const std::string& text);

/// One model's line.
struct BudgetRow {
  std::string model;                                       ///< registry name
  models::Precision precision = models::Precision::kFp32;  ///< serving precision measured
  InferenceFootprint footprint;           ///< measured (runs: batch 1, serving batch)
  std::uint64_t memory_bytes = 0;         ///< parameters + buffers + max activations
  std::uint64_t target_bytes = 0;         ///< 0 = no target (a failure)
  double pct_of_budget = 0;               ///< memory / budget x 100
  double pct_of_target = 0;               ///< memory / target x 100
  bool within_target = false;             ///< memory <= target
  bool within_budget = false;             ///< memory <= budget
  bool ok = false;                        ///< both
  std::string status;                     ///< "PASS", "FAIL: over target", "FAIL: over budget", ...
  std::uint64_t claimed_bytes = 0;        ///< the reference system's claim (0 = none)
  double claimed_over_measured = 0;       ///< claimed / measured (how far the claim was off)
  std::uint64_t training_peak_bytes = 0;  ///< measured trainer-step peak at the training
                                          ///< batch (0 without the views)
};

/// The whole validation.
struct BudgetReport {
  std::string budget_source;             ///< the profile, or who gave the bytes
  Device device;                         ///< the device measured (resolved: "cpu" or "cuda:N")
  std::uint64_t enforced_cap_bytes = 0;  ///< CUDA: the allocator cap (0 on the CPU)
  /// The profile's assumed context reserve (0 with --budget-mib), beside the measured context.
  std::uint64_t profile_reserve_bytes = 0;
  /// CUDA: the workspace and context tags measured after the runs (not measured on the CPU).
  memory::DeviceOverheads overheads;
  std::uint64_t budget_bytes = 0;             ///< the budget
  std::uint64_t headroom_required_bytes = 0;  ///< as asked
  std::int64_t serving_batch = 0;             ///< as asked
  std::vector<BudgetRow> rows;                ///< one per registry model, registry order
  std::uint64_t total_bytes = 0;              ///< sum of memory_bytes
  double total_pct_of_budget = 0;             ///< total / budget x 100
  std::int64_t headroom_bytes = 0;            ///< budget - total (negative when over)
  bool total_within_budget = false;           ///< total <= budget
  bool headroom_ok = false;                   ///< headroom_bytes >= headroom_required_bytes
  /// The four models resident and their serving-batch forwards running on four threads at
  /// once: the ledger's peak over that run (0 without the views).
  std::uint64_t serving_concurrent_bytes = 0;
  /// serving, training (the largest training peak: one model trains at a time) and mixed
  /// (serving + that training peak), each against the budget and headroom.
  std::vector<DeploymentView> views;
  bool ok = false;     ///< every row ok, total within budget, headroom ok, every view ok
  double seconds = 0;  ///< wall time
  /// JSON with every field.
  nlohmann::json to_json() const;
  /// The table: model, memory, target, % of budget, % of target, status; total; headroom.
  std::string table() const;
};

/// Measures every model of the registry and checks the budget. InputError for bad options
/// (unknown profile, serving batch < 1, a bad device or CUDA without a GPU, int8 on CUDA).
BudgetReport validate_budget(const BudgetOptions& options);

}  // namespace foxhunt::plan
