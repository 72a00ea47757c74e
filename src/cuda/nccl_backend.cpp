// The CUDA plugin's NCCL process group (its symbols live in libtorch_cuda).
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "nccl_backend.h"

/// ProcessGroupNCCL over `store` (looked up by name in src/dist/nccl_backend.cpp).
extern "C" __attribute__((visibility("default"))) void foxhunt_cuda_make_nccl_backend(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, c10::intrusive_ptr<c10d::Backend>& out) {
  // Checked against the declared type, so that a change of one side fails to compile.
  [[maybe_unused]] constexpr foxhunt::dist::detail::NcclBackendFactory kChecked =
      &foxhunt_cuda_make_nccl_backend;
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  out = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
}
