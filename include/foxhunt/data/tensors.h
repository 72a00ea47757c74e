#pragma once
/// \file tensors.h
/// Conversions from the torch-free data layer to the tensors the models take. The only data
/// header that includes LibTorch.
///
/// Shapes (float32 unless noted):
/// - Mamba-2: inputs {x [batch, past, 32]}, target [batch, horizon].
/// - TFT: inputs {past [batch, 60, 225], future [batch, 5, 4], static_id [batch] int64},
///   target [batch, 5].
/// - RL: states [batch, 256].

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "foxhunt/data/dataset.h"
#include "foxhunt/data/features.h"
#include "foxhunt/models/model.h"

namespace foxhunt::data {

/// Copies a matrix into a float tensor [rows, cols] on `device`.
torch::Tensor to_tensor(const Matrix& m, const torch::Device& device = torch::kCPU);

/// Copies a 2-D tensor (any floating dtype, any device) into a Matrix.
Matrix from_tensor(const torch::Tensor& t);

/// Mamba-2 batch of the windows anchored at `anchors`.
models::Batch mamba2_batch(const MarketDataset& ds, const std::vector<int64_t>& anchors,
                           const WindowSpec& spec = kMamba2Window,
                           const torch::Device& device = torch::kCPU);

/// TFT batch of the windows anchored at `anchors`; static_id = the dataset's instrument id.
models::Batch tft_batch(const MarketDataset& ds, const std::vector<int64_t>& anchors,
                        const WindowSpec& spec = kTftWindow,
                        const torch::Device& device = torch::kCPU);

/// Stacks equally long observations (e.g. TradingEnv states) into [batch, dim].
torch::Tensor states_tensor(const std::vector<std::vector<float>>& states,
                            const torch::Device& device = torch::kCPU);

}  // namespace foxhunt::data
