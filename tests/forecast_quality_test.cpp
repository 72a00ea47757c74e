// Model quality on a real close-only daily series (issue 11 item 3): the TFT and Mamba-2 defaults
// against the naive baselines on the held-out test split, through the CLI a user runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace foxhunt {
namespace {

using foxhunt::testing::sp500_csv;

void expect_no_worse_than_naive(const std::string& model) {
  const std::string csv = sp500_csv();
  ASSERT_TRUE(std::filesystem::exists(csv))
      << csv << " is missing: scripts/setup.sh fetches it (the arch wheel's S&P 500 data)";
  foxhunt::testing::TempDir dir;
  const auto s = foxhunt::testing::run_cli_json(
      "train " + model + " --progress off --json --data " + csv + " --out " + dir.file(model), 0);
  ASSERT_EQ(s["data"]["bars"].get<int64_t>(), 5031);
  const auto& nb = s["eval"]["next_bar"];
  ASSERT_TRUE(nb.is_object()) << s.dump();
  const double skill = nb["skill"].get<double>();
  const double cover = nb["coverage_p10_p90"].get<double>();
  std::printf(
      "[quality] %s on S&P 500 daily: target vol %s, best epoch %d, skill %+.2f%% [%+.2f, "
      "%+.2f] vs %s, P10-P90 coverage %.1f%%\n",
      model.c_str(), s["data"]["target_vol_feature"].get<std::string>().c_str(),
      s["eval"]["best_epoch"].get<int>(), 100 * skill, 100 * nb["skill_lo"].get<double>(),
      100 * nb["skill_hi"].get<double>(), nb["best_baseline"].get<std::string>().c_str(),
      100 * cover);
  // The bar: no worse than the best naive baseline, calibrated central 80% interval.
  EXPECT_GE(skill, 0.0) << "worse than " << nb["best_baseline"];
  EXPECT_TRUE(nb["beats_best_baseline"].get<bool>());
  EXPECT_GE(cover, 0.70);
  EXPECT_LE(cover, 0.90);
}

TEST(ForecastQualityTest, Mamba2DefaultsNoWorseThanNaiveOnSp500Daily_SLOW) {
  expect_no_worse_than_naive("mamba2");
}

TEST(ForecastQualityTest, TftDefaultsNoWorseThanNaiveOnSp500Daily_SLOW) {
  expect_no_worse_than_naive("tft");
}

}  // namespace
}  // namespace foxhunt
