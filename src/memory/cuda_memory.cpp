// CUDA memory statistics through the CUDA plugin's table (core/cuda_plugin.h): LibTorch's caching
// allocator and the driver. Without the plugin (a build without CUDA, or the file missing) the
// queries say "no CUDA" and everything else fails with the plugin's status.
#include "foxhunt/memory/cuda_memory.h"

#include <exception>
#include <map>
#include <mutex>

#include "foxhunt/core/cuda_plugin.h"

namespace foxhunt::memory {

namespace {

// The plugin's table, or foxhunt::Error saying why there is none.
const CudaMemoryFunctions& table() {
  const CudaMemoryFunctions* t = cuda_memory_functions();
  if (t == nullptr) {
    if (!cuda_plugin_built()) FOXHUNT_FAIL("cuda", "built without CUDA");
    FOXHUNT_FAIL("cuda", "no CUDA backend: ", cuda_plugin_status());
  }
  return *t;
}

// Runs one plugin call; its std::exception becomes foxhunt::Error naming the call and device.
template <class F>
auto call(const char* what, int device, F&& f) {
  try {
    return f(table());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    FOXHUNT_FAIL("cuda", what, "(device ", device, ") failed: ", e.what());
  }
}

// Validates `device` and makes sure LibTorch's CUDA state (and so the caching allocator) exists.
void ensure_device(int device) {
  FOXHUNT_CHECK(device >= 0, "cuda", "device index: expected >= 0, got ", device);
  const int n = cuda_device_count();
  if (device >= n)
    FOXHUNT_FAIL("cuda", "no CUDA device ", device, " (", n, " present",
                 n == 0 ? ": no usable GPU or NVIDIA driver" : "", ")");
  call("lazy init", device, [](const CudaMemoryFunctions& t) { t.lazy_init(); });
}

void mem_get_info(int device, std::uint64_t& free_bytes, std::uint64_t& total_bytes) {
  call("cudaMemGetInfo", device,
       [&](const CudaMemoryFunctions& t) { t.mem_get_info(device, &free_bytes, &total_bytes); });
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
  return cuda_memory_functions() != nullptr;
}

int cuda_device_count() {
  const CudaMemoryFunctions* t = cuda_memory_functions();
  if (t == nullptr) return 0;
  try {
    return t->device_count();
  } catch (const std::exception&) {  // a broken driver counts as none
    return 0;
  }
}

bool cuda_memory_available() {
  return cuda_device_count() > 0;
}

std::string cuda_stats_backend() {
  if (cuda_memory_functions() == nullptr)
    return cuda_plugin_built() ? "none (" + cuda_plugin_status() + ")"
                               : "none (built without CUDA)";
  const int n = cuda_device_count();
  return detail::cat("c10 CUDACachingAllocator (", n, n == 1 ? " device)" : " devices)");
}

CudaMemoryStats cuda_memory_stats(int device) {
  ensure_device(device);
  std::uint64_t s[7] = {};
  call("getDeviceStats", device,
       [&](const CudaMemoryFunctions& t) { t.allocator_stats(device, s); });
  CudaMemoryStats out;
  out.device = device;
  out.allocated_bytes = s[0];
  out.allocated_peak = s[1];
  out.reserved_bytes = s[2];
  out.reserved_peak = s[3];
  out.alloc_count = s[4];
  out.free_count = s[5];
  out.num_ooms = s[6];
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
  call("resetPeakStats", device, [&](const CudaMemoryFunctions& t) { t.reset_peak(device); });
}

std::uint64_t cuda_get_limit(int device) {
  ensure_device(device);
  const double fraction = call("getMemoryFraction", device, [&](const CudaMemoryFunctions& t) {
    return t.get_fraction(device);
  });
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
  call("setMemoryFraction", device,
       [&](const CudaMemoryFunctions& t) { t.set_fraction(fraction, device); });
  auto& c = caps();
  std::lock_guard<std::mutex> lock(c.mutex);
  if (bytes == 0)
    c.by_device.erase(device);
  else
    c.by_device[device] = {fraction, bytes};
  return old;
}

void cuda_empty_cache() {
  if (!cuda_plugin_built()) table();  // "built without CUDA" unless a plugin was named
  if (!cuda_memory_available()) return;
  call("emptyCache", 0, [](const CudaMemoryFunctions& t) {
    t.lazy_init();
    t.empty_cache();
  });
}

}  // namespace foxhunt::memory
