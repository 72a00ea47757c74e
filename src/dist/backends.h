#pragma once
// Internal to the dist area: the one c10d process-group factory per backend. Kept apart so the
// NCCL one (src/dist/cuda/, CUDA builds only) is the only file that sees the NCCL headers.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace foxhunt::dist::detail {

/// ProcessGroupNCCL over `store`; throws foxhunt::InputError in builds without CUDA.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout);

}  // namespace foxhunt::dist::detail
