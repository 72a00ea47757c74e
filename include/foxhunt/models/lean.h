#pragma once
/// \file lean.h
/// The lean CPU inference path of the MLP models (DQN, PPO): a register-blocked kernel over the
/// module's own weights (one pass over the weights for up to 4 rows, no per-layer dispatch, one
/// scratch allocation per call), and the bounded, allocation-free finite-value scan the input
/// checks use.
///
/// The models take this path on their own when it applies (`lean_path_applies`: CPU, float32,
/// contiguous input, gradient mode off) and LibTorch autograd otherwise, so every forward that
/// records gradients is unchanged. One derived form is kept, for serving only: under
/// c10::InferenceMode the output-lane form (8 rows or more) reads the weights transposed from
/// `MlpImpl::lane_weights`, a models/derived_cache.h cache keyed on the weights' version counters
/// and gradients (`with_gradients`), so an optimizer step is seen by the next call. Elsewhere
/// (a trainer's no-grad forwards) it transposes into per-call scratch and keeps nothing.

#include <torch/torch.h>

#include <cstdint>

#include "foxhunt/models/mlp.h"

namespace foxhunt::models {

/// True when all `n` floats at `p` are finite (no NaN, no Inf): one vectorised pass, no
/// allocation, no device sync.
bool all_finite(const float* p, int64_t n);

/// True when `t` (any device, any dtype) holds only finite values. CPU float32 tensors are
/// scanned in place by `all_finite`; others by LibTorch ops (which sync a CUDA device).
bool tensor_all_finite(const torch::Tensor& t);

/// The forward of `mlp` on `x` [batch, in] (row-major float32) into `y` [batch, out]: each layer
/// y = act(x W^T + b), below 8 rows register-blocked over 4 rows x 4 outputs (each weight row
/// read once per 4 input rows), from 8 rows on over 6 rows x 64 output lanes of the transposed
/// weights (cached under InferenceMode, see above), bias and activation applied in registers.
/// Returns false, writing nothing, when a weight or bias is not a contiguous CPU float32 tensor
/// (the caller then takes the LibTorch path). Thread-safe: the activations between layers live in
/// one scratch tensor per call (LibTorch's CPU allocator, so the memory ledger counts it); batches
/// of 128 rows or more are split across the intra-op threads.
bool lean_mlp_forward(const MlpImpl& mlp, const float* x, int64_t batch, float* y);

/// True when `fused_mlp_forward` applies: gradient mode on, `x` a non-empty contiguous CPU
/// float32 matrix, every weight and bias a contiguous CPU float32 tensor.
bool fused_mlp_applies(const MlpImpl& mlp, const torch::Tensor& x);

/// The training forward of `mlp` on `x` as one autograd node: the lean kernels forward (every
/// hidden layer's output saved, as LibTorch's Linear/ReLU/Tanh nodes save them) and a backward
/// of register-blocked kernels for dW = g^T a, db and the input gradients. The same function as
/// the LibTorch layers (equal up to float summation order): on this CPU MKL's sgemm for these
/// shapes and its vector tanh were most of a CartPole update.
torch::Tensor fused_mlp_forward(const MlpImpl& mlp, const torch::Tensor& x);

/// True when an MLP model's forward on `x` may take the lean path: `x` a contiguous CPU float32
/// matrix and gradient mode off (train and eval mode compute the same MLP, so the mode does not
/// matter; `lean_mlp_forward` also checks the weights).
bool lean_path_applies(const torch::Tensor& x);

}  // namespace foxhunt::models
