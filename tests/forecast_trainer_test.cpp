// Forecasting trainer: batch source, early stopping with best-weight restore, and learning an
// AR(1) process against the unconditional-quantile baseline and the known optimum.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <chrono>
#include <set>

#include "foxhunt/core/error.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/quantile_loss.h"
#include "foxhunt/train/forecast_trainer.h"
#include "test_util.h"
#include "train_test_util.h"

namespace foxhunt::train {
namespace {

using foxhunt::testing::QuantileMlpModel;
using foxhunt::testing::quiet_run;

class ForecastTrainerTest : public foxhunt::testing::SeededTest {};

TEST_F(ForecastTrainerTest, TensorBatchSourceShufflesPerEpochDeterministically) {
  auto x = torch::arange(10, torch::kFloat).view({10, 1});
  models::Batch train{{x}, x.squeeze(1)};
  models::Batch val{{x.slice(0, 0, 3)}, x.slice(0, 0, 3).squeeze(1)};
  TensorBatchSource src(train, val, 4, /*seed=*/3);
  EXPECT_EQ(src.train_batches(), 3);
  EXPECT_EQ(src.validation_batches(), 1);
  auto epoch_order = [&](int64_t epoch) {
    std::vector<float> order;
    for (int64_t i = 0; i < src.train_batches(); ++i) {
      auto b = src.train_batch(epoch, i);
      EXPECT_TRUE(torch::equal(b.inputs[0].squeeze(1), b.target));  // rows stay aligned
      for (int64_t k = 0; k < b.size(); ++k) order.push_back(b.target[k].item<float>());
    }
    return order;
  };
  auto e0 = epoch_order(0), e1 = epoch_order(1);
  EXPECT_EQ(e0.size(), 10u);  // 4 + 4 + 2: the last batch is smaller
  EXPECT_EQ(std::set<float>(e0.begin(), e0.end()).size(), 10u);
  EXPECT_EQ(std::set<float>(e1.begin(), e1.end()).size(), 10u);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(epoch_order(0), e0);  // revisiting an epoch gives the same batches
  TensorBatchSource again(train, val, 4, 3);
  EXPECT_TRUE(torch::equal(again.train_batch(1, 2).target, src.train_batch(1, 2).target));
  EXPECT_TRUE(torch::equal(src.validation_batch(0).target, torch::tensor({0.0f, 1.0f, 2.0f})));
  EXPECT_THROW(src.train_batch(0, 3), InputError);
  EXPECT_THROW(TensorBatchSource(train, models::Batch{{x}, x.slice(0, 0, 4)}, 4, 0), InputError);
}

// Elastic resume at the source: an epoch interrupted at world 2, re-cut at world 3, then at
// world 1, trains on every sample of the epoch exactly once and in the epoch's own order.
TEST_F(ForecastTrainerTest, ShardedSourceReCutsAnEpochAtAnotherWorldSize) {
  const int64_t n = 50;
  auto x = torch::arange(n, torch::kFloat).view({n, 1});
  const models::Batch train{{x}, x.squeeze(1)};
  const models::Batch val{{x.slice(0, 0, 4)}, x.slice(0, 0, 4).squeeze(1)};
  // Every rank's share of global batches [first, last) of `epoch`, in rank order.
  auto samples = [&](int64_t world, int64_t offset, int64_t first, int64_t last) {
    std::vector<float> out;
    for (int64_t i = first; i < last; ++i)
      for (int64_t r = 0; r < world; ++r) {
        TensorBatchSource src(train, val, 4, /*seed=*/7);
        src.set_shard(r, world);
        src.start_epoch_at(2, offset);
        auto b = src.train_batch(2, i);
        for (int64_t k = 0; k < b.size(); ++k) out.push_back(b.target[k].item<float>());
      }
    return out;
  };
  TensorBatchSource whole(train, val, 4, 7);
  std::vector<float> order;  // epoch 2 at world 1 from the start: the epoch's order
  for (int64_t i = 0; i < whole.train_batches(); ++i) {
    auto b = whole.train_batch(2, i);
    for (int64_t k = 0; k < b.size(); ++k) order.push_back(b.target[k].item<float>());
  }
  ASSERT_EQ(order.size(), static_cast<size_t>(n));
  // World 2 (global batches of 8): 3 batches done = 24 samples.
  TensorBatchSource two(train, val, 4, 7);
  two.set_shard(0, 2);
  EXPECT_EQ(two.epoch_batches(2), 7);
  const int64_t after_two = two.samples_before(2, 3);
  EXPECT_EQ(after_two, 24);
  auto seen = samples(2, 0, 0, 3);
  // World 3 (global batches of 12) from sample 24: 26 left, 3 batches; do 1 of them.
  TensorBatchSource three(train, val, 4, 7);
  three.set_shard(0, 3);
  three.start_epoch_at(2, after_two);
  EXPECT_EQ(three.epoch_start(2), 24);
  EXPECT_EQ(three.epoch_start(3), 0);  // the next epoch is whole again
  EXPECT_EQ(three.epoch_batches(2), 3);
  EXPECT_EQ(three.epoch_batches(3), 5);
  EXPECT_EQ(three.train_batches(), 5);
  const int64_t after_three = three.samples_before(2, 1);
  EXPECT_EQ(after_three, 36);
  auto more = samples(3, after_two, 0, 1);
  seen.insert(seen.end(), more.begin(), more.end());
  // World 1 (global batches of 4) from sample 36: the last 14 samples in 4 batches.
  TensorBatchSource one(train, val, 4, 7);
  one.start_epoch_at(2, after_three);
  EXPECT_EQ(one.epoch_batches(2), 4);
  more = samples(1, after_three, 0, 4);
  seen.insert(seen.end(), more.begin(), more.end());
  EXPECT_EQ(seen, order);
  EXPECT_THROW(one.train_batch(2, 4), InputError);
  EXPECT_THROW(one.start_epoch_at(2, n + 1), InputError);
  one.start_epoch_at(2, n);  // a checkpoint at the epoch's end: nothing left of it
  EXPECT_EQ(one.epoch_batches(2), 0);
}

// Elastic resume in the trainer: a checkpoint taken part-way through an epoch at world 2 resumes
// at world 1 with the rest of that epoch (not the whole epoch again, not the next one); at the
// same world size it resumes at its own batch.
TEST_F(ForecastTrainerTest, ACheckpointResumesAtAnotherWorldSizeWhereItStopped) {
  foxhunt::testing::TempDir dir;
  torch::manual_seed(3);
  const int64_t n = 61, batch = 4;
  const models::Batch train{{torch::randn({n, 8, 1})}, torch::randn({n, 1})};
  const models::Batch val{{torch::randn({16, 8, 1})}, torch::randn({16, 1})};
  const auto options = ForecastTrainerOptions().epochs(2).patience(0).validate_initial(false);
  const auto ckpt = (dir.path() / "t.ckpt").string();
  {
    QuantileMlpModel model(8, 8);
    TensorBatchSource src(train, val, batch, 1);
    src.set_shard(0, 2);  // rank 0 of 2, without peers: the position is what is checked
    ForecastTrainer trainer(model, src, options);
    RunConfig run = quiet_run();
    run.checkpoint_path = ckpt;
    run.stop_at_step = 5;
    trainer.train(run);
    ASSERT_EQ(trainer.step(), 5);
    ASSERT_EQ(trainer.epoch(), 0);
  }
  {
    QuantileMlpModel model(8, 8);
    TensorBatchSource src(train, val, batch, 1);
    ForecastTrainer trainer(model, src, options);
    trainer.load_checkpoint(ckpt);
    EXPECT_EQ(trainer.resharded_from(), 2);
    EXPECT_EQ(src.epoch_start(0), 5 * batch * 2);  // 40 samples done: 21 left
    trainer.train(quiet_run());
    // 5 steps, then 6 batches for the 21 samples left of epoch 0, then 16 for epoch 1.
    EXPECT_EQ(trainer.step(), 5 + 6 + 16);
    EXPECT_EQ(trainer.epoch(), 2);
  }
  {
    QuantileMlpModel model(8, 8);
    TensorBatchSource src(train, val, batch, 1);
    src.set_shard(0, 2);
    ForecastTrainer trainer(model, src, options);
    trainer.load_checkpoint(ckpt);
    EXPECT_EQ(trainer.resharded_from(), 0);
    EXPECT_EQ(src.epoch_start(0), 0);
    trainer.train(quiet_run());
    EXPECT_EQ(trainer.step(), 2 * 8);  // 8 global batches of 8 an epoch, as if never stopped
  }
  {
    QuantileMlpModel model(8, 8);
    TensorBatchSource other(train, val, batch + 1, 1);  // another per-rank batch: refused
    ForecastTrainer trainer(model, other, options);
    EXPECT_THROW(trainer.load_checkpoint(ckpt), InputError);
  }
}

TEST_F(ForecastTrainerTest, DivergingLossIsACheckFailureNotAnInputError) {
  // Valid input, absurd learning rate: the loss overflows within a few steps. That is a failed
  // run-time check (exit 1), not bad usage (exit 2).
  const auto x = torch::randn({64, 8, 1});
  const models::Batch data{{x}, x.sum(1)};
  QuantileMlpModel model(8, 64);
  TensorBatchSource src(data, data, 16, 1);
  const auto absurd = ForecastTrainerOptions().epochs(50).learning_rate(1e30).max_grad_norm(0);
  try {
    ForecastTrainer(model, src, absurd).train(quiet_run());
    FAIL() << "expected a CheckFailure";
  } catch (const CheckFailure& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite training loss"), std::string::npos);
    EXPECT_EQ(exit_code_for(e), kExitCheckFailed);
  }
}

TEST_F(ForecastTrainerTest, InitialWeightsAreTheBestEpochUntilAnEpochBeatsThem) {
  torch::manual_seed(6);
  models::Batch train{{torch::randn({48, 8, 1})}, torch::randn({48, 1})};
  models::Batch val{{torch::randn({64, 8, 1})}, torch::randn({64, 1})};
  TensorBatchSource src(train, val, 16, 1);
  RunConfig run;
  run.progress = ProgressMode::kOff;
  run.log_interval = 0;
  // Steps of 10 per weight make every epoch far worse than the start: the run must end on the
  // initial weights (best_epoch -1), byte for byte.
  QuantileMlpModel model(8, 64);
  const std::string before = models::module_to_bytes(model.module());
  ForecastTrainer wild(model, src,
                       ForecastTrainerOptions().epochs(3).patience(2).learning_rate(10));
  const double initial = wild.validation_loss();
  std::vector<std::string> events;
  run.on_log = [&](const nlohmann::json& j) { events.push_back(j.value("event", "")); };
  wild.train(run);
  EXPECT_EQ(wild.initial_validation_loss(), initial);
  EXPECT_EQ(wild.best_epoch(), -1);
  EXPECT_EQ(wild.best_validation_loss(), initial);
  for (double v : wild.validation_history()) EXPECT_GT(v, initial);
  EXPECT_EQ(models::module_to_bytes(model.module()), before);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front(), "initial");
  // A sane learning rate beats the initial weights: the best epoch is a real one.
  QuantileMlpModel model2(8, 64);
  ForecastTrainer sane(model2, src, ForecastTrainerOptions().epochs(5).learning_rate(1e-2));
  sane.train(run);
  EXPECT_GE(sane.best_epoch(), 0);
  const auto& hist = sane.validation_history();
  EXPECT_LT(sane.best_validation_loss(), sane.initial_validation_loss());
  EXPECT_EQ(sane.best_validation_loss(), *std::min_element(hist.begin(), hist.end()));
  // Off: no initial check, NaN reported.
  QuantileMlpModel model3(8, 64);
  ForecastTrainer off(model3, src, ForecastTrainerOptions().epochs(1).validate_initial(false));
  off.train(run);
  EXPECT_TRUE(std::isnan(off.initial_validation_loss()));
  EXPECT_EQ(off.best_epoch(), 0);
}

TEST_F(ForecastTrainerTest, EarlyStoppingRestoresBestWeights) {
  // Pure noise with few samples and a wide net: validation loss bottoms out, then overfitting
  // makes it rise, so patience runs out well before the epoch limit.
  torch::manual_seed(5);
  models::Batch train{{torch::randn({48, 8, 1})}, torch::randn({48, 1})};
  models::Batch val{{torch::randn({64, 8, 1})}, torch::randn({64, 1})};
  QuantileMlpModel model(8, 256);
  TensorBatchSource src(train, val, 16, 1);
  // Epochs only: the initial weights as a candidate have their own test below.
  ForecastTrainer trainer(
      model, src,
      ForecastTrainerOptions().epochs(200).patience(3).learning_rate(1e-2).validate_initial(false));
  std::vector<nlohmann::json> epochs;
  RunConfig run;
  run.progress = ProgressMode::kOff;
  run.log_interval = 0;
  run.on_log = [&](const nlohmann::json& j) {
    if (j.value("event", "") == "epoch") epochs.push_back(j);
  };
  auto r = trainer.train(run);
  EXPECT_TRUE(r.completed);
  ASSERT_TRUE(trainer.stopped_early());
  const auto& hist = trainer.validation_history();
  EXPECT_LT(hist.size(), 200u);
  EXPECT_EQ(static_cast<int64_t>(hist.size()), trainer.best_epoch() + 1 + 3);
  EXPECT_EQ(epochs.size(), hist.size());
  const double best = *std::min_element(hist.begin(), hist.end());
  EXPECT_EQ(trainer.best_validation_loss(), best);
  EXPECT_GT(hist.back(), best);
  // The weights of the best epoch are back: re-validating reproduces the best loss exactly.
  EXPECT_DOUBLE_EQ(trainer.validation_loss(), best);
  // patience 0 disables early stopping.
  QuantileMlpModel model2(8, 256);
  ForecastTrainer no_stop(model2, src,
                          ForecastTrainerOptions().epochs(12).patience(0).learning_rate(1e-2));
  no_stop.train(run);
  EXPECT_FALSE(no_stop.stopped_early());
  EXPECT_EQ(no_stop.validation_history().size(), 12u);
}

/// Baseline, optimum and trained losses of one model on the AR(1) task.
struct Ar1Outcome {
  double baseline = 0, optimum = 0, model = 0, seconds = 0;
  int64_t epochs = 0;
};

// AR(1) with phi = 0.8 and unit innovations, one-step horizon, quantiles {0.1, 0.5, 0.9}.
// Baseline: the unconditional quantiles sigma_u z_q (sigma_u = 1/sqrt(1 - phi^2)).
// Optimum: the conditional quantiles phi x_t + z_q. Both evaluated on the validation windows,
// with the same pinball loss the models train on.
Ar1Outcome run_ar1(models::Model& model, int64_t window, ForecastTrainerOptions options,
                   int64_t batch) {
  // Small networks: a second intra-op thread only adds synchronisation (and on a busy machine
  // makes these runs several times slower).
  foxhunt::testing::OneThread one;
  const double phi = 0.8;
  const std::vector<double> q = {0.1, 0.5, 0.9};
  const double z[3] = {-1.2815515655446004, 0.0, 1.2815515655446004};
  const auto x = foxhunt::testing::ar1_series(5000, phi, 77);
  auto [win_train, y_train] = foxhunt::testing::windows(x, 0, 4000, window);
  auto [win_val, y_val] = foxhunt::testing::windows(x, 4000, 5000, window);
  Ar1Outcome out;
  const int64_t n = y_val.size(0);
  const double sigma_u = 1.0 / std::sqrt(1.0 - phi * phi);
  auto base_pred = torch::empty({n, 1, 3});
  auto opt_pred = torch::empty({n, 1, 3});
  auto last = win_val.select(1, window - 1);
  for (int k = 0; k < 3; ++k) {
    base_pred.select(2, k).fill_(sigma_u * z[k]);
    opt_pred.select(2, k).copy_((phi * last + z[k]).unsqueeze(1));
  }
  out.baseline = models::quantile_loss(base_pred, y_val, q).item<double>();
  out.optimum = models::quantile_loss(opt_pred, y_val, q).item<double>();

  TensorBatchSource src(foxhunt::testing::univariate_batch(model, win_train, y_train),
                        foxhunt::testing::univariate_batch(model, win_val, y_val), batch, 11);
  const auto t0 = std::chrono::steady_clock::now();
  ForecastTrainer trainer(model, src, options);
  RunConfig run;
  run.progress = ProgressMode::kOff;
  run.log_interval = 0;
  auto r = trainer.train(run);
  EXPECT_TRUE(r.completed);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out.model = trainer.validation_loss();
  out.epochs = trainer.epoch();
  return out;
}

void expect_ar1_learned(const std::string& label, const Ar1Outcome& o) {
  std::printf(
      "[%s ar1] baseline %.4f  optimum %.4f (%.1f%% below)  model %.4f (%.1f%% below) "
      "after %lld epochs in %.1f s\n",
      label.c_str(), o.baseline, o.optimum, 100 * (1 - o.optimum / o.baseline), o.model,
      100 * (1 - o.model / o.baseline), static_cast<long long>(o.epochs), o.seconds);
  // The known process: the optimum is ~40% below the unconditional baseline.
  EXPECT_NEAR(o.optimum / o.baseline, 0.6, 0.05);
  EXPECT_LE(o.model, 0.8 * o.baseline) << label << " is not 20% below the baseline";
  EXPECT_GE(o.model, 0.95 * o.optimum) << label << " beats the optimum: leakage?";
}

TEST_F(ForecastTrainerTest, MlpLearnsAr1BeyondBaseline) {
  QuantileMlpModel model(16, 32);
  auto o = run_ar1(model, 16, ForecastTrainerOptions().epochs(30).patience(5), 64);
  expect_ar1_learned("test_quantile_mlp", o);
}

// The registry forecasters on the same task: a univariate window (feature 0 of the past input),
// one-step horizon; sizes reduced from the product defaults to keep the test short.
Ar1Outcome run_registry_ar1(const std::string& name, nlohmann::json options, int64_t window,
                            ForecastTrainerOptions trainer) {
  torch::manual_seed(2024);
  auto model = models::make_model(name, options);
  EXPECT_EQ(model->name(), name);
  return run_ar1(*model, window, trainer, 64);
}

TEST_F(ForecastTrainerTest, Mamba2LearnsAr1BeyondBaseline_SLOW) {
  auto o = run_registry_ar1("mamba2",
                            {{"input_dim", 1}, {"window", 16}, {"horizon", 1}, {"d_model", 32}}, 16,
                            ForecastTrainerOptions().epochs(12).patience(3).learning_rate(2e-3));
  expect_ar1_learned("mamba2", o);
}

TEST_F(ForecastTrainerTest, TftLearnsAr1BeyondBaseline_SLOW) {
  // The known-future input is a zero column and the static id is 0: only the past matters.
  auto o =
      run_registry_ar1("tft",
                       {{"past_features", 1},
                        {"future_features", 1},
                        {"static_categories", 1},
                        {"window", 16},
                        {"horizon", 1},
                        {"hidden", 16},
                        {"heads", 2},
                        {"lstm_layers", 1}},
                       16, ForecastTrainerOptions().epochs(12).patience(3).learning_rate(2e-3));
  expect_ar1_learned("tft", o);
}

}  // namespace
}  // namespace foxhunt::train
