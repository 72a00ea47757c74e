#pragma once
/// \file quantile_loss.h
/// Quantile (pinball) loss shared by the forecasting models (Mamba-2, TFT) and their trainer.

#include <torch/torch.h>

#include <vector>

namespace foxhunt::models {

/// Pinball loss QL = max(q e, (q - 1) e), e = y - yhat, averaged over batch, horizon and quantiles.
/// `pred` [batch, horizon, Q], `target` [batch, horizon], `quantiles` has Q levels in (0, 1).
torch::Tensor quantile_loss(const torch::Tensor& pred, const torch::Tensor& target,
                            const std::vector<double>& quantiles);

/// q-risk = 2 sum QL / sum |y| for one quantile index (as in the TFT paper).
torch::Tensor q_risk(const torch::Tensor& pred, const torch::Tensor& target,
                     const std::vector<double>& quantiles, int64_t quantile_index);

}  // namespace foxhunt::models
