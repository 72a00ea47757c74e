#pragma once
/// \file system_info.h
/// What `foxhunt info` reports: build, LibTorch, devices, threads, BLAS, quantized engines.

#include <nlohmann/json.hpp>

namespace foxhunt {

/// Collects build and run-time facts as JSON (keys: foxhunt_version, libtorch_version,
/// cuda_available, cuda_device_count, cuda_devices, threads, blas, lapack, mkl, quantized_engines,
/// cuda_memory_stats_backend).
nlohmann::json system_info();

}  // namespace foxhunt
