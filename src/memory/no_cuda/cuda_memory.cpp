// Stub CUDA memory backend for LibTorch builds without c10_cuda: queries say "no CUDA"; every
// statistic or cap fails with "[cuda] built without CUDA".
#include "foxhunt/memory/cuda_memory.h"

namespace foxhunt::memory {

namespace {
[[noreturn]] void no_cuda() {
  FOXHUNT_FAIL("cuda", "built without CUDA");
}
}  // namespace

bool cuda_stats_compiled() {
  return false;
}
int cuda_device_count() {
  return 0;
}
bool cuda_memory_available() {
  return false;
}
std::string cuda_stats_backend() {
  return "none (built without CUDA)";
}

CudaMemoryStats cuda_memory_stats(int) {
  no_cuda();
}
LedgerStats cuda_ledger_stats(int) {
  no_cuda();
}
std::uint64_t cuda_live_bytes(int) {
  no_cuda();
}
std::uint64_t cuda_peak_bytes(int) {
  no_cuda();
}
void cuda_reset_peak(int) {
  no_cuda();
}
std::uint64_t cuda_set_limit(std::uint64_t, int) {
  no_cuda();
}
std::uint64_t cuda_get_limit(int) {
  no_cuda();
}
void cuda_empty_cache() {
  no_cuda();
}

}  // namespace foxhunt::memory
