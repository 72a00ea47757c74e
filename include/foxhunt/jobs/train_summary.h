#pragma once
/// \file train_summary.h
/// The typed result of `foxhunt train` (jobs/train_job.h): what a training job did, measured and
/// wrote, for one model (TrainSummary) or for `train all` (TrainAllSummary). Each has one
/// to_json, the summary.json and `--json` form; the trainer's options and final metrics stay JSON
/// (they are open-ended per trainer).

#include <array>
#include <cmath>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "foxhunt/data/dataset.h"
#include "foxhunt/data/forecast_eval.h"

namespace foxhunt::jobs {

/// One instrument of a run on a panel.
struct InstrumentDataInfo {
  std::string symbol;                   ///< as in the panel
  int64_t instrument_id = 0;            ///< the TFT's static id (index in the panel)
  int64_t bars = 0;                     ///< its bars
  std::array<int64_t, 2> train{};       ///< [begin, end) of its training split
  std::array<int64_t, 2> validation{};  ///< [begin, end) of its validation split
  std::array<int64_t, 2> test{};        ///< [begin, end) of its test split
  double target_scale = 1.0;            ///< its forecasting targets' scale (1 for RL)
};

/// The market series a job trained on: in the summary as "data" and in the checkpoint's trainer
/// extra as "data" (a resumed run reads `source` and `target_vol_feature` back from there).
struct MarketDataInfo {
  std::string source;                   ///< the bars CSV, or "synthetic..." for the default
  int64_t bars = 0;                     ///< bars in the series
  std::array<int64_t, 2> train{};       ///< [begin, end) of the training split
  std::array<int64_t, 2> validation{};  ///< [begin, end) of the validation split
  std::array<int64_t, 2> test{};        ///< [begin, end) of the test split
  double target_scale = 1.0;            ///< forecasting targets' scale (1 for RL)
  std::string target_vol_feature;       ///< the volatility targets are divided by ("" = none)
  /// Constant-forecast loss of each target-volatility candidate ("none" for ""; NaN = null), when
  /// this run chose one (forecasters, not resumed).
  std::optional<std::map<std::string, double>> target_vol_selection_loss;
  /// A panel run: every instrument, in the panel's order (empty for one series; the fields above
  /// then describe the first instrument), and the cut dates they share.
  std::vector<InstrumentDataInfo> instruments = {};
  /// The panel's common cut dates (data/dataset.h).
  std::optional<data::SplitCuts> cuts = std::nullopt;
  /// Bars built from a tape: their spec ("time:1m"); "" for plain bars.
  std::string bar_spec = {};
  /// Bars per year of the series (data/calendar.h), and how it was decided, in words.
  double periods_per_year = 0.0;
  std::string periods_per_year_basis = {};
};

/// {source, bars, train: [b, e], validation, test, target_scale, target_vol_feature,
/// periods_per_year, periods_per_year_basis}, bar_spec when built from a tape and
/// target_vol_selection_loss when chosen.
nlohmann::json to_json(const MarketDataInfo& d);

/// Why a forecaster trained with its compact sizes (series shorter than the threshold).
struct CompactDefaults {
  std::string reason;      ///< "<n> training bars < <threshold>"
  nlohmann::json model;    ///< the compact model options
  nlohmann::json trainer;  ///< the compact trainer options
};

/// --batch auto: what the memory planner chose (plan/planner.h).
struct BatchPlanSummary {
  int64_t chosen_batch = 0;           ///< the batch trained with (per rank)
  uint64_t budget_bytes = 0;          ///< the budget planned for
  std::string budget_source;          ///< where the budget came from
  int64_t max_batch = 0;              ///< the clamp (replay buffer, rollout, windows)
  std::string limited_by;             ///< what limited the batch
  bool verified = false;              ///< chosen_batch trained under the cap
  uint64_t predicted_peak_bytes = 0;  ///< the fit's prediction at chosen_batch
  uint64_t verified_peak_bytes = 0;   ///< measured under the cap (0 if not verified)
  int64_t world_size = 1;             ///< ranks (the batch is per rank)
  uint64_t comm_bucket_bytes = 0;     ///< all-reduce buckets of a rank
  uint64_t external_bytes = 0;        ///< declared host bytes of the probe
  uint64_t trainer_state_bytes = 0;   ///< the trainer's own state (replay buffer, rollout)
  std::string step;                   ///< the step measured, in words
  double seconds = 0;                 ///< wall time of the plan
};

/// The memory cap a capped run (--batch auto, --budget-mib, --device-profile) trained under.
struct MemoryCapReport {
  uint64_t enforced_cap_bytes = 0;  ///< base (live before the trainer) + budget
  std::string enforced_on;          ///< the device
  std::string mechanism;            ///< how it is enforced, in words
  uint64_t run_peak_bytes = 0;      ///< the run's peak beyond the base
  uint64_t budget_bytes = 0;        ///< the budget
  std::string budget_source;        ///< where it came from
};

/// RL: the greedy policy's returns after training ("eval").
struct PolicyEvaluation {
  int64_t episodes = 0;    ///< episodes (CartPole) or sequential validation windows (trading)
  double mean_return = 0;  ///< mean episode return
  double min_return = 0;   ///< worst episode
  double max_return = 0;   ///< best episode
  std::string policy = "greedy";  ///< the policy evaluated
};

/// Forecasters: the quantile loss on the held-out test split ("eval"); NaN figures are null.
struct ForecastTestEvaluation {
  int64_t windows = 0;            ///< test windows
  double loss = NAN;              ///< mean quantile loss of the model
  double baseline_loss = NAN;     ///< of the unconditional-quantile baseline
  double skill = NAN;             ///< 1 - loss / baseline_loss
  double best_val_loss = NAN;     ///< best validation loss during training
  int64_t best_epoch = 0;         ///< its epoch (-1: the initial constant forecast)
  double initial_val_loss = NAN;  ///< validation loss before the first epoch
  /// The next-bar quantiles in log returns against the naive baselines (none without test
  /// windows or quantile levels: null).
  std::optional<data::ForecastEvaluation> next_bar;
  /// A panel run: next_bar per instrument (next_bar is then null).
  std::map<std::string, data::ForecastEvaluation> next_bar_by_instrument = {};
  /// A panel run: the next-bar scores pooled over the instruments (points-weighted mean pinball
  /// of the model and of each instrument's best naive baseline).
  struct Pooled {
    int64_t instruments = 0;          ///< instruments scored
    int64_t points = 0;               ///< test bars over all of them
    double model_pinball = NAN;       ///< the model's mean pinball loss
    double baseline_pinball = NAN;    ///< each instrument's best baseline's, pooled
    double skill = NAN;               ///< 1 - model / baseline
    int64_t beating_instruments = 0;  ///< instruments whose model beats their best baseline
  };
  std::optional<Pooled> next_bar_pooled = std::nullopt;
};

/// What one training job did (`foxhunt train MODEL`, written to <out>/summary.json).
struct TrainSummary {
  std::string model;         ///< "dqn", "ppo", "mamba2" or "tft"
  std::string env;           ///< "cartpole" or "trading" (RL), "market" (forecasters)
  int64_t steps = 0;         ///< steps done in total (including those before a resume)
  int64_t total_steps = 0;   ///< steps the run was configured for
  int64_t episodes = 0;      ///< finished episodes (RL) or epochs (forecasters)
  bool completed = false;    ///< reached the configured length (or early stopping)
  bool interrupted = false;  ///< stopped by request_stop() (Ctrl-C); the checkpoint is written
  double seconds = 0;        ///< wall time of the training
  std::string checkpoint;    ///< last checkpoint written ("" if none)
  std::string metrics_file;  ///< metrics.jsonl ("" on ranks > 0)
  std::optional<std::string> resumed_from;            ///< the --resume checkpoint (null when fresh)
  nlohmann::json metrics = nlohmann::json::object();  ///< the trainer's final metrics
  nlohmann::json options = nlohmann::json::object();  ///< trainer options as run
  std::optional<MarketDataInfo> data;                 ///< market data (trading env, forecasters)
  /// Forecasters: the compact sizes a short series got (null when not applied; RL: no key).
  std::optional<CompactDefaults> compact_defaults;
  std::optional<BatchPlanSummary> batch_plan;  ///< --batch auto's plan
  std::optional<MemoryCapReport> memory_cap;   ///< the cap of a capped run (null: uncapped)
  int64_t world_size = 1;                      ///< data-parallel ranks
  /// The resumed checkpoint's world size where it differs from world_size (elastic resume).
  std::optional<int64_t> resumed_world_size;
  /// The trainer's data-parallel report (train/data_parallel.h; null: one process). Its
  /// "last_weight_check" is the summary's "weight_checksum".
  nlohmann::json distributed;
  std::optional<double> samples_per_s_all_ranks;  ///< throughput of all ranks together
  /// The evaluation after training: none (interrupted, no episodes, rank > 0: null), RL or
  /// forecaster.
  std::variant<std::monostate, PolicyEvaluation, ForecastTestEvaluation> eval;
  std::optional<std::string> bundle;  ///< the serving bundle written (null: none)

