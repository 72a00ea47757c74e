// Training infrastructure: random stream, metrics log, progress, SIGINT stop, exact resume of
// all three trainers, atomic checkpoints, and the `foxhunt train` command line.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "foxhunt/core/container.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/features.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/train/dqn_trainer.h"
#include "foxhunt/train/forecast_trainer.h"
#include "foxhunt/train/infra.h"
#include "foxhunt/train/loop.h"
#include "foxhunt/train/ppo_trainer.h"
#include "test_util.h"
#include "train_test_util.h"

namespace foxhunt::train {
namespace {

using foxhunt::testing::run_cli;
using foxhunt::testing::TempDir;

using foxhunt::testing::OneThread;

bool same_parameters(torch::nn::Module& a, torch::nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  if (pa.size() != pb.size()) return false;
  for (size_t i = 0; i < pa.size(); ++i)
    if (!torch::equal(pa[i], pb[i])) return false;
  return true;
}

// Metrics lines without the wall-clock fields, for comparing runs.
nlohmann::json without_timing(nlohmann::json j) {
  j.erase("elapsed_s");
  j.erase("samples_per_s");
  return j;
}

using foxhunt::testing::quiet_run;

// A quiet run that checkpoints to `path` and stops at step `stop_at_step`.
RunConfig checkpointed_run(const std::string& path, int64_t stop_at_step) {
  auto run = quiet_run();
  run.checkpoint_path = path;
  run.stop_at_step = stop_at_step;
  return run;
}

class TrainInfraTest : public foxhunt::testing::SeededTest {
 protected:
  void TearDown() override {
    testing_hooks::fail_before_rename = false;
    clear_stop();
  }
};

// ---- building blocks --------------------------------------------------------------------------

TEST_F(TrainInfraTest, RngIsPortableAndResumable) {
  Rng a(42);
  for (int i = 0; i < 1000; ++i) {
    const auto v = a.uniform_int(7);
    EXPECT_LT(v, 7u);
    const double u = a.uniform();
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
  auto p = a.permutation(50);
  EXPECT_EQ(std::set<int64_t>(p.begin(), p.end()).size(), 50u);
  EXPECT_EQ(*std::max_element(p.begin(), p.end()), 49);
  const auto state = a.state();
  Rng b(0);
  b.set_state(state);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a.next(), b.next());
  EXPECT_THROW(b.set_state("garbage"), InputError);
  EXPECT_NE(derive_seed(1, 0), derive_seed(1, 1));
  EXPECT_NE(derive_seed(1, 0), derive_seed(2, 0));
  // mt19937_64's first output for seed 5489 is fixed by the C++ standard: the stream is portable.
  EXPECT_EQ(Rng(5489).next(), 14514284786278117030ull);
}

TEST_F(TrainInfraTest, RollingMeanKeepsTheLastValues) {
  RollingMean m(3);
  EXPECT_TRUE(std::isnan(m.mean()));
  for (double v : {1.0, 2.0, 3.0, 10.0}) m.add(v);
  EXPECT_DOUBLE_EQ(m.mean(), 5.0);
  RollingMean copy(3);
  copy.from_json(m.to_json());
  EXPECT_DOUBLE_EQ(copy.mean(), 5.0);
  EXPECT_EQ(copy.size(), 3u);
}

// A run killed mid-line leaves a partial last line: a resumed run's log drops it before
// appending, and a run from step 0 starts the file anew (never after a killed run's lines).
TEST_F(TrainInfraTest, MetricsLogDropsAKilledRunsPartialLineAndAFreshRunStartsAnew) {
  TempDir dir;
  const auto path = dir.file("m.jsonl");
  auto lines = [&] {
    std::ifstream in(path);
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  };
  std::ofstream(path) << "{\"step\":1}\n{\"step\":2,\"lo";
  MetricsLog(path).write({{"step", 3}});
  auto l = lines();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_EQ(l[0]["step"], 1);
  EXPECT_EQ(l[1]["step"], 3);
  std::ofstream(path, std::ios::app) << "{\"st";  // a partial line and nothing before it ends
  MetricsLog(path, MetricsStart::kAppend).write({{"step", 4}});
  EXPECT_EQ(lines().size(), 3u);
  std::ofstream(path, std::ios::trunc) << "{\"st";  // only a partial line
  MetricsLog(path).write({{"step", 5}});
  ASSERT_EQ(lines().size(), 1u);
  // A session from step 0 (a fresh run) starts the file anew; one resumed at step 8 appends.
  {
    RunConfig run = quiet_run();
    run.metrics_path = path;
    RunSession fresh(run, "test", "test", 10, 0);
    fresh.log({{"step", 1}}, 1, "");
  }
  l = lines();
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0]["step"], 1);
  {
    RunConfig run = quiet_run();
    run.metrics_path = path;
    RunSession resumed(run, "test", "test", 10, 8);
    resumed.log({{"step", 9}}, 9, "");
  }
  EXPECT_EQ(lines().size(), 2u);
}

