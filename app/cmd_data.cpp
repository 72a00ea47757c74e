// foxhunt data generate|inspect: synthetic bars and CSV validation (one series or a panel).

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/market_data.h"
#include "foxhunt/data/panel.h"

namespace foxhunt::cli {
namespace {

struct DataArgs {
  /// The command's line in `foxhunt --help`.
  static constexpr const char* kHelp = "Market data: generate synthetic bars, inspect a CSV";
  data::SyntheticOptions synth;
  std::string out;
  std::string input;
  bool json = false;
};

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
  const auto bars = data::load_market_data(a.input);
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
      ins->add_option("file", args->input, "CSV file (one series, or a panel in long format)")
          ->required();
      ins->add_flag("--json", args->json, "Print JSON only");

      return [args, gen, ins]() {
        if (gen->parsed()) return run_generate(*args);
        if (ins->parsed()) return run_inspect(*args);
        std::cerr << "foxhunt: data: expected 'generate' or 'inspect' (see --help)" << std::endl;
        return static_cast<int>(foxhunt::kExitUsage);
      };
    });

}  // namespace
}  // namespace foxhunt::cli
