#include "foxhunt/train/job.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/train/checkpointing.h"
#include "foxhunt/train/dqn_trainer.h"
#include "foxhunt/train/ppo_trainer.h"

namespace foxhunt::train {

const std::vector<std::string>& trainable_models() {
  static const std::vector<std::string> names = {"dqn", "ppo", "mamba2", "tft"};
  return names;
}

namespace {

constexpr const char* kComponent = "train";

int64_t parse_batch(const std::string& batch) {
  FOXHUNT_CHECK(batch != "auto", kComponent,
                "--batch auto needs the memory batch planner, which is not part of this build "
                "yet; pass a number (e.g. --batch 64)");
  int64_t n = 0;
  size_t used = 0;
  try {
    n = std::stoll(batch, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  FOXHUNT_CHECK(used == batch.size() && n > 0, kComponent,
                "--batch: expected a positive integer or 'auto', got '", batch, "'");
  return n;
}

// Trainer options: checkpoint's (on resume) or defaults, then the JSON overrides, then flags.
nlohmann::json merged_options(nlohmann::json base, const TrainJob& job, const char* steps_key) {
  FOXHUNT_CHECK(job.options.is_object(), kComponent, "--options: expected a JSON object, got ",
                job.options.type_name());
  base.update(job.options);
  if (job.steps > 0) base[steps_key] = job.steps;
  if (!job.batch.empty()) base["batch_size"] = parse_batch(job.batch);
  if (job.seed) base["seed"] = *job.seed;
  base["device"] = job.device;
  return base;
}

nlohmann::json checkpoint_options(const std::string& path, const char* algo) {
  auto c = read_trainer_checkpoint(path, algo);
  FOXHUNT_CHECK(c.header["trainer"].contains("options"), "checkpoint", "'", path,
                "': trainer options missing");
  return c.header["trainer"]["options"];
}

nlohmann::json evaluation(Env& env, const Policy& policy, int64_t episodes, uint64_t seed) {
  if (episodes <= 0) return nullptr;
  auto returns = evaluate_policy(env, policy, episodes, seed);
  const double mean = std::accumulate(returns.begin(), returns.end(), 0.0) / returns.size();
  return {{"episodes", episodes},
          {"mean_return", mean},
          {"min_return", *std::min_element(returns.begin(), returns.end())},
          {"max_return", *std::max_element(returns.begin(), returns.end())},
          {"policy", "greedy"}};
}

struct Paths {
  std::string dir, checkpoint, metrics, summary;
};

Paths output_paths(const TrainJob& job) {
  std::string dir = job.out_dir;
  if (dir.empty() && !job.resume.empty()) {
    dir = std::filesystem::path(job.resume).parent_path().string();
    if (dir.empty()) dir = ".";
  }
  if (dir.empty()) dir = "out/train-" + job.model;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  FOXHUNT_CHECK(!ec && std::filesystem::is_directory(dir), kComponent,
                "--out: cannot create directory '", dir, "': ", ec.message());
  const auto p = std::filesystem::path(dir);
  return {dir, (p / "checkpoint.ckpt").string(), (p / "metrics.jsonl").string(),
          (p / "summary.json").string()};
}

RunConfig run_config(const TrainJob& job, const Paths& paths, int64_t default_log_interval) {
  RunConfig run;
  run.checkpoint_path = paths.checkpoint;
  run.metrics_path = paths.metrics;
  run.checkpoint_interval = job.checkpoint_interval;
  run.log_interval = job.log_interval > 0 ? job.log_interval : default_log_interval;
  run.progress = job.progress;
  return run;
}

nlohmann::json summary_of(const TrainJob& job, const TrainResult& r, const Paths& paths,
                          const nlohmann::json& options) {
  return {
      {"model", job.model},
      {"env", job.env},
      {"steps", r.steps},
      {"total_steps", r.total_steps},
      {"episodes", r.episodes},
      {"completed", r.completed},
      {"interrupted", r.interrupted},
      {"seconds", r.seconds},
      {"checkpoint", r.checkpoint_path},
      {"metrics_file", paths.metrics},
      {"resumed_from", job.resume.empty() ? nlohmann::json(nullptr) : nlohmann::json(job.resume)},
      {"options", options},
      {"metrics", r.metrics}};
}

nlohmann::json run_rl(const TrainJob& job) {
  FOXHUNT_CHECK(job.epochs == 0, kComponent, "--epochs applies to mamba2/tft; ", job.model,
                " trains for --steps");
  FOXHUNT_CHECK(job.env == "cartpole" || job.env == "trading", kComponent,
                "--env: expected cartpole or trading, got '", job.env, "'");
  FOXHUNT_CHECK(
      job.env != "trading", kComponent,
      "--env trading needs the market-data pipeline, which is not part of this build yet");
  FOXHUNT_CHECK(job.data.empty(), kComponent, "--data applies to --env trading and to mamba2/tft");
  FOXHUNT_CHECK(job.eval_episodes >= 0, kComponent, "--eval-episodes: expected >= 0, got ",
                job.eval_episodes);
  const EnvFactory factory = env_factory(job.env);
  std::optional<Paths> paths;
  TrainResult result;
  nlohmann::json options, eval;
  if (job.model == "dqn") {
    auto base =
        job.resume.empty() ? to_json(DqnTrainerOptions()) : checkpoint_options(job.resume, "dqn");
    auto o = dqn_trainer_options_from_json(merged_options(base, job, "total_steps"));
    DqnTrainer trainer(o, factory);
    if (!job.resume.empty()) trainer.load_checkpoint(job.resume);
    paths = output_paths(job);  // only once the options are known to be good
    result = trainer.train(run_config(job, *paths, 1000));
    options = to_json(o);
    auto env = factory(0);
    if (!result.interrupted)
      eval =
          evaluation(*env, trainer.greedy_policy(), job.eval_episodes, derive_seed(o.seed(), 999));
  } else {
    auto base =
        job.resume.empty() ? to_json(PpoTrainerOptions()) : checkpoint_options(job.resume, "ppo");
    auto o = ppo_trainer_options_from_json(merged_options(base, job, "total_steps"));
    PpoTrainer trainer(o, factory);
    if (!job.resume.empty()) trainer.load_checkpoint(job.resume);
    paths = output_paths(job);
    result = trainer.train(run_config(job, *paths, 4096));
    options = to_json(o);
    auto env = factory(0);
    if (!result.interrupted)
      eval =
          evaluation(*env, trainer.greedy_policy(), job.eval_episodes, derive_seed(o.seed(), 999));
  }
  auto summary = summary_of(job, result, *paths, options);
  summary["eval"] = eval;
  return summary;
}

}  // namespace

nlohmann::json run_train_job(const TrainJob& job) {
  const auto& names = trainable_models();
  FOXHUNT_CHECK(std::find(names.begin(), names.end(), job.model) != names.end(), kComponent,
                "unknown model '", job.model, "'; expected one of: dqn, ppo, mamba2, tft");
  FOXHUNT_CHECK(job.steps >= 0 && job.epochs >= 0, kComponent,
                "--steps and --epochs must be positive");
  FOXHUNT_CHECK(job.steps == 0 || job.epochs == 0, kComponent,
                "give either --steps or --epochs, not both");
  if (!job.resume.empty())
    FOXHUNT_CHECK(job.options.empty() && job.batch.empty() && !job.seed, kComponent,
                  "--resume continues with the checkpoint's options; only --steps/--epochs may "
                  "change (drop --options, --batch and --seed)");
  nlohmann::json summary;
  if (job.model == "dqn" || job.model == "ppo") {
    summary = run_rl(job);
  } else {
    throw InputError(kComponent, "training '" + job.model +
                                     "' needs the forecasting models and the market-data "
                                     "pipeline, which are not part of this build yet");
  }
  const auto dir = std::filesystem::path(summary["metrics_file"].get<std::string>()).parent_path();
  write_file_atomic((dir / "summary.json").string(), summary.dump(2) + "\n");
  return summary;
}

std::string format_train_summary(const nlohmann::json& s) {
  char buf[512];
  std::string out;
  const double secs = s.value("seconds", 0.0);
  const auto& m = s["metrics"];
  std::snprintf(buf, sizeof(buf), "%s on %s: %lld/%lld steps, %lld episodes in %s%s\n",
                s["model"].get<std::string>().c_str(), s["env"].get<std::string>().c_str(),
                static_cast<long long>(s["steps"].get<int64_t>()),
                static_cast<long long>(s["total_steps"].get<int64_t>()),
                static_cast<long long>(s["episodes"].get<int64_t>()), format_duration(secs).c_str(),
                s.value("interrupted", false) ? " (interrupted)" : "");
  out += buf;
  if (m.contains("return_mean")) {
    if (m["return_mean"].is_null())
      std::snprintf(buf, sizeof(buf), "  training return (last 100 episodes): n/a\n");
    else
      std::snprintf(buf, sizeof(buf), "  training return (last 100 episodes): %.1f\n",
                    m["return_mean"].get<double>());
    out += buf;
  }
  if (s.contains("eval") && s["eval"].is_object()) {
    const auto& e = s["eval"];
    std::snprintf(buf, sizeof(buf),
                  "  greedy evaluation: mean return %.1f over %lld episodes (min %.0f, max %.0f)\n",
                  e["mean_return"].get<double>(),
                  static_cast<long long>(e["episodes"].get<int64_t>()),
                  e["min_return"].get<double>(), e["max_return"].get<double>());
    out += buf;
  }
  out += "  checkpoint: " + s["checkpoint"].get<std::string>() + "\n";
  out += "  metrics:    " + s["metrics_file"].get<std::string>() + "\n";
  if (s.value("interrupted", false))
    out += "  resume with: foxhunt train " + s["model"].get<std::string>() + " --resume " +
           s["checkpoint"].get<std::string>() + "\n";
  return out;
}

}  // namespace foxhunt::train
