#include "foxhunt/models/ppo.h"

#include <cmath>

namespace foxhunt::models {

nlohmann::json to_json(const PpoOptions& o) {
  return {{"state_dim", o.state_dim()},
          {"hidden", o.hidden()},
          {"actions", o.actions()},
          {"orthogonal_init", o.orthogonal_init()}};
}

PpoOptions ppo_options_from_json(const nlohmann::json& j) {
  check_known_keys(j, "ppo", {"state_dim", "hidden", "actions", "orthogonal_init"});
  PpoOptions o;
  json_get(j, "ppo", "state_dim", o.state_dim());
  json_get(j, "ppo", "hidden", o.hidden());
  json_get(j, "ppo", "actions", o.actions());
  json_get(j, "ppo", "orthogonal_init", o.orthogonal_init());
  return o;
}

int64_t parameter_count(const PpoOptions& o) {
  return mlp_parameter_count(MlpOptions(o.state_dim(), o.hidden(), o.actions())) +
         mlp_parameter_count(MlpOptions(o.state_dim(), o.hidden(), 1));
}

ActorCriticImpl::ActorCriticImpl(PpoOptions options_) : options(std::move(options_)) {
  reset();
}

void ActorCriticImpl::reset() {
  FOXHUNT_CHECK(options.state_dim() > 0 && options.actions() > 1, "ppo",
                "expected state_dim > 0 and actions > 1, got state_dim=", options.state_dim(),
                " actions=", options.actions());
  policy = register_module("policy",
                           Mlp(MlpOptions(options.state_dim(), options.hidden(), options.actions())
                                   .activation(Activation::kTanh)));
  value = register_module(
      "value",
      Mlp(MlpOptions(options.state_dim(), options.hidden(), 1).activation(Activation::kTanh)));
  if (options.orthogonal_init()) {
    policy->orthogonal_init(std::sqrt(2.0), 0.01);
    value->orthogonal_init(std::sqrt(2.0), 1.0);
  }
}

PolicyOutput ActorCriticImpl::forward(const torch::Tensor& state) {
  check_float_input("ppo", "state", state, {-1, options.state_dim()}, module_device(*this));
  return {policy->forward(state), value->forward(state).squeeze(-1)};
}

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

namespace {

class PpoModel final : public Model {
 public:
  explicit PpoModel(PpoOptions o) : net_(std::move(o)) {}
  std::string name() const override { return "ppo"; }
  torch::nn::Module& module() override { return *net_; }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return net_.ptr(); }
  nlohmann::json options_json() const override { return to_json(net_->options); }
  std::vector<std::string> input_names() const override { return {"state"}; }
  int64_t default_seq_len() const override { return 0; }

  Batch example_batch(int64_t batch, int64_t, const torch::Device& device,
                      uint64_t seed) const override {
    torch::manual_seed(seed);
    Batch b;
    b.inputs.push_back(torch::randn({batch, net_->options.state_dim()}).to(device));
    // target columns: action, old log-prob, advantage, return.
    auto action = torch::randint(0, net_->options.actions(), {batch, 1}).to(torch::kFloat);
    auto old_lp = torch::full({batch, 1}, -std::log(static_cast<double>(net_->options.actions())));
    b.target = torch::cat({action, old_lp, torch::randn({batch, 2})}, 1).to(device);
    return b;
  }

  std::vector<torch::Tensor> forward(const Batch& b) override {
    FOXHUNT_CHECK(b.inputs.size() == 1, "ppo", "expected 1 input (state), got ", b.inputs.size());
    auto out = net_->forward(b.inputs[0]);
    return {out.logits, out.value};
  }

  std::vector<std::vector<int64_t>> output_shapes(int64_t batch, int64_t) const override {
    return {{batch, net_->options.actions()}, {batch}};
  }

  torch::Tensor loss(const Batch& b) override {
    FOXHUNT_CHECK(b.inputs.size() == 1, "ppo", "expected 1 input (state), got ", b.inputs.size());
    auto out = net_->forward(b.inputs[0]);
    check_float_input("ppo", "target", b.target, {out.value.size(0), 4}, out.value.device());
    return ppo_loss(out, b.target.select(1, 0), b.target.select(1, 1), b.target.select(1, 2),
                    b.target.select(1, 3));
  }

 private:
  ActorCritic net_;
};

}  // namespace

std::unique_ptr<Model> make_ppo_model(const nlohmann::json& options) {
  return std::make_unique<PpoModel>(ppo_options_from_json(options));
}

}  // namespace foxhunt::models
