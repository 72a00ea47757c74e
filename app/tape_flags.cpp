// The tape flags shared by train, predict, backtest and stress (tape_flags.h).
#include "tape_flags.h"

#include "command.h"
#include "foxhunt/core/error.h"

namespace foxhunt::cli {

void TapeFlags::add(CLI::App* sub, const std::string& ticks_help) {
  ticks_option = sub->add_option("--ticks", ticks, ticks_help);
  sub->add_option("--bar", bar,
                  "Bar spec of the tape's bars: time:60s (ms, s, m, h; >= 1 s), tick:500, "
                  "volume:1000, dollar:5e6 (default: the bundles' recorded spec, where there are "
                  "bundles)");
  add_defaulted(sub, "--on-bad", &on_bad,
                "Tape prints out of order, with a price or size <= 0, a crossed quote or a "
                "repeated trade id: refuse (exit 2 naming FILE:LINE) or drop and count them")
      ->check(CLI::IsMember({"refuse", "drop"}));
  add_defaulted(sub, "--epoch-unit", &epoch_unit,
                "Unit of a tape's Unix epoch timestamps (auto: from their magnitude)")
      ->check(CLI::IsMember({"auto", "s", "ms", "us", "ns"}));
}

data::TapeReadOptions TapeFlags::read_options() const {
  data::TapeReadOptions o;
  o.on_bad = on_bad == "drop" ? data::TapeBadPrintPolicy::kDrop : data::TapeBadPrintPolicy::kRefuse;
  if (epoch_unit == "s") o.epoch_unit = data::TapeEpochUnit::kSeconds;
  if (epoch_unit == "ms") o.epoch_unit = data::TapeEpochUnit::kMilliseconds;
  if (epoch_unit == "us") o.epoch_unit = data::TapeEpochUnit::kMicroseconds;
  if (epoch_unit == "ns") o.epoch_unit = data::TapeEpochUnit::kNanoseconds;
  return o;
}

std::optional<data::BarSpec> TapeFlags::spec() const {
  if (bar.empty()) return std::nullopt;
  return data::parse_bar_spec(bar);
}

data::BarSpec TapeFlags::required_spec(const char* component) const {
  FOXHUNT_CHECK(!bar.empty(), component, "--bar: expected a bar spec with --ticks (",
                data::kBarSpecForms, ")");
  return data::parse_bar_spec(bar);
}

void TapeFlags::check_used(const char* component) const {
  FOXHUNT_CHECK(
      given() || (bar.empty() && on_bad == "refuse" && epoch_unit == "auto"), component,
      "--bar, --on-bad and --epoch-unit apply to a tape: expected --ticks TAPE with them");
}

CLI::Option* add_periods_per_year_flag(CLI::App* sub, double* target, const std::string& what) {
  return sub
      ->add_option("--periods-per-year", *target,
                   "Bars per year that annualise " + what +
                       " (default: inferred from the bars: over 30 days or more their count per "
                       "year, a short intraday span by its sessions x 252, else the spacing)")
      ->check(positive_number());
}

}  // namespace foxhunt::cli
