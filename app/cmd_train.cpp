// foxhunt train MODEL: train one model and write a checkpoint (library: jobs/train_job.h).
#include <ATen/Parallel.h>

#include <filesystem>
#include <iostream>

#include "command.h"
#include "cost_flags.h"
#include "foxhunt/core/error.h"
#include "foxhunt/dist/launcher.h"
#include "foxhunt/jobs/train_job.h"
#include "tape_flags.h"

namespace foxhunt::cli {
namespace {

struct TrainArgs {
  static constexpr const char* kHelp =
      "Train one model (or all four) and write a checkpoint and a serving bundle";
  jobs::TrainJob job;
  std::string batch;  // --batch as given: parsed into job.batch (jobs::BatchChoice)
  std::string options_json;
  std::string model_options_json;
  std::string progress = "auto";
  uint64_t seed = 0;
  int threads = 0;
  bool json = false;
  int64_t nproc = 1;
  int64_t world_size = 1, rank = 0, check_interval = 0;
  std::string master, backend = "auto";
  double timeout_s = 0;
  BudgetFlags budget;
  TapeFlags tape;
  double periods_per_year = 0;
};

// What to run next, in this CLI's flags: resume an interrupted model, serve the bundles.
std::string next_steps(const jobs::TrainSummary& s) {
  return s.interrupted
             ? "resume with: foxhunt train " + s.model + " --resume " + s.checkpoint + "\n"
             : "";
}

std::string next_steps(const jobs::TrainAllSummary& s) {
  std::string out;
  for (const auto& [name, m] : s.models) out += next_steps(m);
  const bool tape = !s.models.empty() && s.models.begin()->second.data &&
                    !s.models.begin()->second.data->bar_spec.empty();
  return out + "serve them with: foxhunt predict --bundles " + s.out +
         (tape ? " --ticks TAPE (the bundles record the bar spec)\n" : " --data F.csv\n");
}

// The command line of rank `rank` under --nproc: this one without --nproc and --master, then
// --world-size, --rank and --master.
std::vector<std::string> rank_args(int64_t rank, int64_t world_size, const std::string& master) {
  const auto& all = program_args();
  std::vector<std::string> out;
  for (size_t i = 1; i < all.size(); ++i) {
    const std::string& a = all[i];
    if (a == "--nproc" || a == "--master") {
      ++i;  // and its value
      continue;
    }
    if (a.rfind("--nproc=", 0) == 0 || a.rfind("--master=", 0) == 0) continue;
    out.push_back(a);
  }
  for (const auto& s :
       {std::string("--world-size"), std::to_string(world_size), std::string("--rank"),
        std::to_string(rank), std::string("--master"), master})
    out.push_back(s);
  return out;
}

std::string self_executable() {
  std::error_code ec;
  auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? program_args().front() : p.string();
}

Registrar registered_train = subcommand<TrainArgs>(
    "train", 40, [](CLI::App* sub, std::shared_ptr<TrainArgs> args) -> Runner {
      std::vector<std::string> accepted = jobs::trainable_models();
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
                        ->check(positive_number());
      auto* epochs = sub->add_option("--epochs", args->job.epochs, "Epochs (mamba2, tft)")
                         ->check(positive_number());

      sub->add_option("--batch", args->batch,
                      "Batch size: a number, or auto (largest batch the memory planner verifies "
                      "within the budget)");
      args->budget.add(sub, "",
                       "Memory budget = this device profile's usable bytes: the whole run is "
                       "capped at it on --device (--batch auto plans for it; default there "
                       "rtx3050ti-4gb). Without it or --budget-mib the run is uncapped",
                       "Memory budget in MiB (overrides --device-profile); caps the whole run");
      auto* seed = sub->add_option("--seed", args->seed, "Seed of every random draw (default 0)")
                       ->check(non_negative_number());
      sub->add_option("--out", args->job.out_dir,
                      "Output directory (default out/train-MODEL, or the resumed checkpoint's)");
      sub->add_option("--resume", args->job.resume,
                      "Continue from a trainer checkpoint (DIR/checkpoint.ckpt, or the run "
                      "directory DIR)")
          ->check(CLI::ExistingPath);
      add_device_flag(sub, &args->job.device);
      args->tape.add(sub,
                     "Tape of trade prints to build the bars from (with --bar; excludes --data); "
                     "the bar spec is recorded in every bundle");
      auto* ppy = add_periods_per_year_flag(sub, &args->periods_per_year,
                                            "the training data (recorded in the bundles; "
                                            "serving's volatility targeting uses it)");
      sub->add_option("--options", args->options_json,
                      "Trainer option overrides as a JSON object, e.g. '{\"learning_rate\":1e-3}'");
      sub->add_option("--model-options", args->model_options_json,
                      "mamba2/tft model options as a JSON object, e.g. '{\"d_model\":32}'");
      // The backtest's cost flags: the trading env charges them, train all fits its rule after
      // them (jobs::TrainJob::trading_env holds the one cost model).
      auto* cost = add_cost_flags(
          sub, &args->job.trading_env.cost_bps, &args->job.trading_env.costs,
          "that the RL policies train under (trading env) and train all fits its rule after; "
          "give backtest the same flags");
      sub->add_option("--env-cost-bps", args->job.trading_env.cost_bps, "Older name of --cost-bps")
          ->check(non_negative_number())
          ->excludes(cost);
      add_defaulted(sub, "--pnl-scale", &args->job.trading_env.pnl_scale,
                    "Trading env: scale of the unrealised PnL in the RL state (recorded in the "
                    "bundle; serving uses it)")
          ->check(CLI::Range(1e-6, 1e6));
      add_defaulted(sub, "--eval-episodes", &args->job.eval_episodes,
                    "Greedy evaluation episodes after RL training (0 = none)")
          ->check(non_negative_number());
      sub->add_option("--log-interval", args->job.log_interval, "Steps between metrics lines")
          ->check(positive_number());
      sub->add_option("--checkpoint-interval", args->job.checkpoint_interval,
                      "Steps between checkpoints (default: only at the end)")
          ->check(positive_number());
      add_defaulted(sub, "--progress", &args->progress,
                    "auto, bar, lines or off (progress on stderr)")
          ->check(CLI::IsMember({"auto", "bar", "lines", "off"}));
      sub->add_option("--threads", args->threads,
                      "Intra-op threads (default: FOXHUNT_THREADS, else OMP_NUM_THREADS, else 1)")
          ->check(positive_number());
      sub->add_flag("--json", args->json, "Print the summary as JSON only");
      // Data parallelism on c10d (Gloo on CPU, NCCL on CUDA).
      const dist::DistOptions d;
      auto* nproc = sub->add_option("--nproc", args->nproc,
                                    "Data-parallel: launch N local ranks of this command and wait "
                                    "for them (rank 0 writes the outputs)")
                        ->check(positive_number());
      auto* world = sub->add_option("--world-size", args->world_size,
                                    "Data-parallel: number of ranks (one process each, any "
                                    "machines; with --rank and --master)")
                        ->check(positive_number());
      sub->add_option("--rank", args->rank, "Data-parallel: this process's rank in [0, world size)")
          ->check(non_negative_number())
          ->needs(world);
      sub->add_option("--master", args->master,
                      "Data-parallel: HOST:PORT of rank 0's rendezvous (default " + d.master() +
                          "; with --nproc: 127.0.0.1 and a free port)");
      add_defaulted(sub, "--backend", &args->backend,
                    "Data-parallel: auto (gloo on cpu, nccl on cuda), gloo or nccl")
          ->check(CLI::IsMember({"auto", "gloo", "nccl"}));
      sub->add_option("--timeout", args->timeout_s,
                      "Data-parallel: seconds to wait for the other ranks before failing "
                      "(default " +
                          std::to_string(static_cast<int>(d.timeout_s())) + ")")
          ->check(positive_number());
      sub->add_option("--check-interval", args->check_interval,
                      "Data-parallel: optimizer steps between cross-rank weight checksum "
                      "comparisons (default " +
                          std::to_string(d.check_interval()) + ")")
          ->check(non_negative_number());
      nproc->excludes(world);
      return [args, seed, steps, epochs, ppy]() {
        auto& job = args->job;
        args->tape.check_used("train");
        if (args->tape.given()) {
          FOXHUNT_CHECK(job.data.empty(), "train",
                        "--ticks builds the bars from a tape: expected no --data with it");
          job.ticks = jobs::TapeSource{args->tape.ticks, args->tape.required_spec("train"),
                                       args->tape.read_options()};
        }
        if (ppy->count() > 0) job.periods_per_year = args->periods_per_year;
        job.batch = jobs::BatchChoice::parse(args->batch, "--batch");
        job.budget = args->budget.resolve("train");
        // One model trains for steps or epochs; `all` takes both (steps: dqn/ppo, epochs: the
        // forecasters).
        FOXHUNT_CHECK(job.model == "all" || steps->count() == 0 || epochs->count() == 0, "train",
                      "--steps excludes --epochs (except for train all)");
        auto& d = job.dist;
        d.world_size(args->world_size).rank(args->rank).backend(args->backend);
        if (!args->master.empty()) d.master(args->master);
        if (args->timeout_s > 0) d.timeout_s(args->timeout_s);
        if (args->check_interval > 0) d.check_interval(args->check_interval);
        dist::validate(d);
        FOXHUNT_CHECK(job.model != "all" || (args->nproc == 1 && d.world_size() == 1), "train",
                      "train all: data-parallel runs train one model; use train MODEL --nproc N");
        if (args->nproc > 1) {
          const auto r = dist::launch_local(self_executable(), rank_args, args->nproc, args->master,
                                            d.timeout_s() + 10.0);
          for (const auto& e : r.ranks)
            if (e.exit_code != 0)
              std::cerr << "foxhunt: train --nproc: rank " << e.rank << " exited with "
                        << e.exit_code
                        << (e.killed             ? " (killed by the launcher)"
                            : e.exit_code == 130 ? " (interrupted; rank 0 wrote the checkpoint)"
                                                 : "")
                        << "\n";
          return r.exit_code;
        }
        if (args->threads > 0) at::set_num_threads(args->threads);
        if (seed->count() > 0) job.seed = args->seed;
        if (!args->options_json.empty())
          job.options = parse_json_flag(args->options_json, "--options", "train");
        if (!args->model_options_json.empty())
          job.model_options = parse_json_flag(args->model_options_json, "--model-options", "train");
        const std::string& p = args->progress;
        job.progress = p == "bar"     ? train::ProgressMode::kBar
                       : p == "lines" ? train::ProgressMode::kLines
                       : p == "off"   ? train::ProgressMode::kOff
                                      : train::ProgressMode::kAuto;
        // Trains (one model, or all: their summaries differ in type), then rank 0 prints.
        const auto run = [&](const auto& train_fn) {
          const auto summary = [&] {
            // Ctrl-C asks the trainer to checkpoint and return; a second one kills the process.
            train::ScopedSigintHandler sigint;
            return train_fn(job);
          }();
          if (d.rank() == 0) {
            if (args->json)
              print_json(jobs::to_json(summary).dump(2));
            else
              std::cout << jobs::format_train_summary(summary) << next_steps(summary);
          }
          // 128 + SIGINT, the shell convention for a run ended by Ctrl-C (the checkpoint is
          // written).
          return summary.interrupted ? 130 : 0;
        };
        return job.model == "all" ? run(jobs::run_train_all) : run(jobs::run_train_job);
      };
    });

}  // namespace
}  // namespace foxhunt::cli
