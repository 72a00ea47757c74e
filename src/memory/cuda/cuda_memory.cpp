// CUDA memory statistics from LibTorch's caching allocator. Compiled when CMake finds c10_cuda
// (FOXHUNT_HAVE_CUDA_STATS); src/memory/no_cuda/cuda_memory.cpp is the stub otherwise.
#include "foxhunt/memory/cuda_memory.h"

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

namespace foxhunt::memory {

namespace {

constexpr auto kAggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

// Validates `device` and makes sure LibTorch's CUDA state (and so the caching allocator) exists.
void ensure_device(int device) {
  FOXHUNT_CHECK(device >= 0, "cuda", "device index: expected >= 0, got ", device);
  const int n = cuda_device_count();
  if (device >= n)
    FOXHUNT_FAIL("cuda", "no CUDA device ", device, " (", n, " present",
                 n == 0 ? ": no usable GPU or NVIDIA driver" : "", ")");
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
}

std::uint64_t u64(std::int64_t v) {
  return v < 0 ? 0 : static_cast<std::uint64_t>(v);
}

void mem_get_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  size_t f = 0, t = 0;
  const cudaError_t rc = cudaMemGetInfo(&f, &t);
  if (rc != cudaSuccess)
    FOXHUNT_FAIL("cuda", "cudaMemGetInfo(device ", device, ") failed: ", cudaGetErrorString(rc));
  free_bytes = f;
  total_bytes = t;
}

// The byte caps we set, so cuda_get_limit returns exactly what was asked for (the allocator only
// keeps the fraction).
struct Caps {
  std::mutex mutex;
  std::map<int, std::pair<double, std::uint64_t>> by_device;  // fraction, bytes
};
Caps& caps() {
  static auto* c = new Caps;
  return *c;
}

}  // namespace

bool cuda_stats_compiled() {
  return true;
}

int cuda_device_count() {
  return static_cast<int>(c10::cuda::device_count());
}

bool cuda_memory_available() {
  return cuda_device_count() > 0;
}

std::string cuda_stats_backend() {
  const int n = cuda_device_count();
  return detail::cat("c10 CUDACachingAllocator (", n, n == 1 ? " device)" : " devices)");
}

CudaMemoryStats cuda_memory_stats(int device) {
  ensure_device(device);
  const auto s =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  CudaMemoryStats out;
  out.device = device;
  out.allocated_bytes = u64(s.allocated_bytes[kAggregate].current);
  out.allocated_peak = u64(s.allocated_bytes[kAggregate].peak);
  out.reserved_bytes = u64(s.reserved_bytes[kAggregate].current);
  out.reserved_peak = u64(s.reserved_bytes[kAggregate].peak);
  out.alloc_count = u64(s.allocation[kAggregate].allocated);
  out.free_count = u64(s.allocation[kAggregate].freed);
  out.num_ooms = u64(s.num_ooms);
  mem_get_info(device, out.free_bytes, out.total_bytes);
  out.limit_bytes = cuda_get_limit(device);
  return out;
}

LedgerStats cuda_ledger_stats(int device) {
  const auto s = cuda_memory_stats(device);
  return {s.allocated_bytes, s.allocated_peak, s.alloc_count, s.free_count};
}

std::uint64_t cuda_live_bytes(int device) {
  return cuda_memory_stats(device).allocated_bytes;
}

std::uint64_t cuda_peak_bytes(int device) {
  return cuda_memory_stats(device).allocated_peak;
}

void cuda_reset_peak(int device) {
  ensure_device(device);
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
}

std::uint64_t cuda_get_limit(int device) {
  ensure_device(device);
  const double fraction =
      c10::cuda::CUDACachingAllocator::getMemoryFraction(static_cast<c10::DeviceIndex>(device));
  if (fraction <= 0.0 || fraction >= 1.0) return 0;
  {
    auto& c = caps();
    std::lock_guard<std::mutex> lock(c.mutex);
    auto it = c.by_device.find(device);
    if (it != c.by_device.end() && it->second.first == fraction) return it->second.second;
  }
  std::uint64_t free_b = 0, total_b = 0;
  mem_get_info(device, free_b, total_b);
  return static_cast<std::uint64_t>(fraction * static_cast<double>(total_b));
}

std::uint64_t cuda_set_limit(std::uint64_t bytes, int device) {
  const std::uint64_t old = cuda_get_limit(device);
  std::uint64_t free_b = 0, total_b = 0;
  mem_get_info(device, free_b, total_b);
  FOXHUNT_CHECK(bytes <= total_b, "cuda", "memory cap for device ", device, ": expected at most ",
                total_b, " B (the device's total), got ", bytes, " B");
  const double fraction =
      bytes == 0 ? 1.0 : static_cast<double>(bytes) / static_cast<double>(total_b);
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction,
                                                     static_cast<c10::DeviceIndex>(device));
  auto& c = caps();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (bytes == 0)
    c.by_device.erase(device);
  else
    c.by_device[device] = {fraction, bytes};
  return old;
}

void cuda_empty_cache() {
  if (!cuda_memory_available()) return;
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
  c10::cuda::CUDACachingAllocator::emptyCache();
}

}  // namespace foxhunt::memory
