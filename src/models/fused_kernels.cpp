#include "foxhunt/models/fused_kernels.h"

#include <atomic>

namespace foxhunt::models {

namespace {
std::atomic<bool> g_fused_cpu_kernels{true};
}  // namespace

bool fused_cpu_kernels() {
  return g_fused_cpu_kernels.load(std::memory_order_relaxed);
}

FusedCpuKernels::FusedCpuKernels(bool enabled) : previous_(fused_cpu_kernels()) {
  g_fused_cpu_kernels.store(enabled, std::memory_order_relaxed);
}

FusedCpuKernels::~FusedCpuKernels() {
  g_fused_cpu_kernels.store(previous_, std::memory_order_relaxed);
}

}  // namespace foxhunt::models
