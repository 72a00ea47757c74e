// The tape through the commands (issue 46, Commands): predict --ticks decides on every closed bar
// exactly as predict on the bars `data bars` writes for the same tape; the bar spec recorded in
// the bundles, another spec refused; backtest --ticks and stress --ticks; which calendar
// annualises the figures.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "foxhunt/core/container.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"
#include "serving_test_fixture.h"

namespace foxhunt::serving {
namespace {

using foxhunt::testing::CliResult;

constexpr int64_t kNs = 1'000'000'000;
constexpr int64_t kDay0 = 1704153600;  // 2024-01-02T00:00:00Z: after the bundles' data

/// A tape of `sessions` days of `minutes` minutes from 14:30 UTC, 5 prints a minute (one in five
/// repeated: two fills in one millisecond); with `symbols`, two instruments interleaved.
std::string make_tape(int sessions, int minutes, bool symbols, uint64_t seed = 3) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0.0, 1.0);
  std::string out = symbols ? "timestamp,symbol,price,size\n" : "timestamp,price,size\n";
  std::vector<std::string> names =
      symbols ? std::vector<std::string>{"NQH4", "ESH4"} : std::vector<std::string>{""};
  std::vector<double> price(names.size(), 100.0);
  for (int d = 0; d < sessions; ++d) {
    const int64_t open = (kDay0 + d * 86400 + 14 * 3600 + 1800) * kNs;
    for (int m = 0; m < minutes; ++m)
      for (int k = 0; k < 5; ++k)
        for (size_t s = 0; s < names.size(); ++s) {
          const int64_t t = open + m * 60 * kNs + k * 12 * kNs +
                            static_cast<int64_t>(rng() % 1000) * 1'000'000 +
                            static_cast<int64_t>(s);
          price[s] = std::round(price[s] * std::exp(5e-4 * z(rng)) * 100.0) / 100.0;
          const std::string line =
              symbols ? fmt::format("{},{},{},{}\n", data::format_time_ns(t), names[s], price[s],
                                    1 + rng() % 9)
                      : fmt::format("{},{},{}\n", data::format_time_ns(t), price[s], 1 + rng() % 9);
          out += line;
          if (rng() % 5 == 0) out += line;
        }
  }
  return out;
}

std::string write(const TempDir& tmp, const std::string& name, const std::string& text) {
  const auto path = tmp.file(name);
  std::ofstream(path) << text;
  return path;
}

/// Fresh bundles (no training) that record `spec` as the bars they were trained on.
std::string tape_bundles(const TempDir& tmp, const std::string& spec) {
  auto bundles = fresh_bundles(data::MarketDataset(bars(700)));
  for (auto& b : bundles) b.bars = BarOrigin{data::parse_bar_spec(spec), "tape"};
  save_all(bundles, tmp.path() / "tb");
  return (tmp.path() / "tb").string();
}

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

/// What must be equal between two decisions of the same bar (latencies are not).
nlohmann::json decision_of(const nlohmann::json& j) {
  nlohmann::json raw = nlohmann::json::object();
  for (const auto& [m, v] : j["models"].items()) raw[m] = v["raw"];
  return {{"timestamp", j["timestamp"]},
          {"signals", j["signals"]},
          {"decision", j["decision"]},
          {"position", j["position"]},
          {"raw", raw},
          {"symbol", j.value("symbol", std::string())}};
}

/// Writes the time:1m bars of `tape` to `csv` (`data bars`), then runs `predict --json` with the
/// bundles of `dir` on them and on the tape itself (`--ticks TAPE` then `tape_flags`); both runs
/// must succeed.
void predict_bars_and_ticks(const std::string& dir, const std::string& tape, const std::string& csv,
                            const std::string& tape_flags, CliResult& from_bars,
                            CliResult& from_tape) {
  ASSERT_EQ(run_cli("data bars --ticks " + tape + " --bar time:1m --out " + csv).exit_code, 0);
  from_bars = run_cli("predict --bundles " + dir + " --data " + csv + " --json");
  ASSERT_EQ(from_bars.exit_code, 0) << from_bars.err;
  from_tape = run_cli("predict --bundles " + dir + " --ticks " + tape + tape_flags + " --json");
  ASSERT_EQ(from_tape.exit_code, 0) << from_tape.err;
}

/// Column `col` of every data row of a CSV.
std::vector<std::string> csv_column(const std::string& path, size_t col) {
  std::ifstream in(path);
  std::vector<std::string> out;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::stringstream ss(line);
    std::string field;
    for (size_t i = 0; i <= col && std::getline(ss, field, ','); ++i) {
    }
    out.push_back(field);
  }
  return out;
}

