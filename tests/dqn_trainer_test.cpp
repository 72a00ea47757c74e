// DQN trainer: Double-DQN targets, epsilon schedule, replay buffer, determinism, and learning
// CartPole to the "solved" bar.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "foxhunt/core/container.h"
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

// Adds transition i (every field derived from i, so a slot tells which transition it holds).
void add_numbered(ReplayBuffer& buf, int i) {
  buf.add({float(i), float(-i), 0.5f * float(i)}, i % 3, 10.0 * i,
          {float(i + 1), float(-i - 1), 0.5f * float(i + 1)}, i % 7 == 0);
}

// The same draws, field by field.
void expect_same_samples(const ReplayBuffer& a, const ReplayBuffer& b, uint64_t seed) {
  Rng ra(seed), rb(seed);
  auto sa = a.sample(64, ra, torch::kCPU), sb = b.sample(64, rb, torch::kCPU);
  EXPECT_TRUE(torch::equal(sa.obs, sb.obs));
  EXPECT_TRUE(torch::equal(sa.next_obs, sb.next_obs));
  EXPECT_TRUE(torch::equal(sa.actions, sb.actions));
  EXPECT_TRUE(torch::equal(sa.rewards, sb.rewards));
  EXPECT_TRUE(torch::equal(sa.terminated, sb.terminated));
}

// The blob the buffer wrote before it stored only its filled slots: the same header and every
// slot of each array (unfilled slots zero), built from the filled-slots blob.
std::string whole_capacity_blob(const std::string& filled, int64_t capacity, int64_t obs) {
  int64_t head[4];
  std::memcpy(head, filled.data(), sizeof(head));
  const auto n = static_cast<size_t>(head[2]), c = static_cast<size_t>(capacity),
             w = static_cast<size_t>(obs);
  std::string out = filled.substr(0, sizeof(head));
  size_t off = sizeof(head);
  for (const size_t bytes_per_row : {w * 4, w * 4, size_t{4}, size_t{4}, size_t{8}}) {
    out += filled.substr(off, n * bytes_per_row);
    out.append((c - n) * bytes_per_row, '\0');
    off += n * bytes_per_row;
  }
  EXPECT_EQ(off, filled.size());
  return out;
}

TEST_F(DqnTrainerTest, ReplayCheckpointHoldsOnlyTheFilledSlots) {
  const int64_t capacity = 100000, obs = 3;
  ReplayBuffer buf(capacity, obs);
  for (int i = 0; i < 64; ++i) add_numbered(buf, i);
  const std::string blob = buf.to_bytes();
  // 64 transitions: a 32-byte header and 64 rows, not the 100k slots (4.4 MB here).
  EXPECT_EQ(blob.size(), 32 + ReplayBuffer::storage_bytes(64, obs));
  EXPECT_LT(blob.size(), ReplayBuffer::storage_bytes(capacity, obs) / 1000);
  // Restored into a buffer that held other transitions: the same contents, counters and draws,
  // and the next add() goes to the same slot.
  ReplayBuffer back(capacity, obs);
  for (int i = 500; i < 700; ++i) add_numbered(back, i);
  back.from_bytes(blob, "test");
  EXPECT_EQ(back.size(), 64);
  EXPECT_EQ(back.position(), 64);
  EXPECT_EQ(back.to_bytes(), blob);
  expect_same_samples(buf, back, 5);
  add_numbered(buf, 64);
  add_numbered(back, 64);
  EXPECT_EQ(back.to_bytes(), buf.to_bytes());
  // A checkpoint of the earlier layout (every slot stored) still loads, to the same state.
  ReplayBuffer old(capacity, obs);
  old.from_bytes(whole_capacity_blob(blob, capacity, obs), "old");
  EXPECT_EQ(old.to_bytes(), blob);
  // Any other length, or counters a ring cannot have, is refused.
  EXPECT_THROW(back.from_bytes(blob.substr(0, blob.size() - 8), "test"), InputError);
  std::string bad = blob;
  const int64_t pos = 10;  // size 64 without a wrap writes next at 64
  std::memcpy(bad.data() + 24, &pos, sizeof(pos));
  EXPECT_THROW(back.from_bytes(bad, "test"), InputError);
}