TEST_F(TrainInfraTest, MetricsLogWritesJsonLinesAndAppends) {
  TempDir dir;
  const auto path = dir.file("m.jsonl");
  {
    MetricsLog log(path);
    log.write({{"step", 1}, {"loss", 0.5}});
    log.write({{"step", 2}, {"loss", json_number(NAN)}});
    EXPECT_EQ(log.lines().size(), 2u);
  }
  { MetricsLog(path).write({{"step", 3}}); }
  std::ifstream in(path);
  std::string line;
  std::vector<nlohmann::json> lines;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[1]["loss"], nullptr);  // NaN is not JSON; it becomes null
  EXPECT_EQ(lines[2]["step"], 3);
  EXPECT_THROW(MetricsLog(dir.file("no/such/dir/m.jsonl")), Error);
}

TEST_F(TrainInfraTest, ProgressLinesShowRateAndEta) {
  EXPECT_EQ(format_duration(3.21), "3.2s");
  EXPECT_EQ(format_duration(125), "2m05s");
  EXPECT_EQ(format_duration(3725), "1h02m05s");
  EXPECT_EQ(format_duration(NAN), "?");
  ::testing::internal::CaptureStderr();
  {
    Progress p("dqn", 1000, 0, ProgressMode::kLines);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    p.update(100);  // lines mode: updates print nothing
    p.log(500, "loss 0.1");
    p.finish();
    Progress off("dqn", 1000, 0, ProgressMode::kOff);
    off.log(500);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("dqn step 500/1000 (50.0%)"), std::string::npos) << err;
  EXPECT_NE(err.find("ETA"), std::string::npos) << err;
  EXPECT_NE(err.find("loss 0.1"), std::string::npos) << err;
}

TEST_F(TrainInfraTest, SigintHandlerSetsTheStopFlagAndIsRestored) {
  struct sigaction before {};
  ::sigaction(SIGINT, nullptr, &before);
  clear_stop();
  {
    ScopedSigintHandler handler;
    EXPECT_FALSE(stop_requested());
    std::raise(SIGINT);  // handled: the test process keeps running
    EXPECT_TRUE(stop_requested());
  }
  struct sigaction after {};
  ::sigaction(SIGINT, nullptr, &after);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  clear_stop();
  EXPECT_FALSE(stop_requested());
}

// ---- exact resume -----------------------------------------------------------------------------

DqnTrainerOptions small_dqn() {
  return DqnTrainerOptions()
      .total_steps(3000)
      .learning_starts(500)
      .train_freq(50)
      .gradient_steps(10)
      .target_update_interval(100)
      .buffer_size(1000)
      .batch_size(32)
      .hidden({32, 32})
      .seed(21);
}

