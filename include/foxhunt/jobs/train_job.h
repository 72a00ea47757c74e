#pragma once
/// \file job.h
/// One training job as `foxhunt train` runs it: picks the trainer for a model, builds the
/// environment or data, applies option overrides, resumes from a checkpoint when asked, trains,
/// evaluates, and writes checkpoint.ckpt, metrics.jsonl and summary.json into the output
/// directory. The CLI only parses arguments into a TrainJob and prints the summary.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "foxhunt/core/container.h"
#include "foxhunt/core/device.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/data/trading_env.h"
#include "foxhunt/dist/options.h"
#include "foxhunt/jobs/train_summary.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/serving/rule_fit.h"
#include "foxhunt/train/dqn_trainer.h"
#include "foxhunt/train/forecast_trainer.h"
#include "foxhunt/train/infra.h"
#include "foxhunt/train/ppo_trainer.h"

namespace foxhunt::jobs {

/// The batch a job trains with: the trainer's default, the memory planner's (`auto`), or a
/// fixed size. Parsed from text at the boundary (the CLI's --batch).
/// Example: `BatchChoice::parse("auto", "--batch").is_auto()`.
struct BatchChoice {
  /// What chooses the batch.
  enum class Kind {
    kDefault,  ///< the trainer's default (a resumed forecaster: its checkpoint's)
    kAuto,     ///< the largest batch the memory planner verifies within the budget
    kFixed,    ///< `size`
  };
  Kind kind = Kind::kDefault;  ///< what chooses the batch
  int64_t size = 0;            ///< kFixed: the batch size (> 0); 0 otherwise

  /// "" = kDefault, "auto" = kAuto, a positive integer = kFixed. Anything else is an InputError
  /// "[train] WHERE: expected a positive integer or 'auto', got 'TEXT'".
  static BatchChoice parse(std::string_view text, const char* where);
  /// A fixed batch of `n` (> 0; InputError otherwise).
  static BatchChoice fixed(int64_t n);
  /// The memory planner's batch.
  static BatchChoice automatic() { return {Kind::kAuto, 0}; }
  /// True for kAuto.
  bool is_auto() const { return kind == Kind::kAuto; }
  /// True for kDefault.
  bool is_default() const { return kind == Kind::kDefault; }
  /// The text parse() reads back: "", "auto" or the size.
  std::string str() const;
  bool operator==(const BatchChoice&) const = default;
};

/// A tape of trade prints a job trains on: its bars are built with `spec` (data/tape_bars.h),
/// and the spec is recorded in every bundle (serving a tape then builds the same bars).
struct TapeSource {
  std::string path;            ///< the tape CSV (data/tape.h)
  data::BarSpec spec;          ///< how its prints become bars (data/bar_builder.h)
  data::TapeReadOptions read;  ///< bad prints refused or dropped, the epoch unit
};

/// What to train and where to write it.
struct TrainJob {
  std::string model;  ///< "dqn", "ppo", "mamba2" or "tft"
  std::string env;    ///< RL environment: "cartpole" (default) or "trading"
  std::string data;   ///< bars CSV (trading env, forecasting); "" = synthetic
  /// A tape to build the bars from instead of `data` (which must then be empty).
  std::optional<TapeSource> ticks;
  /// Bars per year stated by the user (data/calendar.h); none: inferred from the bars (a short
  /// intraday span by its sessions). Recorded in the bundle; serving annualises with it.
  std::optional<double> periods_per_year;
  int64_t steps = 0;   ///< RL environment steps (0 = the trainer's default)
  int64_t epochs = 0;  ///< forecasting epochs (0 = the trainer's default)
  BatchChoice batch;   ///< the trainer's default, the batch planner's (auto), or a size
  /// Memory budget: given, the whole run is capped at it on its device. None = uncapped, except
  /// that batch "auto" plans for (and is capped at) the reference card's usable bytes.
  std::optional<memory::Budget> budget;
  std::optional<uint64_t> seed;  ///< seed (default: the trainer's, 0)
  std::string out_dir;           ///< output directory ("" = out/train-<model>, or the
                                 ///< resumed checkpoint's directory)
  std::string resume;            ///< trainer checkpoint to continue from ("" = fresh)
  Device device;                 ///< "cpu", "cuda", "cuda:N"
  /// Trainer option overrides (JSON keys, as --options gives them); parsed once, when the job
  /// starts, into an OptionsPatch of the model's trainer.
  nlohmann::json options = nlohmann::json::object();
  nlohmann::json model_options = nlohmann::json::object();  ///< mamba2/tft model options
  /// The trading environment of env "trading" (costs, episode length, the RL state's PnL scale;
  /// its seed and random starts are the trainer's): recorded in the bundle, whose serving builds
  /// the state exactly as this environment did. Its cost_bps and costs are the job's one cost
  /// model: the RL policies train under it and `train all` fits its rule under it
  /// (train_all_rule_fit_options), as `foxhunt backtest` with the same cost flags scores them.
  data::TradingEnvOptions trading_env = {};
  int64_t eval_episodes = 20;       ///< greedy evaluation episodes after RL training (0 = none)
  int64_t log_interval = 0;         ///< steps between metrics lines (0 = the job's default)
  int64_t checkpoint_interval = 0;  ///< steps between checkpoints (0 = only at the end)
  train::ProgressMode progress = train::ProgressMode::kAuto;  ///< progress display on stderr
  /// Data-parallel run (world_size > 1): this process is rank `dist.rank()` of
  /// `dist.world_size()`; rank 0 alone writes the checkpoint, metrics, summary and bundle.
  dist::DistOptions dist;
};

/// Typed overrides of a trainer's options (DqnTrainerOptions, PpoTrainerOptions or
/// ForecastTrainerOptions): the values of the options a job names (its --options, or a short
/// series' compact defaults), parsed once from JSON at the boundary. The options it does not
/// name keep whatever they are layered over (merge_trainer_options).
/// Example: `OptionsPatch<train::DqnTrainerOptions>::parse({{"gamma", 0.9}}, "options")`.
template <class Options>
class OptionsPatch {
 public:
  /// Names no option.
  OptionsPatch() = default;
  /// The options of the JSON object `j` (`where` names it in errors: "options"): not an object,
  /// an unknown key or a wrong type is an InputError.
  static OptionsPatch parse(const nlohmann::json& j, const char* where);
  /// `base` with the named options set to this patch's values.
  Options applied_to(Options base) const;
  /// True when it names no option.
  bool empty() const { return names_.empty(); }
  /// The options it names, as their JSON keys.
  const std::vector<std::string>& names() const { return names_; }

