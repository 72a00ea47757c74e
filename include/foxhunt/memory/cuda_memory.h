#pragma once
/// \file cuda_memory.h
/// The ledger's query API for CUDA devices, backed by LibTorch's caching-allocator statistics
/// (c10::cuda::CUDACachingAllocator::getDeviceStats) and its cap (setMemoryFraction). Torch-free.
///
/// Backed by the CUDA plugin (core/cuda_plugin.h), loaded by the first call here. The
/// availability queries (cuda_stats_compiled: the plugin loaded; cuda_memory_available,
/// cuda_device_count, cuda_stats_backend) never throw; every other function throws
/// foxhunt::Error "[cuda] built without CUDA" in a build without the plugin, "[cuda] no CUDA
/// backend: ..." when it cannot be loaded, and "[cuda] no CUDA device ..." when the device index
/// does not exist (e.g. on a machine with no GPU).
///
/// Bytes: "allocated" is what tensors hold (the exact analogue of the CPU ledger's live bytes);
/// "reserved" is what the caching allocator holds from the driver (allocated + cached). Neither
/// includes the CUDA context, cuBLAS/cuDNN workspaces outside the allocator, or other processes;
/// use device_probe.h (NVML) for device-wide used memory.

#include <cstdint>
#include <string>

#include "foxhunt/core/no_copy.h"
#include "foxhunt/memory/ledger.h"

namespace foxhunt::memory {

/// Caching-allocator statistics of one device.
struct CudaMemoryStats {
  int device = 0;                     ///< CUDA device index
  std::uint64_t allocated_bytes = 0;  ///< bytes held by live tensors
  std::uint64_t allocated_peak = 0;   ///< peak of allocated_bytes since start / reset
  std::uint64_t reserved_bytes = 0;   ///< bytes the allocator holds from the driver
  std::uint64_t reserved_peak = 0;    ///< peak of reserved_bytes since start / reset
  std::uint64_t alloc_count = 0;      ///< allocations served since start
  std::uint64_t free_count = 0;       ///< frees since start
  std::uint64_t num_ooms = 0;         ///< out-of-memory failures of the allocator
  std::uint64_t total_bytes = 0;      ///< device memory (cudaMemGetInfo total)
  std::uint64_t free_bytes = 0;       ///< device memory free right now (cudaMemGetInfo free)
  std::uint64_t limit_bytes = 0;      ///< cap from setMemoryFraction (0 = none)
};

/// True when the CUDA plugin is loaded (this call loads it): the real statistics backend.
bool cuda_stats_compiled();
/// Number of usable CUDA devices (0 with no driver/GPU or in the stub build).
int cuda_device_count();
/// True when the backend is compiled and at least one device is usable.
bool cuda_memory_available();
/// A one-line description of the backend, e.g. "c10 CUDACachingAllocator (0 devices)" or
/// "none (built without CUDA)".
std::string cuda_stats_backend();

/// All statistics of `device`.
CudaMemoryStats cuda_memory_stats(int device = 0);
/// The CPU ledger's summary shape for a device: live = allocated, peak = allocated peak,
/// alloc/free counts from the caching allocator.
LedgerStats cuda_ledger_stats(int device = 0);
/// Bytes held by live tensors on `device`.
std::uint64_t cuda_live_bytes(int device = 0);
/// Peak of cuda_live_bytes since start or the last cuda_reset_peak().
std::uint64_t cuda_peak_bytes(int device = 0);
/// Resets the allocator's peak statistics of `device` (peak := current).
void cuda_reset_peak(int device = 0);
/// Caps the caching allocator of `device` at `bytes` (0 = no cap) through setMemoryFraction and
/// returns the previous cap. The cap bounds reserved bytes (tensors + the allocator's cache), not
/// the CUDA context or other processes: to emulate a card, cap at DeviceProfile::usable_bytes().
/// Past the cap LibTorch throws c10::OutOfMemoryError, which translate_oom / rethrow_if_oom turn
/// into foxhunt::OutOfMemoryError. Throws InputError when `bytes` exceeds the device's total.
std::uint64_t cuda_set_limit(std::uint64_t bytes, int device = 0);
/// The cap in force on `device` (0 = none).
std::uint64_t cuda_get_limit(int device = 0);
/// Returns cached, unused blocks of every device to the driver (reserved drops to allocated).
void cuda_empty_cache();

/// RAII: caps `device` for its lifetime and restores the previous cap.
class CudaLimitGuard {
 public:
  /// Sets the cap of `device` to `bytes` (0 = none).
  CudaLimitGuard(std::uint64_t bytes, int device = 0)
      : device_(device), previous_(cuda_set_limit(bytes, device)) {}
  ~CudaLimitGuard() {
    try {
      cuda_set_limit(previous_, device_);
    } catch (...) {  // a destructor must not throw; the device is gone or was never there
    }
  }
  FOXHUNT_NO_COPY(CudaLimitGuard);

 private:
  int device_;
  std::uint64_t previous_;
};

}  // namespace foxhunt::memory
