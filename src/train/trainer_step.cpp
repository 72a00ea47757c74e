#include "foxhunt/train/trainer_step.h"

#include <torch/torch.h>

#include <algorithm>

#include "foxhunt/core/error.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/train/dqn_trainer.h"
#include "foxhunt/train/forecast_trainer.h"
#include "foxhunt/train/infra.h"
#include "foxhunt/train/ppo_trainer.h"

namespace foxhunt::train {

namespace {

constexpr const char* kTrainerStepComponent = "trainer_step";

// Random transitions the DQN collects before its first measured update: enough to sample from
// (with replacement) at any batch; the buffer's bytes are reserved in full anyway.
constexpr std::int64_t kDqnWarmTransitions = 64;

std::uint64_t parameter_bytes(models::Model& m) {
  std::uint64_t n = 0;
  for (const auto& p : m.module().parameters())
    n += static_cast<std::uint64_t>(p.numel()) * p.element_size();
  return n;
}

// The RL network's shape from the model options, read by the model's own catalog hook (its
// defaults; unknown keys and bad values are InputError there).
models::PolicyShape rl_shape(const TrainerStepSpec& spec) {
  return models::policy_shape(spec.model, spec.model_options, kTrainerStepComponent);
}

// The environments of an RL step: the given factory (checked against the model options) or a
// synthetic one of the model's shape.
EnvFactory rl_envs(const TrainerStepSpec& spec, const models::PolicyShape& shape) {
  if (!spec.env) {
    const std::uint64_t seed = spec.seed;
    return [shape, seed](std::int64_t i) -> std::unique_ptr<Env> {
      return std::make_unique<SyntheticEnv>(shape.state_dim, shape.actions,
                                            derive_seed(seed, static_cast<std::uint64_t>(i + 2)));
    };
  }
  auto probe = spec.env(0);
  FOXHUNT_CHECK(probe != nullptr, kTrainerStepComponent, "the environment factory returned null");
  FOXHUNT_CHECK(
      probe->observation_size() == shape.state_dim && probe->action_count() == shape.actions,
      kTrainerStepComponent, spec.model, ": the environment has observations of ",
      probe->observation_size(), " and ", probe->action_count(),
      " actions, the model options expect state_dim ", shape.state_dim, " and ", shape.actions,
      " actions");
  return spec.env;
}

nlohmann::json trainer_json(const TrainerStepSpec& spec) {
  nlohmann::json j =
      spec.trainer_options.is_null() ? nlohmann::json::object() : spec.trainer_options;
  FOXHUNT_CHECK(j.is_object(), kTrainerStepComponent,
                "trainer options: expected a JSON object, got ", j.type_name());
  j["seed"] = spec.seed;
  j["device"] = spec.device;
  return j;
}

class DqnStep final : public TrainerStep {
 public:
  explicit DqnStep(const TrainerStepSpec& spec) {
    const models::PolicyShape shape = rl_shape(spec);
    nlohmann::json j = trainer_json(spec);
    j["hidden"] = shape.hidden;
    DqnTrainerOptions o = dqn_trainer_options_from_json(j);
    // Random actions and no update while the first transitions come in.
    o.learning_starts(std::max(o.learning_starts(), kDqnWarmTransitions));
    o.total_steps(std::max(o.total_steps(), o.learning_starts() + 1));
    trainer_ = std::make_unique<DqnTrainer>(o, rl_envs(spec, shape), spec.model);
    RunConfig run;
    run.progress = ProgressMode::kOff;
    run.stop_at_step = kDqnWarmTransitions;
    trainer_->train(run);
    const std::uint64_t replay = ReplayBuffer::storage_bytes(o.buffer_size(), shape.state_dim);
    describe_ =
        detail::cat("DqnTrainer update: ", o.double_dqn() ? "double" : "vanilla",
                    " DQN (online + target networks), replay buffer ", o.buffer_size(), " x ",
                    shape.state_dim, " (", replay, " B host), Adam, grad clip ", o.max_grad_norm());
    external_ = replay + trainer_->env_host_bytes();
  }
  models::Model& model() override { return trainer_->model(); }
  void prepare(std::int64_t batch) override { trainer_->prepare_update(batch); }
  void apply() override { trainer_->apply_update(); }
  std::uint64_t external_bytes() const override { return external_; }
  std::uint64_t expected_state_bytes() const override {
    return parameter_bytes(trainer_->model());  // the target network
  }
  std::string describe() const override { return describe_; }

