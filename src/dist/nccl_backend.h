#pragma once
/// \file nccl_backend.h
/// Internal to the dist area (used by communicator.cpp) and the CUDA plugin: the NCCL
/// process-group factory. Its one definition is in the plugin (src/cuda/nccl_backend.cpp, the only
/// file that sees the NCCL headers), reached through core/cuda_plugin.h.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>

namespace foxhunt::dist::detail {

/// The plugin's factory (symbol foxhunt_cuda_make_nccl_backend): ProcessGroupNCCL over `store`.
using NcclBackendFactory = void (*)(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                    int size, std::chrono::milliseconds timeout,
                                    c10::intrusive_ptr<c10d::Backend>& out);

/// ProcessGroupNCCL over `store`, from the CUDA plugin; InputError naming why when the plugin
/// cannot be loaded (a build without CUDA, or the file missing).
c10::intrusive_ptr<c10d::Backend> make_nccl_backend(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int size,
                                                    std::chrono::milliseconds timeout);

}  // namespace foxhunt::dist::detail