TEST_F(TrainInfraTest, DqnResumeIsBitExact) {
  OneThread one;
  TempDir dir;
  const auto ckpt = dir.file("dqn.ckpt");
  auto run = quiet_run();
  run.log_interval = 250;
  std::vector<nlohmann::json> full_lines, resumed_lines;

  DqnTrainer full(small_dqn(), env_factory("cartpole"));
  run.on_log = [&](const nlohmann::json& j) { full_lines.push_back(without_timing(j)); };
  auto r_full = full.train(run);

  DqnTrainer first(small_dqn(), env_factory("cartpole"));
  auto run1 = run;
  run1.on_log = nullptr;
  run1.checkpoint_path = ckpt;
  run1.stop_at_step = 1500;  // mid-episode, mid-schedule: everything must be restored
  auto r1 = first.train(run1);
  EXPECT_FALSE(r1.completed);
  EXPECT_FALSE(r1.interrupted);
  EXPECT_EQ(r1.steps, 1500);
  EXPECT_EQ(r1.checkpoint_path, ckpt);

  DqnTrainer second(small_dqn(), env_factory("cartpole"));
  second.load_checkpoint(ckpt);
  EXPECT_EQ(second.step(), 1500);
  auto run2 = run;
  run2.on_log = [&](const nlohmann::json& j) { resumed_lines.push_back(without_timing(j)); };
  auto r2 = second.train(run2);
  EXPECT_TRUE(r2.completed);
  EXPECT_EQ(r2.steps, 3000);
  EXPECT_EQ(r2.episodes, r_full.episodes);
  EXPECT_TRUE(same_parameters(*full.q_network(), *second.q_network()));
  // The metrics after the resume point are the uninterrupted run's, line for line.
  ASSERT_EQ(resumed_lines.size(), 6u);
  for (size_t i = 0; i < resumed_lines.size(); ++i)
    EXPECT_EQ(resumed_lines[i], full_lines[full_lines.size() - 6 + i]) << i;
}

TEST_F(TrainInfraTest, PpoResumeIsBitExact) {
  OneThread one;
  TempDir dir;
  const auto ckpt = dir.file("ppo.ckpt");
  auto opts =
      PpoTrainerOptions().total_steps(4096).n_envs(4).n_steps(64).batch_size(64).n_epochs(4).seed(
          8);
  PpoTrainer full(opts, env_factory("cartpole"));
  auto r_full = full.train(quiet_run());

  PpoTrainer first(opts, env_factory("cartpole"));
  auto run1 = checkpointed_run(ckpt, 2048);
  EXPECT_EQ(first.train(run1).steps, 2048);

  PpoTrainer second(opts, env_factory("cartpole"));
  second.load_checkpoint(ckpt);
  EXPECT_DOUBLE_EQ(second.current_lr(), 0.5e-3);
  auto r2 = second.train(quiet_run());
  EXPECT_EQ(r2.steps, 4096);
  EXPECT_EQ(r2.episodes, r_full.episodes);
  EXPECT_TRUE(same_parameters(*full.network(), *second.network()));
  EXPECT_EQ(without_timing(r2.metrics), without_timing(r_full.metrics));
  // A checkpoint with another number of environments does not fit.
  PpoTrainer other(PpoTrainerOptions(opts).n_envs(2), env_factory("cartpole"));
  EXPECT_THROW(other.load_checkpoint(ckpt), InputError);
}

