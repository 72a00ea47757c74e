// One reader decides what an input is: a panel (a symbol column), one series, or the synthetic
// default for no file.
#include <gtest/gtest.h>

#include <fstream>

#include "foxhunt/core/error.h"
#include "foxhunt/data/market_data.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

using foxhunt::testing::TempDir;

TEST(MarketDataTest, APanelASeriesOrTheSyntheticDefault) {
  TempDir tmp;
  const auto panel_csv = tmp.file("panel.csv"), bars_csv = tmp.file("bars.csv");
  std::ofstream(panel_csv) << "timestamp,symbol,close\n1700000000,A,10\n1700000000,B,20\n"
                              "1700000060,A,11\n1700000060,B,21\n";
  std::ofstream(bars_csv) << "timestamp,close\n1700000000,10\n1700000060,11\n";
  const auto p = load_market_data(panel_csv);
  ASSERT_TRUE(p.is_panel());
  EXPECT_EQ(p.panel->size(), 2);
  EXPECT_EQ(p.panel->find("B")->bars.at(1).close, 21.0);
  const auto s = load_market_data(bars_csv);
  EXPECT_FALSE(s.is_panel());
  EXPECT_EQ(s.series.size(), 2);
  const auto synthetic = load_market_data("");
  EXPECT_FALSE(synthetic.is_panel());
  EXPECT_EQ(synthetic.series.size(), generate_synthetic(SyntheticOptions{}).size());
  // A bad file names itself and the line.
  std::ofstream(tmp.file("bad.csv")) << "timestamp,close\n1700000000,abc\n";
  foxhunt::testing::expect_input_error([&] { load_market_data(tmp.file("bad.csv")); }, "",
                                       {"bad.csv:2"});
}

}  // namespace
}  // namespace foxhunt::data