  /// True for forecasters (env "market").
  bool forecaster() const { return env == "market"; }
  /// The RL evaluation, or nullptr.
  const PolicyEvaluation* policy_eval() const { return std::get_if<PolicyEvaluation>(&eval); }
  /// The forecaster's test evaluation, or nullptr.
  const ForecastTestEvaluation* forecast_eval() const {
    return std::get_if<ForecastTestEvaluation>(&eval);
  }
};

/// The summary.json form: model, env, steps, total_steps, episodes, completed, interrupted,
/// seconds, checkpoint, metrics, metrics_file, resumed_from, options, world_size,
/// resumed_world_size (null unless an elastic resume), bundle, eval,
/// memory_cap, enforced_cap_bytes (the cap's, or null); data, batch_plan (with the cap's
/// enforced_cap_bytes, enforced_on and run_peak_bytes when capped), distributed with
/// weight_checksum, samples_per_s_all_ranks when present; compact_defaults for forecasters.
nlohmann::json to_json(const TrainSummary& s);

/// What `foxhunt train all` did (written to OUT/summary.json).
struct TrainAllSummary {
  std::string out;                             ///< the ensemble directory
  std::map<std::string, TrainSummary> models;  ///< per model trained (in order until a stop)
  std::vector<std::string> bundles;            ///< bundles written, in training order
  bool interrupted = false;                    ///< a run was interrupted (the rest skipped)
  bool complete = false;                       ///< every trainable model has a bundle
  /// The decision rule fitted on the validation split (serving/rule_fit.h), written to
  /// OUT/rule.json when every model has a bundle; "" when none was written.
  std::string rule;
  /// The fit's figures (serving::to_json(RuleFit)), or {"error": why} when it could not be fitted
  /// (the built-in rule then applies); null when not attempted.
  nlohmann::json rule_fit;
};

/// {out, models: {name: summary}, bundles: [paths], interrupted, complete, rule, rule_fit}.
nlohmann::json to_json(const TrainAllSummary& s);

/// Human-readable multi-line form of one model's summary.
std::string format_train_summary(const TrainSummary& s);

/// Human-readable form of `train all`: each model's summary, then the bundles.
std::string format_train_summary(const TrainAllSummary& s);

}  // namespace foxhunt::jobs