TEST_F(TrainInfraTest, ForecastResumeMidEpochIsBitExact) {
  OneThread one;
  TempDir dir;
  const auto ckpt = dir.file("fc.ckpt");
  const auto x = foxhunt::testing::ar1_series(1200, 0.8, 3);
  auto [wt, yt] = foxhunt::testing::windows(x, 0, 900, 12);
  auto [wv, yv] = foxhunt::testing::windows(x, 900, 1200, 12);
  auto make = [&] {
    torch::manual_seed(99);  // identical initial weights
    return std::make_unique<foxhunt::testing::QuantileMlpModel>(12, 32, /*dropout=*/0.2);
  };
  auto opts = ForecastTrainerOptions().epochs(4).seed(4);
  auto full_model = make();
  TensorBatchSource src_full({{wt.unsqueeze(-1)}, yt}, {{wv.unsqueeze(-1)}, yv}, 32, 5);
  ForecastTrainer full(*full_model, src_full, opts);
  auto r_full = full.train(quiet_run());
  ASSERT_EQ(src_full.train_batches(), 28);

  auto model1 = make();
  TensorBatchSource src1({{wt.unsqueeze(-1)}, yt}, {{wv.unsqueeze(-1)}, yv}, 32, 5);
  ForecastTrainer first(*model1, src1, opts);
  // Stops in epoch 1 at batch 17: the dropout stream and the shuffle must continue.
  auto run1 = checkpointed_run(ckpt, 45);
  EXPECT_EQ(first.train(run1).steps, 45);
  EXPECT_EQ(first.epoch(), 1);

  auto model2 = make();
  TensorBatchSource src2({{wt.unsqueeze(-1)}, yt}, {{wv.unsqueeze(-1)}, yv}, 32, 5);
  ForecastTrainer second(*model2, src2, opts);
  second.load_checkpoint(ckpt);
  auto r2 = second.train(quiet_run());
  EXPECT_TRUE(r2.completed);
  EXPECT_EQ(r2.steps, r_full.steps);
  EXPECT_EQ(second.validation_history(), full.validation_history());
  EXPECT_TRUE(same_parameters(full_model->module(), model2->module()));
  // A different model (options) is refused.
  foxhunt::testing::QuantileMlpModel wider(12, 64);
  ForecastTrainer wrong(wider, src2, opts);
  EXPECT_THROW(wrong.load_checkpoint(ckpt), InputError);
}

TEST_F(TrainInfraTest, SigintStopsWithCheckpointAndRunContinues) {
  OneThread one;
  TempDir dir;
  const auto ckpt = dir.file("dqn.ckpt");
  DqnTrainer reference(small_dqn(), env_factory("cartpole"));
  reference.train(quiet_run());

  DqnTrainer trainer(small_dqn(), env_factory("cartpole"));
  auto run = quiet_run();
  run.checkpoint_path = ckpt;
  run.log_interval = 500;
  run.on_log = [](const nlohmann::json& j) {
    if (j["step"] == 1000) std::raise(SIGINT);  // Ctrl-C while training
  };
  TrainResult r;
  {
    ScopedSigintHandler handler;
    r = trainer.train(run);
  }
  EXPECT_TRUE(r.interrupted);
  EXPECT_FALSE(r.completed);
  EXPECT_EQ(r.steps, 1000);
  ASSERT_TRUE(std::filesystem::exists(ckpt));
  DqnTrainer resumed(small_dqn(), env_factory("cartpole"));
  resumed.load_checkpoint(ckpt);
  EXPECT_EQ(resumed.step(), 1000);
  auto r2 = resumed.train(quiet_run());  // train() clears the stop request
  EXPECT_TRUE(r2.completed);
  EXPECT_TRUE(same_parameters(*reference.q_network(), *resumed.q_network()));
}

// ---- checkpoints ------------------------------------------------------------------------------

TEST_F(TrainInfraTest, CheckpointWriteInterruptedBeforeRenameKeepsThePreviousOne) {
  TempDir dir;
  const auto ckpt = dir.file("dqn.ckpt");
  DqnTrainer trainer(small_dqn(), env_factory("cartpole"));
  auto run = checkpointed_run(ckpt, 600);
  trainer.train(run);
  const std::string good = read_file(ckpt);
  run.checkpoint_path.clear();
  run.stop_at_step = 1200;
  trainer.train(run);
  testing_hooks::fail_before_rename = true;
  EXPECT_THROW(trainer.save_checkpoint(ckpt), Error);
  testing_hooks::fail_before_rename = false;
  // The old file is untouched, loads, and nothing else was left in the directory.
  EXPECT_EQ(read_file(ckpt), good);
  DqnTrainer restored(small_dqn(), env_factory("cartpole"));
  restored.load_checkpoint(ckpt);
  EXPECT_EQ(restored.step(), 600);
  int files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir.path())) files += e.is_regular_file();
  EXPECT_EQ(files, 1);
  // The same happens inside train(): the failing periodic checkpoint surfaces as an error.
  testing_hooks::fail_before_rename = true;
  run.checkpoint_path = ckpt;
  run.checkpoint_interval = 100;
  run.stop_at_step = 1500;
  EXPECT_THROW(trainer.train(run), Error);
  testing_hooks::fail_before_rename = false;
  EXPECT_EQ(read_file(ckpt), good);
}

