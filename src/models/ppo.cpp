#include "foxhunt/models/ppo.h"

#include <cmath>

#include "foxhunt/core/checked_math.h"
#include "foxhunt/models/adapter.h"
#include "foxhunt/models/lean.h"
#include "foxhunt/models/options_io.h"

namespace foxhunt::models {

// The one field list of PpoOptions: its JSON writer, reader and known keys.
FOXHUNT_OPTIONS_JSON(PpoOptions, "ppo", ppo_options_from_json, state_dim, hidden, actions,
                     orthogonal_init)

int64_t parameter_count(const PpoOptions& o) {
  return checked_add(mlp_parameter_count(MlpOptions(o.state_dim(), o.hidden(), o.actions())),
                     mlp_parameter_count(MlpOptions(o.state_dim(), o.hidden(), 1)), "ppo",
                     "parameter count");
}

ActorCriticImpl::ActorCriticImpl(PpoOptions options_) : options(std::move(options_)) {
  reset();
}

void ActorCriticImpl::reset() {
  check_policy_sizes("ppo", options.state_dim(), options.actions());
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
  check_float_input("ppo", "state", state, {-1, options.state_dim()},
                    policy->layers.front()->weight.device());
  if (lean_path_applies(state)) {
    const int64_t b = state.size(0);
    auto logits = torch::empty({b, options.actions()});
    auto v = torch::empty({b});
    if (lean_mlp_forward(*policy, state.const_data_ptr<float>(), b,
                         logits.mutable_data_ptr<float>()) &&
        lean_mlp_forward(*value, state.const_data_ptr<float>(), b, v.mutable_data_ptr<float>()))
      return {logits, v};
  }
  return {policy->forward(state), value->forward(state).squeeze(-1)};
}

IoSpec io_spec(const PpoOptions& o) {
  return policy_spec(o.state_dim(), o.actions(), {"logits", "value"});
}

namespace {

class PpoModel final : public ModelAdapter<ActorCritic>, public ActorCriticPolicy {
 public:
  explicit PpoModel(PpoOptions o) : ModelAdapter("ppo", ActorCritic(o), io_spec(o)) {}

  ActorCriticPolicy* as_actor_critic() override { return this; }
  PolicyOutput policy_and_value(const torch::Tensor& states) override {
    return net_->forward(states);
  }

  Batch example_batch(int64_t batch, int64_t, const torch::Device& device,
                      uint64_t seed) const override {
    // target columns: action, old log-prob (uniform policy), advantage, return.
    const double old_lp = -std::log(static_cast<double>(net_->options.actions()));
    return policy_example_batch(
        spec_, batch, device, seed, [old_lp](at::Generator& gen, int64_t n) {
          return std::vector<torch::Tensor>{torch::full({n, 1}, old_lp), torch::randn({n, 2}, gen)};
        });
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
