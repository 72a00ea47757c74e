#include "foxhunt/models/dqn.h"

namespace foxhunt::models {

nlohmann::json to_json(const DqnOptions& o) {
  return {{"state_dim", o.state_dim()}, {"hidden", o.hidden()}, {"actions", o.actions()}};
}

DqnOptions dqn_options_from_json(const nlohmann::json& j) {
  check_known_keys(j, "dqn", {"state_dim", "hidden", "actions"});
  DqnOptions o;
  json_get(j, "dqn", "state_dim", o.state_dim());
  json_get(j, "dqn", "hidden", o.hidden());
  json_get(j, "dqn", "actions", o.actions());
  return o;
}

int64_t parameter_count(const DqnOptions& o) {
  return mlp_parameter_count(MlpOptions(o.state_dim(), o.hidden(), o.actions()));
}

DqnNetImpl::DqnNetImpl(DqnOptions options_) : options(std::move(options_)) {
  reset();
}

void DqnNetImpl::reset() {
  FOXHUNT_CHECK(options.state_dim() > 0 && options.actions() > 1, "dqn",
                "expected state_dim > 0 and actions > 1, got state_dim=", options.state_dim(),
                " actions=", options.actions());
  q = register_module("q", Mlp(MlpOptions(options.state_dim(), options.hidden(), options.actions())
                                   .activation(Activation::kReLU)));
}

torch::Tensor DqnNetImpl::forward(const torch::Tensor& state) {
  check_float_input("dqn", "state", state, {-1, options.state_dim()}, module_device(*this));
  return q->forward(state);
}

namespace {

class DqnModel final : public Model {
 public:
  explicit DqnModel(DqnOptions o) : net_(std::move(o)) {}
  std::string name() const override { return "dqn"; }
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
    // target columns: action taken, TD target y.
    auto action = torch::randint(0, net_->options.actions(), {batch, 1}).to(torch::kFloat);
    b.target = torch::cat({action, torch::randn({batch, 1})}, 1).to(device);
    return b;
  }

  std::vector<torch::Tensor> forward(const Batch& b) override {
    FOXHUNT_CHECK(b.inputs.size() == 1, "dqn", "expected 1 input (state), got ", b.inputs.size());
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

 private:
  DqnNet net_;
};

}  // namespace

std::unique_ptr<Model> make_dqn_model(const nlohmann::json& options) {
  return std::make_unique<DqnModel>(dqn_options_from_json(options));
}

}  // namespace foxhunt::models