TEST_F(TrainInfraTest, TrainerCheckpointIsAModelCheckpointAndIsValidated) {
  TempDir dir;
  const auto ckpt = dir.file("dqn.ckpt");
  DqnTrainer trainer(small_dqn(), env_factory("cartpole"));
  trainer.train(checkpointed_run(ckpt, 700));
  // models::load_model reads the trained weights straight from a trainer checkpoint.
  auto model = models::load_model(ckpt, torch::kCPU, "dqn");
  EXPECT_TRUE(same_parameters(model->module(), *trainer.q_network()));
  // The wrong algorithm, a plain model checkpoint and a truncated file are refused.
  PpoTrainer ppo(PpoTrainerOptions().n_envs(2), env_factory("cartpole"));
  EXPECT_THROW(ppo.load_checkpoint(ckpt), InputError);
  const auto plain = dir.file("plain.ckpt");
  models::save_model(trainer.model(), plain);
  DqnTrainer other(small_dqn(), env_factory("cartpole"));
  EXPECT_THROW(other.load_checkpoint(plain), InputError);
  const auto cut = dir.file("cut.ckpt");
  const std::string bytes = read_file(ckpt);
  write_file_atomic(cut, bytes.substr(0, bytes.size() / 2));
  EXPECT_THROW(other.load_checkpoint(cut), InputError);
  // A network of another shape does not load either.
  DqnTrainer wider(DqnTrainerOptions(small_dqn()).hidden({64}), env_factory("cartpole"));
  EXPECT_THROW(wider.load_checkpoint(ckpt), InputError);
}

// ---- CLI --------------------------------------------------------------------------------------

class TrainCliTest : public ::testing::Test {};

