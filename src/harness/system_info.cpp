#include "foxhunt/harness/system_info.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <sstream>

#include "foxhunt/core/cuda_plugin.h"
#include "foxhunt/memory/cuda_memory.h"
#include "foxhunt/memory/device_probe.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/torch_device.h"

namespace foxhunt {

namespace {

std::string config_value(const std::string& config, const std::string& key) {
  std::istringstream is(config);
  std::string line;
  while (std::getline(is, line)) {
    auto pos = line.find(key + "=");
    if (pos == std::string::npos) continue;
    auto value = line.substr(pos + key.size() + 1);
    auto end = value.find(',');
    return value.substr(0, end);
  }
  return "";
}

std::string qengine_name(at::QEngine e) {
  switch (e) {
    case at::QEngine::NoQEngine:
      return "none";
    case at::QEngine::FBGEMM:
      return "fbgemm";
    case at::QEngine::QNNPACK:
      return "qnnpack";
    case at::QEngine::ONEDNN:
      return "onednn";
    case at::QEngine::X86:
      return "x86";
  }
  return "unknown";
}

}  // namespace

nlohmann::json system_info() {
  nlohmann::json j;
  j["foxhunt_version"] = FOXHUNT_VERSION;
  j["libtorch_version"] = TORCH_VERSION;
  j["cuda_available"] = models::cuda_available();  // loads the CUDA plugin to ask
  j["cuda_device_count"] = models::cuda_device_count();
  j["cuda_plugin"] = cuda_plugin_status();
  j["threads"] = at::get_num_threads();
  j["interop_threads"] = at::get_num_interop_threads();
  const std::string config = at::show_config();
  j["blas"] = config_value(config, "BLAS_INFO");
  j["lapack"] = config_value(config, "LAPACK_INFO");
  j["mkl"] = at::hasMKL();
  j["mkldnn"] = at::hasMKLDNN();
  nlohmann::json engines = nlohmann::json::array();
  for (auto e : at::globalContext().supportedQEngines()) engines.push_back(qengine_name(e));
  j["quantized_engines"] = engines;
  j["quantized_engine"] = qengine_name(at::globalContext().qEngine());
  j["build_cuda"] = cuda_plugin_built();  // a CUDA build of LibTorch: the CUDA plugin was built
  // Memory accounting and the driver-side view of the GPUs.
  j["ledger_installed"] = memory::ledger_installed();
  j["ledger_live_bytes"] = memory::live_bytes();
  j["ledger_limit_bytes"] = memory::get_limit();
  j["cuda_memory_stats_backend"] = memory::cuda_stats_backend();
  j["cuda_memory_stats_compiled"] = memory::cuda_stats_compiled();
  j["nvml"] = memory::to_json(memory::probe_nvml());
  j["nvidia_smi"] = memory::to_json(memory::probe_nvidia_smi());
  return j;
}

}  // namespace foxhunt
