#include "foxhunt/models/dqn.h"

#include "foxhunt/models/adapter.h"
#include "foxhunt/models/lean.h"
#include "foxhunt/models/options_io.h"
#include "foxhunt/models/policy.h"

namespace foxhunt::models {

// The one field list of DqnOptions: its JSON writer, reader and known keys.
FOXHUNT_OPTIONS_JSON(DqnOptions, "dqn", dqn_options_from_json, state_dim, hidden, actions)

int64_t parameter_count(const DqnOptions& o) {
  return mlp_parameter_count(MlpOptions(o.state_dim(), o.hidden(), o.actions()));
}

DqnNetImpl::DqnNetImpl(DqnOptions options_) : options(std::move(options_)) {
  reset();
}

void DqnNetImpl::reset() {
  check_policy_sizes("dqn", options.state_dim(), options.actions());
  q = register_module("q", Mlp(MlpOptions(options.state_dim(), options.hidden(), options.actions())
                                   .activation(Activation::kReLU)));
}

torch::Tensor DqnNetImpl::forward(const torch::Tensor& state) {
  check_float_input("dqn", "state", state, {-1, options.state_dim()},
                    q->layers.front()->weight.device());
  if (lean_path_applies(state)) {
    auto out = torch::empty({state.size(0), options.actions()});
    if (lean_mlp_forward(*q, state.const_data_ptr<float>(), state.size(0),
                         out.mutable_data_ptr<float>()))
      return out;
  }
  return q->forward(state);
}

IoSpec io_spec(const DqnOptions& o) {
  return policy_spec(o.state_dim(), o.actions(), {"q"});
}

namespace {

class DqnModel final : public ModelAdapter<DqnNet>, public ValuePolicy {
 public:
  explicit DqnModel(DqnOptions o) : ModelAdapter("dqn", DqnNet(o), io_spec(o)) {}
  /// Wraps an existing network (a clone): draws nothing from the generator.
  explicit DqnModel(const DqnNet& net) : ModelAdapter("dqn", net, io_spec(net->options)) {}

  ValuePolicy* as_value_policy() override { return this; }
  torch::Tensor action_values(const torch::Tensor& states) override {
    return net_->forward(states);
  }
  std::unique_ptr<Model> clone_model(const torch::Device& device) override {
    auto copy = std::dynamic_pointer_cast<DqnNetImpl>(net_->clone(device));
    FOXHUNT_INTERNAL_ASSERT(copy != nullptr, "DqnNetImpl::clone did not return a DqnNetImpl");
    return std::make_unique<DqnModel>(DqnNet(copy));
  }

  Batch example_batch(int64_t batch, int64_t, const torch::Device& device,
                      uint64_t seed) const override {
    // target columns: action taken, TD target y.
    return policy_example_batch(spec_, batch, device, seed, [](at::Generator& gen, int64_t n) {
      return std::vector<torch::Tensor>{torch::randn({n, 1}, gen)};
    });
  }

  std::vector<torch::Tensor> forward(const Batch& b) override {
    check_inputs(b);
    return {net_->forward(b.inputs[0])};
  }

  std::vector<std::vector<int64_t>> output_shapes(int64_t batch, int64_t) const override {
    return {{batch, net_->options.actions()}};
  }

  torch::Tensor loss(const Batch& b) override {
    auto q = forward(b)[0];
    check_float_input("dqn", "target", b.target, {q.size(0), 2}, q.device());
    auto action = b.target.select(1, 0).to(torch::kLong).unsqueeze(1);
    auto q_a = q.gather(1, action).squeeze(1);
    return torch::smooth_l1_loss(q_a, b.target.select(1, 1));
  }
};

}  // namespace

std::unique_ptr<Model> make_dqn_model(const nlohmann::json& options) {
  return std::make_unique<DqnModel>(dqn_options_from_json(options));
}

}  // namespace foxhunt::models
