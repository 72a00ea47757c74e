// foxhunt stress (harness/stress.h): every scenario on fresh default models, the leak verdicts
// (a planted leak is caught, a clean run is not), the cap, the report and the CLI.
#include <gtest/gtest.h>

#include <chrono>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/harness/reports.h"
#include "foxhunt/harness/stress.h"
#include "foxhunt/memory/ledger.h"
#include "test_util.h"

namespace foxhunt::harness {
using namespace foxhunt::serving;
namespace {

using foxhunt::testing::run_cli;
using foxhunt::testing::run_cli_json;
using foxhunt::testing::TempDir;

StressOptions small_options() {
  StressOptions o;
  o.iterations = 40;
  o.soak = 400;
  o.sample_every = 20;
  o.switch_cycles = 3;
  o.rate = 100;
  o.duration_s = 1.0;
  o.min_queries = 50;
  o.train_steps = 256;
  o.train_epochs = 1;
  o.train_bars = 900;
  return o;
}

const ScenarioResult& only(const StressReport& r) {
  EXPECT_EQ(r.scenarios.size(), 1u);
  return r.scenarios.at(0);
}

// Runs `scenario` alone with `o` and returns its result.
ScenarioResult run_one(const StressOptions& o, const std::string& scenario) {
  std::ostringstream log;
  return only(run_stress(o, {scenario}, log));
}

TEST(Stress, ConcurrentOutputsEqualSerialAndLedgerReturnsToBaseline) {
  const auto s = run_one(small_options(), "concurrent");
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_TRUE(s.ok) << s.summary;
  EXPECT_TRUE(s.details.at("outputs_match_serial").get<bool>());
  EXPECT_EQ(s.details.at("baseline_live_bytes"), s.details.at("final_live_bytes"));
  EXPECT_FALSE(s.details.at("leak_detected").get<bool>());
  EXPECT_GT(s.details.at("throughput_per_s").get<double>(), 0.0);
  EXPECT_EQ(s.latencies_us.size(), 40u);
  // Every model's weights are resident under its own scope, and the four are all there.
  for (const char* m : {"dqn", "ppo", "mamba2", "tft"})
    EXPECT_GT(s.details.at("resident_bytes").at(m).at("live_bytes").get<int64_t>(), 1000) << m;
  EXPECT_EQ(s.model_live_bytes.size(), 4u);
}

TEST(Stress, InstrumentsServeADeskPerTimestamp) {
  auto o = small_options();
  o.instruments = 6;
  o.iterations = 12;
  o.soak = 40;
  o.sample_every = 10;
  o.plant_leak_every = 0;
  std::ostringstream log;
  const auto rep = run_stress(o, {"concurrent", "soak", "server"}, log);
  ASSERT_EQ(rep.scenarios.size(), 3u);
  EXPECT_EQ(rep.environment.at("instruments").get<int64_t>(), 6);
  const auto& c = rep.scenarios[0];
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_TRUE(c.ok) << c.summary;
  EXPECT_EQ(c.details.at("instruments").get<int64_t>(), 6);
  EXPECT_TRUE(c.details.at("outputs_match_serial").get<bool>());
  EXPECT_EQ(c.latencies_us.size(), 12u);  // one per timestamp (the whole batch)
  const double rate = c.details.at("instrument_bars_per_s").get<double>();
  EXPECT_GT(rate, 0.0);
  EXPECT_GT(c.details.at("single_instrument_bars_per_s").get<double>(), 0.0);
  EXPECT_NEAR(c.details.at("batching_gain").get<double>(),
              rate / c.details.at("single_instrument_bars_per_s").get<double>(), 1e-9);
  // The instrument state is in the leak check's bytes (declared to the ledger) and constant.
  EXPECT_EQ(c.details.at("instrument_state_bytes").get<uint64_t>(),
            6 * c.details.at("state_bytes_per_instrument").get<uint64_t>());
  EXPECT_GE(c.details.at("baseline_live_bytes").get<uint64_t>(),
            c.details.at("instrument_state_bytes").get<uint64_t>());
  EXPECT_EQ(c.details.at("baseline_live_bytes"), c.details.at("final_live_bytes"));
  for (size_t k = 1; k < 3; ++k) {
    const auto& s = rep.scenarios[k];
    ASSERT_TRUE(s.error.empty()) << s.name << ": " << s.error;
    EXPECT_TRUE(s.ok) << s.summary;
    EXPECT_EQ(s.details.at("instruments").get<int64_t>(), 6) << s.name;
    EXPECT_GT(s.details.at("instrument_bars_per_s").get<double>(), 0.0) << s.name;
  }
  EXPECT_EQ(rep.scenarios[1].latencies_us.size(), 40u);
  EXPECT_GT(rep.scenarios[1].details.at("instrument_state_bytes").get<uint64_t>(), 6u * 10000u);
  o.instruments = 0;
  EXPECT_THROW(run_stress(o, {"soak"}, log), InputError);
}

TEST(Stress, PlantedLeakIsCaughtAndACleanSoakIsNot) {
  auto o = small_options();
  const auto c = run_one(o, "soak");
  ASSERT_TRUE(c.error.empty()) << c.error;
  EXPECT_TRUE(c.ok) << c.summary;
  EXPECT_FALSE(c.details.at("leak_detected").get<bool>());
  EXPECT_EQ(c.details.at("leak").at("residual_bytes").get<int64_t>(), 0);
  EXPECT_TRUE(c.details.at("leak").at("measured").get<bool>());
  EXPECT_EQ(c.memory_x.size(), 1u + 400 / 20);

  o.plant_leak_every = 50;  // 4 KiB every 50 bars = 80 KiB per 1,000 bars
  const auto l = run_one(o, "soak");
  EXPECT_FALSE(l.ok);
  EXPECT_TRUE(l.details.at("leak_detected").get<bool>());
  EXPECT_EQ(l.details.at("leak").at("residual_bytes").get<int64_t>(), 8 * 4096);
  EXPECT_NEAR(l.details.at("slope_bytes_per_1k").get<double>(), 4096.0 * 1000 / 50,
              0.15 * 4096.0 * 1000 / 50);
}

TEST(Stress, SwitchCyclesLoadAndUnloadBackToBaseline) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto s = run_one(small_options(), "switch");
  const double wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_TRUE(s.ok) << s.summary;
  EXPECT_EQ(s.details.at("cycles_off_baseline").get<int64_t>(), 0);
  // Milliseconds, as named: a cycle holds its load and fits in the whole run.
  const auto& cycle = s.details.at("cycle_ms");
  EXPECT_GE(cycle.at("p50").get<double>(), s.details.at("load_ms").at("p50").get<double>());
  EXPECT_LE(cycle.at("max").get<double>(), wall_ms);
  EXPECT_EQ(s.memory_x.size(), 4u);  // the baseline and one sample per cycle
  for (double live : s.live_bytes) EXPECT_EQ(live, s.live_bytes.front());
}

TEST(Stress, SequentialTrainingLeavesNothingBehind) {
  const auto s = run_one(small_options(), "train");
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_TRUE(s.ok) << s.summary;
  ASSERT_EQ(s.details.at("runs").size(), 4u);
  for (const auto& run : s.details.at("runs")) {
    EXPECT_TRUE(run.at("completed").get<bool>()) << run.dump();
    EXPECT_EQ(run.at("residual_bytes").get<int64_t>(), 0) << run.dump();
    // Training really allocated: its peak is well above what it left.
    EXPECT_GT(run.at("peak_live_bytes").get<int64_t>(), run.at("after_live_bytes").get<int64_t>());
  }
}

TEST(Stress, ServerLatencyCountsFromTheScheduledArrival) {
  auto o = small_options();
  o.models = {"dqn", "ppo"};
  o.p99_ms = 1000.0;  // generous: the verdict must then be valid
  const auto s = run_one(o, "server");
  ASSERT_TRUE(s.error.empty()) << s.error;
  EXPECT_TRUE(s.ok) << s.summary;
  const auto q = s.details.at("queries").get<int64_t>();
  EXPECT_GT(q, 60);  // ~100 arrivals in 1 s
  EXPECT_LT(q, 140);
  EXPECT_TRUE(s.details.at("valid").get<bool>());
  for (double us : s.latencies_us) EXPECT_GE(us, 0.0);
  EXPECT_NEAR(s.details.at("achieved_rate_per_s").get<double>(), static_cast<double>(q), 0.3 * q);

  o.p99_ms = 1e-6;  // impossible: invalid, and the report says why
  const auto bad = run_one(o, "server");
  EXPECT_FALSE(bad.details.at("valid").get<bool>());
  EXPECT_NE(bad.details.at("invalid_because").get<std::string>().find("p99"), std::string::npos);
}

TEST(Stress, CapTooSmallForTheModelsIsATypedOutOfMemoryFailure) {
  std::ostringstream log;
  auto o = small_options();
  o.budget = memory::Budget::of_bytes(512 * 1024);  // the TFT's weights alone are larger
  const auto r = run_stress(o, {"concurrent"}, log);
  const auto& s = only(r);
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.error_type, "out_of_memory") << s.error;
  EXPECT_EQ(r.environment.at("enforced_cap_bytes").get<uint64_t>(), 512u * 1024);
  EXPECT_EQ(s.details.at("limit_bytes").get<uint64_t>(), 512u * 1024);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(memory::get_limit(), 0u);  // the cap ends with the run
  // The report of a failed run is still written and says what happened.
  TempDir dir;
  write_stress_report(r, dir.file("rep"));
  const auto j = nlohmann::json::parse(read_file(dir.file("rep/stress.json")));
  EXPECT_EQ(j.at("scenarios").at("concurrent").at("error_type"), "out_of_memory");
}

