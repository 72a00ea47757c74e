#pragma once
// The tape flags of train, predict, backtest and stress, declared once: --ticks TAPE, --bar
// SPEC, --on-bad and --epoch-unit (data/tape.h, data/bar_builder.h), and --periods-per-year
// (data/calendar.h). They become the library's typed values; only app/ knows the flag names.

#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/tape.h"

namespace foxhunt::cli {

/// --ticks, --bar, --on-bad, --epoch-unit.
struct TapeFlags {
  std::string ticks;              ///< --ticks: the tape CSV ("-": stdin, where a command reads one)
  std::string bar;                ///< --bar: the bar spec as given ("" = none)
  std::string on_bad = "refuse";  ///< --on-bad: refuse or drop
  std::string epoch_unit = "auto";  ///< --epoch-unit: auto, s, ms, us, ns
  CLI::Option* ticks_option = nullptr;

  /// Adds the four flags to `sub`; `ticks_help` says what the tape is for in this command.
  void add(CLI::App* sub, const std::string& ticks_help);
  /// True when --ticks was given.
  bool given() const { return !ticks.empty(); }
  /// The reader's options from --on-bad and --epoch-unit.
  data::TapeReadOptions read_options() const;
  /// --bar parsed (data::parse_bar_spec: InputError naming the forms); none when not given.
  std::optional<data::BarSpec> spec() const;
  /// --bar, required: InputError "[COMPONENT] --bar: expected a bar spec with --ticks ..." when
  /// it was not given.
  data::BarSpec required_spec(const char* component) const;
  /// InputError "[COMPONENT] --bar/--on-bad/--epoch-unit apply to a tape (--ticks)" when a tape
  /// flag was given without --ticks.
  void check_used(const char* component) const;
};

/// Adds --periods-per-year to `sub`, bound to `*target` (0 = inferred; must be > 0 when given).
CLI::Option* add_periods_per_year_flag(CLI::App* sub, double* target, const std::string& what);

}  // namespace foxhunt::cli
