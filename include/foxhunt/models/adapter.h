#pragma once
/// \file adapter.h
/// What a model implementation builds on: `ModelAdapter` (name, module handles, options JSON and
/// the input count of a `TORCH_MODULE` holder), `ForecasterAdapter` (a quantile forecaster's
/// output shapes and pinball loss from its spec), and the synthetic batch and size checks of
/// the policy models.

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "foxhunt/models/batch.h"
#include "foxhunt/models/input_checks.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/spec.h"

namespace foxhunt::models {

/// A synthetic batch for a policy model (seeded local generator): the spec's state input
/// ~ N(0, 1) [batch, state], and a target whose column 0 is a uniformly random action followed by
/// the columns `more(gen, batch)` returns (each [batch, k]).
Batch policy_example_batch(
    const IoSpec& spec, int64_t batch, const torch::Device& device, uint64_t seed,
    const std::function<std::vector<torch::Tensor>(at::Generator&, int64_t)>& more);
/// Throws InputError naming `component` unless a policy reading `state_dim` values and choosing
/// among `actions` discrete actions is well formed: state_dim > 0 and actions > 1.
void check_policy_sizes(const std::string& component, int64_t state_dim, int64_t actions);

/// Output shapes of a quantile forecaster: {[batch, horizon, Q]} from its spec.
std::vector<std::vector<int64_t>> forecaster_output_shapes(const IoSpec& spec, int64_t batch);
/// Training loss of a quantile forecaster: the pinball loss of `pred` [batch, horizon, Q] against
/// `target` [batch, horizon] (checked, naming `component`) at the spec's quantile levels.
torch::Tensor forecaster_loss(const std::string& component, const IoSpec& spec,
                              const torch::Tensor& pred, const torch::Tensor& target);

/// Shared plumbing of the registry adapters: name, module handles and options JSON for a
/// `TORCH_MODULE` holder `Net` whose Impl has an `options` member with an ADL `to_json`.
template <typename Net>
class ModelAdapter : public Model {
 public:
  /// Wraps `net` under the registry name `name`; `spec` is its I/O contract (fixed by the
  /// options, so it is computed once).
  ModelAdapter(std::string name, Net net, IoSpec spec)
      : name_(std::move(name)), net_(std::move(net)), spec_(std::move(spec)) {}
  std::string name() const override { return name_; }
  IoSpec spec() const override { return spec_; }
  torch::nn::Module& module() override { return *net_; }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return net_.ptr(); }
  nlohmann::json options_json() const override { return to_json(net_->options); }

 protected:
  /// Throws InputError unless `b` holds exactly the spec's inputs (cheap: no allocation).
  void check_inputs(const Batch& b) const { check_input_count(name_, spec_, b); }

  std::string name_;  ///< registry name
  Net net_;           ///< the module
  IoSpec spec_;       ///< the I/O contract
};

/// A ModelAdapter for a quantile forecaster: the output shapes ({[batch, horizon, Q]}) and the
/// training loss (the pinball loss of forward()'s output against `batch.target`) follow from the
/// spec, and the synthetic batch from the `example_batch_of` overload of its options type (found
/// by argument-dependent lookup, declared beside the options); the model adds forward().
template <typename Net>
class ForecasterAdapter : public ModelAdapter<Net> {
 public:
  using ModelAdapter<Net>::ModelAdapter;
  /// example_batch_of(options, batch, seq_len, device, seed).
  Batch example_batch(int64_t batch, int64_t seq_len, const torch::Device& device,
                      uint64_t seed) const override {
    return example_batch_of(this->net_->options, batch, seq_len, device, seed);
  }
  /// {[batch, horizon, Q]} (forecaster_output_shapes).
  std::vector<std::vector<int64_t>> output_shapes(int64_t batch, int64_t) const override {
    return forecaster_output_shapes(this->spec_, batch);
  }
  /// The pinball loss of the forecasts against `b.target` (forecaster_loss).
  torch::Tensor loss(const Batch& b) override {
    return forecaster_loss(this->name_, this->spec_, this->forward(b)[0], b.target);
  }
};

}  // namespace foxhunt::models
