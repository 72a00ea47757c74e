// Train/serve skew: a served policy sees the RL state its trading environment built in training,
// with the environment's own options (recorded in the bundle), not the defaults.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/trading_env.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt::serving {
namespace {

using foxhunt::testing::run_cli;
using foxhunt::testing::TempDir;

class PolicyStateTest : public foxhunt::testing::SeededTest {};

// The DQN of the untrained bundles, its environment's PnL scale set to `pnl_scale`, saved and
// loaded back (what serving reads is what the file holds).
Bundle dqn_bundle(const data::MarketDataset& ds, double pnl_scale, const TempDir& tmp) {
  for (auto& b : foxhunt::testing::untrained_bundles(ds, 5)) {
    if (b.name() != "dqn") continue;
    b.trading_env.pnl_scale = pnl_scale;
    const auto path = tmp.file("dqn.fhb");
    save_bundle(b, path);
    return load_bundle(path);
  }
  ADD_FAILURE() << "no dqn in the catalog";
  return {};
}

TEST_F(PolicyStateTest, ServingReproducesTheTrainingEnvironmentsObservations) {
  TempDir tmp;
  const auto series = data::generate_synthetic({.bars = 900, .seed = 12});
  const data::MarketDataset ds(series);
  data::TradingEnvOptions options;
  options.pnl_scale = 37.0;  // not the default: serving must read it from the bundle
  options.episode_length = 0;
  options.random_start = false;
  Bundle bundle = dqn_bundle(ds, options.pnl_scale, tmp);
  ASSERT_EQ(bundle.trading_env.pnl_scale, 37.0);
  const auto model = bundle.model;
  Ensemble ensemble({std::move(bundle)});

  // The environment the policy would train on, following the positions serving takes: from a
  // bar where serving is flat (as an episode starts), the env takes each decision as its action.
  data::TradingEnv env(ds, data::Split::kTrain, options);
  env.reset(0);
  const int64_t begin = env.range().begin;
  bool following = false;
  int64_t compared = 0, with_pnl = 0;
  double worst = 0.0;
  for (int64_t t = 0; t + 1 < env.range().end; ++t) {
    const auto d = ensemble.on_bar(series.bars[static_cast<size_t>(t)]);
    if (t < begin) continue;
    ASSERT_EQ(env.bar(), t);
    const auto& s = d.signals.at(0);
    if (!following) following = s.ready && d.position == 0.0;
    if (following) {
      ASSERT_EQ(d.position, static_cast<double>(env.position()));
      const auto obs = env.observation();
      auto x = torch::from_blob(const_cast<float*>(obs.data()),
                                {1, static_cast<int64_t>(obs.size())}, torch::kFloat32)
                   .clone();
      torch::NoGradGuard no_grad;
      const auto q = model->forward(models::Batch{{x}, {}})[0].contiguous();
      ASSERT_EQ(s.raw.size(), 3u);
      for (int64_t a = 0; a < 3; ++a)
        worst = std::max(worst, std::abs(static_cast<double>(q[0][a].item<float>()) -
                                         static_cast<double>(s.raw[static_cast<size_t>(a)])));
      ++compared;
      with_pnl += env.unrealized_pnl() != 0.0;
    }
    // The single policy's decision is its greedy position: -1, 0 or +1.
    ASSERT_TRUE(d.decision == -1.0 || d.decision == 0.0 || d.decision == 1.0) << d.decision;
    env.step(following ? static_cast<int64_t>(d.decision) + 1 : 1);  // flat until following
  }
  EXPECT_GT(compared, 100);
  EXPECT_GT(with_pnl, 20);  // bars where the PnL scale enters the state
  // The market rows are computed by the streaming and the batch feature engines (equal to
  // rounding); the PnL entry with the default scale instead would move q by far more.
  EXPECT_LT(worst, 1e-4);
}

TEST_F(PolicyStateTest, TrainRecordsTheTradingEnvironmentInTheBundle) {
  TempDir dir;
  const auto csv = dir.file("bars.csv");
  data::write_bars_csv(csv, data::generate_synthetic({.bars = 700, .seed = 3}));
  const auto r = run_cli("train dqn --env trading --data " + csv +
                         " --steps 300 --eval-episodes 0 --pnl-scale 37 --env-cost-bps 2.5 "
                         "--json --progress off --out " +
                         dir.file("t"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto b = load_bundle(dir.file("t"));
  EXPECT_EQ(b.trading_env.pnl_scale, 37.0);
  EXPECT_EQ(b.trading_env.cost_bps, 2.5);
  // A bad scale is refused at the command line.
  EXPECT_EQ(run_cli("train dqn --env trading --pnl-scale 0 --steps 10").exit_code, 2);
}

}  // namespace
}  // namespace foxhunt::serving
