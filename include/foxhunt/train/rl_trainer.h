#pragma once
/// \file rl_trainer.h
/// What the DQN and PPO trainers share: the counters, the network as a registry model, the
/// periodic evaluations that keep the best weights, the checkpoint's extra JSON and the greedy
/// policy. Each trainer adds its step, its state (train/state_io.h) and its checkpoint blobs.

#include <torch/torch.h>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/core/container.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/train/best_policy.h"
#include "foxhunt/train/data_parallel.h"
#include "foxhunt/train/env.h"
#include "foxhunt/train/infra.h"
#include "foxhunt/train/loop.h"

namespace foxhunt::train {

/// Base of the RL trainers.
class RlTrainerBase {
 public:
  virtual ~RlTrainerBase() = default;

  /// The algorithm its checkpoints and metrics are written for (models::trainer_algo of its
  /// trainer kind).
  const std::string& algo() const { return algo_; }
  /// Trains until total_steps (or a stop request / run.stop_at_step); writes metrics and
  /// checkpoints as configured, and a final checkpoint when run.checkpoint_path is set.
  virtual TrainResult train(const RunConfig& run = {}) = 0;
  /// Writes a checkpoint (atomically).
  virtual void save_checkpoint(const std::string& path) = 0;
  /// Restores a checkpoint written by a trainer with the same network and environment; training
  /// then continues exactly (bit-for-bit on the same device and thread count).
  void load_checkpoint(const std::string& path);
  /// The same from a trainer checkpoint already read; `source` names it in errors.
  virtual void load_checkpoint(const Container& c, const std::string& source) = 0;

  /// Trains data-parallel over `comm` (train/data_parallel.h): rank 0's weights are broadcast,
  /// gradients averaged over the ranks every update, stopping agreed and weight checksums
  /// compared. Each rank keeps its own environments and exploration: rank r > 0 reseeds them
  /// from rank_seed(seed, r) (also when resumed from rank 0's checkpoint). Call after
  /// load_checkpoint when resuming.
  virtual void set_data_parallel(std::shared_ptr<dist::Communicator> comm) = 0;
  /// The data-parallel state (null when training alone).
  const DataParallel* data_parallel() const { return dp_.get(); }

  /// Greedy action for one observation (argmax Q, or the most probable action).
  virtual int64_t greedy_action(const std::vector<float>& obs) = 0;
  /// Greedy policy usable with evaluate_policy (valid while the trainer lives).
  Policy greedy_policy() {
    return [this](const std::vector<float>& obs) { return greedy_action(obs); };
  }

  /// Environment steps done (over all environments).
  int64_t step() const { return step_; }
  /// Finished training episodes.
  int64_t episodes() const { return episodes_; }
  /// Extra JSON stored in checkpoints under header["trainer"]["extra"] (e.g. the market data
  /// a trading agent was trained on); restored by load_checkpoint.
  void set_checkpoint_extra(nlohmann::json extra) { extra_ = std::move(extra); }
  /// The extra JSON (set, or loaded from a checkpoint).
  const nlohmann::json& checkpoint_extra() const { return extra_; }
  /// Periodic evaluations so far (best return, its step, the latest return).
  const BestPolicy& evaluations() const { return best_; }
  /// The trained network as a registry model.
  models::Model& model() { return *model_; }

 protected:
  /// The trainer header every RL checkpoint has: options, the environment's identity (name,
  /// observation size, actions), the best-policy record and the extra JSON.
  nlohmann::json checkpoint_header(nlohmann::json options, const Env& env) const;
  /// The container of an RL checkpoint: the model, `header`, and the blobs every RL trainer has
  /// (optimizer, LibTorch RNG, best weights).
  Container checkpoint_container(const nlohmann::json& header,
                                 torch::optim::Optimizer& optimizer) const;
  /// Checks (kind, version, algo, environment identity) and restores what checkpoint_container
  /// wrote besides the model: optimizer, LibTorch RNG, extra JSON and the best policy. Returns
  /// the trainer header. Throws InputError naming `path` on any mismatch.
  const nlohmann::json& restore_common(const Container& c, const std::string& path, const Env& env,
                                       torch::optim::Optimizer& optimizer);

  /// Adds eval_return, best_eval_return and best_eval_step to a metrics line once a periodic
  /// evaluation ran.
  void add_evaluation_metrics(nlohmann::json& line) const {
    if (best_.best_step() < 0) return;
    line["eval_return"] = json_number(best_.last());
    line["best_eval_return"] = json_number(best_.best());
    line["best_eval_step"] = best_.best_step();
  }

  /// The periodic evaluation after a pass of the training loop that took the step from `before`
  /// to step(): when a multiple of `o.eval_interval()` was crossed (0: never), `o.eval_episodes()`
  /// greedy episodes on `env` (the first reset seeded with derive_seed(o.seed(), kBestEval)),
  /// keeping `net`'s weights when they are the best so far. `Options`: the trainer's options.
  /// `env` is null when periodic evaluation is off (no evaluation environment was built).
  template <typename Options>
  void evaluate_when_due(int64_t before, const Options& o, Env* env, torch::nn::Module& net) {
    if (env != nullptr && RunSession::crossed(o.eval_interval(), before, step_))
      best_.evaluate(*env, greedy_policy(), o.eval_episodes(),
                     derive_seed(o.seed(), SeedStream::kBestEval), net, step_);
  }
  /// The end of train(): `session`'s result with the counters and `metrics`, to which the
  /// data-parallel summary is added when training distributed.
  TrainResult finish_run(RunSession& session, bool completed, nlohmann::json metrics);

  /// Sets algo_ to models::trainer_algo(kind) and builds model_: the catalog's model `name`
  /// ("" = models::trainer_model(kind)) sized for `shape` (models::policy_options; InputError
  /// naming `component` for a model without that hook) after seeding LibTorch with `seed`, then
  /// moved to `device`.
  void build_model(models::TrainerKind kind, const std::string& name,
                   const models::PolicyShape& shape, uint64_t seed, const torch::Device& device,
                   const char* component);

  std::string algo_;                                 ///< models::trainer_algo of the trainer
  std::unique_ptr<models::Model> model_;             ///< the network being trained
  int64_t step_ = 0;                                 ///< environment steps done
  int64_t episodes_ = 0;                             ///< finished episodes
  int64_t updates_ = 0;                              ///< optimizer updates
  BestPolicy best_;                                  ///< periodic evaluations and the best weights
  nlohmann::json extra_ = nlohmann::json::object();  ///< checkpoint extra
  std::unique_ptr<DataParallel> dp_;                 ///< set by set_data_parallel
  /// Builds dp_ over `comm` (broadcasting `modules` from rank 0, buckets over `params`). On a
  /// rank r > 0 it also seeds LibTorch's generator with rank_seed(seed, r) and returns that seed,
  /// from which the trainer re-derives its own environment and exploration streams.
  std::optional<uint64_t> attach_data_parallel(std::shared_ptr<dist::Communicator> comm,
                                               const std::vector<torch::nn::Module*>& modules,
                                               std::vector<torch::Tensor> params, uint64_t seed);
  /// The base of this rank's own random streams (environments, exploration).
  uint64_t stream_seed(uint64_t seed) const { return rank_seed(seed, dp_ ? dp_->rank() : 0); }
};

}  // namespace foxhunt::train
