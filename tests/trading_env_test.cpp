#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "foxhunt/core/error.h"
#include "foxhunt/data/trading_env.h"
#include "foxhunt/models/model.h"
#include "foxhunt/train/batches.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

class TradingEnvTest : public foxhunt::testing::SeededTest {
 protected:
  /// Hand-made path 100, 101, 102, 101, 100, 99 with zero market features (254 columns).
  static TradingEnv hand_env(double cost_bps, int64_t episode_length = 0,
                             bool random_start = false) {
    std::vector<double> closes = {100, 101, 102, 101, 100, 99};
    TradingEnvOptions o;
    o.cost_bps = cost_bps;
    o.episode_length = episode_length;
    o.random_start = random_start;
    return TradingEnv(Matrix(6, kRlMarketFeatures), closes, BarRange{0, 6}, o);
  }
};

TEST_F(TradingEnvTest, ActionsMapToPositions) {
  EXPECT_EQ(TradingEnv::action_to_position(0), -1);
  EXPECT_EQ(TradingEnv::action_to_position(1), 0);
  EXPECT_EQ(TradingEnv::action_to_position(2), 1);
  EXPECT_THROW(TradingEnv::action_to_position(3), InputError);
  EXPECT_THROW(TradingEnv::action_to_position(-1), InputError);
}

TEST_F(TradingEnvTest, RewardAndCostArithmeticOnHandMadePath) {
  auto env = hand_env(10.0);
  const auto obs0 = env.reset(0);
  ASSERT_EQ(obs0.size(), 256u);
  EXPECT_EQ(obs0[254], 0.0f);
  EXPECT_EQ(env.bar(), 0);

  // Hand-computed: reward = position x log(c[t+1]/c[t]) - 0.001 x |position change|.
  auto s = env.step(2);  // buy at 100, bar 100 -> 101
  EXPECT_NEAR(s.reward, 0.008950330853168, 1e-12);
  EXPECT_NEAR(s.cost, 0.001, 1e-15);
  EXPECT_EQ(s.position, 1);
  EXPECT_EQ(s.obs[254], 1.0f);
  EXPECT_NEAR(s.obs[255], 100 * std::log(101.0 / 100.0), 1e-5);  // unrealised PnL, percent
  EXPECT_FALSE(s.done);

  s = env.step(1);  // hold = go flat: pay the exit, earn nothing on 101 -> 102
  EXPECT_NEAR(s.reward, -0.001, 1e-12);
  EXPECT_EQ(s.obs[254], 0.0f);
  EXPECT_EQ(s.obs[255], 0.0f);

  s = env.step(0);  // sell short at 102, bar 102 -> 101
  EXPECT_NEAR(s.reward, 0.008852296443012, 1e-12);
  EXPECT_EQ(s.obs[254], -1.0f);
  EXPECT_NEAR(env.unrealized_pnl(), 0.009852296443012, 1e-12);

  s = env.step(0);  // keep the short, no cost, 101 -> 100
  EXPECT_NEAR(s.reward, 0.009950330853168, 1e-12);
  EXPECT_EQ(s.cost, 0.0);
  EXPECT_NEAR(env.unrealized_pnl(), 0.019802627296180, 1e-12);  // log(102/100)

  s = env.step(2);  // flip to long: two units of cost, 100 -> 99
  EXPECT_NEAR(s.cost, 0.002, 1e-15);
  EXPECT_NEAR(s.reward, -0.012050335853501, 1e-12);
  EXPECT_TRUE(s.done);

  EXPECT_NEAR(env.equity(), 1.014811237503658, 1e-12);
  EXPECT_NEAR(s.equity, env.equity(), 1e-15);
  EXPECT_NEAR(env.total_cost(), 0.005, 1e-15);
  EXPECT_EQ(env.trades(), 4);
  ASSERT_EQ(env.equity_curve().size(), 6u);
  EXPECT_EQ(env.equity_curve().front(), 1.0);
  EXPECT_NEAR(env.equity_curve()[1], std::exp(0.008950330853168), 1e-12);

  // Buy-and-hold over the same bars: log(99/100) minus one entry cost.
  const auto cmp = env.compare_to_buy_and_hold();
  EXPECT_NEAR(cmp.buy_and_hold_log_return, -0.011050335853501, 1e-12);
  EXPECT_NEAR(cmp.strategy_log_return, 0.014702622295846, 1e-12);
  EXPECT_NEAR(cmp.excess_log_return, 0.014702622295846 + 0.011050335853501, 1e-12);
  EXPECT_NEAR(env.buy_and_hold_equity(), std::exp(-0.011050335853501), 1e-12);
}