TEST_F(ServingTest, PredictTicksDecidesOnEveryClosedBarAsPredictOnItsBarsCsv) {
  TempDir tmp;
  const std::string dir = tape_bundles(tmp, "time:1m");
  const std::string tape = write(tmp, "tape.csv", make_tape(2, 400, false));
  const std::string csv = tmp.file("bars.csv");
  // The bundles' recorded spec applies without --bar; a file and stdin give the same.
  CliResult from_bars, from_tape;
  ASSERT_NO_FATAL_FAILURE(predict_bars_and_ticks(dir, tape, csv, "", from_bars, from_tape));
  const auto from_stdin = run_cli("predict --bundles " + dir + " --ticks - --json < " + tape);
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;

  const auto a = json_lines(from_bars.out), b = json_lines(from_tape.out),
             c = json_lines(from_stdin.out);
  ASSERT_EQ(a.size(), 800u);  // one decision per closed bar: 2 sessions of 400 minutes
  ASSERT_EQ(b.size(), a.size());
  ASSERT_EQ(c.size(), a.size());
  const auto starts = csv_column(csv, 12);  // start_ns: the first print of each bar
  ASSERT_EQ(starts.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(decision_of(b[i]), decision_of(a[i])) << "bar " << i;
    ASSERT_EQ(decision_of(c[i]), decision_of(a[i])) << "bar " << i;
    // A time bar closes on the first print of the next bar; the last one at the end of the tape.
    const bool last = i + 1 == a.size();
    EXPECT_EQ(b[i]["closed_by_end"].get<bool>(), last) << i;
    if (!last) {
      EXPECT_EQ(std::to_string(b[i]["close_print_ns"].get<int64_t>()), starts[i + 1]) << i;
      EXPECT_EQ(b[i]["close_print_time"].get<std::string>(),
                data::format_time_ns(b[i]["close_print_ns"].get<int64_t>()));
    }
    EXPECT_GE(b[i]["print_to_decision_ns"].get<int64_t>(), 0) << i;
  }
  // The figures on stderr: prints, bars, the latency and the calendar.
  EXPECT_NE(from_tape.err.find("-> 800 time:1m bars"), std::string::npos) << from_tape.err;
  EXPECT_NE(from_tape.err.find("print-to-decision p50"), std::string::npos) << from_tape.err;
  EXPECT_NE(from_tape.err.find("periods/year: "), std::string::npos) << from_tape.err;
}

TEST_F(ServingTest, PredictTicksRefusesAnotherBarSpecNamingBothAndTheBundle) {
  TempDir tmp;
  const std::string dir = tape_bundles(tmp, "time:1m");
  const std::string tape = write(tmp, "tape.csv", make_tape(1, 30, false));
  const auto r = run_cli("predict --bundles " + dir + " --ticks " + tape + " --bar tick:50");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  for (const auto& part :
       std::vector<std::string>{"'tick:50'", "'time:1m'", dir + "/dqn/bundle.fhb"})
    EXPECT_NE(r.err.find(part), std::string::npos) << part << " in " << r.err;
  // The same spec, stated, is accepted (60s is 1m).
  EXPECT_EQ(run_cli("predict --bundles " + dir + " --ticks " + tape + " --bar time:60s").exit_code,
            0);
  // Bundles trained on plain bars record no spec: --bar is then required, and enough.
  const std::string plain = saved_fresh_bundles(tmp, 700);
  const auto none = run_cli("predict --bundles " + plain + " --ticks " + tape);
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("record no bar spec"), std::string::npos) << none.err;
  EXPECT_EQ(run_cli("predict --bundles " + plain + " --ticks " + tape + " --bar time:1m").exit_code,
            0);
  // One input only.
  const auto both = run_cli("predict --bundles " + dir + " --ticks " + tape + " --data " + tape);
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("got both"), std::string::npos) << both.err;
}

