#include "foxhunt/models/torch_device.h"

#include <optional>
#include <string>

#include "foxhunt/core/cuda_plugin.h"
#include "foxhunt/core/error.h"

namespace foxhunt::models {

namespace {

// The device of the first parameter (or buffer) in parameters()' order: the module's own, then
// its children's, depth first. Stops at the first one: parameters() names every parameter of the
// tree (the TFT's ~100, with their joined names) and cost ~10 us per streamed bar.
std::optional<torch::Device> first_device(const torch::nn::Module& m, bool buffers) {
  for (const auto& t : buffers ? m.buffers(/*recurse=*/false) : m.parameters(/*recurse=*/false))
    return t.device();
  for (const auto& c : m.children())
    if (auto d = first_device(*c, buffers)) return d;
  return std::nullopt;
}

}  // namespace

torch::Device module_device(const torch::nn::Module& m) {
  if (auto d = first_device(m, /*buffers=*/false)) return *d;
  if (auto d = first_device(m, /*buffers=*/true)) return *d;  // buffers-only (the INT8 TFT)
  return torch::kCPU;
}

bool cuda_available() {
  return load_cuda_plugin() && torch::cuda::is_available();
}

int cuda_device_count() {
  return cuda_available() ? static_cast<int>(torch::cuda::device_count()) : 0;
}

torch::Device to_torch(const Device& d) {
  if (d.is_cpu()) return torch::kCPU;
  if (!load_cuda_plugin())
    throw InputError("device", "device " + d.str() + ": expected a usable CUDA device, but " +
                                   cuda_plugin_status() + "; use device cpu");
  if (!torch::cuda::is_available()) {
    // Say what was found in one line, not LibTorch's multi-line CUDA text with its URL.
    std::string why = "LibTorch reports no CUDA device";
    try {
      (void)torch::empty({1}, torch::Device(torch::kCUDA));
    } catch (const c10::Error& e) {
      why = e.what_without_backtrace();
      why = why.substr(0, why.find('\n'));
      // Its first sentence: LibTorch goes on with URLs and hints that do not apply here.
      const auto stop = why.find(". ");
      if (stop != std::string::npos) why = why.substr(0, stop);
    }
    throw InputError("device", "device " + d.str() +
                                   ": expected a usable CUDA device, found none (" + why +
                                   "); use device cpu");
  }
  const auto count = static_cast<int>(torch::cuda::device_count());
  FOXHUNT_CHECK(d.index() < count, "device", "device ", d.str(),
                ": expected a CUDA device index below ", count, " (the devices visible here)");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(d.index()));
}

}  // namespace foxhunt::models
