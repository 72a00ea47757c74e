// foxhunt data generate|inspect|bars: synthetic bars, CSV validation (one series, a panel or a
// tape of prints) and bars built from a tape.

#include <fmt/format.h>
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/market_data.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/data/tape_bars.h"

namespace foxhunt::cli {
namespace {

struct DataArgs {
  static constexpr const char* kHelp =
      "Market data: generate synthetic bars, inspect a CSV or a tape, build bars from a tape";
  data::SyntheticOptions synth;
  std::string out;
  std::string input;
  bool json = false;
  // Tapes (inspect on a tape, bars).
  std::string ticks;
  std::string bar_spec;
  std::string on_bad = "refuse";
  std::string epoch_unit = "auto";
  double gap_minutes = 30.0;
};

/// The reader's options from --on-bad and --epoch-unit (values checked by CLI11).
data::TapeReadOptions tape_options(const DataArgs& a) {
  data::TapeReadOptions o;
  o.on_bad =
      a.on_bad == "drop" ? data::TapeBadPrintPolicy::kDrop : data::TapeBadPrintPolicy::kRefuse;
  if (a.epoch_unit == "s") o.epoch_unit = data::TapeEpochUnit::kSeconds;
  if (a.epoch_unit == "ms") o.epoch_unit = data::TapeEpochUnit::kMilliseconds;
  if (a.epoch_unit == "us") o.epoch_unit = data::TapeEpochUnit::kMicroseconds;
  if (a.epoch_unit == "ns") o.epoch_unit = data::TapeEpochUnit::kNanoseconds;
  return o;
}

nlohmann::json drops_json(const data::TapeDrops& d) {
  nlohmann::json j = {{"total", d.total()}, {"first_line", d.first_line}};
  for (int r = 0; r < static_cast<int>(data::TapeDropReason::kCount); ++r)
    j[data::to_string(static_cast<data::TapeDropReason>(r))] = d.count[static_cast<size_t>(r)];
  return j;
}

/// A tape: prints, span, sessions and gaps, prints per second, same-millisecond share, increment.
int inspect_tape(const DataArgs& a, const std::string& text) {
  const data::Tape tape = data::parse_tape_csv(text, a.input, tape_options(a));
  data::TapeSummaryOptions so;
  so.gap_seconds = a.gap_minutes * 60.0;
  const data::TapeSummary s = data::summarize_tape(tape, so);
  if (a.json) {
    nlohmann::json j = {{"file", a.input},
                        {"kind", "tape"},
                        {"first", data::format_time_ns(s.first_ns)},
                        {"last", data::format_time_ns(s.last_ns)},
                        {"dropped", drops_json(s.dropped)}};
    FOXHUNT_JSON_FIELDS(j, s, prints, first_ns, last_ns, span_seconds, gap_seconds,
                        median_prints_per_second, p99_prints_per_second, max_prints_per_second,
                        same_millisecond_share, identical_consecutive, price_increment, volume,
                        has_side, has_quotes, has_trade_id);
    nlohmann::json sessions = nlohmann::json::array(), gaps = nlohmann::json::array();
    for (size_t i = 0; i < s.sessions.size(); ++i) {
      const auto& x = s.sessions[i];
      sessions.push_back({{"first", data::format_time_ns(x.first_ns)},
                          {"last", data::format_time_ns(x.last_ns)},
                          {"prints", x.prints}});
      if (i > 0)
        gaps.push_back(
            {{"from", data::format_time_ns(s.sessions[i - 1].last_ns)},
             {"to", data::format_time_ns(x.first_ns)},
             {"seconds", static_cast<double>(x.first_ns - s.sessions[i - 1].last_ns) / 1e9}});
    }
    j["sessions"] = sessions;
    j["gaps"] = gaps;
    nlohmann::json symbols = nlohmann::json::array();
    for (const auto& x : s.symbols) {
      nlohmann::json row = {{"first", data::format_time_ns(x.first_ns)},
                            {"last", data::format_time_ns(x.last_ns)}};
      FOXHUNT_JSON_FIELDS(row, x, symbol, prints, volume, first_price, last_price, min_price,
                          max_price, price_increment);
      symbols.push_back(row);
    }
    j["symbols"] = symbols;
    print_json(j.dump(2));
    return 0;
  }
  fmt::print("file            {}\n", a.input);
  fmt::print("kind            tape of trade prints (side {}, quotes {}, trade id {})\n",
             s.has_side ? "given" : "tick rule", s.has_quotes ? "yes" : "no",
             s.has_trade_id ? "yes" : "no");
  fmt::print(
      "prints          {}{}\n", s.prints,
      tape.symbols.empty() ? std::string() : fmt::format(" ({} symbols)", tape.symbols.size()));
  fmt::print("span            {} .. {} ({:.1f} s)\n", data::format_time_ns(s.first_ns),
             data::format_time_ns(s.last_ns), s.span_seconds);
  fmt::print("sessions        {} (a gap is over {:g} min without a print)\n", s.sessions.size(),
             a.gap_minutes);
  for (size_t i = 0; i < s.sessions.size(); ++i) {
    const auto& x = s.sessions[i];
    if (i > 0)
      fmt::print("  gap           {:.1f} min\n",
                 static_cast<double>(x.first_ns - s.sessions[i - 1].last_ns) / 60e9);
    fmt::print("  session {:<5} {} .. {}  {} prints\n", i + 1, data::format_time_ns(x.first_ns),
               data::format_time_ns(x.last_ns), x.prints);
  }
  fmt::print("prints/second   median {:g}  p99 {:g}  max {} (over the seconds with prints)\n",
             s.median_prints_per_second, s.p99_prints_per_second, s.max_prints_per_second);
  fmt::print("same ms         {:.2f}% of consecutive prints share a millisecond\n",
             100.0 * s.same_millisecond_share);
  fmt::print("identical       {} prints repeat the print before them (kept as prints)\n",
             s.identical_consecutive);
  fmt::print("price increment {:g}\n", s.price_increment);
  fmt::print("volume          {:g}\n", s.volume);
  if (tape.symbols.size() > 1)
    for (const auto& x : s.symbols)
      fmt::print("  {:<12} {:>9} prints  {} .. {}  increment {:g}\n", x.symbol, x.prints,
                 data::format_time_ns(x.first_ns), data::format_time_ns(x.last_ns),
                 x.price_increment);
  fmt::print("dropped         {}", s.dropped.total());
  for (int r = 0; r < static_cast<int>(data::TapeDropReason::kCount); ++r)
    if (const int64_t c = s.dropped.count[static_cast<size_t>(r)])
      fmt::print("  {} {}", data::to_string(static_cast<data::TapeDropReason>(r)), c);
  fmt::print("\n");
  return 0;
}

/// Bars from a tape, written atomically as the tape-bar CSV (tape_bars.h).
int run_bars(const DataArgs& a) {
  const data::BarSpec spec = data::parse_bar_spec(a.bar_spec);  // before the tape: fail fast
  const data::Tape tape = data::load_tape_csv(a.ticks, tape_options(a));
  int64_t bars = 0, shifted = 0, first = 0, last = 0;
  if (tape.symbols.empty()) {
    const data::TapeBars tb = data::build_tape_bars(tape, spec);
    write_file_atomic(a.out, data::tape_bars_to_csv(tb));
    bars = tb.bars.size();
    shifted = tb.shifted_timestamps;
    first = tb.bars.bars.front().timestamp;
    last = tb.bars.bars.back().timestamp;
  } else {
    const data::TapePanelBars tp = data::build_tape_panel(tape, spec);
    write_file_atomic(a.out, data::tape_panel_to_csv(tp));
    bars = tp.panel.rows();
    first = tp.panel.timestamps.front();
    last = tp.panel.timestamps.back();
  }
  if (a.json) {
    print_json(nlohmann::json{{"out", a.out},
                              {"ticks", a.ticks},
                              {"bar", data::to_string(spec)},
                              {"prints", tape.size_prints()},
                              {"symbols", tape.symbol_count()},
                              {"bars", bars},
                              {"shifted_timestamps", shifted},
                              {"first_timestamp", data::format_timestamp(first)},
                              {"last_timestamp", data::format_timestamp(last)},
                              {"dropped", drops_json(tape.dropped)}}
                   .dump(2));
    return 0;
  }
  fmt::print(stderr, "data bars: wrote {} {} bars from {} prints to {}{}{}\n", bars,
             data::to_string(spec), tape.size_prints(), a.out,
             shifted ? fmt::format(" ({} bars started in a busy second: timestamp moved to the "
                                   "next free second)",
                                   shifted)
                     : std::string(),
             tape.dropped.total() ? fmt::format(" ({} bad prints dropped)", tape.dropped.total())
                                  : std::string());
  return 0;
}

nlohmann::json summary_json(const data::BarSummary& s, const std::string& file) {
  nlohmann::json j = {{"file", file},
                      {"span_seconds", s.last_timestamp - s.first_timestamp},
                      {"returns",
                       {{"total_log_return", s.total_log_return},
                        {"mean", s.mean_log_return},
                        {"std", s.std_log_return},
                        {"min", s.min_log_return},
                        {"max", s.max_log_return},
                        {"abs_autocorr_lag1", s.abs_return_autocorr}}}};
  FOXHUNT_JSON_FIELDS(j, s, rows, first_timestamp, last_timestamp, median_bar_seconds, close_only,
                      first_close, last_close, min_close, max_close, total_volume);
  return j;
}

int run_generate(const DataArgs& a) {
  const auto series = data::generate_synthetic(a.synth);
  data::write_bars_csv(a.out, series);
  if (a.json) {
    print_json(nlohmann::json{{"out", a.out},
                              {"bars", static_cast<int64_t>(series.size())},
                              {"seed", a.synth.seed},
                              {"first_timestamp", series.bars.front().timestamp},
                              {"last_timestamp", series.bars.back().timestamp},
                              {"bar_seconds", a.synth.bar_seconds}}
                   .dump(2));
    return 0;
  }
  std::cerr << "data generate: wrote " << series.size() << " bars (seed " << a.synth.seed << ") to "
            << a.out << "\n";
  return 0;
}

/// A file with a symbol column: one line per symbol (bars, first/last bar, missing bars).
int inspect_panel(const DataArgs& a, const data::Panel& panel) {
  const auto symbols = data::summarize_panel(panel);
  if (a.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : symbols)
      list.push_back({{"symbol", s.symbol},
                      {"bars", s.bars},
                      {"first_timestamp", data::format_timestamp(s.first_timestamp)},
                      {"last_timestamp", data::format_timestamp(s.last_timestamp)},
                      {"missing_bars", s.missing_bars},
                      {"close_only", s.close_only}});
    const nlohmann::json out = {{"file", a.input},
                                {"rows", panel.rows()},
                                {"symbols_count", panel.size()},
                                {"timestamps", static_cast<int64_t>(panel.timestamps.size())},
                                {"symbols", list}};
    print_json(out.dump(2));
    return 0;
  }
  int width = 6;  // "symbol"
  for (const auto& s : symbols) width = std::max(width, static_cast<int>(s.symbol.size()));
  std::printf("file            %s\n", a.input.c_str());
  std::printf("rows            %lld\n", static_cast<long long>(panel.rows()));
  std::printf("symbols         %lld (%lld timestamps in all)\n",
              static_cast<long long>(panel.size()),
              static_cast<long long>(panel.timestamps.size()));
  std::printf("%-*s  %6s  %-20s  %-20s  %7s\n", width, "symbol", "bars", "first", "last",
              "missing");
  for (const auto& s : symbols)
    std::printf("%-*s  %6lld  %-20s  %-20s  %7lld%s\n", width, s.symbol.c_str(),
                static_cast<long long>(s.bars), data::format_timestamp(s.first_timestamp).c_str(),
                data::format_timestamp(s.last_timestamp).c_str(),
                static_cast<long long>(s.missing_bars), s.close_only ? "  close only" : "");
  return 0;
}

int run_inspect(const DataArgs& a) {
  // InputError "file:line: ..." -> exit 2.
  // The file is read once: a tape, else bars or a panel.
  const std::string text = read_file(a.input);
  if (data::has_tape_header(text)) return inspect_tape(a, text);
  const auto bars = data::parse_market_data(text, a.input);
  if (bars.is_panel()) return inspect_panel(a, *bars.panel);
  const auto& series = bars.series;
  const auto s = data::summarize_bars(series);
  if (a.json) {
    print_json(summary_json(s, a.input).dump(2));
    return 0;
  }
  std::printf("file            %s\n", a.input.c_str());
  std::printf("rows            %lld\n", static_cast<long long>(s.rows));
  std::printf("span            %lld .. %lld (%lld s, median bar %lld s)\n",
              static_cast<long long>(s.first_timestamp), static_cast<long long>(s.last_timestamp),
              static_cast<long long>(s.last_timestamp - s.first_timestamp),
              static_cast<long long>(s.median_bar_seconds));
  std::printf("close only      %s\n", s.close_only ? "yes" : "no");
  std::printf("close           first %.6g  last %.6g  min %.6g  max %.6g\n", s.first_close,
              s.last_close, s.min_close, s.max_close);
  std::printf("log returns     total %.6g  mean %.3e  std %.3e  min %.3e  max %.3e\n",
              s.total_log_return, s.mean_log_return, s.std_log_return, s.min_log_return,
              s.max_log_return);
  std::printf("|ret| autocorr  %.4f (lag 1)\n", s.abs_return_autocorr);
  std::printf("total volume    %.6g\n", s.total_volume);
  return 0;
}

Registrar registered_data =
    subcommand<DataArgs>("data", 30, [](CLI::App* sub, std::shared_ptr<DataArgs> args) -> Runner {
      sub->require_subcommand(1);

      auto* gen = sub->add_subcommand("generate",
                                      "Write seeded synthetic bars (regimes, jumps, "
                                      "volatility clustering) to a CSV, atomically");
      add_defaulted(gen, "--bars", &args->synth.bars, "Number of bars")
          ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
      add_seed_flag(gen, &args->synth.seed, "Seed");
      add_defaulted(gen, "--start", &args->synth.start_timestamp,
                    "Timestamp of the first bar (Unix s)")
          ->check(non_negative_number());
      add_defaulted(gen, "--bar-seconds", &args->synth.bar_seconds, "Seconds between bars")
          ->check(CLI::Range(int64_t{1}, int64_t{86400 * 7}));
      gen->add_option("--out", args->out, "Output CSV path")->required();
      gen->add_flag("--json", args->json, "Print what was written as JSON only");

      auto* ins = sub->add_subcommand(
          "inspect",
          "Validate a bar CSV and print a summary (exit 2 with FILE:LINE on bad input); a panel "
          "CSV (with a symbol column) lists each symbol's bars, span and missing bars");
      ins->add_option("file", args->input,
                      "CSV file (one series, a panel in long format, or a tape of prints)")
          ->required();
      ins->add_flag("--json", args->json, "Print JSON only");
      auto add_tape_flags = [&](CLI::App* c) {
        add_defaulted(c, "--on-bad", &args->on_bad,
                      "Tape prints out of order, with a price or size <= 0, a crossed quote or a "
                      "repeated trade id: refuse (exit 2 naming FILE:LINE) or drop and count them")
            ->check(CLI::IsMember({"refuse", "drop"}));
        add_defaulted(c, "--epoch-unit", &args->epoch_unit,
                      "Unit of a tape's Unix epoch timestamps (auto: from their magnitude)")
            ->check(CLI::IsMember({"auto", "s", "ms", "us", "ns"}));
      };
      add_tape_flags(ins);
      add_defaulted(ins, "--gap-minutes", &args->gap_minutes,
                    "Tape: minutes without a print that end a session")
          ->check(positive_number());

      auto* bars = sub->add_subcommand(
          "bars",
          "Build bars from a tape of trade prints (time, tick, volume or dollar bars) and write "
          "them atomically as a bar CSV with the flow columns (vwap, prints, buy/sell volume, "
          "duration, realized variance); train, predict and inspect read it like any bar CSV. A "
          "tape with a symbol column gives a panel (time bars only)");
      bars->add_option("--ticks", args->ticks, "Tape CSV (DateTime,Price,Volume or richer)")
          ->required();
      bars->add_option("--bar", args->bar_spec,
                       "Bar spec: time:60s (ms, s, m, h; >= 1 s), tick:500, volume:1000, "
                       "dollar:5e6")
          ->required();
      bars->add_option("--out", args->out, "Output CSV path")->required();
      bars->add_flag("--json", args->json, "Print what was written as JSON only");
      add_tape_flags(bars);

      return [args, gen, ins, bars]() {
        if (gen->parsed()) return run_generate(*args);
        if (ins->parsed()) return run_inspect(*args);
        if (bars->parsed()) return run_bars(*args);
        std::cerr << "foxhunt: data: expected 'generate', 'inspect' or 'bars' (see --help)"
                  << std::endl;
        return static_cast<int>(foxhunt::kExitUsage);
      };
    });

}  // namespace
}  // namespace foxhunt::cli
