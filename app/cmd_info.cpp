#include <iostream>

#include "command.h"
#include "foxhunt/core/system_info.h"

namespace foxhunt::cli {
namespace {

struct InfoArgs {
  bool json = false;
};

Registrar reg("info", 10, [](CLI::App& app) -> Runner {
  auto args = std::make_shared<InfoArgs>();
  auto* sub = app.add_subcommand(
      "info", "Build, LibTorch version, devices, threads, BLAS, quantized engines");
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
              << "CUDA devices     " << j["cuda_device_count"].get<int>()
              << (j["cuda_available"].get<bool>() ? "" : " (no usable GPU: running on CPU)") << "\n"
              << "threads          " << j["threads"].get<int>() << " intra-op, "
              << j["interop_threads"].get<int>() << " inter-op\n"
              << "BLAS             " << j["blas"].get<std::string>() << "\n"
              << "LAPACK           " << j["lapack"].get<std::string>() << "\n"
              << "quantized        ";
    for (const auto& e : j["quantized_engines"]) std::cout << e.get<std::string>() << " ";
    std::cout << "(active: " << j["quantized_engine"].get<std::string>() << ")\n";
    return 0;
  };
});

}  // namespace
}  // namespace foxhunt::cli