TEST_F(TradingEnvTest, ZeroCostRewardsSumToPositionWeightedReturns) {
  auto env = hand_env(0.0);
  env.reset(0);
  double total = 0;
  for (int i = 0; i < 5; ++i) total += env.step(2).reward;
  EXPECT_NEAR(total, std::log(99.0 / 100.0), 1e-12);  // always long = buy-and-hold, no cost
  EXPECT_NEAR(env.compare_to_buy_and_hold().excess_log_return, 0.0, 1e-12);
}

TEST_F(TradingEnvTest, EpisodeTerminatesAfterConfiguredLength) {
  auto env = hand_env(1.0, 2);
  env.reset(0);
  EXPECT_FALSE(env.step(1).done);
  EXPECT_TRUE(env.step(1).done);
  EXPECT_TRUE(env.done());
  EXPECT_EQ(env.steps(), 2);
  EXPECT_THROW(env.step(1), InputError);
  env.reset(0);
  EXPECT_THROW(env.step(7), InputError);

  // Sequential windows tile the range: starts 0, 2, 4 (last one 1 step), then wrap.
  env.reset(0);
  EXPECT_EQ(env.episode_start(), 0);
  EXPECT_EQ(env.sequential_episodes(), 3);
  env.reset();
  EXPECT_EQ(env.episode_start(), 2);
  env.reset();
  EXPECT_EQ(env.episode_start(), 4);
  EXPECT_TRUE(env.step(1).done);
  env.reset();
  EXPECT_EQ(env.episode_start(), 0);
}

TEST_F(TradingEnvTest, RandomStartsAreSeededAndInBounds) {
  auto env = hand_env(1.0, 2, /*random_start=*/true);
  std::vector<int64_t> a, b;
  std::set<int64_t> seen;
  env.reset(3);
  for (int i = 0; i < 50; ++i) {
    a.push_back(env.episode_start());
    seen.insert(env.episode_start());
    EXPECT_GE(env.episode_start(), 0);
    EXPECT_LE(env.episode_start() + 2, 5);  // two steps need bars start .. start+2
    env.reset();
  }
  env.reset(3);
  for (int i = 0; i < 50; ++i) {
    b.push_back(env.episode_start());
    env.reset();
  }
  EXPECT_EQ(a, b);
  EXPECT_EQ(seen.size(), 4u);  // starts 0..3 all drawn
}

TEST_F(TradingEnvTest, ObservationIsTheRlStateOfTheDataset) {
  SyntheticOptions so;
  so.bars = 1500;
  so.seed = 2;
  const MarketDataset ds(generate_synthetic(so));
  TradingEnvOptions o;
  o.episode_length = 64;
  o.seed = 1;
  TradingEnv env(ds, Split::kValidation, o);
  EXPECT_EQ(env.observation_dim(), kRlStateDim);
  auto obs = env.reset(5);
  ASSERT_EQ(obs.size(), 256u);
  const auto& range = ds.splits().validation;
  EXPECT_TRUE(range.contains(env.episode_start()));
  EXPECT_LE(env.episode_end(), range.end - 1);
  std::vector<float> market(kRlMarketFeatures);
  ds.fill_rl_market(env.bar(), market.data());
  for (int64_t i = 0; i < kRlMarketFeatures; ++i) ASSERT_EQ(obs[i], market[i]) << i;

  std::vector<std::vector<float>> states = {obs};
  int64_t steps = 0;
  bool done = false;
  while (!done) {
    auto s = env.step(steps % 3);
    EXPECT_EQ(s.obs[254], static_cast<float>(TradingEnv::action_to_position(steps % 3)));
    EXPECT_NEAR(s.bar_return, ds.log_return(env.bar()), 1e-12);
    states.push_back(s.obs);
    done = s.done;
    ++steps;
  }
  EXPECT_EQ(steps, 64);

  // The states feed the DQN network directly.
  auto dqn = models::make_model("dqn");
  models::Batch batch;
  batch.inputs = {train::states_tensor(states)};
  const auto out = dqn->forward(batch);
  EXPECT_EQ(out[0].sizes(), (std::vector<int64_t>{65, 3}));
}

TEST_F(TradingEnvTest, BadConstructionIsRejected) {
  TradingEnvOptions o;
  EXPECT_THROW(TradingEnv(Matrix(3, 4), {1, 2}, BarRange{0, 2}, o), InputError);
  EXPECT_THROW(TradingEnv(Matrix(2, 4), {1, 2}, BarRange{0, 1}, o), InputError);
  EXPECT_THROW(TradingEnv(Matrix(2, 4), {1, -2}, BarRange{0, 2}, o), InputError);
  o.cost_bps = -1;
  EXPECT_THROW(TradingEnv(Matrix(2, 4), {1, 2}, BarRange{0, 2}, o), InputError);
}

}  // namespace
}  // namespace foxhunt::data
