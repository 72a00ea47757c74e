#include <iostream>

#include "command.h"
#include "foxhunt/harness/validate.h"

namespace foxhunt::cli {
namespace {

struct ValidateArgs {
  static constexpr const char* kHelp =
      "The main job: every check of the product on the embedded defaults";
  harness::ValidateOptions options;
  bool json = false;
};

Registrar registered_validate = subcommand<ValidateArgs>(
    "validate", 100, [](CLI::App* sub, std::shared_ptr<ValidateArgs> args) -> Runner {
      auto& o = args->options;
      add_device_flag(sub, &o.device);
      add_seed_flag(sub, &o.seed, "Seed for every random draw");
      sub->add_option(
          "--skip", o.skip,
          "Step names to skip (models, train, quantize, plan, budget, stress, backtest)");
      add_defaulted(sub, "--train-bars", &o.train_bars, "Synthetic bars for the train step")
          ->check(CLI::Range(int64_t{1000}, int64_t{10000000}));
      add_defaulted(sub, "--train-threads", &o.train_threads,
                    "Intra-op threads of the train step (0 = one per core, at most 4)")
          ->check(non_negative_number());
      add_defaulted(sub, "--rl-steps", &o.rl_steps, "DQN/PPO environment steps in the train step")
          ->check(positive_number());
      add_defaulted(sub, "--epochs", &o.forecast_epochs, "Mamba-2/TFT epochs in the train step")
          ->check(positive_number());
      sub->add_option("--out", o.out_dir,
                      "Keep the train step's data and checkpoints in this directory");
      add_defaulted(sub, "--report", &o.report_dir,
                    "Directory of the report (report.html, report.md, validate.json); '' = none");
      add_defaulted(sub, "--backtest-bars", &o.backtest_bars,
                    "Held-out synthetic bars after the training bars, for the backtest step")
          ->check(CLI::Range(int64_t{50}, int64_t{10000000}));
      add_defaulted(sub, "--stress-soak", &o.stress_soak, "Bars of the stress step's leak soak")
          ->check(positive_number());
      sub->add_flag("--json", args->json,
                    "Print the report as JSON only (progress goes to stderr)");
      return [args]() {
        std::ostream& log = args->json ? std::cerr : std::cout;
        auto report = harness::run_validate(args->options, log);
        if (!report.report_error.empty())
          std::cerr << "foxhunt: validate: report not written: " << report.report_error << "\n";
        if (args->json) {
          print_json(report.to_json().dump(2));
        } else {
          std::cout << (report.ok() ? "validate: PASS" : "validate: FAIL") << " ("
                    << report.steps.size() << " steps)\n";
        }
        return report.ok() ? 0 : 1;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