TEST_F(ServingTest, PredictTicksServesATapeWithSymbolsAsItsPanelOfTimeBars) {
  TempDir tmp;
  const std::string dir = saved_fresh_bundles(tmp, 700);
  const std::string tape = write(tmp, "tape.csv", make_tape(1, 120, true));
  CliResult p, t;
  ASSERT_NO_FATAL_FAILURE(
      predict_bars_and_ticks(dir, tape, tmp.file("panel.csv"), " --bar time:1m", p, t));
  const auto a = json_lines(p.out), b = json_lines(t.out);
  ASSERT_EQ(a.size(), 240u);  // 2 symbols x 120 bars
  ASSERT_EQ(b.size(), a.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(decision_of(b[i]), decision_of(a[i])) << i;
  // A desk decides on one clock: tick bars are refused there, as the data layer refuses them.
  const auto tick = run_cli("predict --bundles " + dir + " --ticks " + tape + " --bar tick:20");
  EXPECT_EQ(tick.exit_code, 2);
  EXPECT_NE(tick.err.find("a desk needs time bars"), std::string::npos) << tick.err;
}

TEST_F(ServingTest, BacktestTicksScoresTheTapesBarsAndSaysWhichCalendar) {
  TempDir tmp;
  const std::string dir = tape_bundles(tmp, "time:1m");
  const std::string tape = write(tmp, "tape.csv", make_tape(4, 400, false));
  const auto j = foxhunt::testing::run_cli_json(
      "backtest --bundles " + dir + " --ticks " + tape + " --gate none --json", 0);
  // 4 sessions of 400 one-minute bars: a year is 400 x 252 bars, not 525,960 (24 h x 365 d).
  EXPECT_DOUBLE_EQ(j["periods_per_year"].get<double>(), 400.0 * 252.0);
  EXPECT_NE(j["periods_per_year_basis"].get<std::string>().find("sessions of ~400 bars"),
            std::string::npos)
      << j["periods_per_year_basis"];
  EXPECT_GT(j["scored_bars"].get<int64_t>(), 100);
  EXPECT_EQ(j["data"], tape + "[time:1m]");
  // Scored bars inside one session (the last afternoon) cannot show a session: the calendar is
  // the sessions of every bar fed, not the spacing's 24 h x 365 d.
  const auto pm = foxhunt::testing::run_cli_json("backtest --bundles " + dir + " --ticks " + tape +
                                                     " --gate none --json --from "
                                                     "2024-01-05T16:00:00Z",
                                                 0);
  EXPECT_EQ(pm["scored_bars"].get<int64_t>(), 310);
  EXPECT_DOUBLE_EQ(pm["periods_per_year"].get<double>(), 400.0 * 252.0)
      << pm["periods_per_year_basis"];
  // Stated: used for the figures and the rule, and said so.
  const auto g = foxhunt::testing::run_cli_json("backtest --bundles " + dir + " --ticks " + tape +
                                                    " --gate none --json --periods-per-year 5000",
                                                0);
  EXPECT_DOUBLE_EQ(g["periods_per_year"].get<double>(), 5000.0);
  EXPECT_EQ(g["periods_per_year_basis"], "5,000 (given)");
  EXPECT_DOUBLE_EQ(g["rule"]["periods_per_year"].get<double>(), 5000.0);
  // Another spec is refused as predict refuses it.
  const auto other =
      run_cli("backtest --bundles " + dir + " --ticks " + tape + " --bar volume:100 --json");
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("'volume:100'"), std::string::npos) << other.err;
}

TEST_F(ServingTest, StressTicksReportsPrintsBarsAndPrintToDecisionLatency) {
  TempDir tmp;
  const std::string dir = tape_bundles(tmp, "time:1m");
  const std::string text = make_tape(1, 300, false);
  const std::string tape = write(tmp, "tape.csv", text);
  const int64_t prints = std::count(text.begin(), text.end(), '\n') - 1;
  const auto j =
      foxhunt::testing::run_cli_json("stress --bundles " + dir + " --ticks " + tape + " --json", 0);
  ASSERT_TRUE(j["scenarios"].contains("tape")) << j.dump();
  const auto& s = j["scenarios"]["tape"];
  EXPECT_TRUE(s["ok"].get<bool>()) << s.dump();
  const auto& d = s;  // a scenario's details are its own keys (StressReport::to_json)
  EXPECT_EQ(d["prints"].get<int64_t>(), prints);
  EXPECT_EQ(d["bars"].get<int64_t>(), 300);
  EXPECT_EQ(d["bar_spec"], "time:1m");
  EXPECT_GT(d["prints_per_s"].get<double>(), 0.0);
  EXPECT_GT(d["bars_per_s"].get<double>(), 0.0);
  EXPECT_GT(d["print_to_decision_us"]["p50"].get<double>(), 0.0);
  EXPECT_GE(d["print_to_decision_us"]["p99"].get<double>(),
            d["print_to_decision_us"]["p50"].get<double>());
  // The tape scenario without a tape says what it needs.
  const auto none = run_cli("stress --bundles " + dir + " --scenario tape --json");
  EXPECT_NE(none.exit_code, 0);
}

