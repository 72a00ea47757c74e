// The trainers' real steps as the planner measures them (train/trainer_step.h): host buffers
// declared to the ledger against the cap, the fixed tags of each trainer against closed forms
// (the DQN's target network, its replay buffer), and the plan of the real step checked with the
// real trainers: a few steps at the planned batch train under the planned budget, twice the batch
// runs out of memory.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "foxhunt/memory/device_profile.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/planner.h"
#include "foxhunt/train/dqn_trainer.h"
#include "foxhunt/train/forecast_trainer.h"
#include "foxhunt/train/ppo_trainer.h"
#include "foxhunt/train/trainer_step.h"
#include "test_util.h"

namespace foxhunt {
namespace {

constexpr std::int64_t kStateDim = 256;  // the registry's dqn/ppo state_dim
constexpr std::int64_t kActions = 3;

train::EnvFactory synthetic_envs() {
  return [](std::int64_t i) -> std::unique_ptr<train::Env> {
    return std::make_unique<train::SyntheticEnv>(kStateDim, kActions, 100 + i);
  };
}

TEST(ExternalReservationTest, CountsAgainstTheCapAndIsRefusedOverIt) {
  const std::uint64_t ext0 = memory::external_bytes();
  const std::uint64_t refusals0 = memory::refusal_count();
  {
    memory::LimitGuard cap(memory::live_bytes() + ext0 + (1 << 20));
    memory::ExternalReservation a("test/host_a", 512 << 10);
    EXPECT_EQ(memory::external_bytes(), ext0 + (512 << 10));
    try {
      memory::ExternalReservation b("test/host_b", 768 << 10);
      FAIL() << "768 KiB more must not fit a 1 MiB cap holding 512 KiB";
    } catch (const OutOfMemoryError& e) {
      EXPECT_NE(std::string(e.what()).find("test/host_b"), std::string::npos) << e.what();
      EXPECT_EQ(e.requested(), 768u << 10);
    }
    EXPECT_EQ(memory::refusal_count(), refusals0 + 1);
    // Nothing was declared for the refused buffer.
    EXPECT_EQ(memory::external_bytes(), ext0 + (512 << 10));
    memory::ExternalReservation moved = std::move(a);
    EXPECT_EQ(moved.bytes(), 512u << 10);
    EXPECT_EQ(memory::external_bytes(), ext0 + (512 << 10));
  }
  EXPECT_EQ(memory::external_bytes(), ext0);
}

TEST(ReplayBufferMemoryTest, StorageIsDeclaredBeforeItIsAllocated) {
  const std::uint64_t ext0 = memory::external_bytes();
  const std::uint64_t expected = train::ReplayBuffer::storage_bytes(1000, kStateDim);
  EXPECT_EQ(expected, 1000u * (2 * kStateDim * 4 + 4 + 4 + 8));
  {
    train::ReplayBuffer b(1000, kStateDim);
    EXPECT_EQ(memory::external_bytes(), ext0 + expected);
    const auto snap = memory::external_snapshot();
    bool found = false;
    for (const auto& e : snap)
      found = found || (e.tag == "dqn/replay_buffer" && e.bytes == expected);
    EXPECT_TRUE(found);
  }
  EXPECT_EQ(memory::external_bytes(), ext0);
  // The default 100k-transition buffer (~206 MB at state 256) is refused under a 64 MiB cap,
  // before its vectors exist.
  memory::LimitGuard cap(memory::live_bytes() + ext0 + (64 << 20));
  EXPECT_THROW(train::ReplayBuffer(100000, kStateDim), OutOfMemoryError);
  EXPECT_EQ(memory::external_bytes(), ext0);
}

TEST(SyntheticEnvTest, ShapesEpisodesAndBadActions) {
  train::SyntheticEnv env(7, 3, 1, 5);
  auto o = env.reset(9);
  ASSERT_EQ(o.size(), 7u);
  for (float v : o) EXPECT_TRUE(v >= -1.0f && v < 1.0f);
  int steps = 0;
  for (;;) {
    auto s = env.step(2);
    ++steps;
    ASSERT_EQ(s.obs.size(), 7u);
    if (s.done()) {
      EXPECT_TRUE(s.truncated);
      EXPECT_FALSE(s.terminated);
      break;
    }
  }
  EXPECT_EQ(steps, 5);
  EXPECT_THROW(env.step(0), InputError);  // after the episode ended
  env.reset();
  EXPECT_THROW(env.step(3), InputError);
  // Same seed, same observations.
  train::SyntheticEnv again(7, 3, 1, 5);
  EXPECT_EQ(again.reset(9), o);
  EXPECT_THROW(train::SyntheticEnv(0, 3), InputError);
}

// DQN options small enough for fast tests: a replay buffer of `buffer` transitions.
nlohmann::json dqn_options(std::int64_t buffer) {
  return {{"buffer_size", buffer}};
}

class TrainerStepModelTest : public testing::SeededTest,
                             public ::testing::WithParamInterface<std::string> {};

TEST_P(TrainerStepModelTest, FixedTagsMatchTheTrainersClosedForms) {
  const std::string name = GetParam();
  const std::uint64_t live0 = memory::live_bytes();
  const std::uint64_t ext0 = memory::external_bytes();
  plan::TrainConfig cfg;  // the trainer step is the default
  cfg.batch = 4;
  if (name == "dqn") cfg.trainer_options = dqn_options(2000);
  const auto fp = plan::measure_training_footprint(name, cfg);
  plan::TrainConfig syn = cfg;
  syn.step = plan::StepKind::kSynthetic;
  const auto sfp = plan::measure_training_footprint(name, syn);
  EXPECT_TRUE(fp.matches_closed_form()) << fp.to_json().dump(2);
  EXPECT_EQ(fp.gradient_bytes, fp.trainable_parameter_bytes);
  EXPECT_EQ(fp.optimizer_bytes, 2 * fp.trainable_parameter_bytes);  // Adam
  EXPECT_EQ(fp.leaked_bytes, 0u);
  EXPECT_EQ(fp.peak_bytes,
            fp.fixed_bytes + fp.external_bytes + std::max(fp.activation_bytes, fp.step_bytes));
  // The same network either way.
  EXPECT_EQ(fp.parameter_bytes, sfp.parameter_bytes);
  if (name == "dqn") {
    // The target network is resident beside the online one, the replay buffer is declared.
    EXPECT_EQ(fp.trainer_state_bytes, fp.parameter_bytes);
    EXPECT_EQ(fp.fixed_bytes, sfp.fixed_bytes + fp.parameter_bytes);
    EXPECT_EQ(fp.external_bytes, train::ReplayBuffer::storage_bytes(2000, kStateDim));
    EXPECT_NE(fp.step.find("DqnTrainer"), std::string::npos) << fp.step;
    // Per sample the real update holds at least the sampled transitions: obs and next_obs,
    // 2 x 256 x 4 B.
    plan::TrainingProbe real("dqn", cfg);
    const double real_slope =
        double(real.probe(512).activation_bytes - real.probe(64).activation_bytes) / 448.0;
    EXPECT_GE(real_slope, 2.0 * kStateDim * 4) << real_slope;
  } else {
    EXPECT_EQ(fp.trainer_state_bytes, 0u);
    EXPECT_EQ(fp.external_bytes, 0u);
    EXPECT_EQ(fp.fixed_bytes, sfp.fixed_bytes);
    EXPECT_NE(fp.step.find(name == "ppo" ? "PpoTrainer" : "ForecastTrainer"), std::string::npos)
        << fp.step;
  }
  EXPECT_EQ(fp.to_json()["tags"][name + "/external"], fp.external_bytes);
  EXPECT_EQ(memory::live_bytes(), live0);
  EXPECT_EQ(memory::external_bytes(), ext0);
}

// Trains the real trainer of `name` for a few optimizer steps at `batch` under a cap of what is
// live now plus `budget`. Returns "" when it trained, the OutOfMemoryError's message otherwise.
std::string train_real(const std::string& name, std::int64_t batch, std::uint64_t budget,
                       std::int64_t buffer) {
  std::string error;
  const auto run = [&](auto&& build_and_train) {
    const std::uint64_t base = memory::live_bytes() + memory::external_bytes();
    memory::LimitGuard cap(base + budget);
    try {
      memory::translate_oom(build_and_train);
    } catch (const OutOfMemoryError& e) {
      error = e.what();
    }
  };
  train::RunConfig quiet;
  quiet.progress = train::ProgressMode::kOff;
  if (name == "dqn") {
    run([&] {
      auto o = train::DqnTrainerOptions()
                   .batch_size(batch)
                   .buffer_size(buffer)
                   .learning_starts(64)
                   .train_freq(1)
                   .gradient_steps(1)
                   .total_steps(67)
                   .hidden({128, 64})
                   .seed(3);
      train::DqnTrainer t(o, synthetic_envs());
      const auto r = t.train(quiet);
      EXPECT_TRUE(r.completed);
      EXPECT_EQ(r.metrics["updates"], 3);
    });
  } else if (name == "ppo") {
    run([&] {
      const std::int64_t n_envs = 4;
      const std::int64_t n_steps = (batch + n_envs - 1) / n_envs;
      auto o = train::PpoTrainerOptions()
                   .n_envs(n_envs)
                   .n_steps(n_steps)
                   .batch_size(batch)
                   .n_epochs(1)
                   .total_steps(n_envs * n_steps)
                   .hidden({128, 64})
                   .seed(3);
      train::PpoTrainer t(o, synthetic_envs());
      const auto r = t.train(quiet);
      EXPECT_TRUE(r.completed);
    });
  } else {
    // The data exists before the cap's base: the plan budgets the training, not the dataset.
    torch::manual_seed(3);
    auto model = models::make_model(name);
    auto source = std::make_shared<train::TensorBatchSource>(
        model->example_batch(2 * batch, 0, torch::kCPU, 5),
        model->example_batch(batch, 0, torch::kCPU, 6), batch, 3);
    run([&] {
      train::ForecastTrainer t(*model, *source, train::ForecastTrainerOptions().epochs(1).seed(3));
      const auto r = t.train(quiet);
      EXPECT_TRUE(r.completed);
      EXPECT_EQ(t.step(), 2);
    });
  }
  EXPECT_EQ(memory::get_limit(), 0u);
  return error;
}

TEST_P(TrainerStepModelTest, PlannedBatchTrainsTheRealTrainerAndTwiceRunsOut) {
  const std::string name = GetParam();
  const bool rl = name == "dqn" || name == "ppo";
  // RL steps are small per sample: plan around 2048 samples (the DQN buffer holds 8192, so a
  // trainer at twice the plan is still valid: buffer_size >= batch_size); forecasters around 16.
  const std::int64_t around = rl ? 2048 : 16;
  const std::int64_t buffer = 8192;
  plan::PlanOptions o;
  o.model = name;
  if (name == "dqn") o.train.trainer_options = dqn_options(buffer);
  o.budget = memory::Budget::of_bytes(std::uint64_t{1} << 34);
  o.verify = false;
  const auto fit = plan::plan_batch(o);
  o.budget = memory::Budget::of_bytes(
      static_cast<std::uint64_t>(static_cast<double>(fit.predict(around)) / 0.9));
  o.verify = true;
  const auto r = plan::plan_batch(o);
  ASSERT_TRUE(r.verified);
  EXPECT_EQ(r.train.step, plan::StepKind::kTrainer);
  // A fit across a kink can be refitted once after a verification ran out of memory. PPO's
  // rollout grows with the batch only beyond n_envs x n_steps (256); the TFT's peak is the
  // optimizer step's fixed temporaries up to batch ~4 and the backward's activations beyond (the
  // fused VSN stores no [V, N, .] activations, 0.86 MB per sample instead of ~13 MB).
  EXPECT_TRUE(r.limited_by == "budget" ||
              ((name == "ppo" || name == "tft") && r.limited_by == "verification refit"))
      << r.limited_by;
  EXPECT_GE(r.chosen_batch, around * 9 / 10);
  EXPECT_LE(r.chosen_batch, around * 12 / 10);
  EXPECT_LE(r.verified_peak_bytes, o.budget.bytes);
  EXPECT_LE(std::abs(r.predicted_error_pct()), 10.0)
      << "predicted " << r.predicted_peak_bytes << " verified " << r.verified_peak_bytes;
  if (name == "dqn") {
    EXPECT_EQ(r.fixed.external_bytes, train::ReplayBuffer::storage_bytes(buffer, kStateDim));
  }
  const std::uint64_t live0 = memory::live_bytes();
  const std::uint64_t ext0 = memory::external_bytes();
  // The real trainer, not the planner's step: a few steps at the plan fit its budget ...
  EXPECT_EQ(train_real(name, r.chosen_batch, o.budget.bytes, buffer), "");
  // ... and twice the batch runs out of memory under the same cap (the plan is tight).
  const std::string oom = train_real(name, 2 * r.chosen_batch, o.budget.bytes, buffer);
  EXPECT_NE(oom.find("out of memory"), std::string::npos) << oom;
  EXPECT_EQ(memory::live_bytes(), live0);
  EXPECT_EQ(memory::external_bytes(), ext0);
  // The library's verification agrees.
  EXPECT_FALSE(plan::verify_batch(name, r.train, 2 * r.chosen_batch, o.budget.bytes).ok);
}

INSTANTIATE_TEST_SUITE_P(Registry, TrainerStepModelTest, ::testing::ValuesIn(models::model_names()),
                         [](const auto& info) { return info.param; });

TEST(TrainAutoCliTest, TheWholeRunTrainsUnderTheEnforcedCap) {
  testing::TempDir dir;
  const std::uint64_t budget = 4u << 20;
  // PPO on CartPole: planned from the PpoTrainer's own step with its 8 CartPole environments,
  // then the whole run (rollouts, updates, evaluation) under a cap of the budget.
  auto p = testing::run_cli_json(
      "train ppo --steps 2048 --progress off --json --eval-episodes 1 --batch auto "
      "--budget-mib 4 --out " +
          (dir.path() / "ppo").string(),
      0);
  const auto& plan = p["batch_plan"];
  ASSERT_TRUE(plan.is_object()) << p.dump(2);
  EXPECT_TRUE(plan["verified"].get<bool>());
  EXPECT_NE(plan["step"].get<std::string>().find("PpoTrainer"), std::string::npos);
  ASSERT_TRUE(p["enforced_cap_bytes"].is_number()) << p.dump(2);
  EXPECT_EQ(p["enforced_cap_bytes"], plan["enforced_cap_bytes"]);
  EXPECT_EQ(plan["enforced_on"], "cpu");
  EXPECT_GE(p["enforced_cap_bytes"].get<std::uint64_t>(), budget);
  const auto run_peak = plan["run_peak_bytes"].get<std::uint64_t>();
  EXPECT_GT(run_peak, 0u);
  EXPECT_LE(run_peak, budget);
  // A forecaster: the model, its optimizer and every batch of the run under the cap.
  auto m = testing::run_cli_json(
      "train mamba2 --epochs 1 --progress off --json --batch auto "
      "--budget-mib 16 --out " +
          (dir.path() / "mamba2").string(),
      0);
  EXPECT_TRUE(m["batch_plan"]["verified"].get<bool>());
  EXPECT_LE(m["batch_plan"]["run_peak_bytes"].get<std::uint64_t>(), 16u << 20);
  EXPECT_GT(m["enforced_cap_bytes"].get<std::uint64_t>(), 0u);
  // Without --batch auto nothing is enforced, and the summary says so.
  auto fixed = testing::run_cli_json(
      "train ppo --steps 256 --progress off --json --eval-episodes 1 "
      "--out " +
          (dir.path() / "ppo2").string(),
      0);
  EXPECT_TRUE(fixed["enforced_cap_bytes"].is_null());
  EXPECT_TRUE(fixed["memory_cap"].is_null());
}

TEST(TrainCapCliTest, AGivenBudgetCapsAFixedBatchRun) {
  testing::TempDir dir;
  // A fixed batch with --budget-mib: no plan, but the whole run is still capped and reported.
  auto p = testing::run_cli_json(
      "train ppo --steps 512 --batch 64 --progress off --json --eval-episodes 1 --budget-mib 4 "
      "--out " +
          (dir.path() / "ppo").string(),
      0);
  EXPECT_FALSE(p.contains("batch_plan")) << p.dump(2);
  const auto& cap = p["memory_cap"];
  ASSERT_TRUE(cap.is_object()) << p.dump(2);
  EXPECT_EQ(cap["budget_bytes"], 4u << 20);
  EXPECT_EQ(cap["budget_source"], "--budget-mib");
  EXPECT_EQ(cap["enforced_on"], "cpu");
  EXPECT_EQ(p["enforced_cap_bytes"], cap["enforced_cap_bytes"]);
  EXPECT_GT(cap["run_peak_bytes"].get<std::uint64_t>(), 0u);
  EXPECT_LE(cap["run_peak_bytes"].get<std::uint64_t>(), 4u << 20);
  // A profile caps at its usable bytes.
  auto f = testing::run_cli_json(
      "train mamba2 --epochs 1 --progress off --json --device-profile rtx3050ti-4gb --out " +
          (dir.path() / "mamba2").string(),
      0);
  EXPECT_EQ(f["memory_cap"]["budget_source"], "rtx3050ti-4gb usable");
  EXPECT_EQ(f["memory_cap"]["budget_bytes"], memory::find_profile("rtx3050ti-4gb").usable_bytes());
  // A budget the run does not fit in ends it with the typed error: exit 1, naming the cause.
  const auto over = testing::run_cli(
      "train ppo --steps 512 --batch 256 --progress off --json --eval-episodes 1 --budget-mib "
      "0.25 --out " +
      (dir.path() / "ppo-over").string());
  EXPECT_EQ(over.exit_code, 1) << over.out << over.err;
  EXPECT_NE(over.err.find("out of memory"), std::string::npos) << over.err;
}

TEST(TrainerStepTest, BadSpecsAreInputErrors) {
  train::TrainerStepSpec spec;
  spec.model = "nosuchmodel";
  EXPECT_THROW(train::make_trainer_step(spec), InputError);
  spec.model = "dqn";
  spec.trainer_options = {{"nosuchoption", 1}};
  EXPECT_THROW(train::make_trainer_step(spec), InputError);
  // An environment that does not match the model options.
  spec.trainer_options = dqn_options(1000);
  spec.env = [](std::int64_t) { return std::make_unique<train::SyntheticEnv>(8, 3); };
  EXPECT_THROW(train::make_trainer_step(spec), InputError);
  // Other optimizers than adam need the synthetic step.
  plan::TrainConfig cfg;
  cfg.optimizer = plan::OptimizerKind::kSgd;
  EXPECT_THROW(plan::measure_training_footprint("ppo", cfg), InputError);
  EXPECT_THROW(plan::parse_step_kind("real"), InputError);
  EXPECT_EQ(plan::parse_step_kind("synthetic"), plan::StepKind::kSynthetic);
}

}  // namespace
}  // namespace foxhunt
