#pragma once
/// \file best_policy.h
/// Periodic greedy evaluation during RL training with best-weights tracking (what
/// Stable-Baselines3's EvalCallback does with best-model saving): value-based and policy-gradient
/// methods on CartPole-like tasks oscillate late in training, so the trainers can keep the
/// weights that scored best on a fixed set of evaluation episodes and load them at the end.

#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "foxhunt/train/env.h"

namespace foxhunt::train {

/// Best greedy evaluation seen so far and the weights that produced it.
class BestPolicy {
 public:
  /// Runs `episodes` episodes of `policy` in `env` (first reset seeded with `seed`, so every
  /// evaluation sees the same starts) and returns the mean return. When it is at least the best
  /// so far (ties go to the later, longer-trained weights) `module`'s weights are kept.
  double evaluate(Env& env, const Policy& policy, int64_t episodes, uint64_t seed,
                  torch::nn::Module& module, int64_t step);
  /// Loads the kept weights into `module`; false when nothing was kept.
  bool restore(torch::nn::Module& module) const;
  /// Best mean return (-inf before the first evaluation).
  double best() const { return best_; }
  /// Step of the best evaluation (-1 before the first).
  int64_t best_step() const { return best_step_; }
  /// Mean return of the latest evaluation (NaN before the first).
  double last() const { return last_; }
  /// Kept weights (module_to_bytes), empty before the first evaluation.
  const std::string& weights() const { return weights_; }
  /// Counters as JSON (the weights travel as a checkpoint blob).
  nlohmann::json to_json() const;
  /// Restores counters and weights.
  void load(const nlohmann::json& j, std::string weights);

 private:
  double best_ = -std::numeric_limits<double>::infinity();
  double last_ = NAN;
  int64_t best_step_ = -1;
  std::string weights_;
};

}  // namespace foxhunt::train
