#pragma once
// Helpers shared by the bars tests (bars_test.cpp: CSV and timestamps; bars_synthetic_test.cpp:
// writing, the generator, the summary and the CLI): the fixture, with the bar comparisons.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"

namespace foxhunt::testing {

class BarsTest : public ::testing::Test {
 protected:
  /// Parses `text` expecting an InputError whose message has "src.csv:LINE:" and `reason`.
  static void expect_error(const std::string& text, int line, const std::string& reason) {
    try {
      data::parse_bars_csv(text, "src.csv");
      FAIL() << "no error for:\n" << text;
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("src.csv:" + std::to_string(line) + ": "), std::string::npos)
          << "expected line " << line << ": " << what;
      EXPECT_NE(what.find(reason), std::string::npos) << "expected '" << reason << "': " << what;
      EXPECT_EQ(e.component(), "bars");
    }
  }
  static constexpr const char* kHeader = "timestamp,open,high,low,close,volume\n";

  /// Expects bar `b` to be (t, o, h, l, c, v).
  static void expect_bar(const data::Bar& b, int64_t t, double o, double h, double l, double c,
                         double v) {
    EXPECT_EQ(b.timestamp, t);
    EXPECT_DOUBLE_EQ(b.open, o);
    EXPECT_DOUBLE_EQ(b.high, h);
    EXPECT_DOUBLE_EQ(b.low, l);
    EXPECT_DOUBLE_EQ(b.close, c);
    EXPECT_DOUBLE_EQ(b.volume, v);
  }

  /// Whether `a` and `b` hold the same bars, to the bit.
  static bool same_bars(const data::BarSeries& a, const data::BarSeries& b) {
    if (a.bars.size() != b.bars.size() || a.close_only != b.close_only) return false;
    for (size_t i = 0; i < a.bars.size(); ++i) {
      const data::Bar &x = a.bars[i], &y = b.bars[i];
      if (x.timestamp != y.timestamp || x.open != y.open || x.high != y.high || x.low != y.low ||
          x.close != y.close || x.volume != y.volume)
        return false;
    }
    return true;
  }
};

}  // namespace foxhunt::testing
