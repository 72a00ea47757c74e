#include "foxhunt/data/calendar.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/strings.h"

namespace foxhunt::data {

namespace calendar_impl {
namespace {

constexpr const char* kCalendarComponent = "calendar";
constexpr double kDayMsCalendar = 86'400'000.0;
constexpr double kYearMsCalendar = 365.25 * kDayMsCalendar;
constexpr double kSessionGapSpacings = 5.0;  // a session gap is also > 5 median spacings

/// The median of `v` (reordered); the mean of the two middle values for an even count.
double median_of(std::vector<int64_t>& v) {
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  double m = static_cast<double>(v[mid]);
  if (v.size() % 2 == 0) {
    const int64_t lower =
        *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
    m = 0.5 * (m + static_cast<double>(lower));
  }
  return m;
}

/// A spacing in its largest whole-ish unit: "1 min", "1 h", "1.5 d", "30 s".
std::string spacing_text(double seconds) {
  if (seconds >= 86400.0) return fmt::format("{:g} d", seconds / 86400.0);
  if (seconds >= 3600.0) return fmt::format("{:g} h", seconds / 3600.0);
  if (seconds >= 60.0) return fmt::format("{:g} min", seconds / 60.0);
  return fmt::format("{:g} s", seconds);
}

}  // namespace
}  // namespace calendar_impl

const char* to_string(CalendarBasis basis) {
  return enum_name(basis, {"given", "span", "sessions", "spacing"});
}

std::string format_count(double value) {
  const double r = std::round(value);
  if (!std::isfinite(value) || std::fabs(value - r) > 0.5 || std::fabs(r) >= 1e18)
    return fmt::format("{:g}", value);
  std::string digits = fmt::format("{}", static_cast<int64_t>(std::fabs(r)));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (r < 0 ? "-" : "") + out;
}

std::string PeriodsPerYear::describe() const {
  using namespace calendar_impl;
  const std::string v = format_count(value);
  switch (basis) {
    case CalendarBasis::kGiven:
      return v + " (given)";
    case CalendarBasis::kSpan:
      return fmt::format("{} (inferred from {} bars over {:.1f} days)", v, format_count(bars),
                         span_days);
    case CalendarBasis::kSessions:
      return fmt::format("{} (inferred from {} sessions of ~{} bars, x {} sessions a year)", v,
                         sessions, format_count(bars_per_session),
                         format_count(value / bars_per_session));
    case CalendarBasis::kSpacing:
      return fmt::format("{} (inferred from the median spacing of {}{})", v,
                         spacing_text(median_spacing_seconds),
                         span_days < 30.0 ? ", around the clock" : "");
  }
  return v;
}

PeriodsPerYear infer_calendar(const std::vector<int64_t>& ts, const CalendarOptions& options) {
  using namespace calendar_impl;
  const size_t n = ts.size();
  FOXHUNT_CHECK(n >= 2, kCalendarComponent,
                "infer_periods_per_year: expected at least 2 timestamps, got ", n);
  FOXHUNT_CHECK(options.gap_seconds > 0 && options.sessions_per_year > 0, kCalendarComponent,
                "calendar options: expected gap_seconds > 0 and sessions_per_year > 0, got ",
                options.gap_seconds, " and ", options.sessions_per_year);
  std::vector<int64_t> gaps(n - 1);
  for (size_t i = 1; i < n; ++i) {
    FOXHUNT_CHECK(ts[i] > ts[i - 1], kCalendarComponent,
                  "infer_periods_per_year: expected strictly increasing timestamps, got ", ts[i],
                  " at index ", i, " after ", ts[i - 1]);
    gaps[i - 1] = ts[i] - ts[i - 1];
  }
  PeriodsPerYear p;
  p.bars = static_cast<int64_t>(n);
  const double span = static_cast<double>(ts.back() - ts.front());
  p.span_days = span / kDayMsCalendar;
  std::vector<int64_t> sorted = gaps;
  const double median = median_of(sorted);
  p.median_spacing_seconds = median / 1000.0;
  if (span >= 30.0 * kDayMsCalendar) {
    p.basis = CalendarBasis::kSpan;
    p.value = static_cast<double>(n - 1) / (span / kYearMsCalendar);
    return p;
  }
  // Sessions: runs of bars between gaps. Each must close within a day for the market to have
  // sessions at all (else it trades around the clock, or the bars are daily).
  const double gap_ms = std::max(options.gap_seconds * 1000.0, kSessionGapSpacings * median);
  std::vector<int64_t> counts;
  bool closes_daily = true;
  size_t first = 0;
  for (size_t i = 1; i <= n; ++i) {
    if (i < n && static_cast<double>(gaps[i - 1]) <= gap_ms) continue;
    closes_daily = closes_daily && static_cast<double>(ts[i - 1] - ts[first]) <= kDayMsCalendar;
    counts.push_back(static_cast<int64_t>(i - first));
    first = i;
  }
  if (counts.size() >= 2 && closes_daily) {
    const size_t skip = counts.size() >= 3 ? 1 : 0;  // partial first and last sessions
    double sum = 0.0;
    for (size_t k = skip; k + skip < counts.size(); ++k) sum += static_cast<double>(counts[k]);
    p.basis = CalendarBasis::kSessions;
    p.sessions = static_cast<int64_t>(counts.size());
    p.bars_per_session = sum / static_cast<double>(counts.size() - 2 * skip);
    p.value = p.bars_per_session * options.sessions_per_year;
    return p;
  }
  p.basis = CalendarBasis::kSpacing;
  p.value = kYearMsCalendar / median;
  return p;
}

PeriodsPerYear infer_calendar(const BarSeries& series, const CalendarOptions& options) {
  std::vector<int64_t> ms;
  ms.reserve(series.bars.size());
  for (const Bar& b : series.bars) ms.push_back(b.timestamp * 1000);
  return infer_calendar(ms, options);
}

PeriodsPerYear given_periods_per_year(double value, const std::string& where) {
  FOXHUNT_CHECK(std::isfinite(value) && value > 0, calendar_impl::kCalendarComponent, where,
                ": expected a finite number > 0 (bars per year), got ", value);
  PeriodsPerYear p;
  p.value = value;
  p.basis = CalendarBasis::kGiven;
  return p;
}

}  // namespace foxhunt::data