TEST_F(DqnTrainerTest, WrappedReplayBufferRoundTripsWithItsWritePosition) {
  const int64_t capacity = 10, obs = 3;
  ReplayBuffer buf(capacity, obs);
  for (int i = 0; i < 23; ++i) add_numbered(buf, i);  // wrapped twice: next write at slot 3
  ASSERT_EQ(buf.size(), capacity);
  ASSERT_EQ(buf.position(), 3);
  const std::string blob = buf.to_bytes();
  EXPECT_EQ(blob.size(), 32 + ReplayBuffer::storage_bytes(capacity, obs));
  ReplayBuffer back(capacity, obs);
  back.from_bytes(blob, "test");
  EXPECT_EQ(back.position(), 3);
  expect_same_samples(buf, back, 11);
  // Both keep overwriting the oldest slot: after more adds they hold the same transitions in the
  // same slots (a restored position of 0 would overwrite the newest, 20..22, not 13..15).
  for (int i = 23; i < 30; ++i) {
    add_numbered(buf, i);
    add_numbered(back, i);
  }
  EXPECT_EQ(back.to_bytes(), buf.to_bytes());
  expect_same_samples(buf, back, 12);
}

TEST_F(DqnTrainerTest, ShortRunCheckpointIsSizedByStepsNotCapacity) {
  foxhunt::testing::TempDir dir;
  const auto ckpt = dir.file("dqn.ckpt");
  // The default capacity (100k transitions), 64 steps: before, the checkpoint held every slot.
  auto opts = DqnTrainerOptions().total_steps(1000).hidden({32, 32}).seed(2);
  ASSERT_EQ(opts.buffer_size(), 100000);
  DqnTrainer trainer(opts, env_factory("cartpole"));
  auto run = quiet_run();
  run.checkpoint_path = ckpt;
  run.stop_at_step = 64;
  EXPECT_EQ(trainer.train(run).steps, 64);
  const int64_t obs = 4;  // CartPole
  const Container c = read_container(ckpt);
  EXPECT_EQ(c.blobs.at("replay").size(), 32 + ReplayBuffer::storage_bytes(64, obs));
  // The whole file (two small networks, optimizer, header) is far under the 4.8 MB of slots.
  EXPECT_LT(std::filesystem::file_size(ckpt), ReplayBuffer::storage_bytes(100000, obs) / 20);
}

// A run resumed from a checkpoint taken before the small buffer wrapped (step 200 of capacity
// 300: size 200, next slot 200) and one taken after (step 730: full, next slot 130) both end
// with the uninterrupted run's weights, to the bit.
TEST_F(DqnTrainerTest, ResumeBeforeAndAfterTheReplayBufferWrapsIsBitExact) {
  foxhunt::testing::OneThread one;
  foxhunt::testing::TempDir dir;
  const auto opts = DqnTrainerOptions()
                        .total_steps(900)
                        .learning_starts(100)
                        .train_freq(50)
                        .gradient_steps(10)
                        .target_update_interval(100)
                        .buffer_size(300)
                        .batch_size(32)
                        .hidden({32, 32})
                        .seed(5);
  DqnTrainer full(opts, env_factory("cartpole"));
  const auto r_full = full.train(quiet_run());
  ASSERT_TRUE(r_full.completed);
  const int64_t obs = 4;                                                 // CartPole
  const std::pair<int64_t, int64_t> stops[] = {{200, 200}, {730, 300}};  // (step, transitions)
  for (const auto& [stop, stored] : stops) {
    SCOPED_TRACE(stop);
    const auto ckpt = dir.file(fmt::format("dqn_{}.ckpt", stop));
    DqnTrainer first(opts, env_factory("cartpole"));
    auto run = quiet_run();
    run.checkpoint_path = ckpt;
    run.stop_at_step = stop;
    EXPECT_EQ(first.train(run).steps, stop);
    EXPECT_EQ(read_container(ckpt).blobs.at("replay").size(),
              32 + ReplayBuffer::storage_bytes(stored, obs));
    DqnTrainer second(opts, env_factory("cartpole"));
    second.load_checkpoint(ckpt);
    EXPECT_EQ(second.replay_size(), stored);
    const auto r2 = second.train(quiet_run());
    EXPECT_TRUE(r2.completed);
    EXPECT_EQ(r2.episodes, r_full.episodes);
    auto pa = full.q_network()->parameters(), pb = second.q_network()->parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i], pb[i])) << i;
  }
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
