// foxhunt train MODEL: train one model and write a checkpoint (library: runtime/train_job.h).
#include <ATen/Parallel.h>

#include <iostream>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/runtime/train_job.h"

namespace foxhunt::cli {
namespace {

struct TrainArgs {
  runtime::TrainJob job;
  std::string options_json;
  std::string model_options_json;
  std::string progress = "auto";
  uint64_t seed = 0;
  int threads = 0;
  bool json = false;
};

Registrar reg = subcommand<TrainArgs>(
    "train", 40, "Train one model (or all four) and write a checkpoint and a serving bundle",
    [](CLI::App* sub, std::shared_ptr<TrainArgs> args) -> Runner {
      std::vector<std::string> accepted = runtime::trainable_models();
      accepted.push_back("all");
      sub->add_option("model", args->job.model,
                      "dqn, ppo, mamba2, tft, or all (the four on one series: OUT/<model>/)")
          ->required()
          ->check(CLI::IsMember(accepted));
      sub->add_option("--env", args->job.env, "RL environment: cartpole (default) or trading")
          ->check(CLI::IsMember({"cartpole", "trading"}));
      sub->add_option("--data", args->job.data,
                      "Bars CSV (trading env, mamba2/tft); default synthetic");
      auto* steps = sub->add_option("--steps", args->job.steps, "Environment steps (dqn, ppo)")
                        ->check(CLI::PositiveNumber);
      auto* epochs = sub->add_option("--epochs", args->job.epochs, "Epochs (mamba2, tft)")
                         ->check(CLI::PositiveNumber);

      sub->add_option("--batch", args->job.batch,
                      "Batch size: a number, or auto (largest batch the memory planner verifies "
                      "within the budget)");
      sub->add_option("--device-profile", args->job.device_profile,
                      "--batch auto: budget = this device profile's usable bytes")
          ->capture_default_str();
      sub->add_option("--budget-mib", args->job.budget_mib,
                      "--batch auto: budget in MiB (overrides --device-profile)")
          ->check(CLI::PositiveNumber);
      auto* seed = sub->add_option("--seed", args->seed, "Seed of every random draw (default 0)");
      sub->add_option("--out", args->job.out_dir,
                      "Output directory (default out/train-MODEL, or the resumed checkpoint's)");
      sub->add_option("--resume", args->job.resume, "Continue from a trainer checkpoint")
          ->check(CLI::ExistingFile);
      sub->add_option("--device", args->job.device, "cpu, cuda or cuda:N")->capture_default_str();
      sub->add_option("--options", args->options_json,
                      "Trainer option overrides as a JSON object, e.g. '{\"learning_rate\":1e-3}'");
      sub->add_option("--model-options", args->model_options_json,
                      "mamba2/tft model options as a JSON object, e.g. '{\"d_model\":32}'");
      sub->add_option("--eval-episodes", args->job.eval_episodes,
                      "Greedy evaluation episodes after RL training (0 = none)")
          ->check(CLI::NonNegativeNumber)
          ->capture_default_str();
      sub->add_option("--log-interval", args->job.log_interval, "Steps between metrics lines")
          ->check(CLI::PositiveNumber);
      sub->add_option("--checkpoint-interval", args->job.checkpoint_interval,
                      "Steps between checkpoints (default: only at the end)")
          ->check(CLI::PositiveNumber);
      sub->add_option("--progress", args->progress, "auto, bar, lines or off (progress on stderr)")
          ->check(CLI::IsMember({"auto", "bar", "lines", "off"}))
          ->capture_default_str();
      sub->add_option("--threads", args->threads,
                      "Intra-op threads (default: FOXHUNT_THREADS, else OMP_NUM_THREADS, else 1)")
          ->check(CLI::PositiveNumber);
      sub->add_flag("--json", args->json, "Print the summary as JSON only");
      return [args, seed, steps, epochs]() {
        auto& job = args->job;
        // One model trains for steps or epochs; `all` takes both (steps: dqn/ppo, epochs: the
        // forecasters).
        FOXHUNT_CHECK(job.model == "all" || steps->count() == 0 || epochs->count() == 0, "train",
                      "--steps excludes --epochs (except for train all)");
        if (args->threads > 0) at::set_num_threads(args->threads);
        if (seed->count() > 0) job.seed = args->seed;
        if (!args->options_json.empty()) {
          try {
            job.options = nlohmann::json::parse(args->options_json);
          } catch (const nlohmann::json::exception& e) {
            throw InputError("train", std::string("--options: not valid JSON (") + e.what() + ")");
          }
        }
        if (!args->model_options_json.empty()) {
          try {
            job.model_options = nlohmann::json::parse(args->model_options_json);
          } catch (const nlohmann::json::exception& e) {
            throw InputError("train",
                             std::string("--model-options: not valid JSON (") + e.what() + ")");
          }
        }
        const std::string& p = args->progress;
        job.progress = p == "bar"     ? train::ProgressMode::kBar
                       : p == "lines" ? train::ProgressMode::kLines
                       : p == "off"   ? train::ProgressMode::kOff
                                      : train::ProgressMode::kAuto;
        nlohmann::json summary;
        {
          // Ctrl-C asks the trainer to checkpoint and return; a second Ctrl-C kills the process.
          train::ScopedSigintHandler sigint;
          summary = job.model == "all" ? runtime::run_train_all(job) : runtime::run_train_job(job);
        }
        if (args->json)
          print_json(summary.dump(2));
        else
          std::cout << runtime::format_train_summary(summary);
        // 128 + SIGINT, the shell convention for a run ended by Ctrl-C (the checkpoint is written).
        return summary.value("interrupted", false) ? 130 : 0;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