TEST_F(ServingTest, BundlesRecordTheBarSpecAndCalendarAndOldOnesMeanPlainBars) {
  TempDir tmp;
  auto bundles = fresh_bundles(data::MarketDataset(bars(700)));
  // A bundle written without them (every bundle before tapes) loads as plain bars.
  save_all(bundles, tmp.path() / "plain");
  const auto plain = load_bundle((tmp.path() / "plain" / "tft").string());
  EXPECT_FALSE(plain.bars.has_value());
  EXPECT_EQ(plain.periods_per_year, 0.0);
  EXPECT_EQ(
      read_container((tmp.path() / "plain" / "tft" / kBundleFile).string()).header.count("bars"),
      0u);
  for (auto& b : bundles) {
    b.bars = BarOrigin{data::parse_bar_spec("tick:500"), "tape"};
    b.periods_per_year = 98280;
    b.periods_per_year_basis = "98,280 (given)";
  }
  save_all(bundles, tmp.path() / "tape");
  const auto dir = (tmp.path() / "tape").string();
  const auto loaded = load_ensemble_bundles(dir);
  for (const auto& b : loaded) {
    ASSERT_TRUE(b.bars.has_value()) << b.name();
    EXPECT_EQ(data::to_string(b.bars->spec), "tick:500");
    EXPECT_EQ(b.bars->source, "tape");
    EXPECT_EQ(b.periods_per_year, 98280.0);
  }
  const auto header = read_container(BundleDirectory(dir).bundle_path("tft")).header;
  EXPECT_EQ(header["bars"]["spec"], "tick:500");
  EXPECT_EQ(header["calendar"]["periods_per_year"], 98280.0);
  // Serving annualises with the recorded calendar; a rule's own figure still wins.
  EXPECT_EQ(resolve_rule(DecisionRule{}, loaded).periods_per_year, 98280.0);
  EXPECT_EQ(periods_per_year_basis(DecisionRule{}, loaded), "98,280 (given)");
  DecisionRule fixed;
  fixed.periods_per_year = 252;
  EXPECT_EQ(resolve_rule(fixed, loaded).periods_per_year, 252.0);
  EXPECT_EQ(tape_bar_spec(loaded, dir, std::nullopt), data::parse_bar_spec("tick:500"));
  // Bundles that disagree are one error naming both.
  auto mixed = loaded;
  mixed[1].bars.reset();
  foxhunt::testing::expect_input_error([&] { (void)recorded_bar_spec(mixed, dir); }, "bundle",
                                       {"plain bars", "'tick:500'"});
}

// train all on a tape: the spec and calendar in every bundle, predict --ticks without --bar.
TEST(TapeCommandsEndToEndTest, TrainAllOnATapeRecordsTheSpecAndServesIt_SLOW) {
  TempDir tmp;
  const std::string tape = write(tmp, "tape.csv", make_tape(4, 400, false));
  const std::string out = (tmp.path() / "ens").string();
  const auto train = run_cli("train all --ticks " + tape +
                             " --bar time:1m --steps 600 --epochs 1 --progress off --out " + out);
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_NE(train.out.find("periods/year: 100,800 (inferred from 4 sessions of ~400 bars"),
            std::string::npos)
      << train.out;
  for (const auto& b : load_ensemble_bundles(out)) {
    ASSERT_TRUE(b.bars.has_value()) << b.name();
    EXPECT_EQ(data::to_string(b.bars->spec), "time:1m");
    EXPECT_EQ(b.periods_per_year, 400.0 * 252);
  }
  const auto p = run_cli("predict --bundles " + out + " --ticks " + tape + " --json");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(json_lines(p.out).size(), 1600u);
  // --periods-per-year is stated and recorded as given.
  const auto given = run_cli("train all --ticks " + tape +
                             " --bar time:1m --steps 600 --epochs 1 --progress off "
                             "--periods-per-year 5000 --out " +
                             out + "2");
  ASSERT_EQ(given.exit_code, 0) << given.err;
  EXPECT_NE(given.out.find("periods/year: 5,000 (given)"), std::string::npos) << given.out;
  EXPECT_EQ(load_ensemble_bundles(out + "2").front().periods_per_year, 5000.0);
}

}  // namespace
}  // namespace foxhunt::serving
