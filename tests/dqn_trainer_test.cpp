// DQN trainer: Double-DQN targets, epsilon schedule, replay buffer, determinism, and learning
// CartPole to the "solved" bar.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <numeric>

#include "foxhunt/core/error.h"
#include "foxhunt/train/dqn_trainer.h"
#include "test_util.h"
#include "train_test_util.h"

namespace foxhunt::train {
namespace {

using foxhunt::testing::quiet_run;

class DqnTrainerTest : public foxhunt::testing::SeededTest {};

TEST_F(DqnTrainerTest, DoubleDqnTargetOnHandMadeBatch) {
  auto rewards = torch::tensor({1.0f, 0.5f, -1.0f});
  auto terminated = torch::tensor({0.0f, 1.0f, 0.0f});
  auto q_online = torch::tensor({{1.0f, 2.0f}, {3.0f, 0.0f}, {0.5f, 0.4f}});
  auto q_target = torch::tensor({{10.0f, 20.0f}, {30.0f, 40.0f}, {7.0f, 9.0f}});
  // Double DQN: a* = argmax online = {1, 0, 0}; evaluated by the target net: {20, 30, 7}.
  // y = r + 0.9 (1 - done) Q_target(s', a*) = {1 + 18, 0.5 (terminal), -1 + 6.3}.
  auto y = dqn_targets(rewards, terminated, q_online, q_target, 0.9, true);
  EXPECT_TRUE(torch::allclose(y, torch::tensor({19.0f, 0.5f, 5.3f})));
  // Vanilla DQN takes the target net's own max {20, 40, 9}: row 3 differs (-1 + 8.1).
  auto y_vanilla = dqn_targets(rewards, terminated, torch::Tensor(), q_target, 0.9, false);
  EXPECT_TRUE(torch::allclose(y_vanilla, torch::tensor({19.0f, 0.5f, 7.1f})));
  EXPECT_THROW(dqn_targets(rewards, terminated, torch::Tensor(), q_target, 0.9, true), InputError);
  EXPECT_THROW(dqn_targets(rewards.narrow(0, 0, 2), terminated, q_online, q_target, 0.9),
               InputError);
}

TEST_F(DqnTrainerTest, LinearEpsilonSchedule) {
  // 1.0 -> 0.04 over the first 16% of 50k steps (8000 steps), flat afterwards.
  EXPECT_DOUBLE_EQ(linear_epsilon(0, 50000, 0.16, 1.0, 0.04), 1.0);
  EXPECT_NEAR(linear_epsilon(4000, 50000, 0.16, 1.0, 0.04), 0.52, 1e-12);
  EXPECT_NEAR(linear_epsilon(8000, 50000, 0.16, 1.0, 0.04), 0.04, 1e-12);
  EXPECT_NEAR(linear_epsilon(40000, 50000, 0.16, 1.0, 0.04), 0.04, 1e-12);
  EXPECT_DOUBLE_EQ(linear_epsilon(10, 100, 0.0, 1.0, 0.05), 0.05);
}

TEST_F(DqnTrainerTest, ReplayBufferOverwritesOldestAndRoundTrips) {
  ReplayBuffer buf(3, 2);
  for (int i = 0; i < 5; ++i)
    buf.add({float(i), float(-i)}, i % 2, 10.0 * i, {float(i + 1), float(-i - 1)}, i == 4);
  EXPECT_EQ(buf.size(), 3);
  Rng rng(1);
  auto s = buf.sample(64, rng, torch::kCPU);
  ASSERT_EQ(s.obs.sizes(), (std::vector<int64_t>{64, 2}));
  // Only transitions 2, 3, 4 remain, and every field of a sample belongs to the same one.
  for (int64_t b = 0; b < 64; ++b) {
    const float i = s.obs[b][0].item<float>();
    EXPECT_TRUE(i == 2 || i == 3 || i == 4) << i;
    EXPECT_EQ(s.obs[b][1].item<float>(), -i);
    EXPECT_EQ(s.next_obs[b][0].item<float>(), i + 1);
    EXPECT_EQ(s.actions[b].item<int64_t>(), static_cast<int64_t>(i) % 2);
    EXPECT_EQ(s.rewards[b].item<float>(), 10 * i);
    EXPECT_EQ(s.terminated[b].item<float>(), i == 4 ? 1.0f : 0.0f);
  }
  ReplayBuffer copy(3, 2);
  copy.from_bytes(buf.to_bytes(), "test");
  Rng r1(9), r2(9);
  auto a = buf.sample(16, r1, torch::kCPU);
  auto b = copy.sample(16, r2, torch::kCPU);
  EXPECT_TRUE(torch::equal(a.obs, b.obs));
  EXPECT_TRUE(torch::equal(a.rewards, b.rewards));
  ReplayBuffer wrong(4, 2);
  EXPECT_THROW(wrong.from_bytes(buf.to_bytes(), "test"), InputError);
  EXPECT_THROW(buf.add({1.0f}, 0, 0.0, {1.0f, 2.0f}, false), InputError);
}

TEST_F(DqnTrainerTest, SameSeedSameRunDifferentSeedDifferentRun) {
  auto opts = DqnTrainerOptions()
                  .total_steps(1200)
                  .learning_starts(200)
                  .train_freq(100)
                  .gradient_steps(10)
                  .buffer_size(2000)
                  .hidden({32, 32});
  RunConfig run;
  run.progress = ProgressMode::kOff;
  run.log_interval = 400;
  DqnTrainer a(DqnTrainerOptions(opts).seed(3), env_factory("cartpole"));
  DqnTrainer b(DqnTrainerOptions(opts).seed(3), env_factory("cartpole"));
  DqnTrainer c(DqnTrainerOptions(opts).seed(4), env_factory("cartpole"));
  auto ra = a.train(run);
  auto rb = b.train(run);
  c.train(run);
  EXPECT_TRUE(ra.completed);
  EXPECT_EQ(ra.steps, 1200);
  EXPECT_GT(ra.episodes, 10);
  EXPECT_EQ(ra.episodes, rb.episodes);
  auto pa = a.q_network()->parameters(), pb = b.q_network()->parameters(),
       pc = c.q_network()->parameters();
  bool all_equal = true, any_diff_c = false;
  for (size_t i = 0; i < pa.size(); ++i) {
    all_equal = all_equal && torch::equal(pa[i], pb[i]);
    any_diff_c = any_diff_c || !torch::equal(pa[i], pc[i]);
  }
  EXPECT_TRUE(all_equal);
  EXPECT_TRUE(any_diff_c);
  // Metrics: one line per log interval, with the documented keys.
  ASSERT_TRUE(ra.metrics.contains("epsilon"));
  EXPECT_NEAR(ra.metrics["epsilon"].get<double>(), 0.04, 1e-12);
  EXPECT_TRUE(ra.metrics["loss"].is_number());
}

TEST_F(DqnTrainerTest, OptionsRoundTripThroughJson) {
  auto o = DqnTrainerOptions().total_steps(123).hidden({8}).tau(0.5).double_dqn(false).seed(77);
  auto back = dqn_trainer_options_from_json(to_json(o));
  EXPECT_EQ(to_json(back), to_json(o));
  EXPECT_THROW(dqn_trainer_options_from_json({{"learning_rat", 1e-3}}), InputError);
  EXPECT_THROW(DqnTrainer(DqnTrainerOptions().batch_size(0), env_factory("cartpole")), InputError);
  EXPECT_THROW(DqnTrainer(DqnTrainerOptions().tau(1.5), env_factory("cartpole")), InputError);
}

TEST_F(DqnTrainerTest, PeriodicEvaluationKeepsTheBestWeights) {
  auto opts = DqnTrainerOptions()
                  .total_steps(4000)
                  .learning_starts(200)
                  .train_freq(100)
                  .gradient_steps(20)
                  .buffer_size(4000)
                  .hidden({32, 32})
                  .learning_rate(1e-3)
                  .eval_interval(500)
                  .eval_episodes(3)
                  .seed(6);
  RunConfig run;
  run.progress = ProgressMode::kOff;
  run.log_interval = 500;
  std::vector<double> evals;
  run.on_log = [&](const nlohmann::json& j) { evals.push_back(j["eval_return"].get<double>()); };
  DqnTrainer trainer(opts, env_factory("cartpole"));
  auto r = trainer.train(run);
  ASSERT_EQ(evals.size(), 8u);  // one evaluation per log line here
  const double best = *std::max_element(evals.begin(), evals.end());
  EXPECT_EQ(trainer.evaluations().best(), best);
  EXPECT_EQ(r.metrics["best_eval_return"].get<double>(), best);
  // The final network is the best-evaluated one: replaying the evaluation reproduces its score.
  auto env = env_factory("cartpole")(kEvalEnvIndex);
  auto returns = evaluate_policy(*env, trainer.greedy_policy(), 3, derive_seed(6, 7));
  EXPECT_DOUBLE_EQ(std::accumulate(returns.begin(), returns.end(), 0.0) / 3.0, best);
  // Without keep_best the last weights stay.
  DqnTrainer last(DqnTrainerOptions(opts).keep_best(false), env_factory("cartpole"));
  last.train(quiet_run());
  auto last_returns = evaluate_policy(*env, last.greedy_policy(), 3, derive_seed(6, 7));
  EXPECT_DOUBLE_EQ(std::accumulate(last_returns.begin(), last_returns.end(), 0.0) / 3.0,
                   last.evaluations().last());
}

}  // namespace
}  // namespace foxhunt::train
