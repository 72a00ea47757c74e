#include <cstdio>
#include <iostream>

#include "command.h"
#include "foxhunt/core/units.h"
#include "foxhunt/models/summary.h"

namespace foxhunt::cli {
namespace {

struct ModelsArgs {
  bool json = false;
};

Registrar reg = subcommand<ModelsArgs>(
    "models", 20, "The four models: parameters and bytes per precision",
    [](CLI::App* sub, std::shared_ptr<ModelsArgs> args) -> Runner {
      sub->add_flag("--json", args->json, "Print JSON only");
      return [args]() {
        auto summaries = models::describe_models();
        if (args->json) {
          nlohmann::json j = nlohmann::json::array();
          for (const auto& s : summaries) j.push_back(models::to_json(s));
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
        return 0;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
