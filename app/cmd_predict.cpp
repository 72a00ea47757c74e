// foxhunt predict: stream bars through the four-model ensemble, one decision per bar
// (library: runtime/serving.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/models/model.h"
#include "foxhunt/runtime/serving.h"

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

// "2024-03-01T09:30:00Z" for a table row.
std::string iso_time(int64_t t) {
  const int64_t days = t >= 0 ? t / 86400 : (t - 86399) / 86400;
  const int64_t secs = t - days * 86400;
  // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
  const int64_t z = days + 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t d = doy - (153 * mp + 2) / 5 + 1;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  const int64_t y = yoe + era * 400 + (m <= 2);
  char buf[96];  // room for any int64 fields (the compiler checks the worst case)
  std::snprintf(buf, sizeof(buf), "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ",
                static_cast<long long>(y), static_cast<long long>(m), static_cast<long long>(d),
                static_cast<long long>(secs / 3600), static_cast<long long>(secs % 3600 / 60),
                static_cast<long long>(secs % 60));
  return buf;
}

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
        runtime::DecisionRule rule;
        if (!a->rule.empty()) rule = runtime::load_decision_rule(a->rule);
        const torch::Device device = models::to_torch(a->device);
        const int64_t from = a->from.empty() ? INT64_MIN : data::parse_timestamp(a->from);
        auto ensemble = runtime::Ensemble::load(a->bundles, rule, device);
        ensemble.set_parallel(!a->serial);

        std::ifstream file;
        std::istream* in = &std::cin;
        if (a->data != "-") {
          file.open(a->data);
          FOXHUNT_CHECK(file.good(), "predict", "--data: cannot open '", a->data, "'");
          in = &file;
        }
        const std::string source = a->data == "-" ? "stdin" : a->data;
        data::BarCsvReader reader(source);
        if (!a->json) {
          std::printf("%-20s %12s", "time", "close");
          for (const auto& m : ensemble.models()) std::printf(" %8s", m.name().c_str());
          std::printf(" %9s %10s\n", "decision", "latency_us");
        }
        std::vector<double> latencies;
        int64_t bars = 0, skipped = 0, printed = 0;
        std::string line;
        while (std::getline(*in, line)) {
          std::optional<data::Bar> bar;
          runtime::BarDecision d;
          try {
            bar = reader.read_line(line);
            if (!bar) continue;
            if (a->skip_bad) {
              std::string why;
              if (!ensemble.try_on_bar(*bar, &d, &why)) {
                std::fprintf(stderr, "foxhunt: warning: %s:%lld: skipped: %s\n", source.c_str(),
                             static_cast<long long>(reader.line_number()), why.c_str());
                ++skipped;
                continue;
              }
            } else {
              d = ensemble.on_bar(*bar);
            }
          } catch (const InputError& e) {
            if (!a->skip_bad) {
              throw InputError(
                  "predict", source + ":" + std::to_string(reader.line_number()) + ": " + e.what());
            }
            std::fprintf(stderr, "foxhunt: warning: skipped: %s\n", e.what());
            ++skipped;
            continue;
          }
          ++bars;
          latencies.push_back(d.latency_us);
          if (d.timestamp < from) continue;
          ++printed;
          if (a->json) {
            std::cout << runtime::to_json(d).dump() << '\n';
          } else {
            std::printf("%-20s %12.6g", iso_time(d.timestamp).c_str(), bar->close);
            for (const auto& s : d.signals) {
              if (s.ready)
                std::printf(" %+8.3f", s.signal);
              else
                std::printf(" %8s", "warmup");
            }
            std::printf(" %+9.3f %10.1f\n", d.decision, d.latency_us);
          }
        }
        std::cout.flush();
        FOXHUNT_CHECK(bars > 0, "predict", "--data ", source, ": no bars");
        const auto lat = summarize_latencies(latencies);
        std::fprintf(stderr,
                     "foxhunt: %lld bars (%lld printed, %lld skipped); latency per bar p50 %.1f "
                     "us, p99 %.1f us\n",
                     static_cast<long long>(bars), static_cast<long long>(printed),
                     static_cast<long long>(skipped), lat.p50, lat.p99);
        return 0;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
