#include "foxhunt/train/rl_trainer.h"

#include "foxhunt/models/checkpoint.h"
#include "foxhunt/train/checkpointing.h"

namespace foxhunt::train {

void RlTrainerBase::load_checkpoint(const std::string& path) {
  load_checkpoint(read_trainer_checkpoint(path, algo()), path);
}

void RlTrainerBase::build_model(models::TrainerKind kind, const std::string& name,
                                const models::PolicyShape& shape, uint64_t seed,
                                const torch::Device& device, const char* component) {
  algo_ = models::trainer_algo(kind);
  const std::string model = name.empty() ? models::trainer_model(kind).name : name;
  auto options = models::policy_options(model, shape, component);
  torch::manual_seed(seed);
  model_ = models::make_model(model, options);
  model_->to(device);
}

TrainResult RlTrainerBase::finish_run(RunSession& session, bool completed, nlohmann::json metrics) {
  if (dp_) metrics["distributed"] = dp_->summary();
  return session.finish(step_, episodes_, completed, std::move(metrics));
}

nlohmann::json RlTrainerBase::checkpoint_header(nlohmann::json options, const Env& env) const {
  return {{"options", std::move(options)},      {"env", env.name()},
          {"obs_size", env.observation_size()}, {"actions", env.action_count()},
          {"best_policy", best_.to_json()},     {"extra", extra_}};
}

Container RlTrainerBase::checkpoint_container(const nlohmann::json& header,
                                              torch::optim::Optimizer& optimizer) const {
  Container c = trainer_container(*model_, algo(), header);
  c.blobs["optimizer"] = optimizer_to_bytes(optimizer);
  c.blobs["torch_rng"] = torch_rng_state();
  if (!best_.weights().empty()) c.blobs["best_module"] = best_.weights();
  return c;
}

const nlohmann::json& RlTrainerBase::restore_common(const Container& c, const std::string& path,
                                                    const Env& env,
                                                    torch::optim::Optimizer& optimizer) {
  check_trainer_container(c, path, algo());
  const auto& t = c.header["trainer"];
  FOXHUNT_CHECK(t.at("env").get<std::string>() == env.name() &&
                    t.at("obs_size").get<int64_t>() == env.observation_size() &&
                    t.at("actions").get<int64_t>() == env.action_count(),
                "checkpoint", "'", path, "': trained on env '", t.at("env").get<std::string>(),
                "' (obs ", t.at("obs_size"), ", actions ", t.at("actions"),
                "), this trainer runs '", env.name(), "' (obs ", env.observation_size(),
                ", actions ", env.action_count(), ")");
  optimizer_from_bytes(optimizer, require_blob(c, "optimizer", path), path);
  set_torch_rng_state(require_blob(c, "torch_rng", path), path);
  extra_ = t.value("extra", nlohmann::json::object());
  auto best = c.blobs.find("best_module");
  best_.load(t.at("best_policy"), best == c.blobs.end() ? std::string() : best->second);
  return t;
}

std::optional<uint64_t> RlTrainerBase::attach_data_parallel(
    std::shared_ptr<dist::Communicator> comm, const std::vector<torch::nn::Module*>& modules,
    std::vector<torch::Tensor> params, uint64_t seed) {
  dp_ = std::make_unique<DataParallel>(std::move(comm), modules, std::move(params));
  if (dp_->rank() == 0) return std::nullopt;
  const uint64_t own = stream_seed(seed);
  torch::manual_seed(own);
  return own;
}

}  // namespace foxhunt::train