TEST_F(TrainCliTest, DqnJsonRunWritesCheckpointAndMetrics) {
  TempDir dir;
  const auto out = dir.file("run");
  auto r = run_cli("train dqn --env cartpole --steps 200 --json --eval-episodes 3 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);  // stdout is JSON only
  EXPECT_EQ(j["model"], "dqn");
  EXPECT_EQ(j["steps"], 200);
  EXPECT_EQ(j["completed"], true);
  EXPECT_EQ(j["interrupted"], false);
  EXPECT_EQ(j["eval"]["episodes"], 3);
  EXPECT_GT(j["episodes"].get<int64_t>(), 0);
  const std::string ckpt = j["checkpoint"];
  EXPECT_EQ(ckpt, out + "/checkpoint.ckpt");
  auto model = models::load_model(ckpt, torch::kCPU, "dqn");
  EXPECT_EQ(model->options_json()["state_dim"], 4);
  EXPECT_TRUE(std::filesystem::exists(out + "/metrics.jsonl"));
  auto summary = nlohmann::json::parse(read_file(out + "/summary.json"));
  EXPECT_EQ(summary["steps"], 200);
  // Progress went to stderr, not stdout.
  EXPECT_NE(r.err.find("dqn step 200/200"), std::string::npos) << r.err;
}

TEST_F(TrainCliTest, PpoResumeContinuesTheRun) {
  TempDir dir;
  const auto out = dir.file("ppo");
  const std::string opts =
      "--options '{\"n_envs\":2,\"n_steps\":64,\"batch_size\":64,\"n_epochs\":2}'";
  auto r1 = run_cli("train ppo --steps 512 --json --eval-episodes 1 --progress off --out " + out +
                    " " + opts);
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_EQ(nlohmann::json::parse(r1.out)["options"]["n_envs"], 2);
  auto r2 = run_cli("train ppo --resume " + out +
                    "/checkpoint.ckpt --steps 1024 --json "
                    "--eval-episodes 1 --progress off");
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  auto j = nlohmann::json::parse(r2.out);
  EXPECT_EQ(j["steps"], 1024);
  EXPECT_EQ(j["options"]["n_envs"], 2);  // options came from the checkpoint
  EXPECT_EQ(j["resumed_from"], out + "/checkpoint.ckpt");
  EXPECT_EQ(j["checkpoint"], out + "/checkpoint.ckpt");
  // Changing the options on resume is refused.
  auto r3 = run_cli("train ppo --resume " + out + "/checkpoint.ckpt --seed 3");
  EXPECT_EQ(r3.exit_code, 2) << r3.err;
  // The run's directory names its checkpoint too; a directory without one says so.
  auto r4 = run_cli("train ppo --resume " + out +
                    " --steps 1536 --json --eval-episodes 1 "
                    "--progress off");
  ASSERT_EQ(r4.exit_code, 0) << r4.err;
  EXPECT_EQ(nlohmann::json::parse(r4.out)["resumed_from"], out + "/checkpoint.ckpt");
  auto r5 = run_cli("train ppo --resume " + dir.path().string() + " --steps 2048");
  EXPECT_EQ(r5.exit_code, 2);
  EXPECT_NE(r5.err.find("this directory has none"), std::string::npos) << r5.err;
}

TEST_F(TrainCliTest, TextSummaryByDefault) {
  TempDir dir;
  auto r = run_cli("train dqn --steps 100 --eval-episodes 2 --progress off --out " + dir.file("t"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("dqn on cartpole: 100/100 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("greedy evaluation"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("checkpoint:"), std::string::npos) << r.out;
}

TEST_F(TrainCliTest, BadArgumentsExit2) {
  TempDir dir;
  const std::string out = " --out " + dir.file("bad");
  for (const std::string& args : std::vector<std::string>{
           "train", "train bogus", "train dqn --env mars" + out, "train dqn --steps 0" + out,
           "train dqn --steps -5" + out, "train dqn --steps 10 --epochs 2" + out,
           "train dqn --epochs 2" + out, "train dqn --batch abc" + out,
           "train dqn --batch auto --device-profile nosuchcard" + out,
           "train dqn --options '{bad'" + out, "train dqn --options '{\"learning_rat\":1}'" + out,
           "train dqn --options '{\"batch_size\":0}'" + out,
           "train dqn --resume /no/such/file.ckpt" + out, "train dqn --progress sometimes" + out,
           "train dqn --bogus-flag" + out}) {
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
    EXPECT_TRUE(r.out.empty()) << args << ": " << r.out;
    EXPECT_FALSE(r.err.empty()) << args;
  }
  // Nothing was written for rejected runs.
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad")));
}

// A short synthetic series as a CSV (1500 bars: 256 warm-up, then 70/15/15 splits).
std::string small_bars_csv(const TempDir& dir) {
  data::SyntheticOptions o;
  o.bars = 1500;
  o.seed = 5;
  const auto path = dir.file("bars.csv");
  data::write_bars_csv(path, data::generate_synthetic(o));
  return path;
}

TEST_F(TrainCliTest, ForecastersTrainOnCsvAndResume) {
  TempDir dir;
  const auto csv = small_bars_csv(dir);
  const auto out = dir.file("m2");
  auto r = run_cli("train mamba2 --data " + csv +
                   " --epochs 1 --batch 32 --json --progress off --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["env"], "market");
  EXPECT_EQ(j["episodes"], 1);  // epochs
  EXPECT_TRUE(j["eval"]["loss"].is_number());
  EXPECT_TRUE(j["eval"]["baseline_loss"].is_number());
  EXPECT_GT(j["eval"]["windows"].get<int64_t>(), 100);
  EXPECT_EQ(j["data"]["source"], csv);
  // A short series trains the compact Mamba-2, and says so.
  EXPECT_EQ(j["options"]["model"]["d_model"], 16);
  EXPECT_EQ(j["options"]["model"]["n_layers"], 1);
  EXPECT_TRUE(j["compact_defaults"].is_object());
  EXPECT_TRUE(j["eval"]["next_bar"]["skill"].is_number());
  const int64_t steps_per_epoch = j["steps"];
  // The trainer checkpoint is a mamba2 model checkpoint, with the data it was trained on.
  const std::string ckpt = j["checkpoint"];
  auto model = models::load_model(ckpt, torch::kCPU, "mamba2");
  EXPECT_EQ(model->name(), "mamba2");
  auto header = read_container(ckpt).header;
  EXPECT_EQ(header["trainer"]["extra"]["batch_size"], 32);
  // Targets are returns over a volatility chosen on train + validation, then scaled to unit
  // variance: a scale of order 1 (raw returns of ~1e-3 would need ~1e3).
  const auto& data_info = header["trainer"]["extra"]["data"];
  EXPECT_GT(data_info["target_scale"].get<double>(), 0.1);
  EXPECT_LT(data_info["target_scale"].get<double>(), 10.0);
  EXPECT_FALSE(data_info["target_vol_feature"].get<std::string>().empty());
  // Resume to a second epoch: same batches per epoch, twice the steps.
  // (no --data: the checkpoint names the CSV it was trained on)
  auto r2 = run_cli("train mamba2 --resume " + ckpt + " --epochs 2 --json --progress off");
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  auto j2 = nlohmann::json::parse(r2.out);
  EXPECT_EQ(j2["steps"], 2 * steps_per_epoch);
  EXPECT_EQ(j2["episodes"], 2);
  EXPECT_EQ(j2["data"]["source"], csv);
  // The resumed run keeps the scaling its weights were trained for (no new selection).
  EXPECT_EQ(j2["data"]["target_vol_feature"], data_info["target_vol_feature"]);
  EXPECT_EQ(j2["data"]["target_scale"], data_info["target_scale"]);
  EXPECT_FALSE(j2["data"].contains("target_vol_selection_loss"));
  // TFT, shrunk through --model-options to keep the test short.
  auto r3 = run_cli("train tft --data " + csv + " --epochs 1 --json --progress off --out " +
                    dir.file("tft") +
                    " --model-options '{\"hidden\":8,\"heads\":1,\"lstm_layers\":1,\"window\":16,"
                    "\"horizon\":2}'");
  ASSERT_EQ(r3.exit_code, 0) << r3.err;
  auto j3 = nlohmann::json::parse(r3.out);
  EXPECT_EQ(j3["options"]["model"]["hidden"], 8);
  EXPECT_TRUE(j3["compact_defaults"].is_null());  // the user's options win
  EXPECT_TRUE(j3["eval"]["loss"].is_number());
  EXPECT_NO_THROW(models::load_model(j3["checkpoint"], torch::kCPU, "tft"));
}

TEST_F(TrainCliTest, RlOnTheTradingEnvironment) {
  TempDir dir;
  const auto csv = small_bars_csv(dir);
  auto r = run_cli("train dqn --env trading --data " + csv +
                   " --steps 600 --eval-episodes 2 --json --progress off --out " + dir.file("t"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["env"], "trading");
  EXPECT_EQ(j["steps"], 600);
  EXPECT_EQ(j["options"]["hidden"], (std::vector<int64_t>{128, 64}));
  EXPECT_TRUE(j["eval"]["mean_return"].is_number());
  auto model = models::load_model(j["checkpoint"], torch::kCPU, "dqn");
  EXPECT_EQ(model->options_json()["state_dim"], data::kRlStateDim);
  EXPECT_EQ(model->options_json()["actions"], 3);
  auto p = run_cli("train ppo --env trading --data " + csv +
                   " --steps 512 --eval-episodes 1 --json --progress off --out " + dir.file("p"));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(p.out)["steps"], 512);
}

TEST_F(TrainCliTest, MarketArgumentsAreChecked) {
  TempDir dir;
  const auto csv = small_bars_csv(dir);
  const std::string out = " --out " + dir.file("bad");
  for (const std::string& args : std::vector<std::string>{
           "train mamba2 --steps 10 --data " + csv + out,
           "train mamba2 --env cartpole --data " + csv + out,
           "train dqn --data " + csv + out,  // cartpole takes no data
           "train mamba2 --data " + dir.file("missing.csv") + out,
           "train mamba2 --data " + csv + " --model-options '{\"input_dim\":8}'" + out,
           "train mamba2 --data " + csv + " --model-options '{\"bogus\":1}'" + out,
           "train dqn --model-options '{\"d_model\":8}'" + out}) {
    auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("bad")));
}

// `foxhunt train <algo>` for `steps` steps with the batch size chosen by the memory planner under
// a 64 MiB budget (JSON summary on stdout).
foxhunt::testing::CliResult train_with_auto_batch(const std::string& algo, int64_t steps,
                                                  const std::string& out) {
  return run_cli("train " + algo + " --steps " + std::to_string(steps) +
                 " --batch auto --budget-mib 64 --eval-episodes 1 --json --progress off --out " +
                 out);
}

TEST_F(TrainCliTest, BatchAutoUsesTheMemoryPlanner) {
  TempDir dir;
  auto r = train_with_auto_batch("dqn", 300, dir.file("a"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  const auto& plan = j["batch_plan"];
  EXPECT_EQ(plan["budget_bytes"], 64ull << 20);
  EXPECT_TRUE(plan["verified"].get<bool>());
  EXPECT_EQ(j["options"]["batch_size"], plan["chosen_batch"]);
  // The [256, 256] Q-network's step at batch b needs a few KiB per sample: 64 MiB binds.
  EXPECT_EQ(plan["limited_by"], "budget");
  EXPECT_GT(plan["chosen_batch"].get<int64_t>(), 1000);
  EXPECT_LT(plan["chosen_batch"].get<int64_t>(), 100000);
  EXPECT_LE(plan["verified_peak_bytes"].get<uint64_t>(), 64ull << 20);
  // PPO's minibatch is clamped to one rollout (8 envs x 32 steps).
  auto p = train_with_auto_batch("ppo", 256, dir.file("p"));
  ASSERT_EQ(p.exit_code, 0) << p.err;
  auto jp = nlohmann::json::parse(p.out);
  EXPECT_EQ(jp["batch_plan"]["chosen_batch"], 256);
  EXPECT_EQ(jp["batch_plan"]["limited_by"], "max-batch clamp");
  EXPECT_EQ(jp["options"]["batch_size"], 256);
  // A budget below what batch 1 needs is the planner's failure (exit 1), naming the memory tag.
  auto tiny =
      run_cli("train ppo --steps 256 --batch auto --budget-mib 0.01 --out " + dir.file("b"));
  EXPECT_EQ(tiny.exit_code, 1) << tiny.err;
  EXPECT_NE(tiny.err.find("planner"), std::string::npos) << tiny.err;
}

TEST_F(TrainCliTest, CtrlCCheckpointsAndExits130) {
  TempDir dir;
  const auto out = dir.file("sig");
  const auto stdout_path = dir.file("stdout.txt");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(fd, 1);
    ::dup2(devnull, 2);
    ::execl(FOXHUNT_CLI_PATH, "foxhunt", "train", "dqn", "--steps", "100000000", "--out",
            out.c_str(), "--log-interval", "500", "--progress", "off", "--json",
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Wait for the run to be under way (first metrics line), then press Ctrl-C.
  const auto metrics = out + "/metrics.jsonl";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  int status = 0;
  bool exited = false;
  while (std::chrono::steady_clock::now() < deadline &&
         !(std::filesystem::exists(metrics) && std::filesystem::file_size(metrics) > 0)) {
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;  // it failed to start: report its status below
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!exited) {
    ::kill(pid, SIGINT);
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  }
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 130);
  auto j = nlohmann::json::parse(read_file(stdout_path));
  EXPECT_EQ(j["interrupted"], true);
  EXPECT_LT(j["steps"].get<int64_t>(), 100000000);
  EXPECT_GE(j["steps"].get<int64_t>(), 500);
  DqnTrainer resumed(dqn_trainer_options_from_json(j["options"]), env_factory("cartpole"));
  resumed.load_checkpoint(j["checkpoint"]);
  EXPECT_EQ(resumed.step(), j["steps"].get<int64_t>());
}

}  // namespace
}  // namespace foxhunt::train
