// foxhunt bench-memory: the INT8 TFT's five memory checks and the QAT training bytes
// (library: jobs/quant_report.h). Exit 1 when a check fails.
#include <cstdio>
#include <iostream>

#include "command.h"
#include "foxhunt/core/units.h"
#include "foxhunt/jobs/quant_report.h"
#include "foxhunt/models/tft.h"

namespace foxhunt::cli {
namespace {

struct BenchMemoryArgs {
  static constexpr const char* kHelp =
      "INT8 vs FP32 TFT memory: five ledger checks on 3-D inputs, and QAT training bytes per tag";
  jobs::Int8MemoryOptions options;
  std::string model_options = "{}";
  bool json = false, no_qat = false;
};

Registrar registered_bench_memory = subcommand<BenchMemoryArgs>(
    "bench-memory", 58, [](CLI::App* sub, std::shared_ptr<BenchMemoryArgs> a) -> Runner {
      auto& o = a->options;
      add_defaulted(sub, "--inferences", &o.inferences, "INT8 inferences of the leak check");
      add_defaulted(sub, "--batch", &o.big_batch, "The large inference batch");
      add_defaulted(sub, "--threshold-bytes", &o.int8_threshold_bytes,
                    "Check 2: cap on the INT8 model's resident bytes");
      sub->add_option("--model-options", a->model_options, "TFT options JSON (default: full size)");
      add_seed_flag(sub, &o.seed, "Weights and inputs");
      sub->add_flag("--no-qat", a->no_qat, "Skip the QAT training-bytes report");
      sub->add_flag("--json", a->json, "Print JSON only");
      return [a]() {
        auto o = a->options;
        const nlohmann::json mo =
            parse_json_flag(a->model_options, "--model-options", "bench-memory");
        o.model = models::tft_options_from_json(mo);
        auto report = jobs::tft_int8_memory_checks(o);
        if (!a->no_qat) report.qat = jobs::tft_qat_memory(o);
        const bool passed = report.passed();
        // The figures are listed as the JSON has them (key order, JSON values).
        const nlohmann::json json = jobs::to_json(report);
        if (a->json) {
          print_json(json.dump(2));
          return passed ? 0 : 1;
        }
        for (const auto& c : json.at("checks")) {
          std::printf("%-4s %s\n", c.at("passed").get<bool>() ? "ok" : "FAIL",
                      c.at("name").get<std::string>().c_str());
          for (const auto& [k, v] : c.items())
            if (k != "name" && k != "passed")
              std::printf("       %-40s %s\n", k.c_str(), v.dump().c_str());
        }
        if (report.qat) {
          const auto& q = json.at("qat");
          std::printf("qat training bytes (batch %lld):\n",
                      static_cast<long long>(report.qat->batch));
          for (const auto& [k, v] : q.at("training_bytes").items())
            std::printf("       %-40s %s\n", k.c_str(), human_bytes(v.get<double>()).c_str());
          for (const auto& [k, v] : q.at("converted_inference_bytes").items())
            std::printf("       int8 %-35s %s\n", k.c_str(), human_bytes(v.get<double>()).c_str());
        }
        std::printf("%s\n", passed ? "all checks passed" : "a check FAILED");
        return passed ? 0 : 1;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
