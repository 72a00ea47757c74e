#pragma once
/// \file fused_kernels.h
/// The process-wide switch of the fused CPU kernels (models/), kept apart from model.h so that
/// flipping it costs no rebuild of everything that includes the model interface.

namespace foxhunt::models {

/// Whether the fused CPU fp32 kernels may run (the inference kernels of the MLPs, Mamba-2 and the
/// TFT, the fused training nodes of the MLPs and the TFT's VSN, and train::FusedAdam's loop). On by
/// default. Off, the CPU runs the same LibTorch ops as CUDA does, so a CPU ledger figure and a CUDA
/// allocator figure describe the same computation (the CUDA memory tests compare them so).
/// Process-wide.
bool fused_cpu_kernels();
/// Sets fused_cpu_kernels() for its lifetime and restores the previous value.
class FusedCpuKernels {
 public:
  explicit FusedCpuKernels(bool enabled);
  ~FusedCpuKernels();
  FusedCpuKernels(const FusedCpuKernels&) = delete;  // a scope, not a value

 private:
  bool previous_;
};

}  // namespace foxhunt::models