 private:
  std::unique_ptr<DqnTrainer> trainer_;
  std::string describe_;
  std::uint64_t external_ = 0;
};

class PpoStep final : public TrainerStep {
 public:
  explicit PpoStep(const TrainerStepSpec& spec) : seed_(spec.seed) {
    const models::PolicyShape shape = rl_shape(spec);
    nlohmann::json j = trainer_json(spec);
    j["hidden"] = shape.hidden;
    const PpoTrainerOptions o = ppo_trainer_options_from_json(j);
    rollout_rows_ = o.n_envs() * o.n_steps();
    clip_ = o.clip_range();
    trainer_ = std::make_unique<PpoTrainer>(o, rl_envs(spec, shape), spec.model);
    describe_ = detail::cat("PpoTrainer minibatch step: rollout of max(batch, n_envs ", o.n_envs(),
                            " x n_steps ", o.n_steps(), ") rows on the device, clipped loss, ",
                            "FusedAdam, grad clip ", o.max_grad_norm());
  }
  models::Model& model() override { return trainer_->model(); }
  void prepare(std::int64_t batch) override {
    // A minibatch is drawn from one rollout; a batch above the rollout implies more steps per
    // rollout (n_steps raised), so the rollout grows with it.
    rollout_ = trainer_->synthetic_rollout(std::max(rollout_rows_, batch), seed_ + calls_++);
    trainer_->prepare_minibatch(rollout_, torch::arange(batch, torch::kLong), clip_);
  }
  void apply() override {
    trainer_->apply_minibatch();
    rollout_ = {};
  }
  std::uint64_t external_bytes() const override { return trainer_->env_host_bytes(); }
  std::uint64_t expected_state_bytes() const override { return 0; }
  std::string describe() const override { return describe_; }

 private:
  std::unique_ptr<PpoTrainer> trainer_;
  PpoTrainer::Rollout rollout_;
  std::int64_t rollout_rows_ = 0;
  double clip_ = 0.2;
  std::uint64_t seed_ = 0, calls_ = 0;
  std::string describe_;
};

// A source the forecast trainer is built over; the step hands it batches itself.
class ExampleBatches final : public BatchSource {
 public:
  ExampleBatches(const models::Model& m, std::int64_t seq, torch::Device device, std::uint64_t seed)
      : model_(m), seq_(seq), device_(device), seed_(seed) {}
  std::int64_t train_batches() const override { return 1; }
  models::Batch train_batch(std::int64_t, std::int64_t) override { return make(1); }
  std::int64_t validation_batches() const override { return 1; }
  models::Batch validation_batch(std::int64_t) override { return make(1); }
  models::Batch make(std::int64_t batch) {
    return model_.example_batch(batch, seq_, device_, seed_ + calls_++);
  }

 private:
  const models::Model& model_;
  std::int64_t seq_;
  torch::Device device_;
  std::uint64_t seed_, calls_ = 0;
};

class ForecastStep final : public TrainerStep {
 public:
  explicit ForecastStep(const TrainerStepSpec& spec) : device_(models::to_torch(spec.device)) {
    nlohmann::json j = trainer_json(spec);
    j.erase("device");  // the forecast trainer follows the model's device
    const ForecastTrainerOptions o = forecast_trainer_options_from_json(j);
    torch::manual_seed(spec.seed);
    model_ = models::make_model(spec.model, spec.model_options);
    model_->to(device_);
    model_->module().train();
    const std::int64_t seq = spec.seq_len == 0 ? model_->default_seq_len() : spec.seq_len;
    batches_ = std::make_unique<ExampleBatches>(*model_, seq, device_, spec.seed);
    trainer_ = std::make_unique<ForecastTrainer>(*model_, *batches_, o);
    describe_ = detail::cat("ForecastTrainer step: ", spec.model, " loss on a window of ", seq,
                            " bars, Adam (weight decay ", o.weight_decay(), "), grad clip ",
                            o.max_grad_norm());
  }
  models::Model& model() override { return *model_; }
  void prepare(std::int64_t batch) override { trainer_->prepare_step(batches_->make(batch)); }
  void apply() override { trainer_->apply_step(); }
  std::uint64_t external_bytes() const override { return 0; }
  std::uint64_t expected_state_bytes() const override { return 0; }
  std::string describe() const override { return describe_; }

 private:
  torch::Device device_;
  std::unique_ptr<models::Model> model_;
  std::unique_ptr<ExampleBatches> batches_;
  std::unique_ptr<ForecastTrainer> trainer_;
  std::string describe_;
};

}  // namespace

std::unique_ptr<TrainerStep> make_trainer_step(const TrainerStepSpec& spec) {
  FOXHUNT_CHECK(spec.seq_len >= 0, kTrainerStepComponent,
                "seq_len: expected >= 0 (0 = model default), got ", spec.seq_len);
  FOXHUNT_CHECK(models::in_catalog(spec.model), kTrainerStepComponent, "model: expected one of ",
                models::joined_model_names(), " (the trainers), got '", spec.model, "'");
  switch (models::catalog_entry(spec.model).trainer) {
    case models::TrainerKind::kDqn:
      return std::make_unique<DqnStep>(spec);
    case models::TrainerKind::kPpo:
      return std::make_unique<PpoStep>(spec);
    case models::TrainerKind::kForecast:
      return std::make_unique<ForecastStep>(spec);
  }
  throw Error(kTrainerStepComponent, "unhandled trainer kind of '" + spec.model + "'");
}

}  // namespace foxhunt::train
