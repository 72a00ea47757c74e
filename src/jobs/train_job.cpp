#include "foxhunt/jobs/train_job.h"

#include "foxhunt/core/fields.h"
#include "foxhunt/data/forecast_eval.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <optional>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/units.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/dist/communicator.h"
#include "foxhunt/memory/device_memory.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/planner.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/train/batches.h"
#include "foxhunt/train/checkpointing.h"
#include "foxhunt/train/dqn_trainer.h"
#include "foxhunt/train/forecast_trainer.h"
#include "foxhunt/train/market_sources.h"
#include "foxhunt/train/ppo_trainer.h"
#include "train_market.h"

namespace foxhunt::jobs {

using market_data::load_market;
using market_data::Market;
using market_data::write_bundle;

namespace {

// "dqn/ppo" and "mamba2/tft", for the messages that say which flags apply to whom.
std::string policy_names() {
  return models::joined_model_names(models::Family::kPolicy, "/");
}
std::string forecaster_names() {
  return models::joined_model_names(models::Family::kForecaster, "/");
}

}  // namespace

const std::vector<std::string>& trainable_models() {
  static const std::vector<std::string> names = models::model_names();
  return names;
}

namespace {

constexpr const char* kTrainJobComponent = "train";

int64_t parse_batch(const std::string& batch) {
  int64_t n = 0;
  size_t used = 0;
  try {
    n = std::stoll(batch, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  FOXHUNT_CHECK(used == batch.size() && n > 0, kTrainJobComponent,
                "batch: expected a positive integer or 'auto', got '", batch, "'");
  return n;
}

nlohmann::json checked_overrides(const nlohmann::json& j, const char* flag) {
  FOXHUNT_CHECK(j.is_object(), kTrainJobComponent, flag, ": expected a JSON object, got ",
                j.type_name());
  return j;
}

// The budget a run is capped at: --budget-mib, else --device-profile's usable bytes; --batch
// auto without either plans for (and is capped at) the reference card. None otherwise.
std::optional<memory::Budget> run_budget(const TrainJob& job) {
  if (job.budget) return job.budget;
  if (job.batch == "auto") return memory::Budget::of_profile(memory::kReferenceProfile);
  return std::nullopt;
}

// --batch auto: the memory planner's largest verified batch for `model` (built with
// `model_options`) within the budget, at most `max_batch`. `plan_out` receives its summary.
// The planner measures the trainer's real step with `trainer_options` (and for RL its real
// environments `env`).
int64_t plan_auto_batch(const TrainJob& job, const std::string& model,
                        const nlohmann::json& model_options, int64_t max_batch, uint64_t seed,
                        std::optional<BatchPlanSummary>& plan_out,
                        const nlohmann::json& trainer_options, train::EnvFactory env = nullptr) {
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

// A capped run (--batch auto, --budget-mib or --device-profile) trains under its budget for the
// whole run: a cap of what was live (and declared) before the trainer existed plus the budget.
// It reports the cap and the run's peak beyond that base.
class RunCap {
 public:
  explicit RunCap(const TrainJob& job)
      : dev_(job.device.resolved()),
        budget_(run_budget(job)),
        // Without a device the job fails with its own message; the cap is never enforced.
        live0_(dev_.is_cuda() && !memory::cuda_memory_available()
                   ? 0
                   : memory::device_live_bytes(dev_)),
        external0_(dev_.is_cuda() ? 0 : memory::external_bytes()) {}
  // Starts enforcing the budget beyond the base, when the job has one (call after planning: the
  // planner verifies under its own cap). What was built since the base counts against it. On
  // CUDA the cap is the allocator's memory fraction (reserved bytes), on the CPU the ledger's
  // (live + external).
  void enforce() {
    if (!budget_) return;
    cap_bytes_ = live0_ + external0_ + budget_->bytes;
    cap_.emplace(dev_, cap_bytes_);
    memory::device_reset_peak(dev_);
  }
  // The cap and the run's peak (device peak + declared host bytes on the CPU, beyond the base);
  // none for an uncapped run.
  std::optional<MemoryCapReport> report() const {
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

 private:
  memory::MemoryDevice dev_;
  std::optional<memory::Budget> budget_;
  std::uint64_t live0_, external0_;
  std::uint64_t cap_bytes_ = 0;
  std::optional<memory::DeviceLimitGuard> cap_;
};

// RL trainer options: the checkpoint's (on resume) or the defaults, then --options, then flags
// (--batch auto is planned later, once the network is known).
nlohmann::json rl_options(nlohmann::json base, const TrainJob& job) {
  base.update(checked_overrides(job.options, "options"));
  if (job.steps > 0) base["total_steps"] = job.steps;
  if (!job.batch.empty() && job.batch != "auto") base["batch_size"] = parse_batch(job.batch);
  if (job.seed) base["seed"] = *job.seed;
  base["device"] = job.device;
  return base;
}

// The --resume checkpoint (read once per job) checked as a trainer checkpoint of `algo`.
const Container& resumed_checkpoint(const std::optional<Container>& resumed, const TrainJob& job,
                                    const char* algo) {
  FOXHUNT_INTERNAL_ASSERT(resumed.has_value(), "no resume checkpoint");
  train::check_trainer_container(*resumed, job.resume, algo);
  FOXHUNT_CHECK(resumed->header["trainer"].contains("options"), "checkpoint", "'", job.resume,
                "': trainer options missing");
  return *resumed;
}

// The data-parallel group of a job (null when it trains alone). Connected after every input was
// checked, so a bad flag fails at once on each rank instead of after the rendezvous.
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

// The world size a trainer checkpoint was written at. A run may resume at another one (elastic
// resume): the weights and optimizer state are the same on every rank, a forecaster's epoch is
// re-cut from its first untrained sample (ForecastTrainer::load_checkpoint), and RL ranks other
// than 0 start their own streams from the checkpoint as they do at the same world size.
int64_t checkpoint_world(const Container& resumed) {
  const auto& trainer = resumed.header.value("trainer", nlohmann::json::object());
  const auto& extra = trainer.value("extra", nlohmann::json::object());
  return extra.is_object() ? extra.value("world_size", int64_t{1}) : 1;
}

struct Paths {
  std::string dir, checkpoint, metrics, summary;
};

// Created only once every input was checked, so a rejected job writes nothing. Ranks other
// than 0 write nothing at all (empty paths).
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

// ---- RL ---------------------------------------------------------------------------------------

std::optional<PolicyEvaluation> evaluation(train::Env& env, const train::Policy& policy,
                                           int64_t episodes, uint64_t seed) {
  if (episodes <= 0) return std::nullopt;
  auto returns = train::evaluate_policy(env, policy, episodes, seed);
  PolicyEvaluation e;
  e.episodes = episodes;
  e.mean_return = std::accumulate(returns.begin(), returns.end(), 0.0) / returns.size();
  e.min_return = *std::min_element(returns.begin(), returns.end());
  e.max_return = *std::max_element(returns.begin(), returns.end());
  return e;
}

// The training record of an RL bundle: the run's result, options and evaluation (without the
// summary's world size, memory cap and bundle entries, which the bundle never stored).
nlohmann::json rl_bundle_training(const TrainSummary& s) {
  nlohmann::json j = to_json(s);
  for (const char* k : {"world_size", "bundle", "memory_cap", "enforced_cap_bytes"}) j.erase(k);
  return j;
}

// What an RL job needs besides its options: environments, evaluation, market data.
struct RlContext {
  train::EnvFactory factory;
  std::function<std::unique_ptr<train::Env>()> make_eval_env;
  int64_t eval_episodes = 0;
  std::string env_name;
  const Market* market = nullptr;  // trading env only (then a bundle)
  std::optional<MarketDataInfo> data_info;
  const Container* resumed = nullptr;  // the --resume checkpoint, read once
};

struct RlOutcome {
  std::optional<Paths> paths;
  train::TrainResult result;
  nlohmann::json options;
  std::optional<PolicyEvaluation> eval;
  std::optional<BatchPlanSummary> batch_plan;
  std::optional<std::string> bundle_path;  // written for market-trained (serving) models
  std::optional<MemoryCapReport> memory_cap;
};

// One RL recipe: plan the batch (--batch auto, at most `plan_clamp`), train, evaluate greedily,
// and bundle the network when it trained on market data.
template <typename Trainer, typename NetOptions, typename Options>
RlOutcome train_rl(const TrainJob& job, const RlContext& ctx, Options o, int64_t plan_clamp,
                   int64_t log_interval) {
  RlOutcome out;
  RunCap cap(job);
  if (job.batch == "auto") {
    nlohmann::json net;
    {
      auto probe = ctx.factory(0);
      net = models::to_json(NetOptions()
                                .state_dim(probe->observation_size())
                                .hidden(o.hidden())
                                .actions(probe->action_count()));
    }
    o.batch_size(plan_auto_batch(job, job.model, net, plan_clamp, o.seed(), out.batch_plan,
                                 to_json(o), ctx.factory));
  }
  cap.enforce();
  Trainer trainer(o, ctx.factory);
  if (ctx.resumed) trainer.load_checkpoint(*ctx.resumed, job.resume);
  nlohmann::json extra = nlohmann::json::object();
  if (ctx.data_info) extra["data"] = to_json(*ctx.data_info);
  if (job.dist.world_size() > 1) extra["world_size"] = job.dist.world_size();
  if (!extra.empty()) trainer.set_checkpoint_extra(extra);
  if (auto comm = connect_ranks(job, o.device())) trainer.set_data_parallel(comm);
  out.paths = output_paths(job);
  out.result = trainer.train(run_config(job, *out.paths, log_interval));
  out.options = to_json(o);
  if (job.dist.rank() > 0) return out;  // rank 0 evaluates and writes the bundle
  auto env = ctx.make_eval_env();
  if (!out.result.interrupted)
    out.eval = evaluation(*env, trainer.greedy_policy(), ctx.eval_episodes,
                          derive_seed(o.seed(), SeedStream::kFinalEval));
  if (ctx.market && !out.result.interrupted) {
    auto s = summary_of(job, ctx.env_name, out.result, *out.paths, out.options);
    if (out.eval) s.eval = *out.eval;
    out.bundle_path = write_bundle(trainer.model(), *ctx.market, rl_bundle_training(s),
                                   out.paths->dir, job.trading_env);
  }
  out.memory_cap = cap.report();
  return out;
}

TrainSummary run_rl(const TrainJob& job, const std::optional<Container>& resumed) {
  const std::string env_name = job.env.empty() ? "cartpole" : job.env;
  FOXHUNT_CHECK(job.epochs == 0, kTrainJobComponent, "epochs applies to ", forecaster_names(), "; ",
                job.model, " trains for steps");
  FOXHUNT_CHECK(env_name == "cartpole" || env_name == "trading", kTrainJobComponent,
                "env: expected cartpole or trading, got '", env_name, "'");
  FOXHUNT_CHECK(job.data.empty() || env_name == "trading", kTrainJobComponent,
                "data applies to env 'trading' and to ", forecaster_names());
  FOXHUNT_CHECK(job.model_options.empty(), kTrainJobComponent, "model_options applies to ",
                forecaster_names(), "; use options for ", job.model);
  FOXHUNT_CHECK(job.eval_episodes >= 0, kTrainJobComponent, "eval_episodes: expected >= 0, got ",
                job.eval_episodes);

  train::EnvFactory factory;
  std::function<std::unique_ptr<train::Env>()> make_eval_env;
  int64_t eval_episodes = job.eval_episodes;
  // Periodic greedy evaluation keeps the best weights (CartPole learning oscillates late).
  nlohmann::json dqn_defaults = to_json(train::DqnTrainerOptions().eval_interval(5000));
  nlohmann::json ppo_defaults = to_json(train::PpoTrainerOptions().eval_interval(10000));
  std::optional<MarketDataInfo> data_info;
  std::optional<Market> market;
  if (env_name == "cartpole") {
    factory = train::env_factory("cartpole");
    make_eval_env = [factory] { return factory(train::kEvalEnvIndex); };
  } else {
    // The reference trading configuration (ARCHITECTURE.md, "Memory accounting"): 256-d state,
    // hidden [128, 64], DQN lr 1e-4.
    market = load_market(job, resumed, false);
    data_info = market->info;
    // A panel: one policy trading every instrument (episodes drawn across them).
    factory = train::trading_env_factory(market->datasets, data::Split::kTrain, job.trading_env);
    make_eval_env = [factory] { return factory(train::kEvalEnvIndex); };
    data::TradingEnvOptions eval_options = job.trading_env;
    eval_options.random_start = false;
    train::PanelTradingEnv probe(market->datasets, data::Split::kValidation, eval_options);
    eval_episodes = std::min(eval_episodes, probe.sequential_episodes());
    // Periodic evaluation on (up to 10) validation windows keeps the best weights.
    const int64_t periodic = std::min<int64_t>(10, probe.sequential_episodes());
    dqn_defaults = to_json(train::DqnTrainerOptions()
                               .hidden({128, 64})
                               .learning_rate(1e-4)
                               .eval_interval(10000)
                               .eval_episodes(periodic));
    ppo_defaults = to_json(
        train::PpoTrainerOptions().hidden({128, 64}).eval_interval(16384).eval_episodes(periodic));
  }

  RlContext ctx{factory,
                make_eval_env,
                eval_episodes,
                env_name,
                market ? &*market : nullptr,
                data_info,
                resumed ? &*resumed : nullptr};
  RlOutcome r;
  switch (models::catalog_entry(job.model).trainer) {
    case models::TrainerKind::kDqn: {
      auto base = job.resume.empty()
                      ? dqn_defaults
                      : resumed_checkpoint(resumed, job, "dqn").header["trainer"]["options"];
      const auto o = train::dqn_trainer_options_from_json(rl_options(base, job));
      r = train_rl<train::DqnTrainer, models::DqnOptions>(job, ctx, o, o.buffer_size(), 1000);
      break;
    }
    case models::TrainerKind::kPpo: {
      auto base = job.resume.empty()
                      ? ppo_defaults
                      : resumed_checkpoint(resumed, job, "ppo").header["trainer"]["options"];
      const auto o = train::ppo_trainer_options_from_json(rl_options(base, job));
      // A minibatch larger than one rollout is pointless: clamp to n_envs * n_steps.
      r = train_rl<train::PpoTrainer, models::PpoOptions>(job, ctx, o, o.n_envs() * o.n_steps(),
                                                          4096);
      break;
    }
    case models::TrainerKind::kForecast:
      FOXHUNT_INTERNAL_ASSERT(false, "run_rl on a forecaster (" + job.model + ")");
  }
  auto summary = summary_of(job, env_name, r.result, *r.paths, r.options);
  add_distributed(summary, r.result, job);
  summary.bundle = r.bundle_path;
  if (r.eval) summary.eval = *r.eval;
  summary.batch_plan = r.batch_plan;
  summary.memory_cap = r.memory_cap;
  summary.data = data_info;
  return summary;
}

// ---- forecasting ------------------------------------------------------------------------------

// Pinball loss on the test split of the constant forecast whose quantiles are the empirical
// quantiles of the training targets: the bar a forecaster has to beat.
// A panel pools every instrument's (unit-variance scaled) targets.
double unconditional_baseline(const std::vector<const data::MarketDataset*>& panel,
                              const data::WindowSpec& spec, const std::vector<double>& quantiles) {
  // The targets carry their scaling (fill_target).
  std::vector<float> target(static_cast<size_t>(spec.horizon));
  std::vector<double> train;
  for (const auto* ds : panel)
    for (int64_t a : ds->anchors(data::Split::kTrain, spec)) {
      ds->fill_target(a, spec, target.data());
      train.insert(train.end(), target.begin(), target.end());
    }
  std::sort(train.begin(), train.end());
  std::vector<double> level;
  for (double q : quantiles) {
    const double pos = q * static_cast<double>(train.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, train.size() - 1);
    level.push_back(train[lo] + (pos - static_cast<double>(lo)) * (train[hi] - train[lo]));
  }
  double sum = 0.0;
  int64_t n = 0;
  for (const auto* ds : panel)
    for (int64_t a : ds->anchors(data::Split::kTest, spec)) {
      ds->fill_target(a, spec, target.data());
      for (int64_t k = 1; k <= spec.horizon; ++k) {
        const double y = target[static_cast<size_t>(k - 1)];
        for (size_t i = 0; i < quantiles.size(); ++i) {
          const double e = y - level[i];
          sum += std::max(quantiles[i] * e, (quantiles[i] - 1.0) * e);
          ++n;
        }
      }
    }
  return n > 0 ? sum / static_cast<double>(n) : NAN;
}

// Below this many training bars the forecasters default to compact sizes. Measured on the 3,000
// synthetic bars `foxhunt validate` used to train on, before volatility-scaled targets and the
// constant-forecast head (next-bar skill against the best naive baseline on the test split):
// TFT hidden 32 -36%, hidden 16 with dropout 0.3 -9%, hidden 8 with dropout 0.2 and lr 3e-4 -2%
// [-5%, +1%]; Mamba-2 d_model 64 x 2 layers -16%, d_model 16 x 1 layer -5%.
constexpr int64_t kShortSeriesBars = 5000;

// The measured choices live in each model's catalog entry (models/catalog.cpp).
nlohmann::json compact_model_options(const std::string& model) {
  return models::catalog_entry(model).compact_model_options;
}

nlohmann::json compact_trainer_options(const std::string& model) {
  return models::catalog_entry(model).compact_trainer_options;
}

// The forecaster's quantile head starts at the constant forecast: bias = the quantile levels of
// the (scaled) training targets per horizon step, weights = 0. Training then starts from the
// volatility-scaled empirical quantiles and the validation check before the first epoch
// (ForecastTrainerOptions::validate_initial) keeps them unless an epoch does better.
// A panel: the levels of every instrument's targets pooled.
void init_quantile_head(models::Model& model, const std::vector<const data::MarketDataset*>& panel,
                        const data::WindowSpec& spec) {
  torch::nn::Linear head = model.quantile_head();
  if (head.is_empty()) return;
  const auto taus = model.spec().quantiles;
  // A head has an output per (step, level), or one per level that it applies to every step.
  const auto q = static_cast<int64_t>(taus.size());
  const int64_t groups = head->bias.numel() / std::max<int64_t>(q, 1);
  FOXHUNT_INTERNAL_ASSERT(
      q > 0 && (groups == 1 || groups == spec.horizon) && groups * q == head->bias.numel(),
      "quantile head: ", head->bias.numel(), " outputs for ", q, " levels and horizon ",
      spec.horizon);
  std::vector<std::vector<double>> per_group(static_cast<size_t>(groups));
  std::vector<float> target(static_cast<size_t>(spec.horizon));
  for (const auto* ds : panel)
    for (int64_t a : ds->anchors(data::Split::kTrain, spec)) {
      ds->fill_target(a, spec, target.data());
      for (int64_t k = 0; k < spec.horizon; ++k)
        per_group[static_cast<size_t>(groups == 1 ? 0 : k)].push_back(
            target[static_cast<size_t>(k)]);
    }
  std::vector<float> levels;
  for (auto& v : per_group) {
    std::sort(v.begin(), v.end());
    for (double t : taus) levels.push_back(static_cast<float>(data::empirical_quantile(v, t)));
  }
  torch::NoGradGuard no_grad;
  // Zero weights, not small random ones: measured on the 3,000 validate bars, 0.1x the default
  // initialisation ended 0.2-0.9 points lower in next-bar skill (Mamba-2, lr 1e-4 to 3e-3).
  head->weight.zero_();
  head->bias.copy_(torch::tensor(levels).to(head->bias.device()).view_as(head->bias));
}

// The honest test: the next-bar quantiles of every test window, converted back to log returns,
// against the naive baselines (data/forecast_eval.h) built from the returns before the test
// split. One evaluation per instrument (one for a single series), in the panel's order; null
// for an instrument without test windows.
struct NextBar {
  std::optional<data::ForecastEvaluation> eval;
  int64_t points = 0;  // test bars scored
};

std::vector<NextBar> next_bar_evaluations(models::Model& model, train::MarketBatchSource& source,
                                          const Market& market, const std::vector<double>& taus,
                                          uint64_t seed) {
  const size_t n = market.datasets.size();
  std::vector<data::QuantileMatrix> q(n);
  std::vector<std::vector<double>> y(n);
  std::vector<int64_t> first_anchor(n, -1);
  std::vector<NextBar> out(n);
  if (taus.empty()) return out;
  model.module().eval();
  {
    torch::NoGradGuard no_grad;
    for (int64_t b = 0; b < source.test_batches(); ++b) {
      const auto& refs = source.test_refs(b);
      const auto result = model.forward(source.test_batch(b)).at(0).to(torch::kCPU, torch::kDouble);
      const auto first = result.select(1, 0).contiguous();  // [batch, Q]: the next bar
      const double* v = first.data_ptr<double>();
      for (int64_t i = 0; i < first.size(0); ++i) {
        const auto& ref = refs.at(static_cast<size_t>(i));
        const auto k = static_cast<size_t>(ref.instrument);
        const auto& ds = *market.datasets[k];
        if (first_anchor[k] < 0) first_anchor[k] = ref.anchor;
        const double back = ds.target_divisor(ref.anchor) / ds.options().target_scale;
        std::vector<double> row(taus.size());
        for (size_t j = 0; j < taus.size(); ++j) row[j] = v[i * first.size(1) + j] * back;
        q[k].push_back(std::move(row));
        y[k].push_back(ds.log_return(ref.anchor + 1));
      }
    }
  }
  for (size_t k = 0; k < n; ++k) {
    if (y[k].empty()) continue;
    const auto& ds = *market.datasets[k];
    std::vector<double> past;
    for (int64_t bar = std::max<int64_t>(1, ds.splits().train.begin); bar <= first_anchor[k]; ++bar)
      past.push_back(ds.log_return(bar));
    out[k].eval = data::evaluate_forecast(past, y[k], q[k], taus, seed);
    out[k].points = static_cast<int64_t>(y[k].size());
  }
  return out;
}

// Pools a panel's per-instrument evaluations (points-weighted, like the panel backtest).
ForecastTestEvaluation::Pooled pool_next_bar(const std::vector<NextBar>& evals) {
  ForecastTestEvaluation::Pooled p;
  double model = 0.0, baseline = 0.0;
  for (const auto& nb : evals) {
    if (!nb.eval) continue;
    const auto& e = *nb.eval;
    const auto points = static_cast<double>(nb.points);
    double best = e.model.mean_pinball;
    for (const auto& [name, scores] : e.baselines)
      if (name == e.best_baseline) best = scores.mean_pinball;
    model += points * e.model.mean_pinball;
    baseline += points * best;
    p.points += nb.points;
    p.instruments += 1;
    p.beating_instruments += e.beats_best_baseline ? 1 : 0;
  }
  if (p.points > 0) {
    p.model_pinball = model / static_cast<double>(p.points);
    p.baseline_pinball = baseline / static_cast<double>(p.points);
    p.skill = p.baseline_pinball > 0 ? 1.0 - p.model_pinball / p.baseline_pinball : NAN;
  }
  return p;
}

TrainSummary run_forecast(const TrainJob& job, const std::optional<Container>& resumed) {
  FOXHUNT_CHECK(job.steps == 0, kTrainJobComponent, "steps applies to ", policy_names(), "; ",
                job.model, " trains for epochs");
  FOXHUNT_CHECK(job.env.empty(), kTrainJobComponent, "env applies to ", policy_names(), "; ",
                job.model, " trains on market data (data: a bars CSV)");
  const auto names = models::model_names();
  FOXHUNT_CHECK(std::find(names.begin(), names.end(), job.model) != names.end(), kTrainJobComponent,
                "model '", job.model, "' is not part of this build");
  checked_overrides(job.options, "options");
  checked_overrides(job.model_options, "model_options");
  if (!job.resume.empty())
    FOXHUNT_CHECK(job.model_options.empty(), kTrainJobComponent,
                  "resume continues with the checkpoint's model; drop model_options");

  if (resumed) resumed_checkpoint(resumed, job, "forecast");
  FOXHUNT_CHECK(!resumed || resumed->header.value("model", "") == job.model, kTrainJobComponent,
                "resume: '", job.resume, "' holds a '",
                resumed ? resumed->header.value("model", "?") : "", "' model, not '", job.model,
                "'");
  Market market = load_market(job, resumed, true);
  // Short series get the compact sizes (unless the user chose options or resumes a run); a
  // panel counts the training bars of all its instruments.
  int64_t train_bars = 0;
  for (const auto& ds : market.datasets) train_bars += ds->splits().train.size();
  const bool compact = !resumed && job.model_options.empty() && train_bars < kShortSeriesBars;
  nlohmann::json model_options = resumed   ? resumed->header["options"]
                                 : compact ? compact_model_options(job.model)
                                           : job.model_options;
  // A model with an instrument input (the TFT's static categorical) gets an id per instrument.
  const auto& sizing = models::catalog_entry(job.model).instrument_count_option;
  const auto instruments = static_cast<int64_t>(market.datasets.size());
  if (!sizing.empty() && !resumed) {
    if (!model_options.contains(sizing))
      model_options[sizing] = std::max<int64_t>(
          instruments,
          models::make_model(job.model, model_options)->options_json().value(sizing, int64_t{1}));
    FOXHUNT_CHECK(model_options[sizing].is_number_integer() &&
                      model_options[sizing].get<int64_t>() >= instruments,
                  kTrainJobComponent, "model_options: ", sizing, " ", model_options[sizing].dump(),
                  " is fewer than the ", instruments, " instruments of '", market.info.source,
                  "' (", job.model, " gives each instrument its own id)");
  }
  nlohmann::json base =
      resumed ? resumed->header["trainer"]["options"] : to_json(train::ForecastTrainerOptions());
  if (compact) base.update(compact_trainer_options(job.model));
  base.update(job.options);
  if (job.epochs > 0) base["epochs"] = job.epochs;
  if (job.seed) base["seed"] = *job.seed;
  const auto o = train::forecast_trainer_options_from_json(base);
  // On resume the batch size is the checkpoint's: it fixes the batches of an epoch.
  // 0 = --batch auto, planned once the model and the data are known.
  int64_t batch = resumed ? resumed->header["trainer"]
                                .value("extra", nlohmann::json::object())
                                .value("batch_size", int64_t{64})
                  : job.batch.empty()   ? 64
                  : job.batch == "auto" ? 0
                                        : parse_batch(job.batch);
  const torch::Device device = models::to_torch(job.device);

  RunCap cap(job);               // a budget given: the whole run under it
  torch::manual_seed(o.seed());  // deterministic initial weights
  auto model = models::make_model(job.model, model_options);
  model->to(device);
  std::optional<BatchPlanSummary> batch_plan;
  if (batch == 0) {
    // More than one epoch's windows in a batch is pointless: clamp to the training windows.
    size_t windows = 0;
    for (const auto& ds : market.datasets)
      windows += ds->anchors(data::Split::kTrain, train::window_of(model->spec())).size();
    batch = plan_auto_batch(job, job.model, model->options_json(), static_cast<int64_t>(windows),
                            o.seed(), batch_plan, to_json(o));
  }
  cap.enforce();
  train::MarketBatchSource source(market.datasets, *model, batch, o.seed(), device);
  if (!resumed) init_quantile_head(*model, market.raw(), source.spec());
  // --batch is per rank: an epoch is made of global batches of batch x world windows.
  source.set_shard(job.dist.rank(), job.dist.world_size());
  train::ForecastTrainer trainer(*model, source, o);
  if (resumed) trainer.load_checkpoint(*resumed, job.resume);
  nlohmann::json extra = {{"data", to_json(market.info)}, {"batch_size", batch}};
  if (job.dist.world_size() > 1) extra["world_size"] = job.dist.world_size();
  trainer.set_checkpoint_extra(extra);
  if (auto comm = connect_ranks(job, device)) trainer.set_data_parallel(comm);
  const Paths paths = output_paths(job);
  auto result = trainer.train(run_config(job, paths, 50));

  nlohmann::json options = to_json(o);
  options["batch_size"] = batch;
  options["model"] = model->options_json();
  auto summary = summary_of(job, "market", result, paths, options);
  summary.data = market.info;
  if (compact)
    summary.compact_defaults =
        CompactDefaults{.reason = std::to_string(train_bars) + " training bars < " +
                                  std::to_string(kShortSeriesBars),
                        .model = compact_model_options(job.model),
                        .trainer = compact_trainer_options(job.model)};
  summary.batch_plan = batch_plan;
  summary.memory_cap = cap.report();
  add_distributed(summary, result, job);
  if (job.dist.rank() > 0) return summary;  // rank 0 evaluates and writes the bundle
  if (!result.interrupted) {
    const auto spec = source.spec();
    const std::vector<double> quantiles = model->spec().quantiles;
    const double test_loss = train::mean_batch_loss(
        *model, source.test_batches(), [&](int64_t i) { return source.test_batch(i); });
    const double baseline =
        quantiles.empty() ? NAN : unconditional_baseline(market.raw(), spec, quantiles);
    ForecastTestEvaluation e;
    const auto next_bar = next_bar_evaluations(*model, source, market, quantiles, o.seed());
    if (market.is_panel()) {
      for (size_t i = 0; i < next_bar.size(); ++i)
        if (next_bar[i].eval) e.next_bar_by_instrument[market.symbols[i]] = *next_bar[i].eval;
      e.next_bar_pooled = pool_next_bar(next_bar);
    } else {
      e.next_bar = next_bar.front().eval;
    }
    e.windows = source.windows(data::Split::kTest);
    e.loss = test_loss;
    e.baseline_loss = baseline;
    e.skill = 1.0 - test_loss / baseline;
    e.best_val_loss = trainer.best_validation_loss();
    e.best_epoch = trainer.best_epoch();
    e.initial_val_loss = trainer.initial_validation_loss();
    summary.eval = std::move(e);
    // The bundle stores the summary as it stands before the bundle itself.
    nlohmann::json training = to_json(summary);
    training.erase("bundle");
    summary.bundle = write_bundle(*model, market, training, paths.dir);
  }
  return summary;
}

}  // namespace

TrainSummary run_train_job(const TrainJob& given) {
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
  if (job.dist.world_size() > 1 && job.device == Device::cuda() && torch::cuda::device_count() > 1)
    job.device = Device::cuda(static_cast<int>(job.dist.rank() % torch::cuda::device_count()));
  FOXHUNT_CHECK(models::in_catalog(job.model), kTrainJobComponent, "unknown model '", job.model,
                "'; expected one of: ", models::joined_model_names());
  FOXHUNT_CHECK(job.steps >= 0 && job.epochs >= 0, kTrainJobComponent,
                "steps and epochs must be positive");
  FOXHUNT_CHECK(job.steps == 0 || job.epochs == 0, kTrainJobComponent,
                "give either steps or epochs, not both");
  if (!job.resume.empty())
    FOXHUNT_CHECK(job.options.empty() && job.batch.empty() && !job.seed, kTrainJobComponent,
                  "resume continues with the checkpoint's options; only steps/epochs may "
                  "change (drop options, batch and seed)");
  // The checkpoint is read (and CRC-checked) once; options, data path and state come from it.
  std::optional<Container> resumed;
  if (!job.resume.empty()) resumed = read_container(job.resume);
  dist::validate(job.dist);
  TrainSummary summary =
      models::is_policy(job.model) ? run_rl(job, resumed) : run_forecast(job, resumed);
  if (resumed && checkpoint_world(*resumed) != job.dist.world_size())
    summary.resumed_world_size = checkpoint_world(*resumed);
  if (job.dist.rank() > 0) return summary;
  const auto dir = std::filesystem::path(summary.metrics_file).parent_path();
  write_file_atomic((dir / "summary.json").string(), to_json(summary).dump(2) + "\n");
  return summary;
}

}  // namespace foxhunt::jobs
