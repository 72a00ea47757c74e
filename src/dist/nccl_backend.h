#pragma once
/// \file nccl_backend.h
/// Internal to the dist area (used by communicator.cpp): the NCCL process-group factory, declared
/// apart so that src/dist/cuda/nccl_backend.cpp (CUDA builds only) is the only file that sees the
/// NCCL headers; src/dist/no_cuda/ has the stub.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace foxhunt::dist::detail {

/// ProcessGroupNCCL over `store`; throws foxhunt::InputError in builds without CUDA.
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout);

}  // namespace foxhunt::dist::detail
