#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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

TEST(CliTest, UnknownSubcommandExits2) {
  EXPECT_EQ(run_cli("frobnicate").exit_code, 2);
  EXPECT_EQ(run_cli("").exit_code, 2);
}

TEST(CliTest, EverySubcommandHasHelp) {
  for (const char* sub : {"info", "models", "validate", "devices", "data inspect", "plan", "budget",
                          "train", "predict", "export x", "import x"}) {
    auto r = run_cli(std::string(sub) + " --help");
    EXPECT_EQ(r.exit_code, 0) << sub;
    EXPECT_NE(r.out.find("--json"), std::string::npos) << sub << ": " << r.out;
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
