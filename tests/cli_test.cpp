#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "foxhunt/core/container.h"
#include "foxhunt/core/file_io.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using foxhunt::testing::run_cli;

TEST(CliTest, ModelsJsonListsFourModels) {
  auto r = run_cli("models --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);  // throws if stdout is not pure JSON
  ASSERT_TRUE(j.contains("models"));
  std::vector<std::string> names;
  for (const auto& m : j["models"]) names.push_back(m["name"]);
  EXPECT_EQ(names, (std::vector<std::string>{"dqn", "ppo", "mamba2", "tft"}));
  EXPECT_EQ(j["models"][0]["parameters"], 41347);
  EXPECT_EQ(j["models"][1]["parameters"], 82564);
}

TEST(CliTest, UnknownFlagExits2WithOneLine) {
  auto r = run_cli("models --bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("--bogus"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// train all on a file too short to split: one line naming the file and the bars it needs, exit
// 2, before any model starts (no model directory is made).
TEST(CliTest, TrainAllOnTooFewBarsNamesTheFile) {
  foxhunt::testing::TempDir tmp;
  const auto csv = tmp.file("short.csv");
  ASSERT_EQ(run_cli("data generate --bars 200 --out " + csv).exit_code, 0);
  const auto out = tmp.path() / "ens";
  const auto r = run_cli("train all --data " + csv + " --progress off --out " + out.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("'" + csv + "': need more than warmup + 2 = 258 bars"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("got 200"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out / "dqn"));
}

TEST(CliTest, UnknownSubcommandExits2) {
  EXPECT_EQ(run_cli("frobnicate").exit_code, 2);
  EXPECT_EQ(run_cli("").exit_code, 2);
}

// The subcommands a help text lists under "Subcommands:" (the first word of each entry).
std::vector<std::string> listed_subcommands(const std::string& help) {
  std::vector<std::string> out;
  std::istringstream in(help);
  std::string line;
  bool listing = false;
  while (std::getline(in, line)) {
    if (line.rfind("Subcommands:", 0) == 0) {
      listing = true;
    } else if (listing && line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') {
      out.push_back(line.substr(2, line.find(' ', 2) - 2));
    } else if (listing && !line.empty() && line[0] != ' ') {
      listing = false;
    }
  }
  return out;
}

// Every command the CLI lists (and every command of a group such as `data`) answers --help with
// exit 0 and offers --json: the list comes from the CLI itself, so a new command is covered.
TEST(CliTest, EverySubcommandHasHelp) {
  const auto top = listed_subcommands(run_cli("--help").out);
  ASSERT_GE(top.size(), 15u) << "the top-level help lists too few subcommands";
  std::vector<std::string> leaves;
  for (const auto& sub : top) {
    auto r = run_cli(sub + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub << ": " << r.err;
    const auto nested = listed_subcommands(r.out);
    if (nested.empty()) leaves.push_back(sub);
    for (const auto& n : nested) leaves.push_back(sub + " " + n);
  }
  for (const char* expected : {"stress", "backtest", "quantize", "bench-memory", "data generate"})
    EXPECT_NE(std::find(leaves.begin(), leaves.end(), expected), leaves.end()) << expected;
  for (const auto& leaf : leaves) {
    auto r = run_cli(leaf + " --help");
    EXPECT_EQ(r.exit_code, 0) << leaf << ": " << r.err;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << leaf << ": " << r.out;
  }
}

TEST(CliTest, InfoJsonIsValid) {
  auto r = run_cli("info --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["foxhunt_version"], FOXHUNT_VERSION);
  EXPECT_TRUE(j["libtorch_version"].get<std::string>().rfind("2.", 0) == 0);
  EXPECT_FALSE(j["quantized_engines"].empty());
}

}  // namespace
}  // namespace foxhunt

TEST(CliTest, ForecastTargetsAreScaledByTheVolatilityChosenOnTrainAndValidation) {
  // The target volatility is the candidate whose constant forecast scores best on the training
  // and validation splits (never the test split), and the bundle serves with the same one.
  foxhunt::testing::TempDir dir;
  const std::string csv = dir.file("bars.csv");
  ASSERT_EQ(foxhunt::testing::run_cli("data generate --bars 1500 --seed 3 --out " + csv).exit_code,
            0);
  const auto s = foxhunt::testing::run_cli_json(
      "train mamba2 --epochs 1 --progress off --json --data " + csv + " --out " + dir.file("m"), 0);
  const auto& losses = s["data"]["target_vol_selection_loss"];
  ASSERT_TRUE(losses.is_object());
  EXPECT_GE(losses.size(), 8u);
  std::string best;
  double best_loss = INFINITY;
  for (const auto& [name, loss] : losses.items()) {
    ASSERT_TRUE(loss.is_number()) << name;
    if (loss.get<double>() < best_loss) {
      best_loss = loss.get<double>();
      best = name;
    }
  }
  EXPECT_EQ(s["data"]["target_vol_feature"].get<std::string>(), best == "none" ? "" : best);
  // "none" (the unconditional quantiles) is among the candidates and loses to some volatility.
  EXPECT_LT(best_loss, losses["none"].get<double>());
  // The head started at the constant forecast, which the trainer scored before the first epoch.
  const auto& eval = s["eval"];
  EXPECT_TRUE(eval["initial_val_loss"].is_number());
  EXPECT_GE(eval["best_val_loss"].get<double>(), 0.0);
  EXPECT_LE(eval["best_val_loss"].get<double>(), eval["initial_val_loss"].get<double>());
  const auto bundle = foxhunt::read_container(s["bundle"].get<std::string>());
  EXPECT_EQ(bundle.header.value("target_vol_feature", std::string("?")),
            s["data"]["target_vol_feature"].get<std::string>());
}

TEST(CliTest, TapeInspectAndBars) {
  // A tape is inspected as prints (not refused as "unknown column 'Price'"), and `data bars`
  // writes bars that `data inspect` reads as a bar CSV.
  foxhunt::testing::TempDir dir;
  const std::string tape = dir.file("tape.csv");
  foxhunt::write_file_atomic(tape,
                             "DateTime,Price,Volume\n"
                             "2013-09-01 17:00:00.083,1640.25,8\n"
                             "2013-09-01 17:00:00.083,1640.25,8\n"
                             "2013-09-01 17:01:10.500,1640.5,2\n");
  const auto s = foxhunt::testing::run_cli_json("data inspect --json " + tape, 0);
  EXPECT_EQ(s["kind"], "tape");
  EXPECT_EQ(s["prints"], 3);
  EXPECT_EQ(s["price_increment"], 0.25);
  EXPECT_EQ(s["identical_consecutive"], 1);
  const std::string bars = dir.file("bars.csv");
  const auto b = foxhunt::testing::run_cli_json(
      "data bars --json --ticks " + tape + " --bar time:60s --out " + bars, 0);
  EXPECT_EQ(b["bars"], 2);
  EXPECT_EQ(b["bar"], "time:1m");
  const auto back = foxhunt::testing::run_cli_json("data inspect --json " + bars, 0);
  EXPECT_EQ(back["rows"], 2);
  EXPECT_EQ(back["first_timestamp"], 1378054800);
  const auto bad =
      foxhunt::testing::run_cli("data bars --ticks " + tape + " --bar time:5 --out " + bars);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("expected time:<N><unit>"), std::string::npos) << bad.err;
  // A print out of order: refused naming FILE:LINE, or dropped and counted.
  const std::string late = dir.file("late.csv");
  foxhunt::write_file_atomic(late,
                             "DateTime,Price,Volume\n2013-09-01 17:00:01,1,1\n"
                             "2013-09-01 17:00:00,1,1\n");
  const auto refused = foxhunt::testing::run_cli("data inspect " + late);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find(late + ":3: print at"), std::string::npos) << refused.err;
  const auto dropped =
      foxhunt::testing::run_cli_json("data inspect --json --on-bad drop " + late, 0);
  EXPECT_EQ(dropped["dropped"]["out_of_order"], 1);
  EXPECT_EQ(dropped["prints"], 1);
}
