// Builds without CUDA: no NCCL process group.
#include "nccl_backend.h"

#include "foxhunt/core/error.h"

namespace foxhunt::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>&, int,
                                                    int, std::chrono::milliseconds) {
  throw InputError("dist", "backend nccl: this build of foxhunt has no CUDA (use gloo)");
}

}  // namespace foxhunt::dist::detail
