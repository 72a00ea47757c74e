#pragma once
// Helpers shared by the trainer tests: a small quantile forecaster implementing models::Model
// (for infrastructure tests that must not depend on a particular registry model), an AR(1)
// series, and a batch builder that feeds a univariate window to any forecasting model.
#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <random>
#include <vector>

#include "foxhunt/models/model.h"
#include "foxhunt/models/quantile_loss.h"
#include "foxhunt/train/best_policy.h"
#include "foxhunt/train/env.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::testing {

/// A run without progress output (a designated initializer would leave RunConfig's string and
/// function members to -Wmissing-field-initializers).
inline train::RunConfig quiet_run() {
  train::RunConfig c;
  c.progress = train::ProgressMode::kOff;
  return c;
}

/// One intra-op thread for the scope (restored afterwards): bit-exact comparisons must not depend
/// on how a reduction was split across threads, and tiny networks only pay for the
/// synchronisation of a second thread.
class OneThread {
 public:
  OneThread() : old_(torch::get_num_threads()) { torch::set_num_threads(1); }
  ~OneThread() { torch::set_num_threads(old_); }
  OneThread(const OneThread&) = delete;
  OneThread& operator=(const OneThread&) = delete;

 private:
  int old_;
};

/// window -> MLP -> [batch, 1, Q] quantiles of the next value; optional dropout exercises the
/// RNG-state part of checkpoints.
class QuantileMlpModel final : public models::Model {
 public:
  QuantileMlpModel(int64_t window, int64_t hidden, double dropout = 0.0,
                   std::vector<double> quantiles = {0.1, 0.5, 0.9})
      : window_(window), hidden_(hidden), dropout_(dropout), quantiles_(std::move(quantiles)) {
    net_ = std::make_shared<torch::nn::SequentialImpl>();
    net_->push_back(torch::nn::Linear(window, hidden));
    net_->push_back(torch::nn::ReLU());
    net_->push_back(torch::nn::Dropout(dropout));
    net_->push_back(torch::nn::Linear(hidden, hidden));
    net_->push_back(torch::nn::ReLU());
    net_->push_back(torch::nn::Linear(hidden, static_cast<int64_t>(quantiles_.size())));
  }
  std::string name() const override { return "test_quantile_mlp"; }
  torch::nn::Module& module() override { return *net_; }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return net_; }
  nlohmann::json options_json() const override {
    return {
        {"window", window_}, {"hidden", hidden_}, {"dropout", dropout_}, {"quantiles", quantiles_}};
  }
  models::IoSpec spec() const override {
    models::IoSpec s;
    s.inputs = {{"x", models::InputRole::kPastFeatures, "", window_, 1}};
    s.outputs = {"quantiles"};
    s.window = window_;
    s.horizon = 1;
    s.quantiles = quantiles_;
    return s;
  }
  models::Batch example_batch(int64_t batch, int64_t, const torch::Device& device,
                              uint64_t seed) const override {
    torch::manual_seed(seed);
    return {{torch::randn({batch, window_, 1}).to(device)}, torch::randn({batch, 1}).to(device)};
  }
  std::vector<torch::Tensor> forward(const models::Batch& b) override {
    models::check_float_input("test_quantile_mlp", "x", b.inputs.at(0), {-1, window_, 1},
                              models::module_device(*net_));
    return {net_->forward(b.inputs[0].squeeze(-1)).unsqueeze(1)};
  }
  std::vector<std::vector<int64_t>> output_shapes(int64_t batch, int64_t) const override {
    return {{batch, 1, static_cast<int64_t>(quantiles_.size())}};
  }
  torch::Tensor loss(const models::Batch& b) override {
    return models::quantile_loss(forward(b)[0], b.target, quantiles_);
  }

 private:
  int64_t window_, hidden_;
  double dropout_;
  std::vector<double> quantiles_;
  std::shared_ptr<torch::nn::SequentialImpl> net_;
};

/// x_t = phi x_{t-1} + e_t, e_t ~ N(0, 1), started from the stationary distribution.
inline std::vector<double> ar1_series(int64_t n, double phi, uint64_t seed) {
  std::mt19937_64 gen(seed);
  // Box-Muller from the top 53 bits: the same series on every platform.
  auto normal = [&] {
    const double u1 = (static_cast<double>(gen() >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = static_cast<double>(gen() >> 11) * 0x1.0p-53;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  };
  std::vector<double> x(static_cast<size_t>(n));
  x[0] = normal() / std::sqrt(1.0 - phi * phi);
  for (int64_t t = 1; t < n; ++t) x[t] = phi * x[t - 1] + normal();
  return x;
}

/// Sliding windows over `x[begin, end)`: inputs [n, window] (float) and next values [n, 1].
inline std::pair<torch::Tensor, torch::Tensor> windows(const std::vector<double>& x, int64_t begin,
                                                       int64_t end, int64_t window) {
  const int64_t n = end - begin - window;
  auto in = torch::empty({n, window}, torch::kFloat);
  auto y = torch::empty({n, 1}, torch::kFloat);
  auto ia = in.accessor<float, 2>();
  auto ya = y.accessor<float, 2>();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t k = 0; k < window; ++k) ia[i][k] = static_cast<float>(x[begin + i + k]);
    ya[i][0] = static_cast<float>(x[begin + i + window]);
  }
  return {in, y};
}

/// A batch for any forecasting model whose first input is a past window [b, L, F]: the series
/// goes into feature 0 of that input; every other input (known-future features, static ids) is
/// zero with the shape and dtype the model's example batch has.
inline models::Batch univariate_batch(const models::Model& model, const torch::Tensor& win,
                                      const torch::Tensor& y) {
  const int64_t n = win.size(0), L = win.size(1);
  auto example = model.example_batch(1, L, torch::kCPU, 0);
  models::Batch b;
  for (size_t i = 0; i < example.inputs.size(); ++i) {
    auto shape = example.inputs[i].sizes().vec();
    shape[0] = n;
    auto t = torch::zeros(shape, example.inputs[i].options());
    if (i == 0) t.select(-1, 0).copy_(win);
    b.inputs.push_back(t);
  }
  b.target = y;
  return b;
}

/// Trains an RL trainer on CartPole (log lines every `log_interval` steps), prints the figures
/// under `label`, and returns the mean greedy return over 20 fresh episodes (not the episodes
/// its periodic evaluations selected the weights on).
template <typename Trainer>
double solve_cartpole(Trainer& trainer, const char* label, int64_t log_interval) {
  const auto t0 = std::chrono::steady_clock::now();
  train::RunConfig run;
  run.progress = train::ProgressMode::kOff;
  run.log_interval = log_interval;
  auto result = trainer.train(run);
  EXPECT_TRUE(result.completed);
  auto env = train::env_factory("cartpole")(0);
  auto returns = train::evaluate_policy(*env, trainer.greedy_policy(), 20, 2024);
  const double mean = std::accumulate(returns.begin(), returns.end(), 0.0) / returns.size();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf(
      "[%s cartpole] train %.1f s, eval mean return %.1f over 20 episodes, training "
      "return_mean(100) %.1f, best periodic eval %.1f at step %lld\n",
      label, secs, mean, result.metrics["return_mean"].template get<double>(),
      trainer.evaluations().best(), static_cast<long long>(trainer.evaluations().best_step()));
  return mean;
}

}  // namespace foxhunt::testing