 private:
  Options values_;                  // the named options' values (the others: defaults, unused)
  std::vector<std::string> names_;  // which options it sets
};

/// The job's flags that set trainer options (a flag left empty changes nothing).
struct TrainerFlags {
  /// --steps (RL trainers' total_steps) or --epochs (the forecaster's epochs); 0 = unchanged.
  int64_t length = 0;
  /// --batch N (RL trainers' batch_size; a forecaster's batch is its data source's).
  std::optional<int64_t> batch_size;
  std::optional<uint64_t> seed;         ///< --seed
  std::optional<torch::Device> device;  ///< the job's device (RL trainers hold it)
};

/// The one place a train job layers its trainer's options, lowest first: the trainer's defaults
/// for this run (`defaults`: the environment's or the series length's) or, resuming, the
/// checkpoint's options instead (`resumed`); then `patches` in order (a short series' compact
/// defaults, then --options); then the flags. A resumed job has no patches and only the length
/// and device flags (run_train_job refuses the others), so it continues with its checkpoint's
/// options.
/// Example: `merge_trainer_options(train::DqnTrainerOptions(), std::nullopt, {patch}, flags)`.
template <class Options>
Options merge_trainer_options(const Options& defaults, const std::optional<Options>& resumed,
                              const std::vector<OptionsPatch<Options>>& patches,
                              const TrainerFlags& flags);

/// What a train job reads from the trainer checkpoint it resumes, parsed once from the
/// checkpoint's header (read_resumed_checkpoint).
struct ResumedCheckpoint {
  std::string path;   ///< the checkpoint file
  std::string model;  ///< the model's registry name ("" when the header has none)
  /// The model's options, in the catalog's JSON form (models::make_model builds from it).
  nlohmann::json model_options = nlohmann::json::object();
  /// The trainer's options, of the trainer the checkpoint was written by.
  std::variant<train::DqnTrainerOptions, train::PpoTrainerOptions, train::ForecastTrainerOptions>
      trainer_options;
  int64_t batch_size = 64;  ///< a forecaster's batch (it fixes an epoch's batches)
  int64_t world_size = 1;   ///< the world size it was written at
  /// The bars CSV it trained on ("" for the embedded synthetic series or an environment).
  std::string data_path;
  std::string target_vol_feature;  ///< a forecaster's target volatility ("" = none)
};

/// Checks `c` (read from `path`) as a checkpoint of the trainer `kind` (its
/// models::trainer_algo id) holding its trainer's options, and reads what a job resumes from it.
/// InputError when it is not one.
ResumedCheckpoint read_resumed_checkpoint(const Container& c, const std::string& path,
                                          models::TrainerKind kind);

/// Model names `foxhunt train` accepts.
const std::vector<std::string>& trainable_models();

/// Runs the job and returns its summary (train_summary.h; its to_json is also written to
/// <out>/summary.json): model, env, steps, total_steps, episodes, completed, interrupted,
/// seconds, checkpoint, metrics_file, options, final metrics and the evaluation: for RL the
/// greedy policy's returns (CartPole episodes, or sequential windows of the validation split for
/// trading), for mamba2/tft the quantile loss on the held-out test split beside the
/// unconditional-quantile baseline, and next_bar: the next-bar quantiles in log returns scored
/// against the naive baselines (data/forecast_eval.h). Series with fewer than 5,000 training
/// bars train compact forecasters (TFT hidden 8, lr 3e-4; Mamba-2 d_model 16, one layer) unless
/// --model-options is given (compact_defaults in the summary says so). Market data comes from
/// `data` (a bars CSV) or the embedded synthetic series; forecasting targets are scaled to unit
/// variance on the training split (the scale is stored in the checkpoint). Throws InputError
/// for bad input. With batch "auto" the memory planner (plan/planner.h) picks the largest
/// batch whose training step fits the budget, verified under the enforced cap, clamped to what
/// the trainer can use (replay buffer, rollout, training windows); the plan is in batch_plan.
/// Honours request_stop() (the CLI wires Ctrl-C to it): the trainer checkpoints and the summary
/// says interrupted.
/// With dist.world_size() > 1 the ranks rendezvous at dist.master() (c10d TCPStore + Gloo/NCCL)
/// once every input is checked: forecasters shard each epoch's global batches of batch x world
/// windows (--batch is per rank), RL ranks run their own environments; gradients are averaged
/// every step and weights compared across ranks (train/data_parallel.h). Only rank 0 writes
/// files and evaluates; the summary has world_size and the trainer's distributed report (with
/// the weight checksum).
/// A resumed run needs the checkpoint's world size. With several GPUs, `--device cuda` puts rank r
/// on GPU r mod device count.
TrainSummary run_train_job(const TrainJob& job);

/// `foxhunt train all`: trains the four models on one series (`data`, or the synthetic default)
/// and writes OUT/{dqn,ppo,mamba2,tft}/ with a bundle each (OUT = out_dir, default
/// out/ensemble): the RL models on the trading env of that series for `steps`, the forecasters
/// for `epochs`. Returns the per-model summaries, the bundles written, whether a run was
/// interrupted (the rest are then skipped) and whether every model has a bundle (its to_json is
/// also written to OUT/summary.json). The RL models train, and the rule is fitted, under the
/// job's cost model (trading_env.cost_bps and .costs; InputError "[costs] ..." for a bad one,
/// before any model starts).
///
/// Crash consistency: every file is written atomically (core/file_io.h), and OUT/rule.json then
/// OUT/summary.json are written last and removed first, so a directory holding OUT/summary.json
/// is a finished run (its "complete" says whether every model has a bundle); one without it was
/// stopped or killed part-way. A rerun of the same job into OUT redoes every model from step 0
/// (a seeded run on one thread writes the same weights) and replaces what a killed run left.
TrainAllSummary run_train_all(const TrainJob& job);

/// The options of `train all`'s rule fit: serving::RuleFitOptions' defaults with the job's cost
/// model (trading_env.cost_bps and .costs): the rule is fitted after the costs its policies
/// trained under (rule.json's fit records them: cost_bps, costs).
serving::RuleFitOptions train_all_rule_fit_options(const TrainJob& job);

/// Fits the decision rule of the ensemble in `dir` on the validation split of `data_path` (the
/// bars CSV the models trained on, "" for the synthetic default; split as the trainers split it)
/// with `options` and writes DIR/rule.json (serving/rule_fit.h). Returns the fit's figures, or
/// {"error": why} when it could not fit (then no DIR/rule.json remains and the built-in rule
/// applies). `train all` and validate call it once every bundle is written.
nlohmann::json fit_ensemble_rule(const std::string& dir, const std::string& data_path,
                                 const serving::RuleFitOptions& options = {});

}  // namespace foxhunt::jobs
