// The calendar inference (data/calendar.h): short intraday spans are annualised by their
// sessions, not as 24 hours a day, 365 days a year.
#include "foxhunt/data/calendar.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "foxhunt/data/backtest.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

constexpr int64_t kMinuteMs = 60'000;
constexpr int64_t kHourMs = 60 * kMinuteMs;
constexpr int64_t kDayMs = 24 * kHourMs;

/// `days` sessions of 1-minute bars from 14:30 to 21:00 UTC (390 bars each), one a day.
std::vector<int64_t> equity_minutes(int days, int first_session_bars = 390) {
  std::vector<int64_t> ts;
  const int64_t day0 = 1'700'000'000'000 / kDayMs * kDayMs;
  for (int d = 0; d < days; ++d) {
    const int bars = d == 0 ? first_session_bars : 390;
    const int64_t open = day0 + d * kDayMs + 14 * kHourMs + 30 * kMinuteMs;
    for (int k = 390 - bars; k < 390; ++k) ts.push_back(open + k * kMinuteMs);
  }
  return ts;
}

TEST(CalendarTest, TwoIntradaySessionsAreAnnualisedBySessionsNotByTheClock) {
  const auto p = infer_calendar(equity_minutes(2));
  EXPECT_EQ(p.basis, CalendarBasis::kSessions);
  EXPECT_EQ(p.sessions, 2);
  EXPECT_DOUBLE_EQ(p.bars_per_session, 390.0);
  EXPECT_DOUBLE_EQ(p.value, 390.0 * 252.0);  // 98,280, not 525,960 (24 h x 365.25 d)
  EXPECT_EQ(p.describe(), "98,280 (inferred from 2 sessions of ~390 bars, x 252 sessions a year)");
  // The plain function follows the same rule.
  EXPECT_DOUBLE_EQ(infer_periods_per_year(equity_minutes(2)), 98280.0);
}

TEST(CalendarTest, PartialFirstAndLastSessionsAreLeftOutFromThreeOn) {
  // 5 sessions, the first only 100 bars long, the last cut after 50 bars: the middle three say
  // 390.
  auto ts = equity_minutes(5, 100);
  ts.resize(ts.size() - 340);
  const auto p = infer_calendar(ts);
  EXPECT_EQ(p.basis, CalendarBasis::kSessions);
  EXPECT_EQ(p.sessions, 5);
  EXPECT_DOUBLE_EQ(p.bars_per_session, 390.0);
  // The sessions per year are an option.
  EXPECT_DOUBLE_EQ(infer_calendar(ts, {.sessions_per_year = 250}).value, 390.0 * 250);
}

TEST(CalendarTest, OneSessionOrRoundTheClockFallsBackToTheMedianSpacing) {
  // One session: the calendar cannot be seen; the spacing decides (and says so).
  const auto one = infer_calendar(equity_minutes(1));
  EXPECT_EQ(one.basis, CalendarBasis::kSpacing);
  EXPECT_DOUBLE_EQ(one.value, 365.25 * 24 * 60);
  // Minute bars around the clock for 3 days with a 2-hour outage: the sessions are longer than
  // a day, so this market never closes.
  std::vector<int64_t> crypto;
  for (int64_t m = 0; m < 3 * 24 * 60; ++m)
    if (m < 1000 || m >= 1120) crypto.push_back(m * kMinuteMs);
  const auto c = infer_calendar(crypto);
  EXPECT_EQ(c.basis, CalendarBasis::kSpacing);
  EXPECT_DOUBLE_EQ(c.value, 365.25 * 24 * 60);
  EXPECT_NE(c.describe().find("median spacing of 1 min"), std::string::npos) << c.describe();
}

TEST(CalendarTest, GapsShorterThanTheThresholdDoNotSplitASession) {
  // Two sessions with a 20-minute halt inside each: still two sessions of 380 bars.
  std::vector<int64_t> ts;
  for (int d = 0; d < 2; ++d)
    for (int k = 0; k < 400; ++k)
      if (k < 100 || k >= 120) ts.push_back(d * kDayMs + 14 * kHourMs + k * kMinuteMs);
  const auto p = infer_calendar(ts);
  EXPECT_EQ(p.sessions, 2);
  EXPECT_DOUBLE_EQ(p.bars_per_session, 380.0);
  // A gap threshold under the halt splits each session in two.
  EXPECT_EQ(infer_calendar(ts, {.gap_seconds = 600}).sessions, 4);
}

TEST(CalendarTest, LongSpansCountTheBarsThere) {
  // 60 days of the equity session: (n - 1) / years.
  const auto ts = equity_minutes(60);
  const auto p = infer_calendar(ts);
  EXPECT_EQ(p.basis, CalendarBasis::kSpan);
  const double years = static_cast<double>(ts.back() - ts.front()) / (365.25 * kDayMs);
  EXPECT_NEAR(p.value, static_cast<double>(ts.size() - 1) / years, 1e-6);
}

TEST(CalendarTest, GivenFiguresAreCheckedAndSaySo) {
  const auto g = given_periods_per_year(98280, "--periods-per-year");
  EXPECT_EQ(g.basis, CalendarBasis::kGiven);
  EXPECT_EQ(g.describe(), "98,280 (given)");
  foxhunt::testing::expect_input_error([] { given_periods_per_year(0, "--periods-per-year"); },
                                       "calendar", {"--periods-per-year", "> 0", "got 0"});
  EXPECT_EQ(format_count(1234567), "1,234,567");
  EXPECT_EQ(format_count(252), "252");
  EXPECT_EQ(format_count(8766.4), "8,766");
}

}  // namespace
}  // namespace foxhunt::data
