// `foxhunt backtest --walk-forward N` end to end (jobs/walk_forward.h): folds tile the scored
// bars, each fold's bars equal a plain backtest of that fold's ensemble, a rerun reuses the
// trained folds, a rolling window trains on the last W bars.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "foxhunt/data/bars.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using testing::run_cli;
using testing::TempDir;

TEST(WalkForwardTest, FoldsTileTheScoredBarsAndResume_SLOW) {
  TempDir tmp;
  const auto series = data::generate_synthetic({.bars = 1600, .seed = 12});
  const auto csv = tmp.file("bars.csv");
  data::write_bars_csv(csv, series);
  const auto work = tmp.file("wf");
  const std::string cmd = "backtest --data " + csv + " --walk-forward 200 --initial 1000 --work " +
                          work + " --steps 300 --epochs 1 --json --gate none";
  const auto first = run_cli(cmd);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto j = nlohmann::json::parse(first.out);
  ASSERT_EQ(j["refits"].size(), 3u);
  EXPECT_EQ(j["walk_forward"]["window"], "expanding");
  for (int k = 0; k < 3; ++k) {
    const auto& r = j["refits"][k];
    EXPECT_EQ(r["train_begin"], 0);
    EXPECT_EQ(r["train_end"], 1000 + 200 * k);
    EXPECT_EQ(r["score_begin"], 1000 + 200 * k);
    EXPECT_EQ(r["score_end"], 1200 + 200 * k);
    EXPECT_EQ(r["train_last_timestamp"], series.bars[999 + 200 * k].timestamp);
    EXPECT_EQ(r["first_timestamp"], series.bars[1000 + 200 * k].timestamp);
    EXPECT_EQ(r["last_timestamp"], series.bars[1199 + 200 * k].timestamp);
    EXPECT_FALSE(r["reused"].get<bool>());
    EXPECT_TRUE(r["training"].contains("tft")) << r.dump();
    EXPECT_TRUE(r["rule_fit"].contains("weights")) << r["rule_fit"].dump();
    // PSR per strategy and the ensemble's DSR against its fold's search.
    const double psr = r["psr"]["ensemble"].get<double>();
    EXPECT_TRUE(psr >= 0.0 && psr <= 1.0) << psr;
    EXPECT_TRUE(r["psr"].contains("buy_and_hold"));
    ASSERT_TRUE(r["dsr"].is_number()) << r.dump();
    EXPECT_LE(r["dsr"].get<double>(), psr + 1e-12);  // deflated: at most the PSR against 0
    EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(work) /
                                        ("fold-00" + std::to_string(k)) / "rule.json"));
  }
  // Every bar after the first training window is scored once, out of sample.
  EXPECT_EQ(j["scored_bars"], 600);
  EXPECT_EQ(j["first_timestamp"], series.bars[1000].timestamp);
  EXPECT_EQ(j["last_timestamp"], series.bars[1599].timestamp);
  for (const char* s : {"ensemble", "tft", "buy_and_hold", "vol_target"})
    EXPECT_TRUE(j["strategies"].contains(s)) << s;
  // Stitched: the ensemble's PSR, and its DSR against every fold's search together.
  EXPECT_EQ(j["walk_forward"]["stitched_psr"], j["strategies"]["ensemble"]["psr"]);
  ASSERT_TRUE(j["walk_forward"]["stitched_dsr"].is_number()) << j["walk_forward"].dump();
  EXPECT_EQ(j["walk_forward"]["stitched_dsr"], j["strategies"]["ensemble"]["dsr"]);

  // The first fold's stretch is exactly a plain backtest of its ensemble over its bars.
  const auto plain = run_cli("backtest --bundles " + work + "/fold-000 --data " + csv + " --to " +
                             std::to_string(series.bars[1199].timestamp) + " --json --gate none");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto p = nlohmann::json::parse(plain.out);
  EXPECT_EQ(p["scored_bars"], 200);
  EXPECT_DOUBLE_EQ(p["strategies"]["ensemble"]["sharpe"].get<double>(),
                   j["refits"][0]["sharpe"]["ensemble"].get<double>());
  EXPECT_DOUBLE_EQ(p["strategies"]["tft"]["sharpe"].get<double>(),
                   j["refits"][0]["sharpe"]["tft"].get<double>());
  EXPECT_DOUBLE_EQ(p["strategies"]["ensemble"]["psr"].get<double>(),
                   j["refits"][0]["psr"]["ensemble"].get<double>());
  EXPECT_EQ(p["strategies"]["ensemble"]["dsr"], j["refits"][0]["dsr"]);

  // A rerun reuses every fold and gives the same figures; a fold whose record is gone retrains.
  std::filesystem::remove(std::filesystem::path(work) / "fold-002" / "walk_forward.json");
  const auto again = run_cli(cmd);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto k = nlohmann::json::parse(again.out);
  EXPECT_TRUE(k["refits"][0]["reused"].get<bool>());
  EXPECT_TRUE(k["refits"][1]["reused"].get<bool>());
  EXPECT_FALSE(k["refits"][2]["reused"].get<bool>());
  EXPECT_EQ(k["strategies"]["ensemble"]["sharpe"], j["strategies"]["ensemble"]["sharpe"]);
  EXPECT_NE(again.err.find("reused the ensemble"), std::string::npos) << again.err;

  // Rolling: each fold trains on the last 800 bars only (so fold 1 is trained anew).
  const auto rolling = run_cli("backtest --data " + csv +
                               " --walk-forward 200 --initial 1200 --rolling 800 --work " + work +
                               " --steps 300 --epochs 1 --json --gate none");
  ASSERT_EQ(rolling.exit_code, 0) << rolling.err;
  const auto r = nlohmann::json::parse(rolling.out);
  ASSERT_EQ(r["refits"].size(), 2u);
  EXPECT_EQ(r["walk_forward"]["window"], "rolling");
  EXPECT_EQ(r["refits"][0]["train_begin"], 400);
  EXPECT_EQ(r["refits"][1]["train_begin"], 600);
  EXPECT_FALSE(r["refits"][0]["reused"].get<bool>());
  EXPECT_EQ(r["scored_bars"], 400);
}

TEST(WalkForwardTest, BadArgumentsExit2) {
  TempDir tmp;
  const auto csv = tmp.file("bars.csv");
  data::write_bars_csv(csv, data::generate_synthetic({.bars = 400, .seed = 1}));
  for (const std::string args :
       {" --walk-forward 5", " --walk-forward 100 --bundles x", " --walk-forward 100 --from 1",
        " --rolling 100", " --walk-forward 100 --initial 400",
        " --walk-forward 100 --initial 200 --rolling 300"}) {
    const auto r = run_cli("backtest --data " + csv + args + " --work " + tmp.file("w"));
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  }
  // Nothing was trained for a refused run.
  EXPECT_FALSE(std::filesystem::exists(tmp.file("w") + "/fold-000"));
}

}  // namespace
}  // namespace foxhunt
