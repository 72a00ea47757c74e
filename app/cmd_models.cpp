#include <cstdio>
#include <iostream>

#include "command.h"
#include "foxhunt/core/units.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/models/summary.h"

namespace foxhunt::cli {
namespace {

struct ModelsArgs {
  static constexpr const char* kHelp = "The four models: parameters and bytes per precision";
  bool json = false;
};

Registrar registered_models = subcommand<ModelsArgs>(
    "models", 20, [](CLI::App* sub, std::shared_ptr<ModelsArgs> args) -> Runner {
      sub->add_flag("--json", args->json, "Print JSON only");
      return [args]() {
        auto summaries = models::describe_models();
        if (args->json) {
          nlohmann::json j = nlohmann::json::array();
          for (const auto& s : summaries) {
            auto m = models::to_json(s);
            // Parameter bytes per precision (models/precisions.h: a quantized form adds its own).
            m["precisions"] = models::precision_bytes(s.name);
            j.push_back(m);
          }
          print_json(nlohmann::json{{"models", j}}.dump(2));
          return 0;
        }
        std::printf("%-8s %12s %14s %10s %14s %6s\n", "model", "parameters", "fp32 bytes",
                    "buffers", "buffer bytes", "window");
        for (const auto& s : summaries)
          std::printf("%-8s %12lld %14s %10lld %14s %6lld\n", s.name.c_str(),
                      static_cast<long long>(s.parameters),
                      human_bytes(static_cast<double>(s.parameter_bytes)).c_str(),
                      static_cast<long long>(s.buffers),
                      human_bytes(static_cast<double>(s.buffer_bytes)).c_str(),
                      static_cast<long long>(s.seq_len));
        for (const auto& name : models::models_with_precision(models::Precision::kInt8)) {
          const auto p = models::precision_bytes(name);
          const auto& i8 = p[models::to_string(models::Precision::kInt8)];
          std::printf(
              "\n%s int8: %s (%s int8 codes + %s fp32: scales, biases, LayerNorms, embedding, "
              "folded embedding maps), %.3fx fp32\n",
              name.c_str(), human_bytes(i8["parameter_bytes"].get<double>()).c_str(),
              human_bytes(i8["int8_bytes"].get<double>()).c_str(),
              human_bytes(i8["fp32_bytes"].get<double>()).c_str(),
              i8["ratio_to_fp32"].get<double>());
        }
        for (const auto& name : models::models_with_precision(models::Precision::kBf16)) {
          const auto p = models::precision_bytes(name);
          const auto& bf = p[models::to_string(models::Precision::kBf16)];
          std::printf("\n%s bf16: %s (%s bf16 weights + %s fp32), %.3fx fp32\n", name.c_str(),
                      human_bytes(bf["parameter_bytes"].get<double>()).c_str(),
                      human_bytes(bf["bf16_bytes"].get<double>()).c_str(),
                      human_bytes(bf["fp32_bytes"].get<double>()).c_str(),
                      bf["ratio_to_fp32"].get<double>());
        }
        return 0;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
