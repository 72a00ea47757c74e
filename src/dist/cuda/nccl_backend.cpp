// The NCCL process group (CUDA builds of LibTorch only; its symbols live in libtorch_cuda).
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "nccl_backend.h"

namespace foxhunt::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout) {
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, opts);
}

}  // namespace foxhunt::dist::detail
