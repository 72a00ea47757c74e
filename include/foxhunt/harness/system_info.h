#pragma once
/// \file system_info.h
/// What `foxhunt info` reports: build, LibTorch, devices, threads, BLAS, quantized engines.

#include <nlohmann/json.hpp>

namespace foxhunt {

/// Collects build and run-time facts as JSON (keys: foxhunt_version, libtorch_version,
/// cuda_available, cuda_device_count, cuda_plugin (where the CUDA plugin was loaded from, or why
/// not: core/cuda_plugin.h), threads, interop_threads, blas, lapack, mkl, mkldnn,
/// quantized_engines, quantized_engine, build_cuda, ledger_installed, ledger_live_bytes,
/// ledger_limit_bytes, cuda_memory_stats_backend, cuda_memory_stats_compiled, nvml, nvidia_smi;
/// the last two as memory::to_json(DeviceProbe)).
nlohmann::json system_info();

}  // namespace foxhunt
