// One training job (`foxhunt train MODEL`): its checks, its typed inputs read once (the --resume
// checkpoint, --options), the run cap, the output files and the summary. The RL models train in
// train_rl.cpp, the forecasters in train_forecast.cpp; train_options.cpp has the typed inputs.
#include "foxhunt/jobs/train_job.h"

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/calendar.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/torch_device.h"
#include "foxhunt/plan/planner.h"
#include "train_job_parts.h"

namespace foxhunt::jobs {

const std::vector<std::string>& trainable_models() {
  static const std::vector<std::string> names = models::model_names();
  return names;
}

namespace detail {

std::string policy_names() {
  return models::joined_model_names(models::Family::kPolicy, "/");
}
std::string forecaster_names() {
  return models::joined_model_names(models::Family::kForecaster, "/");
}

std::optional<memory::Budget> run_budget(const TrainJob& job) {
  if (job.budget) return job.budget;
  if (job.batch.is_auto()) return memory::Budget::of_profile(memory::kReferenceProfile);
  return std::nullopt;
}

int64_t plan_auto_batch(const TrainJob& job, const std::string& model,
                        const nlohmann::json& model_options, int64_t max_batch, uint64_t seed,
                        std::optional<BatchPlanSummary>& plan_out,
                        const nlohmann::json& trainer_options, train::EnvFactory env) {
  plan::PlanOptions po;
  po.model = model;
  po.model_options = model_options;
  po.train.seed = seed;
  po.train.step = plan::StepKind::kTrainer;
  po.train.trainer_options = trainer_options;
  po.train.env = std::move(env);
  po.train.device = job.device;  // measured and capped on the device the job trains on
  // Data-parallel: the batch is per rank, and each rank also holds the all-reduce buckets.
  po.train.world_size = job.dist.world_size();
  po.train.bucket_mib = job.dist.bucket_mib();
  po.max_batch = std::max<int64_t>(1, max_batch);
  const auto budget = *run_budget(job);
  po.budget = budget;
  const auto r = plan::plan_batch(po);
  BatchPlanSummary& p = plan_out.emplace();
  FOXHUNT_COPY_FIELDS(p, r, chosen_batch, budget_bytes, budget_source, max_batch, limited_by,
                      verified, predicted_peak_bytes, verified_peak_bytes, seconds);
  FOXHUNT_COPY_FIELDS(p, r.fixed, comm_bucket_bytes, external_bytes, trainer_state_bytes, step);
  p.world_size = po.train.world_size;  // the batch is per rank
  return r.chosen_batch;
}

RunCap::RunCap(const TrainJob& job)
    : dev_(job.device.resolved()),
      budget_(run_budget(job)),
      // Without a device the job fails with its own message; the cap is never enforced.
      live0_(dev_.is_cuda() && !memory::cuda_memory_available() ? 0
                                                                : memory::device_live_bytes(dev_)),
      external0_(dev_.is_cuda() ? 0 : memory::external_bytes()) {}

void RunCap::enforce() {
  if (!budget_) return;
  cap_bytes_ = live0_ + external0_ + budget_->bytes;
  cap_.emplace(dev_, cap_bytes_);
  memory::device_reset_peak(dev_);
}

std::optional<MemoryCapReport> RunCap::report() const {
  if (!cap_) return std::nullopt;
  const std::uint64_t peak = memory::device_peak_bytes(dev_);
  const std::uint64_t ext = dev_.is_cuda() ? 0 : memory::external_bytes();
  MemoryCapReport r;
  r.enforced_cap_bytes = cap_bytes_;
  r.enforced_on = dev_.str();
  r.mechanism = dev_.is_cuda() ? "CUDA caching-allocator memory fraction"
                               : "CPU ledger hard cap (live + declared host bytes)";
  r.run_peak_bytes =
      (peak > live0_ ? peak - live0_ : 0) + (ext > external0_ ? ext - external0_ : 0);
  r.budget_bytes = budget_->bytes;
  r.budget_source = budget_->source;
  return r;
}

std::shared_ptr<dist::Communicator> connect_ranks(const TrainJob& job,
                                                  const torch::Device& device) {
  if (job.dist.world_size() <= 1) return nullptr;
  return dist::Communicator::connect(job.dist, device);
}

void add_distributed(TrainSummary& summary, const train::TrainResult& r, const TrainJob& job) {
  summary.world_size = job.dist.world_size();
  if (job.dist.world_size() <= 1 || !r.metrics.contains("distributed")) return;
  summary.distributed = r.metrics["distributed"];
  if (r.metrics.contains("samples_per_s"))
    summary.samples_per_s_all_ranks =
        r.metrics["samples_per_s"].get<double>() * static_cast<double>(job.dist.world_size());
}

Paths output_paths(const TrainJob& job) {
  if (job.dist.rank() > 0) return {};
  std::string dir = job.out_dir;
  if (dir.empty() && !job.resume.empty()) {
    dir = std::filesystem::path(job.resume).parent_path().string();
    if (dir.empty()) dir = ".";
  }
  if (dir.empty()) dir = "out/train-" + job.model;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  FOXHUNT_CHECK(!ec && std::filesystem::is_directory(dir), kTrainJobComponent,
                "out_dir: cannot create directory '", dir, "': ", ec.message());
  const auto p = std::filesystem::path(dir);
  return {dir, (p / "checkpoint.ckpt").string(), (p / "metrics.jsonl").string(),
          (p / "summary.json").string()};
}

train::RunConfig run_config(const TrainJob& job, const Paths& paths, int64_t default_log_interval) {
  train::RunConfig run;
  run.checkpoint_path = paths.checkpoint;
  run.metrics_path = paths.metrics;
  run.checkpoint_interval = job.checkpoint_interval;
  run.log_interval = job.log_interval > 0 ? job.log_interval : default_log_interval;
  run.progress = job.dist.rank() > 0 ? train::ProgressMode::kOff : job.progress;
  return run;
}

TrainSummary summary_of(const TrainJob& job, const std::string& env, const train::TrainResult& r,
                        const Paths& paths, const nlohmann::json& options) {
  TrainSummary s;
  s.model = job.model;
  s.env = env;
  FOXHUNT_COPY_FIELDS(s, r, steps, total_steps, episodes, completed, interrupted, seconds, metrics);
  s.checkpoint = r.checkpoint_path;
  s.metrics_file = paths.metrics;
  if (!job.resume.empty()) s.resumed_from = job.resume;
  s.options = options;
  return s;
}

}  // namespace detail

TrainSummary run_train_job(const TrainJob& job) {
  return run_train_job(job, nullptr);
}

TrainSummary run_train_job(const TrainJob& given, const data::MarketData* preloaded) {
  using detail::kTrainJobComponent;
  (void)models::to_torch(given.device);  // a device that is not there: one line, before any work
  // Data-parallel ranks on one machine share `--device cuda`: rank r takes GPU r mod count (as
  // torchrun's local rank does), so NCCL gets one device per rank where there are enough.
  TrainJob job = given;
  // A training output directory names its checkpoint as well as DIR/checkpoint.ckpt does.
  if (!job.resume.empty() && std::filesystem::is_directory(job.resume)) {
    const auto ckpt = (std::filesystem::path(job.resume) / "checkpoint.ckpt").string();
    FOXHUNT_CHECK(
        std::filesystem::exists(ckpt), kTrainJobComponent, "resume ", job.resume,
        ": expected a trainer checkpoint or a training output directory holding "
        "checkpoint.ckpt (a training run writes it into its out_dir); this directory has none");
    job.resume = ckpt;
  }
  if (job.dist.world_size() > 1 && job.device == Device::cuda() && models::cuda_device_count() > 1)
    job.device = Device::cuda(job.dist.rank() % models::cuda_device_count());
  FOXHUNT_CHECK(models::in_catalog(job.model), kTrainJobComponent, "unknown model '", job.model,
                "'; expected one of: ", models::joined_model_names());
  FOXHUNT_CHECK(job.steps >= 0 && job.epochs >= 0, kTrainJobComponent,
                "steps and epochs must be positive");
  FOXHUNT_CHECK(job.steps == 0 || job.epochs == 0, kTrainJobComponent,
                "give either steps or epochs, not both");
  FOXHUNT_CHECK(!job.ticks || job.data.empty(), kTrainJobComponent,
                "ticks: a tape to build bars from excludes data (a bars CSV); give one of them");
  if (job.periods_per_year)
    (void)data::given_periods_per_year(*job.periods_per_year, "periods_per_year");
  if (!job.resume.empty())
    FOXHUNT_CHECK(job.options.empty() && job.batch.is_default() && !job.seed, kTrainJobComponent,
                  "resume continues with the checkpoint's options; only steps/epochs may "
                  "change (drop options, batch and seed)");
  // The typed inputs, read once: --options for the model's trainer, and the checkpoint (read and
  // CRC-checked once; options, data path and state come from it).
  detail::JobInputs in;
  in.preloaded = preloaded;
  const auto kind = models::catalog_entry(job.model).trainer;
  switch (kind) {
    case models::TrainerKind::kDqn:
      in.options = OptionsPatch<train::DqnTrainerOptions>::parse(job.options, "options");
      break;
    case models::TrainerKind::kPpo:
      in.options = OptionsPatch<train::PpoTrainerOptions>::parse(job.options, "options");
      break;
    case models::TrainerKind::kForecast:
      in.options = OptionsPatch<train::ForecastTrainerOptions>::parse(job.options, "options");
      break;
  }
  std::optional<Container> container;
  if (!job.resume.empty()) {
    container = read_container(job.resume);
    in.container = &*container;
    in.resumed = read_resumed_checkpoint(*container, job.resume, kind);
  }
  dist::validate(job.dist);
  TrainSummary summary =
      models::is_policy(job.model) ? detail::run_rl(job, in) : detail::run_forecast(job, in);
  // Elastic resume: the weights and optimizer state are the same on every rank, a forecaster's
  // epoch is re-cut from its first untrained sample (ForecastTrainer::load_checkpoint), and RL
  // ranks other than 0 start their own streams from the checkpoint as at the same world size.
  if (in.resumed && in.resumed->world_size != job.dist.world_size())
    summary.resumed_world_size = in.resumed->world_size;
  if (job.dist.rank() > 0) return summary;
  const auto dir = std::filesystem::path(summary.metrics_file).parent_path();
  write_file_atomic((dir / "summary.json").string(), to_json(summary).dump(2) + "\n");
  return summary;
}

}  // namespace foxhunt::jobs
