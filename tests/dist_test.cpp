// Data-parallel training on c10d (Gloo over loopback): the communicator, bucketed gradient
// averaging, equivalence with one process at the combined batch, weight checksums, failures
// that end a run instead of hanging, and `foxhunt train --nproc`.
//
// The in-process tests run each rank on its own thread with its own ProcessGroupGloo (as
// PyTorch's own c10d tests do); the CLI tests run real processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <algorithm>
#include <chrono>

#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "foxhunt/core/container.h"
#include "foxhunt/dist/communicator.h"
#include "foxhunt/dist/gradient_sync.h"
#include "foxhunt/dist/launcher.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/planner.h"
#include "foxhunt/train/data_parallel.h"
#include "foxhunt/train/forecast_trainer.h"
#include "test_util.h"
#include "train_test_util.h"

namespace foxhunt {
namespace {

using dist::Communicator;
using dist::DistOptions;

DistOptions local_options(int64_t world, int64_t rank, int port, double timeout_s = 30) {
  return DistOptions()
      .world_size(world)
      .rank(rank)
      .master("127.0.0.1:" + std::to_string(port))
      .timeout_s(timeout_s);
}

// Runs body(comm) on `world` threads, one rank each, connected with local_options (then
// `customize`); rethrows the first rank's exception.
void run_ranks_shared(int64_t world,
                      const std::function<void(const std::shared_ptr<Communicator>&)>& body,
                      double timeout_s = 30,
                      const std::function<DistOptions(DistOptions)>& customize = {}) {
  const int port = dist::free_local_port();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int64_t r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto o = local_options(world, r, port, timeout_s);
        body(Communicator::connect(customize ? customize(o) : o, torch::kCPU));
      } catch (...) {
        errors[static_cast<size_t>(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void run_ranks(int64_t world, const std::function<void(Communicator&)>& body,
               double timeout_s = 30) {
  run_ranks_shared(
      world, [&](const std::shared_ptr<Communicator>& c) { body(*c); }, timeout_s);
}

TEST(DistOptionsTest, BadValuesAreInputErrorsNamingTheOption) {
  EXPECT_NO_THROW(dist::validate(DistOptions()));
  foxhunt::testing::expect_input_error([] { dist::validate(DistOptions().world_size(2).rank(2)); },
                                       "dist", {"rank: ", "[0, 2)", "got 2"});
  foxhunt::testing::expect_input_error([] { dist::validate(DistOptions().master("localhost")); },
                                       "dist", {"master: ", "HOST:PORT", "localhost"});
  foxhunt::testing::expect_input_error([] { dist::validate(DistOptions().master("h:70000")); },
                                       "dist", {"[1, 65535]", "h:70000"});
  // A host that does not resolve is refused at validation, before any socket (".invalid" never
  // resolves: RFC 2606).
  foxhunt::testing::expect_input_error(
      [] { dist::validate(DistOptions().world_size(2).master("nowhere.invalid:29500")); }, "dist",
      {"master: ", "'nowhere.invalid:29500'", "does not resolve"});
  EXPECT_NO_THROW(dist::validate(DistOptions().master("localhost:29500")));
  EXPECT_NO_THROW(dist::validate(DistOptions().master("[::1]:29500")));
  foxhunt::testing::expect_input_error([] { dist::validate(DistOptions().backend("mpi")); }, "dist",
                                       {"auto, gloo or nccl", "mpi"});
  foxhunt::testing::expect_input_error([] { dist::validate(DistOptions().timeout_s(0)); }, "dist",
                                       {"timeout_s: "});
  const auto hp = dist::parse_host_port("[::1]:29500", "master");
  EXPECT_EQ(hp.first, "::1");
  EXPECT_EQ(hp.second, 29500);
  EXPECT_EQ(dist::resolve_backend("auto", torch::kCPU), "gloo");
  EXPECT_EQ(dist::resolve_backend("auto", torch::Device(torch::kCUDA, 0)), "nccl");
}

TEST(CommunicatorTest, CollectivesOverGlooOnTwoRanks) {
  run_ranks(2, [](Communicator& c) {
    EXPECT_EQ(c.backend(), "gloo");
    auto t = torch::full({5}, static_cast<float>(c.rank() + 1));
    c.allreduce_sum_(t);
    EXPECT_TRUE(torch::equal(t, torch::full({5}, 3.0f)));
    // broadcast: rank 1 receives rank 0's values
    std::vector<torch::Tensor> b{torch::full({3}, static_cast<float>(10 * c.rank() + 7))};
    c.broadcast_(b, 0);
    EXPECT_TRUE(torch::equal(b[0], torch::full({3}, 7.0f)));
    EXPECT_EQ(c.allgather(int64_t{100} + c.rank()), (std::vector<int64_t>{100, 101}));
    const auto rows = c.allgather(std::vector<double>{0.5 * c.rank(), -1.0});
    ASSERT_EQ(rows.size(), 2u);
    EXPECT_EQ(rows[1], (std::vector<double>{0.5, -1.0}));
    c.barrier();
    EXPECT_GE(c.collectives(), 5);
  });
}

TEST(CommunicatorTest, ARankThatNobodyJoinsFailsWithinTheTimeout) {
  // Rank 1 of 2 with no rank 0: the rendezvous gives up after --timeout, with a clear error.
  const int port = dist::free_local_port();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    Communicator::connect(local_options(2, 1, port, 2.0), torch::kCPU);
    FAIL() << "expected a CommunicationError";
  } catch (const dist::CommunicationError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("rank 1 of 2"), std::string::npos) << what;
    EXPECT_NE(what.find("rendezvous"), std::string::npos) << what;
    EXPECT_EQ(exit_code_for(e), kExitCheckFailed);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 30.0);
  // Rank 0 waiting for a rank that never comes fails the same way.
  EXPECT_THROW(
      Communicator::connect(local_options(2, 0, dist::free_local_port(), 1.0), torch::kCPU),
      dist::CommunicationError);
}

TEST(GradientSyncTest, BucketsFollowReverseOrderAndTheSizeLimit) {
  std::vector<torch::Tensor> p = {torch::zeros({100}).requires_grad_(),   // 400 B
                                  torch::zeros({10}),                     // no grad: left out
                                  torch::zeros({50}).requires_grad_(),    // 200 B
                                  torch::zeros({300}).requires_grad_()};  // 1200 B
  const auto b = dist::plan_buckets(p, 600);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0], (std::vector<size_t>{3}));     // larger than a bucket: alone
  EXPECT_EQ(b[1], (std::vector<size_t>{2, 0}));  // 200 + 400 = 600 fits
  // The buckets are ledger-visible under their own scope, exactly one copy of the gradients.
  const auto before = memory::scope_stats(dist::kBucketScope).live_bytes;
  {
    dist::GradientSync sync(p, nullptr, 600);
    EXPECT_EQ(sync.bucket_count(), 2u);
    EXPECT_EQ(sync.bucket_bytes_total(), 1804);  // + the weight element in the last bucket
    EXPECT_EQ(sync.resident_bytes(), 1804);
    EXPECT_EQ(memory::scope_stats(dist::kBucketScope).live_bytes - before, 1804u);
  }
  EXPECT_EQ(memory::scope_stats(dist::kBucketScope).live_bytes, before);
}

TEST(GradientSyncTest, WeightedAverageEqualsTheGradientOfTheUnionBatch) {
  // Rank r holds n_r samples of a linear model's data; after the sync every rank's gradient must
  // be the gradient of the mean loss over all 3 + 5 samples, computed by one process.
  torch::manual_seed(3);
  const auto x = torch::randn({8, 4});
  const auto y = torch::randn({8, 1});
  const auto w0 = torch::randn({1, 4});
  auto w_ref = w0.clone().requires_grad_();
  torch::mse_loss(torch::mm(x, w_ref.t()), y).backward();
  const auto expected = w_ref.grad().clone();
  run_ranks(2, [&](Communicator& c) {
    auto w = w0.clone().requires_grad_();
    const int64_t lo = c.rank() == 0 ? 0 : 3, hi = c.rank() == 0 ? 3 : 8;
    dist::GradientSync sync({w}, std::shared_ptr<Communicator>(&c, [](Communicator*) {}), 1 << 20);
    sync.begin(static_cast<double>(hi - lo));
    torch::mse_loss(torch::mm(x.slice(0, lo, hi), w.t()), y.slice(0, lo, hi)).backward();
    sync.finish();
    EXPECT_TRUE(torch::allclose(w.grad(), expected, 1e-5, 1e-6)) << w.grad() << expected;
    EXPECT_EQ(sync.launched_during_backward(), 1);  // the bucket left from the hook
    // A rank with no samples skips backward and contributes nothing.
    w.mutable_grad() = torch::Tensor();
    sync.begin(c.rank() == 0 ? 0.0 : 8.0);
    if (c.rank() == 1) torch::mse_loss(torch::mm(x, w.t()), y).backward();
    sync.finish();
    EXPECT_TRUE(torch::allclose(w.grad(), expected, 1e-5, 1e-6));
  });
}

TEST(GradientSyncTest, ThePlannerPlansPerRankWithTheBucketsResident) {
  // --batch auto under data parallelism: the plan is per rank, and a rank's fixed bytes include
  // its all-reduce buckets, so the verified step ran with them allocated under the cap.
  plan::PlanOptions o;
  o.model = "dqn";
  o.budget = memory::Budget::of_bytes(4 * 1024 * 1024);
  o.max_batch = 4096;
  o.train.trainer_options = {{"buffer_size", 1000}};  // a 2 MB replay buffer in the 4 MiB
  const auto alone = plan::plan_batch(o);
  o.train.world_size = 2;
  const auto rank = plan::plan_batch(o);
  EXPECT_EQ(alone.fixed.comm_bucket_bytes, 0u);
  EXPECT_EQ(rank.fixed.comm_bucket_bytes, rank.fixed.trainable_parameter_bytes + 4);
  EXPECT_EQ(rank.fixed.fixed_bytes, alone.fixed.fixed_bytes + rank.fixed.comm_bucket_bytes);
  EXPECT_TRUE(rank.verified);
  EXPECT_LE(rank.chosen_batch, alone.chosen_batch);
  EXPECT_LE(rank.verified_peak_bytes, o.budget.bytes);
}

// Trains QuantileMlpModel on `train` for `epochs` at per-rank `batch` over `world` ranks (world 1:
// no communicator) and returns rank 0's final parameters and the ranks' checksum comparison.
struct ParallelRun {
  std::vector<torch::Tensor> params;
  nlohmann::json distributed;
};

ParallelRun train_mlp(int64_t world, int64_t batch, int64_t epochs, const models::Batch& train,
                      const models::Batch& val) {
  testing::OneThread one;
  ParallelRun out;
  std::vector<std::unique_ptr<testing::QuantileMlpModel>> models;
  for (int64_t r = 0; r < world; ++r) {
    torch::manual_seed(11);  // identical initial weights (rank 0's are broadcast anyway)
    models.push_back(std::make_unique<testing::QuantileMlpModel>(8, 16));
  }
  const auto options = train::ForecastTrainerOptions().epochs(epochs).patience(0).seed(5);
  auto body = [&](int64_t r, std::shared_ptr<Communicator> comm) {
    train::TensorBatchSource src(train, val, batch, 9);
    src.set_shard(r, world);
    train::ForecastTrainer trainer(*models[static_cast<size_t>(r)], src, options);
    if (comm) trainer.set_data_parallel(comm);
    train::RunConfig run;
    run.progress = train::ProgressMode::kOff;
    run.log_interval = 0;
    auto result = trainer.train(run);
    if (r == 0) {
      for (auto& p : models[0]->module().parameters()) out.params.push_back(p.detach().clone());
      if (comm) out.distributed = result.metrics["distributed"];
    }
  };
  if (world == 1) {
    body(0, nullptr);
    return out;
  }
  run_ranks_shared(
      world, [&](const std::shared_ptr<Communicator>& comm) { body(comm->rank(), comm); }, 30,
      [](DistOptions o) { return o.check_interval(3); });
  return out;
}

TEST(DataParallelTest, TwoRanksAtBatchBEqualOneProcessAtBatch2B) {
  torch::manual_seed(2);
  // 49 windows at a global batch of 16: the last global batch has 1 sample, so rank 0's share is
  // empty there and it must step with zero weight.
  const models::Batch train{{torch::randn({49, 8, 1})}, torch::randn({49, 1})};
  const models::Batch val{{torch::randn({16, 8, 1})}, torch::randn({16, 1})};
  const auto single = train_mlp(1, 16, 3, train, val);
  const auto parallel = train_mlp(2, 8, 3, train, val);
  ASSERT_EQ(single.params.size(), parallel.params.size());
  double max_diff = 0, max_moved = 0;
  for (size_t i = 0; i < single.params.size(); ++i)
    max_diff =
        std::max(max_diff, (single.params[i] - parallel.params[i]).abs().max().item<double>());
  // The runs moved far from each other's tolerance: the comparison is not vacuous.
  torch::manual_seed(11);
  testing::QuantileMlpModel init(8, 16);
  auto p0 = init.module().parameters();
  for (size_t i = 0; i < p0.size(); ++i)
    max_moved = std::max(max_moved, (single.params[i] - p0[i]).abs().max().item<double>());
  EXPECT_LT(max_diff, 1e-5) << "2 ranks at batch 8 differ from 1 process at batch 16";
  EXPECT_GT(max_moved, 1e-3);
  const auto& d = parallel.distributed;
  EXPECT_EQ(d["world_size"], 2);
  EXPECT_EQ(d["steps_synchronized"], 12);           // 4 global batches x 3 epochs
  EXPECT_GE(d["weight_checks"].get<int64_t>(), 4);  // every 3 steps and at the end
  EXPECT_TRUE(d["last_weight_check"]["identical"].get<bool>());
  EXPECT_EQ(d["last_weight_check"]["ranks"][0], d["last_weight_check"]["ranks"][1]);
}

TEST(DataParallelTest, DifferentWeightsOnTwoRanksAreACheckFailure) {
  std::atomic<int> failures{0};
  torch::manual_seed(1);
  const auto w0 = torch::randn({4, 4});  // here: LibTorch's generator is shared by the threads
  run_ranks(2, [&](Communicator& c) {
    auto w = w0.clone();
    auto same = dist::compare_weights(c, {w}, 7);
    EXPECT_TRUE(same.identical);
    EXPECT_EQ(same.step, 7);
    if (c.rank() == 1) w[0][0] += 1e-6f;  // one ulp-scale difference is enough
    try {
      dist::compare_weights(c, {w}, 8);
    } catch (const CheckFailure& e) {
      EXPECT_NE(std::string(e.what()).find("rank(s) 1 differ from rank 0"), std::string::npos)
          << e.what();
      ++failures;
    }
  });
  EXPECT_EQ(failures.load(), 2);  // every rank stops, not only the one that differs
}

TEST(DataParallelTest, BroadcastGivesEveryRankRank0sInitialWeights) {
  // Different local initialisation on purpose (built here: LibTorch's generator is global).
  std::vector<std::unique_ptr<testing::QuantileMlpModel>> local;
  for (int r = 0; r < 2; ++r) {
    torch::manual_seed(100 + r);
    local.push_back(std::make_unique<testing::QuantileMlpModel>(8, 4));
  }
  torch::manual_seed(100);
  testing::QuantileMlpModel rank0(8, 4);
  ASSERT_FALSE(torch::equal(local[1]->module().parameters()[0], rank0.module().parameters()[0]));
  run_ranks(2, [&](Communicator& c) {
    auto& m = *local[static_cast<size_t>(c.rank())];
    train::DataParallel dp(std::shared_ptr<Communicator>(&c, [](Communicator*) {}), {&m.module()},
                           m.module().parameters());
    const auto a = m.module().parameters(), b = rank0.module().parameters();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i]));
    dp.check_now(0);
    EXPECT_FALSE(dp.agree_stop(false));
    EXPECT_TRUE(dp.agree_stop(c.rank() == 1));  // one rank's Ctrl-C stops both
  });
}

