#pragma once
/// \file calendar.h
/// How many bars a year holds (the factor that annualises returns, Sharpe ratios and
/// volatilities), inferred from the bars' own timestamps, or given, and said in words so that
/// every command prints which was used. Torch-free.
///
/// The rule (infer_calendar), simple and deterministic:
/// - span = last - first >= 30 days: (bars - 1) / (span in years of 365.25 days): the calendar
///   measured from the data (weekends, holidays and session hours without bars accounted for).
/// - a shorter span is cut into sessions at gaps: more than CalendarOptions::gap_seconds (30
///   minutes, the tape summary's threshold) and more than 5 median spacings without a bar. With
///   two sessions or more, each at most a day long (an intraday market that closes), a year is
///   bars per session x CalendarOptions::sessions_per_year (252): a 2-day tape of 1-minute bars
///   is not annualised as if it traded 24 hours a day, 365 days a year. Bars per session is the
///   mean over the sessions, leaving out the first and the last when there are three or more
///   (a file usually starts and ends inside one); with two, both count, so a partial one makes
///   the figure low: state it (given_periods_per_year) when you know the market's hours.
/// - otherwise (one session, or sessions longer than a day: trading around the clock, or daily
///   bars): 365.25 days / the median spacing.

#include <cstdint>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"

namespace foxhunt::data {

/// Where a periods-per-year figure came from.
enum class CalendarBasis {
  kGiven,     ///< stated by the user
  kSpan,      ///< bars / years over a span of 30 days or more
  kSessions,  ///< bars per session x sessions per year (a short intraday span)
  kSpacing,   ///< 365.25 days / the median spacing
};

/// "given", "span", "sessions", "spacing".
const char* to_string(CalendarBasis basis);

/// Options of infer_calendar.
struct CalendarOptions {
  /// A session ends at more than this many seconds without a bar (and more than 5 median
  /// spacings).
  double gap_seconds = 1800.0;
  /// Trading sessions in a year (an exchange calendar).
  double sessions_per_year = 252.0;
};

/// Bars per year and how they were decided.
struct PeriodsPerYear {
  double value = 0.0;                           ///< bars per year (> 0)
  CalendarBasis basis = CalendarBasis::kGiven;  ///< where it came from
  int64_t bars = 0;                             ///< bars the inference saw (0: given)
  int64_t sessions = 0;                         ///< kSessions: sessions found
  double bars_per_session = 0.0;                ///< kSessions: their mean bar count
  double span_days = 0.0;                       ///< last - first, in days
  double median_spacing_seconds = 0.0;          ///< the median bar spacing

  /// In words, e.g. "98,280 (inferred from 2 sessions of ~390 bars, x 252 sessions a year)",
  /// "252 (given)", "8,766 (inferred from the median spacing of 1 h)".
  std::string describe() const;
};

/// The rule of the file comment on timestamps in Unix milliseconds (strictly increasing, at
/// least two; InputError otherwise, naming the index).
PeriodsPerYear infer_calendar(const std::vector<int64_t>& timestamps_ms,
                              const CalendarOptions& options = {});

/// infer_calendar of a bar series (whose timestamps are Unix seconds).
PeriodsPerYear infer_calendar(const BarSeries& series, const CalendarOptions& options = {});

/// A figure the user states: InputError "[calendar] WHERE: expected a finite number > 0, got X"
/// otherwise.
PeriodsPerYear given_periods_per_year(double value, const std::string& where);

/// `value` with thousands separators and no fraction when it is whole to 0.5 ("98,280").
std::string format_count(double value);

}  // namespace foxhunt::data
