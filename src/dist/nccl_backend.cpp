// The NCCL process group comes from the CUDA plugin (its symbols live in libtorch_cuda, which only
// the plugin links).
#include "nccl_backend.h"

#include "foxhunt/core/cuda_plugin.h"
#include "foxhunt/core/error.h"

namespace foxhunt::dist::detail {

c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout) {
  auto factory =
      reinterpret_cast<NcclBackendFactory>(cuda_plugin_symbol("foxhunt_cuda_make_nccl_backend"));
  if (factory == nullptr)
    throw InputError(
        "dist", "backend nccl: expected the CUDA plugin, " + cuda_plugin_status() + " (use gloo)");
  c10::intrusive_ptr<c10d::Backend> out;
  factory(store, rank, size, timeout, out);
  return out;
}

}  // namespace foxhunt::dist::detail
