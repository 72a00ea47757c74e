#include <iostream>

#include "command.h"
#include "foxhunt/core/units.h"
#include "foxhunt/harness/system_info.h"

namespace foxhunt::cli {
namespace {

struct InfoArgs {
  static constexpr const char* kHelp =
      "Build, LibTorch version, devices, threads, BLAS, quantized engines, memory accounting";
  bool json = false;
};

Registrar registered_info =
    subcommand<InfoArgs>("info", 10, [](CLI::App* sub, std::shared_ptr<InfoArgs> args) -> Runner {
      sub->add_flag("--json", args->json, "Print JSON only");
      return [args]() {
        auto j = system_info();
        if (args->json) {
          print_json(j.dump(2));
          return 0;
        }
        std::cout << "foxhunt          " << j["foxhunt_version"].get<std::string>() << "\n"
                  << "LibTorch         " << j["libtorch_version"].get<std::string>() << "\n"
                  << "CUDA build       " << (j["build_cuda"].get<bool>() ? "yes" : "no") << "\n"
                  << "CUDA plugin      " << j["cuda_plugin"].get<std::string>() << "\n"
                  << "CUDA devices     " << j["cuda_device_count"].get<int>()
                  << (j["cuda_available"].get<bool>() ? "" : " (no usable GPU: running on CPU)")
                  << "\n"
                  << "threads          " << j["threads"].get<int>() << " intra-op, "
                  << j["interop_threads"].get<int>() << " inter-op\n"
                  << "BLAS             " << j["blas"].get<std::string>() << "\n"
                  << "LAPACK           " << j["lapack"].get<std::string>() << "\n"
                  << "quantized        ";
        for (const auto& e : j["quantized_engines"]) std::cout << e.get<std::string>() << " ";
        std::cout << "(active: " << j["quantized_engine"].get<std::string>() << ")\n"
                  << "memory ledger    "
                  << (j["ledger_installed"].get<bool>() ? "installed (exact CPU accounting), "
                                                        : "NOT installed, ")
                  << human_bytes(j["ledger_live_bytes"].get<double>()) << " live\n"
                  << "CUDA mem stats   " << j["cuda_memory_stats_backend"].get<std::string>()
                  << "\n";
        for (const char* key : {"nvml", "nvidia_smi"}) {
          const auto& p = j[key];
          std::cout << (std::string(key) == "nvml" ? "NVML             " : "nvidia-smi       ");
          if (!p["ok"].get<bool>()) {
            std::cout << p["message"].get<std::string>() << "\n";
            continue;
          }
          std::cout << p["gpus"].size() << " GPU(s)";
          if (!p["driver_version"].get<std::string>().empty())
            std::cout << ", driver " << p["driver_version"].get<std::string>();
          std::cout << "\n";
          for (const auto& g : p["gpus"]) {
            auto b = [&](const char* k) {
              return g[k].is_null() ? std::string("n/a") : human_bytes(g[k].get<double>());
            };
            std::cout << "  [" << g["index"].get<int>() << "] " << g["name"].get<std::string>()
                      << ": " << b("used_bytes") << " used, " << b("free_bytes") << " free, "
                      << b("total_bytes") << " total\n";
          }
        }
        return 0;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