// ---- CLI: real processes ----------------------------------------------------------------------

// Weights of the module in a trainer checkpoint.
std::vector<torch::Tensor> checkpoint_weights(const std::string& path) {
  const auto c = read_container(path);
  auto model = models::make_model(c.header.at("model").get<std::string>(), c.header.at("options"));
  models::module_from_bytes(model->module(), c.blobs.at("module"), path);
  std::vector<torch::Tensor> out;
  for (auto& p : model->module().parameters()) out.push_back(p.detach().clone());
  return out;
}

// The weights a run seeded with `seed` starts from, built as jobs/train_forecast.cpp builds them
// (torch::manual_seed, then the model from the options in `checkpoint`'s header), with the
// quantile head's weight and bias left undefined: training sets those from the targets before
// its first step (init_quantile_head).
std::vector<torch::Tensor> seeded_initial_weights(const std::string& checkpoint, uint64_t seed) {
  const auto c = read_container(checkpoint);
  torch::manual_seed(seed);
  auto model = models::make_model(c.header.at("model").get<std::string>(), c.header.at("options"));
  const auto head = model->quantile_head();
  std::vector<torch::Tensor> out;
  for (auto& p : model->module().parameters()) {
    const bool in_head = !head.is_empty() && (p.is_same(head->weight) || p.is_same(head->bias));
    out.push_back(in_head ? torch::Tensor() : p.detach().clone());
  }
  return out;
}

