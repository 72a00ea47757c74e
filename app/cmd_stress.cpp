// foxhunt stress: the serving runtime under load with exact leak verdicts (library:
// harness/stress.h).
#include <iostream>
#include <sstream>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/harness/reports.h"
#include "foxhunt/harness/stress.h"
#include "foxhunt/memory/device_profile.h"

namespace foxhunt::cli {
namespace {

// The flags bind the library's StressOptions directly: each default is declared once, there.
struct StressArgs {
  static constexpr const char* kHelp =
      "Stress the serving runtime: concurrent four-model inference, sequential training, "
      "load/unload cycles, a leak soak and Poisson server load, with exact memory verdicts";
  harness::StressOptions o;
  std::string scenario = "all";
  std::string models;
  BudgetFlags budget;
  std::string report;
  bool long_soak = false;
  bool json = false;
};

Registrar registered_stress = subcommand<StressArgs>(
    "stress", 65, [](CLI::App* sub, std::shared_ptr<StressArgs> a) -> Runner {
      auto* scenario = add_defaulted(
          sub, "--scenario", &a->scenario,
          "all, or a comma-separated list of concurrent, train, switch, soak, server, tape "
          "(with --ticks; --ticks alone runs tape)");
      sub->add_option("--ticks", a->o.ticks,
                      "tape: a tape CSV replayed as fast as it goes through the streaming bar "
                      "builder and the desk (prints/s, bars/s, print-to-decision p50/p99)");
      sub->add_option("--bar", a->o.bar_spec,
                      "tape: bar spec (default: the bundles' recorded spec; time:1m for fresh "
                      "models)");
      sub->add_option("--bundles", a->o.bundles,
                      "Directory with dqn/ ppo/ mamba2/ tft/ bundles (default: fresh default "
                      "models)");
      sub->add_option("--models", a->models,
                      "Serve only these models, comma-separated (default: all four)");
      add_device_flag(sub, &a->o.device);
      a->budget.add(sub, "",
                    "Enforce this card's usable bytes for the whole run (ledger cap on CPU, "
                    "allocator memory fraction on CUDA); default: no cap",
                    "Enforce this cap in MiB instead");
      add_defaulted(sub, "--iterations", &a->o.iterations, "concurrent: bars");
      add_defaulted(sub, "--instruments", &a->o.instruments,
                    "concurrent, soak, server: synthetic instruments per bar, served by a desk "
                    "in one batch per model (1: one instrument through the ensemble)");
      add_defaulted(sub, "--soak", &a->o.soak, "soak: bars of the whole ensemble");
      sub->add_flag("--long", a->long_soak, "soak: 1,000,000 bars");
      add_defaulted(sub, "--cycles", &a->o.switch_cycles, "switch: load/unload cycles");
      add_defaulted(sub, "--rate", &a->o.rate, "server: Poisson arrivals per second");
      add_defaulted(sub, "--duration", &a->o.duration_s, "server: seconds of arrivals");
      add_defaulted(sub, "--p99-ms", &a->o.p99_ms, "server: the p99 bound of a valid run");
      add_defaulted(sub, "--min-queries", &a->o.min_queries, "server: queries a valid run needs");
      add_defaulted(sub, "--train-steps", &a->o.train_steps, "train: RL environment steps");
      add_defaulted(sub, "--train-epochs", &a->o.train_epochs, "train: forecaster epochs");
      add_defaulted(sub, "--leak-threshold", &a->o.leak_threshold_bytes_per_1k,
                    "Leak threshold on the memory slope, bytes per 1,000 inferences");
      add_seed_flag(sub, &a->o.seed, "Seed of the bars and the fresh models");
      sub->add_option("--report", a->report,
                      "Write DIR/report.html (plots), DIR/report.md and DIR/stress.json");
      sub->add_flag("--json", a->json, "Print the JSON report only (progress goes to stderr)");
      return [a, scenario]() {
        // --ticks alone means the tape scenario; `tape` without a tape is refused by the run.
        if (!a->o.ticks.empty() && scenario->count() == 0) a->scenario = "tape";
        // A --report path that cannot hold the files fails now, before the run.
        if (!a->report.empty()) check_output_dir(a->report, "--report");
        harness::StressOptions o = a->o;
        o.budget = a->budget.resolve("stress");
        if (a->long_soak) o.soak = 1000000;
        std::stringstream ss(a->models);
        for (std::string m; std::getline(ss, m, ',');)
          if (!m.empty()) o.models.push_back(m);
        const auto scenarios = harness::parse_scenarios(a->scenario);
        const auto report = harness::run_stress(o, scenarios, std::cerr);
        std::string html;
        if (!a->report.empty()) html = harness::write_stress_report(report, a->report);
        if (a->json) {
          auto j = report.to_json();
          if (!html.empty()) j["report"] = html;
          print_json(j.dump(2));
        } else {
          std::cout << report.table();
          if (!html.empty()) std::cout << "report: " << html << "\n";
          std::cout << (report.ok() ? "PASS" : "FAIL") << std::endl;
        }
        return report.ok() ? 0 : 1;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
