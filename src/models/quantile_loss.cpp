#include "foxhunt/models/quantile_loss.h"

#include "foxhunt/models/model.h"

namespace foxhunt::models {

namespace {
torch::Tensor pinball(const torch::Tensor& pred, const torch::Tensor& target,
                      const std::vector<double>& quantiles) {
  FOXHUNT_CHECK(pred.dim() == 3, "quantile_loss",
                "pred: expected rank 3 [batch, horizon, Q], got rank ", pred.dim(), " with shape ",
                shape_str(pred.sizes().vec()));
  FOXHUNT_CHECK(
      target.dim() == 2 && target.size(0) == pred.size(0) && target.size(1) == pred.size(1),
      "quantile_loss", "target: expected shape ", shape_str({pred.size(0), pred.size(1)}), ", got ",
      shape_str(target.sizes().vec()));
  FOXHUNT_CHECK(static_cast<int64_t>(quantiles.size()) == pred.size(2), "quantile_loss",
                "expected ", pred.size(2), " quantile levels, got ", quantiles.size());
  auto q = torch::tensor(quantiles, pred.options()).view({1, 1, -1});
  auto e = target.unsqueeze(-1).to(pred.scalar_type()) - pred;
  return torch::max(q * e, (q - 1.0) * e);  // [batch, horizon, Q]
}
}  // namespace

torch::Tensor quantile_loss(const torch::Tensor& pred, const torch::Tensor& target,
                            const std::vector<double>& quantiles) {
  return pinball(pred, target, quantiles).mean();
}

torch::Tensor q_risk(const torch::Tensor& pred, const torch::Tensor& target,
                     const std::vector<double>& quantiles, int64_t quantile_index) {
  auto ql = pinball(pred, target, quantiles).select(2, quantile_index);
  return 2.0 * ql.sum() / target.abs().sum().clamp_min(1e-12);
}

}  // namespace foxhunt::models
