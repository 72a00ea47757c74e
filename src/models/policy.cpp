#include "foxhunt/models/policy.h"

namespace foxhunt::models {

torch::Tensor ppo_loss(const PolicyOutput& out, const torch::Tensor& actions,
                       const torch::Tensor& old_log_prob, const torch::Tensor& advantages,
                       const torch::Tensor& returns, double clip, double vf_coef, double ent_coef) {
  auto log_probs = torch::log_softmax(out.logits, -1);
  auto new_log_prob = log_probs.gather(1, actions.to(torch::kLong).view({-1, 1})).squeeze(1);
  auto ratio = torch::exp(new_log_prob - old_log_prob);
  auto surr1 = ratio * advantages;
  auto surr2 = torch::clamp(ratio, 1.0 - clip, 1.0 + clip) * advantages;
  auto policy_loss = -torch::min(surr1, surr2).mean();
  auto value_loss = torch::mse_loss(out.value, returns);
  auto entropy = -(log_probs.exp() * log_probs).sum(-1).mean();
  return policy_loss + vf_coef * value_loss - ent_coef * entropy;
}

}  // namespace foxhunt::models
