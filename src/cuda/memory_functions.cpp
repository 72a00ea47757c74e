// The CUDA plugin's memory table: LibTorch's caching-allocator statistics and cap, and the
// driver's free/total bytes. Links nothing of foxhunt: it fails with std::runtime_error (or
// LibTorch's c10::Error), and src/memory/cuda_memory.cpp adds the device and the component.
#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

#include "foxhunt/core/cuda_plugin.h"

namespace {

constexpr auto kAggregate = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

std::uint64_t u64(std::int64_t v) {
  return v < 0 ? 0 : static_cast<std::uint64_t>(v);
}

c10::DeviceIndex index(int device) {
  return static_cast<c10::DeviceIndex>(device);
}

int device_count() {
  return static_cast<int>(c10::cuda::device_count());
}

void lazy_init() {
  at::globalContext().lazyInitDevice(c10::DeviceType::CUDA);
}

void allocator_stats(int device, std::uint64_t out[7]) {
  const auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(index(device));
  out[0] = u64(s.allocated_bytes[kAggregate].current);
  out[1] = u64(s.allocated_bytes[kAggregate].peak);
  out[2] = u64(s.reserved_bytes[kAggregate].current);
  out[3] = u64(s.reserved_bytes[kAggregate].peak);
  out[4] = u64(s.allocation[kAggregate].allocated);
  out[5] = u64(s.allocation[kAggregate].freed);
  out[6] = u64(s.num_ooms);
}

void mem_get_info(int device, std::uint64_t* free_bytes, std::uint64_t* total_bytes) {
  c10::cuda::CUDAGuard guard(index(device));
  size_t f = 0, t = 0;
  const cudaError_t rc = cudaMemGetInfo(&f, &t);
  if (rc != cudaSuccess)
    throw std::runtime_error(std::string("cudaMemGetInfo failed: ") + cudaGetErrorString(rc));
  *free_bytes = f;
  *total_bytes = t;
}

void reset_peak(int device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(index(device));
}

double get_fraction(int device) {
  return c10::cuda::CUDACachingAllocator::getMemoryFraction(index(device));
}

void set_fraction(double fraction, int device) {
  c10::cuda::CUDACachingAllocator::setMemoryFraction(fraction, index(device));
}

void empty_cache() {
  c10::cuda::CUDACachingAllocator::emptyCache();
}

}  // namespace

/// The plugin's entry point (looked up by name in src/core/cuda_plugin.cpp).
extern "C" __attribute__((visibility("default"))) const foxhunt::CudaMemoryFunctions*
foxhunt_cuda_memory() {
  static const foxhunt::CudaMemoryFunctions table{
      foxhunt::kCudaPluginAbi, &device_count, &lazy_init,
      &allocator_stats,        &mem_get_info, &reset_peak,
      &get_fraction,           &set_fraction, &empty_cache};
  return &table;
}
