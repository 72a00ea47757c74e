#pragma once
/// \file device_memory.h
/// One memory interface over the CPU ledger (ledger.h) and the CUDA caching allocator
/// (cuda_memory.h): live and peak bytes, a cap, and the overheads only a GPU has. The planner,
/// the footprints and the trainers' caps measure "the device" through it, so the same code plans
/// on the CPU (emulating a card) and on a real card. Torch-free.
///
/// CPU: live = the ledger's live bytes, the cap = LimitGuard (live + external bytes).
/// CUDA: live = allocated bytes, the cap = the allocator's memory fraction (bounds reserved =
/// allocated + cache, so the cache is emptied before a cap is set). Ledger scopes are CPU-only:
/// on CUDA the footprint tags are differences of allocated bytes between phases.
/// On CUDA two tags exist that the CPU lacks (measure_device_overheads):
///   workspace = reserved - allocated (the allocator's cache and cuBLAS/cuDNN workspaces in it),
///   context   = device used (NVML) - reserved, at idle (the CUDA context, kernels, libraries).

#include <cstdint>
#include <optional>
#include <string>

#include "foxhunt/core/device.h"
#include "foxhunt/core/no_copy.h"
#include "foxhunt/memory/cuda_memory.h"
#include "foxhunt/memory/ledger.h"

namespace foxhunt::memory {

/// A device whose memory is measured: the CPU (the ledger) or a CUDA device (its ordinal()).
using MemoryDevice = foxhunt::Device;

/// Live bytes: the ledger's on the CPU, allocated bytes on CUDA.
std::uint64_t device_live_bytes(const MemoryDevice& d);
/// Peak of device_live_bytes since start or the last device_reset_peak.
std::uint64_t device_peak_bytes(const MemoryDevice& d);
/// Sets the peak to the current live bytes.
void device_reset_peak(const MemoryDevice& d);
/// What counts against a cap now: CPU live + external bytes, CUDA reserved bytes.
std::uint64_t device_in_use_bytes(const MemoryDevice& d);

/// RAII cap of a device: the ledger's LimitGuard on the CPU, the allocator's memory fraction on
/// CUDA (after emptying the cache, so the cap bounds what the step really holds). Past it an
/// allocation throws foxhunt::OutOfMemoryError (through translate_oom on CUDA).
class DeviceLimitGuard {
 public:
  /// Caps `d` at `bytes` in use (absolute, as device_in_use_bytes counts them).
  DeviceLimitGuard(const MemoryDevice& d, std::uint64_t bytes);
  ~DeviceLimitGuard();
  FOXHUNT_NO_COPY(DeviceLimitGuard);
  /// The cap set.
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::uint64_t bytes_;
  std::optional<LimitGuard> cpu_;
  std::optional<CudaLimitGuard> cuda_;
};

/// The overheads a GPU adds beyond what tensors hold.
struct DeviceOverheads {
  bool measured = false;              ///< false on the CPU or when NVML did not answer
  std::uint64_t workspace_bytes = 0;  ///< reserved - allocated
  std::uint64_t context_bytes = 0;    ///< NVML used - reserved (0 when NVML is unavailable)
  bool context_measured = false;      ///< NVML answered for this device
  std::string note;                   ///< why something was not measured
};

/// Measures the workspace (now) and context (device used by NVML minus reserved; call at idle)
/// of `d`. On the CPU: nothing to measure (measured = false, note says so).
DeviceOverheads measure_device_overheads(const MemoryDevice& d);

}  // namespace foxhunt::memory
