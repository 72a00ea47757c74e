// `foxhunt train all` (the four models on one series into one ensemble directory) and the text
// summary of train jobs; split from train_job.cpp, which runs one model.
#include <cstdio>
#include <filesystem>
#include <string>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/units.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::jobs {

using namespace foxhunt::serving;  // the areas below
namespace {

constexpr const char* kComponent = "train";

}  // namespace

using train::format_duration;

nlohmann::json run_train_all(const TrainJob& base) {
  FOXHUNT_CHECK(base.resume.empty(), kComponent,
                "train all: --resume applies to one model; resume each with foxhunt train MODEL");
  FOXHUNT_CHECK(base.dist.world_size() == 1, kComponent,
                "train all: data-parallel runs train one model; use foxhunt train MODEL --nproc N");
  FOXHUNT_CHECK(base.env.empty() || base.env == "trading", kComponent,
                "train all: the RL models train on the trading env of --data, got --env ",
                base.env);
  FOXHUNT_CHECK(base.options.empty() && base.model_options.empty(), kComponent,
                "train all: --options/--model-options differ per model; use foxhunt train MODEL");
  const std::string out = base.out_dir.empty() ? "out/ensemble" : base.out_dir;
  nlohmann::json models = nlohmann::json::object();
  nlohmann::json bundles = nlohmann::json::array();
  bool interrupted = false;
  for (const auto& name : trainable_models()) {
    TrainJob job = base;
    job.model = name;
    job.out_dir = BundleDirectory(out).model_dir(name);
    const bool rl = models::is_policy(name);
    job.env = rl ? "trading" : "";
    job.steps = rl ? base.steps : 0;    // --steps: the RL models
    job.epochs = rl ? 0 : base.epochs;  // --epochs: the forecasters
    std::fprintf(stderr, "[train all] %s -> %s\n", name.c_str(), job.out_dir.c_str());
    auto summary = run_train_job(job);
    interrupted = summary.value("interrupted", false);
    if (!summary["bundle"].is_null()) bundles.push_back(summary["bundle"]);
    models[name] = std::move(summary);
    if (interrupted) break;  // Ctrl-C stops the whole run; finished bundles stay
  }
  nlohmann::json all = {{"out", out},
                        {"models", models},
                        {"bundles", bundles},
                        {"interrupted", interrupted},
                        {"complete", bundles.size() == trainable_models().size()}};
  write_file_atomic((std::filesystem::path(out) / "summary.json").string(), all.dump(2) + "\n");
  return all;
}

std::string format_train_summary(const nlohmann::json& s) {
  if (s.contains("models") && s.contains("bundles")) {  // train all
    std::string out;
    for (const auto& [name, m] : s["models"].items()) out += format_train_summary(m);
    out += "bundles (" + std::to_string(s["bundles"].size()) +
           "): serve them with foxhunt predict "
           "--bundles " +
           s["out"].get<std::string>() + " --data F.csv\n";
    return out;
  }
  char buf[512];
  std::string out;
  const double secs = s.value("seconds", 0.0);
  const auto& m = s["metrics"];
  const bool forecast = s["env"] == "market";
  std::snprintf(buf, sizeof(buf), "%s on %s: %lld/%lld steps, %lld %s in %s%s\n",
                s["model"].get<std::string>().c_str(), s["env"].get<std::string>().c_str(),
                static_cast<long long>(s["steps"].get<int64_t>()),
                static_cast<long long>(s["total_steps"].get<int64_t>()),
                static_cast<long long>(s["episodes"].get<int64_t>()),
                forecast ? "epochs" : "episodes", format_duration(secs).c_str(),
                s.value("interrupted", false) ? " (interrupted)" : "");
  out += buf;
  if (s.contains("distributed") && s["distributed"].is_object()) {
    const auto& d = s["distributed"];
    const auto& w = d.value("last_weight_check", nlohmann::json());
    std::snprintf(
        buf, sizeof(buf),
        "  data-parallel: %lld ranks (%s), %lld buckets of %s, %.3g s waiting for "
        "all-reduce; weights %s at step %lld (checksum %s)\n",
        static_cast<long long>(d.value("world_size", int64_t{1})), d.value("backend", "?").c_str(),
        static_cast<long long>(d.value("buckets", int64_t{0})),
        human_bytes(d.value("bucket_bytes", int64_t{0})).c_str(),
        d.value("communication_wait_s", 0.0),
        w.is_object() && w.value("identical", false) ? "identical on every rank" : "not compared",
        static_cast<long long>(w.is_object() ? w.value("step", int64_t{-1}) : -1),
        w.is_object() ? w.value("weight_checksum", "").c_str() : "-");
    out += buf;
  }
  if (m.contains("return_mean")) {
    if (m["return_mean"].is_null())
      std::snprintf(buf, sizeof(buf), "  training return (last 100 episodes): n/a\n");
    else
      std::snprintf(buf, sizeof(buf), "  training return (last 100 episodes): %.4g\n",
                    m["return_mean"].get<double>());
    out += buf;
  }
  const auto& e = s.contains("eval") ? s["eval"] : nlohmann::json();
  if (e.is_object() && e.contains("mean_return")) {
    std::snprintf(buf, sizeof(buf),
                  "  greedy evaluation: mean return %.4g over %lld episodes (min %.4g, max %.4g)\n",
                  e["mean_return"].get<double>(),
                  static_cast<long long>(e["episodes"].get<int64_t>()),
                  e["min_return"].get<double>(), e["max_return"].get<double>());
    out += buf;
  }
  if (e.is_object() && e.contains("loss") && e["loss"].is_number()) {
    std::snprintf(buf, sizeof(buf),
                  "  best validation loss %.5g (epoch %lld); test loss %.5g vs unconditional "
                  "baseline %.5g over %lld windows\n",
                  e["best_val_loss"].is_number() ? e["best_val_loss"].get<double>() : NAN,
                  static_cast<long long>(e["best_epoch"].get<int64_t>()), e["loss"].get<double>(),
                  e["baseline_loss"].is_number() ? e["baseline_loss"].get<double>() : NAN,
                  static_cast<long long>(e["windows"].get<int64_t>()));
    out += buf;
  }
  out += "  checkpoint: " + s["checkpoint"].get<std::string>() + "\n";
  out += "  metrics:    " + s["metrics_file"].get<std::string>() + "\n";
  if (s.value("interrupted", false))
    out += "  resume with: foxhunt train " + s["model"].get<std::string>() + " --resume " +
           s["checkpoint"].get<std::string>() + "\n";
  return out;
}

}  // namespace foxhunt::jobs
