#pragma once
/// \file cuda_plugin.h
/// The CUDA backend as a plugin: libfoxhunt_cuda.so holds every foxhunt function that calls
/// CUDA (the caching-allocator statistics and cap, the NCCL process group) and brings LibTorch's
/// CUDA libraries with it. Nothing else links them, so a process that stays on the CPU never
/// loads them: `foxhunt` starts in about half the time and 370 MB less resident memory (the
/// wheel's libtorch_cuda, cuBLAS, cuDNN, NCCL). The first use of a CUDA device loads the plugin;
/// LibTorch's CUDA kernels, hooks and allocator register themselves as it loads. Torch-free.
///
/// Where it is looked for: $FOXHUNT_CUDA_PLUGIN (a file) and nothing else when it is set; else,
/// in order: beside the binary or shared
/// library that holds this code; in ../lib from there (an install, wherever its prefix was
/// moved); the build tree; the install's lib directory as configured; the loader's own
/// search path (LD_LIBRARY_PATH, rpath). The first that exists is loaded; its load error, if
/// any, is what cuda_plugin_status() reports.

#include <cstdint>
#include <string>
#include <vector>

namespace foxhunt {

/// The plugin's ABI version: a plugin of another version is refused (it was built from other
/// sources than this binary).
inline constexpr int kCudaPluginAbi = 1;

/// The plugin's memory functions (the table its foxhunt_cuda_memory() returns). They throw a
/// std::exception (c10::Error, std::runtime_error) on failure; foxhunt/memory/cuda_memory.h turns
/// that into foxhunt::Error.
struct CudaMemoryFunctions {
  int abi = 0;            ///< kCudaPluginAbi of the plugin's sources
  int (*device_count)();  ///< usable CUDA devices (0 without a driver or GPU)
  void (*lazy_init)();    ///< LibTorch's CUDA state (context, allocator) on first use
  /// The caching allocator's counters of `device`: allocated current and peak, reserved current
  /// and peak, allocations, frees, out-of-memory failures.
  void (*allocator_stats)(int device, std::uint64_t out[7]);
  void (*mem_get_info)(int device, std::uint64_t* free_bytes, std::uint64_t* total_bytes);
  void (*reset_peak)(int device);                     ///< peak := current
  double (*get_fraction)(int device);                 ///< the allocator's cap, as a fraction
  void (*set_fraction)(double fraction, int device);  ///< caps the allocator
  void (*empty_cache)();                              ///< returns cached blocks to the driver
};

/// Loads the plugin once (thread-safe; later calls return the first answer). True when it is
/// loaded and its ABI matches.
bool load_cuda_plugin();

/// True when the plugin is loaded; never loads it. A process in which it is not loaded has no
/// CUDA tensor of foxhunt's making, so a passive observer (the memory profiler's device series)
/// asks this first instead of loading 370 MB of CUDA libraries to find nothing.
bool cuda_plugin_loaded();

/// True when this build made a plugin (LibTorch with CUDA was found at configure time).
bool cuda_plugin_built();

/// One line: "loaded from PATH", "not loaded yet", or why it could not be loaded (each place
/// tried and what the loader said).
std::string cuda_plugin_status();

/// The address of `symbol` in the loaded plugin; nullptr when the plugin is not loaded or lacks it.
void* cuda_plugin_symbol(const char* symbol);

/// The plugin's memory table (loads the plugin); nullptr when it cannot be loaded.
const CudaMemoryFunctions* cuda_memory_functions();

namespace detail {
/// The files tried, in order (see the file comment). Public for the tests.
std::vector<std::string> cuda_plugin_candidates();
}  // namespace detail

}  // namespace foxhunt