TEST(DistCliTest, TwoLocalRanksMatchOneProcessAtTheDoubledBatchAndResume) {
  testing::TempDir dir;
  const auto one = dir.path() / "one";
  const auto two = dir.path() / "two";
  // A short series (27 steps an epoch at a global batch of 32): Adam amplifies float rounding
  // differences (2 partial sums instead of 1) over hundreds of steps, not over tens.
  const auto csv = (dir.path() / "bars.csv").string();
  ASSERT_EQ(testing::run_cli("data generate --bars 1500 --out " + csv).exit_code, 0);
  // restore_best off: the checkpoints hold the weights of the last step, never the initial ones
  // (an epoch that scores worse than the start would otherwise restore them, and the two runs
  // would agree without having trained).
  const std::string common =
      "train mamba2 --epochs 1 --progress off --json --seed 3 "
      "--options '{\"restore_best\":false}' --data " +
      csv + " ";
  auto s1 = testing::run_cli_json(common + "--batch 32 --out " + one.string(), 0);
  auto s2 = testing::run_cli_json(common + "--batch 16 --nproc 2 --out " + two.string(), 0);
  EXPECT_EQ(s1["world_size"], 1);
  EXPECT_EQ(s2["world_size"], 2);
  EXPECT_EQ(s1["steps"], s2["steps"]);  // the same global batches
  ASSERT_TRUE(s2["weight_checksum"].is_object()) << s2.dump(2);
  EXPECT_TRUE(s2["weight_checksum"]["identical"].get<bool>());
  EXPECT_EQ(s2["distributed"]["backend"], "gloo");
  EXPECT_GT(s2["distributed"]["allreduced_bytes"].get<int64_t>(), 0);
  // Rank 0 alone wrote the outputs, and its checkpoint loads.
  EXPECT_TRUE(std::filesystem::exists(two / "checkpoint.ckpt"));
  EXPECT_TRUE(std::filesystem::exists(two / "bundle.fhb"));
  const auto w1 = checkpoint_weights((one / "checkpoint.ckpt").string());
  const auto w2 = checkpoint_weights((two / "checkpoint.ckpt").string());
  ASSERT_EQ(w1.size(), w2.size());
  double max_diff = 0, scale = 0;
  for (size_t i = 0; i < w1.size(); ++i) {
    max_diff = std::max(max_diff, (w1[i] - w2[i]).abs().max().item<double>());
    scale = std::max(scale, w1[i].abs().max().item<double>());
  }
  EXPECT_LT(max_diff, 1e-4 * std::max(1.0, scale)) << "max |w1 - w2| " << max_diff;
  // ... and training moved the weights much further than that from the seeded initial weights
  // (the check is not vacuous), by no more than Adam's steps allow (at most ~3 lr per step at
  // beta1 0.9, beta2 0.999): a bound that also shows the initial weights were rebuilt exactly
  // (a different initialisation differs by the weights' own scale, ~0.1).
  const auto w0 = seeded_initial_weights((one / "checkpoint.ckpt").string(), 3);
  ASSERT_EQ(w0.size(), w1.size());
  double moved = 0;
  int compared = 0;
  for (size_t i = 0; i < w0.size(); ++i) {
    if (!w0[i].defined()) continue;
    ++compared;
    moved = std::max(moved, (w1[i] - w0[i]).abs().max().item<double>());
  }
  EXPECT_GE(compared, static_cast<int>(w0.size()) - 2);  // only the head's two left out
  EXPECT_GT(moved, 10 * 1e-4 * std::max(1.0, scale)) << "max |w1 - w0| " << moved;
  const double steps = s1["steps"].get<double>();
  EXPECT_LT(moved, 3.5 * 1e-3 * steps) << "max |w1 - w0| " << moved;  // lr 1e-3 (the default)
  // Elastic resume: the 2-rank checkpoint continues in one process at the same per-rank batch
  // (16), so its next epoch takes twice the steps of a 2-rank one (53 or 54 for 27).
  const auto ckpt = (two / "checkpoint.ckpt").string();
  auto alone =
      testing::run_cli_json("train mamba2 --epochs 2 --progress off --json --data " + csv +
                                " --resume " + ckpt + " --out " + (dir.path() / "alone").string(),
                            0);
  EXPECT_EQ(alone["world_size"], 1);
  EXPECT_EQ(alone["resumed_world_size"], 2);
  EXPECT_EQ(alone["episodes"], 2);
  const int64_t more = alone["steps"].get<int64_t>() - s2["steps"].get<int64_t>();
  EXPECT_GE(more, 2 * s2["steps"].get<int64_t>() - 1);
  EXPECT_LE(more, 2 * s2["steps"].get<int64_t>());
  auto resumed = testing::run_cli_json(
      "train mamba2 --epochs 2 --progress off --json --nproc 2 --data " + csv + " --resume " + ckpt,
      0);
  EXPECT_EQ(resumed["episodes"], 2);
  EXPECT_EQ(resumed["steps"].get<int64_t>(), 2 * s2["steps"].get<int64_t>());
  EXPECT_TRUE(resumed["weight_checksum"]["identical"].get<bool>());
  EXPECT_TRUE(resumed["resumed_world_size"].is_null());  // the same world size
}

