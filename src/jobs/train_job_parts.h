#pragma once
// The parts of a train job (internal to the jobs area), shared by train_job.cpp (checks,
// outputs, the run cap, run_train_job), train_rl.cpp (dqn, ppo) and train_forecast.cpp
// (the forecasters).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json.hpp>

#include "foxhunt/core/container.h"
#include "foxhunt/dist/communicator.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/memory/device_memory.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/train/env.h"
#include "foxhunt/train/infra.h"
#include "train_market.h"

namespace foxhunt::jobs::detail {

inline constexpr const char* kTrainJobComponent = "train";

// "dqn/ppo" and "mamba2/tft", for the messages that say which flags apply to whom.
std::string policy_names();
std::string forecaster_names();

// What a job starts from, read once by run_train_job: the --resume checkpoint and its header, the
// job's --options parsed for its trainer, and market data a caller already loaded.
struct JobInputs {
  const Container* container = nullptr;         // the --resume checkpoint (null: a fresh run)
  std::optional<ResumedCheckpoint> resumed;     // its header
  const data::MarketData* preloaded = nullptr;  // `train all`'s bars (null: load)
  std::variant<OptionsPatch<train::DqnTrainerOptions>, OptionsPatch<train::PpoTrainerOptions>,
               OptionsPatch<train::ForecastTrainerOptions>>
      options;  // --options, typed for the model's trainer
};

// The budget a run is capped at: --budget-mib, else --device-profile's usable bytes; --batch
// auto without either plans for (and is capped at) the reference card. None otherwise.
std::optional<memory::Budget> run_budget(const TrainJob& job);

// --batch auto: the memory planner's largest verified batch for `model` (built with
// `model_options`, the catalog's JSON form the planner takes) within the budget, at most
// `max_batch`. `plan_out` receives its summary. The planner measures the trainer's real step
// with `trainer_options` (and for RL its real environments `env`).
int64_t plan_auto_batch(const TrainJob& job, const std::string& model,
                        const nlohmann::json& model_options, int64_t max_batch, uint64_t seed,
                        std::optional<BatchPlanSummary>& plan_out,
                        const nlohmann::json& trainer_options, train::EnvFactory env = nullptr);

// A capped run (--batch auto, --budget-mib or --device-profile) trains under its budget for the
// whole run: a cap of what was live (and declared) before the trainer existed plus the budget.
// It reports the cap and the run's peak beyond that base.
class RunCap {
 public:
  explicit RunCap(const TrainJob& job);
  // Starts enforcing the budget beyond the base, when the job has one (call after planning: the
  // planner verifies under its own cap). What was built since the base counts against it. On
  // CUDA the cap is the allocator's memory fraction (reserved bytes), on the CPU the ledger's
  // (live + external).
  void enforce();
  // The cap and the run's peak (device peak + declared host bytes on the CPU, beyond the base);
  // none for an uncapped run.
  std::optional<MemoryCapReport> report() const;

 private:
  memory::MemoryDevice dev_;
  std::optional<memory::Budget> budget_;
  std::uint64_t live0_, external0_;
  std::uint64_t cap_bytes_ = 0;
  std::optional<memory::DeviceLimitGuard> cap_;
};

// The data-parallel group of a job (null when it trains alone). Connected after every input was
// checked, so a bad flag fails at once on each rank instead of after the rendezvous.
std::shared_ptr<dist::Communicator> connect_ranks(const TrainJob& job, const torch::Device& device);

// The distributed report of a data-parallel run (world size, the trainer's report, the
// throughput of all ranks).
void add_distributed(TrainSummary& summary, const train::TrainResult& r, const TrainJob& job);

// The files of a run.
struct Paths {
  std::string dir, checkpoint, metrics, summary;
};

// Created only once every input was checked, so a rejected job writes nothing. Ranks other
// than 0 write nothing at all (empty paths).
Paths output_paths(const TrainJob& job);

// The trainer's run configuration: outputs, intervals, progress (off on ranks other than 0).
train::RunConfig run_config(const TrainJob& job, const Paths& paths, int64_t default_log_interval);

// The summary's common part: the trainer's result, outputs and options.
TrainSummary summary_of(const TrainJob& job, const std::string& env, const train::TrainResult& r,
                        const Paths& paths, const nlohmann::json& options);

// The RL models (train_rl.cpp) and the forecasters (train_forecast.cpp).
TrainSummary run_rl(const TrainJob& job, const JobInputs& in);
TrainSummary run_forecast(const TrainJob& job, const JobInputs& in);

}  // namespace foxhunt::jobs::detail

namespace foxhunt::jobs {

// run_train_job (train_job.h) on market data already loaded (`train all`: `preloaded`, read
// once for every model); null: the job loads its own.
TrainSummary run_train_job(const TrainJob& job, const data::MarketData* preloaded);

}  // namespace foxhunt::jobs