TEST(Stress, ReportHoldsTheSvgPlots) {
  std::ostringstream log;
  const auto r = run_stress(small_options(), {"soak"}, log);
  TempDir dir;
  const auto html_path = write_stress_report(r, dir.file("rep"));
  const auto html = read_file(html_path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  size_t svgs = 0;
  for (size_t p = html.find("<svg"); p != std::string::npos; p = html.find("<svg", p + 1)) ++svgs;
  EXPECT_GE(svgs, 5u);  // memory per model, RSS, profiler timeline, latency histogram, throughput
  EXPECT_NE(html.find("memory over time"), std::string::npos);
  ASSERT_EQ(r.scenarios.size(), 1u);
  EXPECT_GE(r.scenarios[0].profile_t.size(), 2u);  // the profiler sampled the run
  EXPECT_TRUE(r.scenarios[0].details.contains("profiler"));
  EXPECT_NE(html.find("<polyline"), std::string::npos);
  EXPECT_NE(html.find("mamba2"), std::string::npos);
  const auto md = read_file(dir.file("rep/report.md"));
  EXPECT_NE(md.find("| scenario"), std::string::npos);
  const auto j = nlohmann::json::parse(read_file(dir.file("rep/stress.json")));
  EXPECT_TRUE(j.at("scenarios").at("soak").contains("slope_bytes_per_1k"));
  const int rendered = foxhunt::testing::render_in_chromium(html_path, dir.file("rep.png"));
  if (rendered == -1) GTEST_SKIP() << "chromium or python3 not installed: render not checked";
  EXPECT_EQ(rendered, 0) << "the stress report rendered blank or failed in headless Chromium";
}

TEST(Stress, ScenarioNamesAreChecked) {
  EXPECT_EQ(parse_scenarios("all"), stress_scenarios());
  EXPECT_EQ(parse_scenarios("soak,switch"), (std::vector<std::string>{"soak", "switch"}));
  EXPECT_NE(foxhunt::testing::input_error([] { parse_scenarios("soak,bogus"); }).find("bogus"),
            std::string::npos);
  auto o = small_options();
  o.models = {"dqn", "gpt"};
  std::ostringstream log;
  EXPECT_NE(foxhunt::testing::input_error([&] { run_stress(o, {"soak"}, log); }).find("gpt"),
            std::string::npos);
}

TEST(Stress, CliJsonCarriesTheVerdictKeys) {
  const auto j =
      run_cli_json("stress --scenario concurrent,soak --iterations 20 --soak 200 --json", 0);
  EXPECT_TRUE(j.at("ok").get<bool>());
  for (const char* s : {"concurrent", "soak"}) {
    const auto& e = j.at("scenarios").at(s);
    for (const char* key :
         {"throughput_per_s", "outputs_match_serial", "leak_detected", "slope_bytes_per_1k"})
      EXPECT_TRUE(e.contains(key)) << s << " lacks " << key;
  }
  EXPECT_TRUE(j.at("scenarios").at("concurrent").at("outputs_match_serial").get<bool>());
  const auto bad = run_cli("stress --scenario nope");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  const auto oom = run_cli("stress --scenario soak --soak 50 --budget-mib 0.5 --json");
  EXPECT_EQ(oom.exit_code, 1) << oom.err;
  EXPECT_EQ(nlohmann::json::parse(oom.out).at("scenarios").at("soak").at("error_type"),
            "out_of_memory");
}

}  // namespace
}  // namespace foxhunt::harness
