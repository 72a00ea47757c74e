// foxhunt predict: stream bars through the four-model ensemble, one decision per bar
// (library: serving/serving.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bar_stream.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::cli {
namespace {

struct PredictArgs {
  std::string bundles;
  std::string data;
  std::string from;
  std::string rule;
  Device device;
  bool skip_bad = false;
  bool serial = false;
  bool json = false;
};

Registrar reg = subcommand<PredictArgs>(
    "predict", 50,
    "Stream bars through the four-model ensemble: each model's signal and one target position "
    "in [-1, 1] per bar",
    [](CLI::App* sub, std::shared_ptr<PredictArgs> a) -> Runner {
      sub->add_option("--bundles", a->bundles,
                      "Directory with dqn/, ppo/, mamba2/, tft/ bundles (foxhunt train all --out)")
          ->required();
      sub->add_option("--data", a->data, "Bars CSV to stream, or - for stdin")->required();
      sub->add_option("--from", a->from,
                      "Print bars from this time on (Unix seconds or ISO 8601); earlier bars only "
                      "warm the state up");
      sub->add_option(
          "--rule", a->rule,
          "Decision rule JSON: {\"weights\": {...}, \"forecast_gain\", \"dead_band\", ...}");
      add_device_flag(sub, &a->device);
      sub->add_flag("--skip-bad-bars", a->skip_bad,
                    "Skip an invalid bar with a warning on stderr instead of stopping (exit 2)");
      sub->add_flag("--serial", a->serial,
                    "Run the four models one by one instead of concurrently");
      sub->add_flag("--json", a->json, "One JSON object per bar on stdout (JSON lines)");
      return [a]() {
        serving::DecisionRule rule;
        if (!a->rule.empty()) rule = serving::load_decision_rule(a->rule);
        const torch::Device device = models::to_torch(a->device);
        const int64_t from = a->from.empty() ? INT64_MIN : data::parse_timestamp(a->from);
        auto ensemble = serving::Ensemble::load(a->bundles, rule, device);
        ensemble.set_parallel(!a->serial);

        std::ifstream file;
        std::istream* in = &std::cin;
        if (a->data != "-") {
          file.open(a->data);
          FOXHUNT_CHECK(file.good(), "predict", "--data: cannot open '", a->data, "'");
          in = &file;
        }
        serving::BarStreamOptions so;
        so.source = a->data == "-" ? "stdin" : a->data;
        so.skip_bad = a->skip_bad;
        so.from = from;
        if (!a->json) {
          std::printf("%-20s %12s", "time", "close");
          for (const auto& m : ensemble.models()) std::printf(" %8s", m.name().c_str());
          std::printf(" %9s %10s\n", "decision", "latency_us");
        }
        const auto print = [&](const data::Bar& bar, const serving::BarDecision& d) {
          if (a->json) {
            std::cout << serving::to_json(d).dump() << '\n';
            return;
          }
          std::printf("%-20s %12.6g", data::format_timestamp(d.timestamp).c_str(), bar.close);
          for (const auto& s : d.signals) {
            if (s.ready)
              std::printf(" %+8.3f", s.signal);
            else
              std::printf(" %8s", "warmup");
          }
          std::printf(" %+9.3f %10.1f\n", d.decision, d.latency_us);
        };
        const auto warn = [](const std::string& m) {
          std::fprintf(stderr, "foxhunt: warning: %s\n", m.c_str());
        };
        const auto stats = serving::stream_bars(ensemble, *in, so, print, warn);
        std::cout.flush();
        std::fprintf(stderr,
                     "foxhunt: %lld bars (%lld printed, %lld skipped); latency per bar p50 %.1f "
                     "us, p99 %.1f us\n",
                     static_cast<long long>(stats.bars), static_cast<long long>(stats.reported),
                     static_cast<long long>(stats.skipped), stats.latency_us.p50,
                     stats.latency_us.p99);
        return 0;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
