#include "foxhunt/memory/device_memory.h"

#include "foxhunt/core/error.h"
#include "foxhunt/memory/device_probe.h"

namespace foxhunt::memory {

std::uint64_t device_live_bytes(const MemoryDevice& d) {
  return d.is_cuda() ? cuda_live_bytes(d.ordinal()) : live_bytes();
}

std::uint64_t device_peak_bytes(const MemoryDevice& d) {
  return d.is_cuda() ? cuda_peak_bytes(d.ordinal()) : peak_bytes();
}

void device_reset_peak(const MemoryDevice& d) {
  if (d.is_cuda())
    cuda_reset_peak(d.ordinal());
  else
    reset_peak();
}

std::uint64_t device_in_use_bytes(const MemoryDevice& d) {
  return d.is_cuda() ? cuda_memory_stats(d.ordinal()).reserved_bytes
                     : live_bytes() + external_bytes();
}

DeviceLimitGuard::DeviceLimitGuard(const MemoryDevice& d, std::uint64_t bytes) : bytes_(bytes) {
  if (d.is_cuda()) {
    cuda_empty_cache();  // the fraction bounds reserved bytes: start from what tensors hold
    cuda_.emplace(bytes, d.ordinal());
  } else {
    cpu_.emplace(bytes);
  }
}

DeviceLimitGuard::~DeviceLimitGuard() = default;

DeviceOverheads measure_device_overheads(const MemoryDevice& d) {
  DeviceOverheads o;
  if (!d.is_cuda()) {
    o.note = "cpu: no allocator cache or device context (the ledger counts tensors exactly)";
    return o;
  }
  const CudaMemoryStats s = cuda_memory_stats(d.ordinal());
  o.measured = true;
  o.workspace_bytes =
      s.reserved_bytes > s.allocated_bytes ? s.reserved_bytes - s.allocated_bytes : 0;
  const DeviceProbe probe = probe_devices();
  for (const auto& g : probe.gpus) {
    if (g.index != d.ordinal() || !g.used_bytes) continue;
    o.context_measured = true;
    o.context_bytes = *g.used_bytes > s.reserved_bytes ? *g.used_bytes - s.reserved_bytes : 0;
  }
  if (!o.context_measured)
    o.note = probe.ok ? "NVML/nvidia-smi did not report device " + std::to_string(d.ordinal())
                      : "no device-wide usage: " + probe.message;
  return o;
}

}  // namespace foxhunt::memory
