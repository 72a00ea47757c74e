#include "foxhunt/train/best_policy.h"

#include <numeric>

#include "foxhunt/models/checkpoint.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::train {

double BestPolicy::evaluate(Env& env, const Policy& policy, int64_t episodes, uint64_t seed,
                            torch::nn::Module& module, int64_t step) {
  const auto returns = evaluate_policy(env, policy, episodes, seed);
  last_ =
      std::accumulate(returns.begin(), returns.end(), 0.0) / static_cast<double>(returns.size());
  if (last_ >= best_) {
    best_ = last_;
    best_step_ = step;
    weights_ = models::module_to_bytes(module);
  }
  return last_;
}

bool BestPolicy::restore(torch::nn::Module& module) const {
  if (weights_.empty()) return false;
  models::module_from_bytes(module, weights_, "best weights");
  return true;
}

nlohmann::json BestPolicy::to_json() const {
  return {{"best", json_number(best_)}, {"last", json_number(last_)}, {"best_step", best_step_}};
}

void BestPolicy::load(const nlohmann::json& j, std::string weights) {
  best_ = j.at("best").is_null() ? -std::numeric_limits<double>::infinity()
                                 : j.at("best").get<double>();
  last_ = j.at("last").is_null() ? NAN : j.at("last").get<double>();
  best_step_ = j.at("best_step").get<int64_t>();
  weights_ = std::move(weights);
}

}  // namespace foxhunt::train
