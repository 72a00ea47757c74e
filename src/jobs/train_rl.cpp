// The RL models of a train job (dqn, ppo): environments, the trainer's typed options, batch
// planning, training, greedy evaluation and the bundle of a policy trained on market data.
#include <algorithm>
#include <functional>
#include <numeric>

#include "foxhunt/core/error.h"
#include "foxhunt/core/units.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/train/dqn_trainer.h"
#include "foxhunt/train/market_sources.h"
#include "foxhunt/train/ppo_trainer.h"
#include "train_job_parts.h"

namespace foxhunt::jobs::detail {

using market_data::load_market;
using market_data::Market;
using market_data::write_bundle;

namespace {

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
template <typename Trainer, typename Options>
RlOutcome train_rl(const TrainJob& job, const RlContext& ctx, Options o, int64_t plan_clamp,
                   int64_t log_interval) {
  RlOutcome out;
  RunCap cap(job);
  if (job.batch.is_auto()) {
    nlohmann::json net;
    {
      auto probe = ctx.factory(0);
      net = models::policy_options(job.model,
                                   {probe->observation_size(), o.hidden(), probe->action_count()},
                                   kTrainJobComponent);
    }
    o.batch_size(plan_auto_batch(job, job.model, net, plan_clamp, o.seed(), out.batch_plan,
                                 to_json(o), ctx.factory));
  }
  cap.enforce();
  Trainer trainer(o, ctx.factory, job.model);
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

// The RL trainer's options for this job: the environment's defaults (or the checkpoint's), then
// --options, then the flags (--batch auto is planned later, once the network is known).
template <typename Options>
Options rl_trainer_options(const TrainJob& job, const JobInputs& in, const Options& defaults) {
  std::optional<Options> resumed;
  if (in.resumed) resumed = std::get<Options>(in.resumed->trainer_options);
  TrainerFlags flags;
  flags.length = job.steps;
  if (job.batch.kind == BatchChoice::Kind::kFixed) flags.batch_size = job.batch.size;
  flags.seed = job.seed;
  flags.device = models::to_torch(job.device);
  return merge_trainer_options(defaults, resumed, {std::get<OptionsPatch<Options>>(in.options)},
                               flags);
}

}  // namespace

TrainSummary run_rl(const TrainJob& job, const JobInputs& in) {
  const std::string env_name = job.env.empty() ? "cartpole" : job.env;
  FOXHUNT_CHECK(job.epochs == 0, kTrainJobComponent, "epochs applies to ", forecaster_names(), "; ",
                job.model, " trains for steps");
  FOXHUNT_CHECK(env_name == "cartpole" || env_name == "trading", kTrainJobComponent,
                "env: expected cartpole or trading, got '", env_name, "'");
  FOXHUNT_CHECK((job.data.empty() && !job.ticks) || env_name == "trading", kTrainJobComponent,
                "data and ticks apply to env 'trading' and to ", forecaster_names());
  FOXHUNT_CHECK(job.model_options.empty(), kTrainJobComponent, "model_options applies to ",
                forecaster_names(), "; use options for ", job.model);
  FOXHUNT_CHECK(job.eval_episodes >= 0, kTrainJobComponent, "eval_episodes: expected >= 0, got ",
                job.eval_episodes);

  train::EnvFactory factory;
  std::function<std::unique_ptr<train::Env>()> make_eval_env;
  int64_t eval_episodes = job.eval_episodes;
  // Periodic greedy evaluation keeps the best weights (CartPole learning oscillates late).
  auto dqn_defaults = train::DqnTrainerOptions().eval_interval(5000);
  auto ppo_defaults = train::PpoTrainerOptions().eval_interval(10000);
  std::optional<MarketDataInfo> data_info;
  std::optional<Market> market;
  if (env_name == "cartpole") {
    factory = train::env_factory("cartpole");
    make_eval_env = [factory] { return factory(train::kEvalEnvIndex); };
  } else {
    // The reference trading configuration (ARCHITECTURE.md, "Memory accounting"): 256-d state,
    // hidden [128, 64], DQN lr 1e-4.
    market = load_market(job, in.resumed ? &*in.resumed : nullptr, in.preloaded, false);
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
    dqn_defaults = train::DqnTrainerOptions()
                       .hidden({128, 64})
                       .learning_rate(1e-4)
                       .eval_interval(10000)
                       .eval_episodes(periodic);
    ppo_defaults =
        train::PpoTrainerOptions().hidden({128, 64}).eval_interval(16384).eval_episodes(periodic);
  }

  RlContext ctx{factory,   make_eval_env, eval_episodes, env_name, market ? &*market : nullptr,
                data_info, in.container};
  RlOutcome r;
  switch (models::catalog_entry(job.model).trainer) {
    case models::TrainerKind::kDqn: {
      const auto o = rl_trainer_options(job, in, dqn_defaults);
      r = train_rl<train::DqnTrainer>(job, ctx, o, o.buffer_size(), 1000);
      break;
    }
    case models::TrainerKind::kPpo: {
      const auto o = rl_trainer_options(job, in, ppo_defaults);
      // A minibatch larger than one rollout is pointless: clamp to n_envs * n_steps.
      r = train_rl<train::PpoTrainer>(job, ctx, o, o.n_envs() * o.n_steps(), 4096);
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

}  // namespace foxhunt::jobs::detail
