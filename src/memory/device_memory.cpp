#include "foxhunt/memory/device_memory.h"

#include "foxhunt/core/error.h"
#include "foxhunt/memory/device_probe.h"

namespace foxhunt::memory {

MemoryDevice MemoryDevice::parse(const std::string& text, const char* component) {
  MemoryDevice d;
  if (text == "cpu") return d;
  if (text == "cuda") {
    d.cuda = true;
    return d;
  }
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5) {
    std::size_t used = 0;
    int index = -1;
    try {
      index = std::stoi(text.substr(5), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == text.size() - 5 && index >= 0) {
      d.cuda = true;
      d.index = index;
      return d;
    }
  }
  throw InputError(component, "device: expected cpu, cuda or cuda:N, got '" + text + "'");
}

std::string MemoryDevice::str() const {
  return cuda ? "cuda:" + std::to_string(index) : "cpu";
}

std::uint64_t device_live_bytes(const MemoryDevice& d) {
  return d.cuda ? cuda_live_bytes(d.index) : live_bytes();
}

std::uint64_t device_peak_bytes(const MemoryDevice& d) {
  return d.cuda ? cuda_peak_bytes(d.index) : peak_bytes();
}

void device_reset_peak(const MemoryDevice& d) {
  if (d.cuda)
    cuda_reset_peak(d.index);
  else
    reset_peak();
}

std::uint64_t device_in_use_bytes(const MemoryDevice& d) {
  return d.cuda ? cuda_memory_stats(d.index).reserved_bytes : live_bytes() + external_bytes();
}

DeviceLimitGuard::DeviceLimitGuard(const MemoryDevice& d, std::uint64_t bytes) : bytes_(bytes) {
  if (d.cuda) {
    cuda_empty_cache();  // the fraction bounds reserved bytes: start from what tensors hold
    cuda_.emplace(bytes, d.index);
  } else {
    cpu_.emplace(bytes);
  }
}

DeviceLimitGuard::~DeviceLimitGuard() = default;

DeviceOverheads measure_device_overheads(const MemoryDevice& d) {
  DeviceOverheads o;
  if (!d.cuda) {
    o.note = "cpu: no allocator cache or device context (the ledger counts tensors exactly)";
    return o;
  }
  const CudaMemoryStats s = cuda_memory_stats(d.index);
  o.measured = true;
  o.workspace_bytes =
      s.reserved_bytes > s.allocated_bytes ? s.reserved_bytes - s.allocated_bytes : 0;
  const DeviceProbe probe = probe_devices();
  for (const auto& g : probe.gpus) {
    if (g.index != d.index || !g.used_bytes) continue;
    o.context_measured = true;
    o.context_bytes = *g.used_bytes > s.reserved_bytes ? *g.used_bytes - s.reserved_bytes : 0;
  }
  if (!o.context_measured)
    o.note = probe.ok ? "NVML/nvidia-smi did not report device " + std::to_string(d.index)
                      : "no device-wide usage: " + probe.message;
  return o;
}

}  // namespace foxhunt::memory
