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

#include "foxhunt/core/device.h"
#include "foxhunt/data/trading_env.h"
#include "foxhunt/dist/options.h"
#include "foxhunt/jobs/train_summary.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::jobs {

/// What to train and where to write it.
struct TrainJob {
  std::string model;   ///< "dqn", "ppo", "mamba2" or "tft"
  std::string env;     ///< RL environment: "cartpole" (default) or "trading"
  std::string data;    ///< bars CSV (trading env, forecasting); "" = synthetic
  int64_t steps = 0;   ///< RL environment steps (0 = the trainer's default)
  int64_t epochs = 0;  ///< forecasting epochs (0 = the trainer's default)
  std::string batch;   ///< "" = default, "auto" = batch planner, or a number
  /// Memory budget: given, the whole run is capped at it on its device. None = uncapped, except
  /// that batch "auto" plans for (and is capped at) the reference card's usable bytes.
  std::optional<memory::Budget> budget;
  std::optional<uint64_t> seed;  ///< seed (default: the trainer's, 0)
  std::string out_dir;           ///< output directory ("" = out/train-<model>, or the
                                 ///< resumed checkpoint's directory)
  std::string resume;            ///< trainer checkpoint to continue from ("" = fresh)
  Device device;                 ///< "cpu", "cuda", "cuda:N"
  nlohmann::json options = nlohmann::json::object();  ///< trainer option overrides (JSON keys)
  nlohmann::json model_options = nlohmann::json::object();  ///< mamba2/tft model options
  /// The trading environment of env "trading" (costs, episode length, the RL state's PnL scale;
  /// its seed and random starts are the trainer's): recorded in the bundle, whose serving builds
  /// the state exactly as this environment did.
  data::TradingEnvOptions trading_env = {};
  int64_t eval_episodes = 20;       ///< greedy evaluation episodes after RL training (0 = none)
  int64_t log_interval = 0;         ///< steps between metrics lines (0 = the job's default)
  int64_t checkpoint_interval = 0;  ///< steps between checkpoints (0 = only at the end)
  train::ProgressMode progress = train::ProgressMode::kAuto;  ///< progress display on stderr
  /// Data-parallel run (world_size > 1): this process is rank `dist.rank()` of
  /// `dist.world_size()`; rank 0 alone writes the checkpoint, metrics, summary and bundle.
  dist::DistOptions dist;
};

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
/// also written to OUT/summary.json).
TrainAllSummary run_train_all(const TrainJob& job);

/// Fits the decision rule of the ensemble in `dir` on the validation split of `data_path` (the
/// bars CSV the models trained on, "" for the synthetic default; split as the trainers split it)
/// and writes DIR/rule.json (serving/rule_fit.h). Returns the fit's figures, or {"error": why}
/// when it could not fit (then no DIR/rule.json remains and the built-in rule applies). `train all`
/// and validate call it once every bundle is written.
nlohmann::json fit_ensemble_rule(const std::string& dir, const std::string& data_path);

}  // namespace foxhunt::jobs