TEST(DistCliTest, RlRanksRunTheirOwnEnvironmentsAndStayIdentical) {
  testing::TempDir dir;
  // DQN with --batch auto under a 6 MiB budget: the planner plans the per-rank batch with the
  // all-reduce buckets resident, so a rank gets a smaller batch than a process alone. (The
  // replay buffer counts against the budget: 20k CartPole transitions are 0.96 MB.)
  const std::string dqn =
      "train dqn --steps 1500 --progress off --json --eval-episodes 2 --batch auto --budget-mib 6 "
      "--check-interval 50 --options '{\"learning_starts\":200,\"buffer_size\":20000}' --out ";
  auto alone = testing::run_cli_json(dqn + (dir.path() / "dqn1").string(), 0);
  auto s = testing::run_cli_json(dqn + (dir.path() / "dqn").string() + " --nproc 2", 0);
  EXPECT_LT(s["batch_plan"]["chosen_batch"].get<int64_t>(),
            alone["batch_plan"]["chosen_batch"].get<int64_t>());
  EXPECT_EQ(alone["batch_plan"]["comm_bucket_bytes"], 0);
  EXPECT_EQ(s["world_size"], 2);
  const auto& d = s["distributed"];
  EXPECT_GT(d["steps_synchronized"].get<int64_t>(), 100);
  EXPECT_GE(d["weight_checks"].get<int64_t>(), 2);
  EXPECT_TRUE(d["last_weight_check"]["identical"].get<bool>());
  ASSERT_TRUE(s.contains("batch_plan")) << s.dump(2);
  EXPECT_EQ(s["batch_plan"]["world_size"], 2);
  EXPECT_GT(s["batch_plan"]["comm_bucket_bytes"].get<int64_t>(), 0);
  EXPECT_TRUE(s["batch_plan"]["verified"].get<bool>());
  // Elastic resume: the 2-rank checkpoint continues in one process (rank 0's streams and
  // replay buffer, the shared weights) to the new step limit.
  auto more = testing::run_cli_json(
      "train dqn --steps 1800 --progress off --json --eval-episodes 1 --resume " +
          (dir.path() / "dqn" / "checkpoint.ckpt").string() + " --out " +
          (dir.path() / "dqn-alone").string(),
      0);
  EXPECT_EQ(more["world_size"], 1);
  EXPECT_EQ(more["resumed_world_size"], 2);
  EXPECT_EQ(more["steps"], 1800);
  EXPECT_EQ(more["options"]["batch_size"], s["options"]["batch_size"]);  // the rank's batch
  // PPO: every minibatch update is averaged (320 here: 2 rollouts of 160 minibatch updates).
  auto p = testing::run_cli_json(
      "train ppo --steps 4096 --progress off --json --eval-episodes 1 "
      "--nproc 2 --check-interval 5 --out " +
          (dir.path() / "ppo").string(),
      0);
  EXPECT_EQ(p["world_size"], 2);
  EXPECT_EQ(p["distributed"]["steps_synchronized"], 320);
  EXPECT_EQ(p["distributed"]["weight_checks"], 64);
  EXPECT_TRUE(p["weight_checksum"]["identical"].get<bool>());
}

