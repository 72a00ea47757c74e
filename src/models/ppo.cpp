#include "foxhunt/models/ppo.h"

#include <cmath>

#include "foxhunt/models/options_io.h"

namespace foxhunt::models {

namespace {
// The one field list of PpoOptions: JSON writer, reader and known keys come from it.
const OptionsSchema<PpoOptions>& schema_of_PpoOptions() {
  static const OptionsSchema<PpoOptions> schema(
      "ppo", {FOXHUNT_OPTION(PpoOptions, state_dim), FOXHUNT_OPTION(PpoOptions, hidden),
              FOXHUNT_OPTION(PpoOptions, actions), FOXHUNT_OPTION(PpoOptions, orthogonal_init)});
  return schema;
}
}  // namespace

nlohmann::json to_json(const PpoOptions& o) {
  return schema_of_PpoOptions().to_json(o);
}

PpoOptions ppo_options_from_json(const nlohmann::json& j) {
  const PpoOptions o = schema_of_PpoOptions().from_json(j);
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

IoSpec io_spec(const PpoOptions& o) {
  IoSpec s;
  s.inputs = {{"state", InputRole::kState, "rl_state", 0, o.state_dim()}};
  s.outputs = {"logits", "value"};
  s.actions = o.actions();
  return s;
}

namespace {

class PpoModel final : public ModelAdapter<ActorCritic> {
 public:
  explicit PpoModel(PpoOptions o) : ModelAdapter("ppo", ActorCritic(o), io_spec(o)) {}

  Batch example_batch(int64_t batch, int64_t, const torch::Device& device,
                      uint64_t seed) const override {
    auto gen = at::detail::createCPUGenerator(seed);
    Batch b;
    b.inputs.push_back(torch::randn({batch, net_->options.state_dim()}, gen).to(device));
    // target columns: action, old log-prob, advantage, return.
    auto action =
        torch::randint(0, net_->options.actions(), {batch, 1}, gen, torch::kLong).to(torch::kFloat);
    auto old_lp = torch::full({batch, 1}, -std::log(static_cast<double>(net_->options.actions())));
    b.target = torch::cat({action, old_lp, torch::randn({batch, 2}, gen)}, 1).to(device);
    return b;
  }

  std::vector<torch::Tensor> forward(const Batch& b) override {
    check_inputs(b);
    auto out = net_->forward(b.inputs[0]);
    return {out.logits, out.value};
  }

  std::vector<std::vector<int64_t>> output_shapes(int64_t batch, int64_t) const override {
    return {{batch, net_->options.actions()}, {batch}};
  }

  torch::Tensor loss(const Batch& b) override {
    check_inputs(b);
    auto out = net_->forward(b.inputs[0]);
    check_float_input("ppo", "target", b.target, {out.value.size(0), 4}, out.value.device());
    return ppo_loss(out, b.target.select(1, 0), b.target.select(1, 1), b.target.select(1, 2),
                    b.target.select(1, 3));
  }
};

}  // namespace

std::unique_ptr<Model> make_ppo_model(const nlohmann::json& options) {
  return std::make_unique<PpoModel>(ppo_options_from_json(options));
}

}  // namespace foxhunt::models
