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
/// Verdicts: a model passes when memory <= target and memory <= budget; the run passes when every
/// model passes, total <= budget and budget - total >= the required headroom.
///
/// Targets file (JSON), values in MiB (> 0), any subset of the registry's models:
///   {"targets_mib": {"dqn": 150, "tft": 200}}
/// or in bytes: {"targets_bytes": {"dqn": 157286400}} (not both). Unknown models or keys, wrong
/// types, non-positive values and unreadable or malformed files are InputError naming the file
/// and the entry.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/units.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/plan/footprint.h"

namespace foxhunt::plan {

/// The reference system's per-model targets in bytes: dqn 150, ppo 200, mamba2 500, tft 200 MiB.
std::map<std::string, std::uint64_t> default_targets();

/// Parses a targets document (see the file comment) over `base` (usually default_targets()).
/// `where` names the source in errors.
std::map<std::string, std::uint64_t> targets_from_json(const nlohmann::json& j,
                                                       const std::string& where,
                                                       std::map<std::string, std::uint64_t> base);

/// Reads a targets file over default_targets(). Errors are InputError naming the file.
std::map<std::string, std::uint64_t> load_targets(const std::string& path);

/// What to validate.
struct BudgetOptions {
  /// Device profile giving the budget (its usable bytes).
  std::string device_profile = memory::kReferenceProfile;
  /// Budget override in bytes (0 = use the profile).
  std::uint64_t budget_bytes = 0;
  /// Free memory required after all models: 500 MiB by default.
  std::uint64_t headroom_bytes = 500 * kMiB;
  /// Per-model targets in bytes (registry name -> bytes).
  std::map<std::string, std::uint64_t> targets = default_targets();
  /// The serving batch measured beside batch 1.
  std::int64_t serving_batch = 64;
  /// Seed of the models and the synthetic batches.
  std::uint64_t seed = 42;
};

/// One model's line.
struct BudgetRow {
  std::string model;               ///< registry name
  InferenceFootprint footprint;    ///< measured (runs: batch 1, serving batch)
  std::uint64_t memory_bytes = 0;  ///< parameters + buffers + max activations
  std::uint64_t target_bytes = 0;  ///< 0 = no target (a failure)
  double pct_of_budget = 0;        ///< memory / budget x 100
  double pct_of_target = 0;        ///< memory / target x 100
  bool within_target = false;      ///< memory <= target
  bool within_budget = false;      ///< memory <= budget
  bool ok = false;                 ///< both
  std::string status;              ///< "PASS", "FAIL: over target", "FAIL: over budget", ...
};

/// The whole validation.
struct BudgetReport {
  std::string budget_source;                  ///< profile name or "--budget-mib"
  std::uint64_t budget_bytes = 0;             ///< the budget
  std::uint64_t headroom_required_bytes = 0;  ///< as asked
  std::int64_t serving_batch = 0;             ///< as asked
  std::vector<BudgetRow> rows;                ///< one per registry model, registry order
  std::uint64_t total_bytes = 0;              ///< sum of memory_bytes
  double total_pct_of_budget = 0;             ///< total / budget x 100
  std::int64_t headroom_bytes = 0;            ///< budget - total (negative when over)
  bool total_within_budget = false;           ///< total <= budget
  bool headroom_ok = false;                   ///< headroom_bytes >= headroom_required_bytes
  bool ok = false;                            ///< every row ok, total within budget, headroom ok
  double seconds = 0;                         ///< wall time
  /// JSON with every field.
  nlohmann::json to_json() const;
  /// The table: model, memory, target, % of budget, % of target, status; total; headroom.
  std::string table() const;
};

/// Measures every model of the registry and checks the budget. InputError for bad options
/// (unknown profile, serving batch < 1).
BudgetReport validate_budget(const BudgetOptions& options);

}  // namespace foxhunt::plan
