#include "foxhunt/models/adapter.h"

#include "foxhunt/models/quantile_loss.h"

namespace foxhunt::models {

Batch policy_example_batch(
    const IoSpec& spec, int64_t batch, const torch::Device& device, uint64_t seed,
    const std::function<std::vector<torch::Tensor>(at::Generator&, int64_t)>& more) {
  auto gen = at::detail::createCPUGenerator(seed);
  Batch b;
  b.inputs.push_back(torch::randn(spec.inputs.at(0).shape(batch), gen).to(device));
  std::vector<torch::Tensor> target = {
      torch::randint(0, spec.actions, {batch, 1}, gen, torch::kLong).to(torch::kFloat)};
  for (auto& t : more(gen, batch)) target.push_back(std::move(t));
  b.target = torch::cat(target, 1).to(device);
  return b;
}

void check_policy_sizes(const std::string& component, int64_t state_dim, int64_t actions) {
  FOXHUNT_CHECK(state_dim > 0 && actions > 1, component,
                "expected state_dim > 0 and actions > 1, got state_dim=", state_dim,
                " actions=", actions);
}

std::vector<std::vector<int64_t>> forecaster_output_shapes(const IoSpec& spec, int64_t batch) {
  return {{batch, spec.horizon, static_cast<int64_t>(spec.quantiles.size())}};
}

torch::Tensor forecaster_loss(const std::string& component, const IoSpec& spec,
                              const torch::Tensor& pred, const torch::Tensor& target) {
  check_float_input(component, "target", target, {pred.size(0), pred.size(1)}, pred.device());
  return quantile_loss(pred, target, spec.quantiles);
}

}  // namespace foxhunt::models