// Starts rank 1 of a 2-rank mamba2 run (the binary itself, so that a signal reaches it), runs
// rank 0 in the foreground, and sends `sig` to rank 1 once rank 0 has logged a training step.
// Returns rank 0's result and its wall time.
std::pair<testing::CliResult, double> run_and_signal_rank1(int sig, double timeout_s) {
  testing::TempDir dir;
  const std::string master = "127.0.0.1:" + std::to_string(dist::free_local_port());
  const std::string args = "train mamba2 --epochs 200 --progress off --log-interval 1 --timeout " +
                           std::to_string(timeout_s) + " --world-size 2 --master " + master;
  const auto metrics = dir.path() / "metrics.jsonl";
  std::vector<std::string> words;
  {
    std::istringstream in(args + " --rank 1");
    for (std::string w; in >> w;) words.push_back(w);
  }
  const pid_t rank1 = ::fork();
  if (rank1 == 0) {
    std::vector<char*> argv{const_cast<char*>(FOXHUNT_CLI_PATH)};
    for (auto& w : words) argv.push_back(w.data());
    argv.push_back(nullptr);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execv(FOXHUNT_CLI_PATH, argv.data());
    ::_exit(127);
  }
  std::thread signaller([&] {
    for (int i = 0; i < 1200; ++i) {
      std::ifstream f(metrics);
      std::string line;
      if (f && std::getline(f, line) && !line.empty()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(rank1, sig);
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto r = testing::run_cli(args + " --rank 0 --out " + dir.path().string());
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  signaller.join();
  ::kill(rank1, SIGKILL);
  int status = 0;
  ::waitpid(rank1, &status, 0);
  return {r, s};
}

TEST(DistCliTest, AKilledRankEndsTheRunWithAClearErrorNotAHang) {
  const auto [r, s] = run_and_signal_rank1(SIGKILL, 20);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("[dist] rank 0 of 2: all-reduce failed"), std::string::npos) << r.err;
  EXPECT_LT(s, 60.0);
}

TEST(DistCliTest, AStalledRankTimesOutInsteadOfHanging) {
  // SIGSTOP: the peer's sockets stay open, only --timeout ends the wait.
  const auto [r, s] = run_and_signal_rank1(SIGSTOP, 3);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("did not answer within timeout_s 3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Timed out"), std::string::npos) << r.err;
  EXPECT_LT(s, 60.0);
}

TEST(DistCliTest, CtrlCStopsEveryRankAtTheSameStepWithACheckpoint) {
  // SIGINT to the launcher's process group (what a terminal's Ctrl-C does): the ranks agree to
  // stop at the same step, rank 0 checkpoints, everybody exits 130.
  testing::TempDir dir;
  const auto out = dir.path() / "run";
  const pid_t launcher = ::fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    ::setsid();  // its own process group, as a shell job
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 1);
    ::dup2(devnull, 2);
    ::execl(FOXHUNT_CLI_PATH, FOXHUNT_CLI_PATH, "train", "mamba2", "--epochs", "200", "--nproc",
            "2", "--progress", "off", "--log-interval", "1", "--out", out.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  for (int i = 0; i < 1200; ++i) {
    std::ifstream f(out / "metrics.jsonl");
    std::string line;
    if (f && std::getline(f, line) && !line.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-launcher, SIGINT);
  int status = 0;
  ::waitpid(launcher, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130);
  std::ifstream f(out / "summary.json");
  ASSERT_TRUE(f.good());
  const auto s = nlohmann::json::parse(f);
  EXPECT_TRUE(s["interrupted"].get<bool>());
  EXPECT_EQ(s["steps"].get<int64_t>() % 16, 0);  // an agreement step
  EXPECT_TRUE(s["weight_checksum"]["identical"].get<bool>());
  EXPECT_EQ(s["weight_checksum"]["step"], s["steps"]);
  EXPECT_TRUE(std::filesystem::exists(out / "checkpoint.ckpt"));
}

TEST(DistCliTest, FlagsAreCheckedBeforeAnyRendezvous) {
  auto r = testing::run_cli("train mamba2 --world-size 2 --rank 5 --progress off");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rank: expected a rank in [0, 2), got 5"), std::string::npos) << r.err;
  r = testing::run_cli("train all --nproc 2 --progress off");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("train MODEL --nproc"), std::string::npos) << r.err;
  r = testing::run_cli("train mamba2 --nproc 2 --world-size 2");
  EXPECT_EQ(r.exit_code, 2);
  // A master that does not resolve: one line naming it, exit 2, before any rendezvous (no c10d
  // retries and warnings), for a rank of a multi-machine run and for local ranks alike.
  for (const std::string ranks : {"--world-size 2 --rank 1", "--nproc 2"}) {
    r = testing::run_cli("train mamba2 " + ranks +
                         " --master nowhere.invalid:29500 --timeout 30 --progress off");
    EXPECT_EQ(r.exit_code, 2) << ranks << ": " << r.err;
    EXPECT_NE(r.err.find("master: host 'nowhere.invalid' of 'nowhere.invalid:29500' does not "
                         "resolve"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace foxhunt
