#pragma once
/// \file stress.h
/// `foxhunt stress`: the serving runtime under load, with exact memory verdicts.
///
/// Scenarios (each one a ScenarioResult; `all` runs them in this order):
/// - concurrent: the four models resident, N bars, each bar running the models concurrently
///   (Ensemble on its thread pool); a second, serial ensemble over the same bars must give
///   bit-identical outputs.
/// - train: each of the four trained briefly, back to back, in this process; after each run the
///   ledger's live bytes must be back at the pre-training baseline exactly.
/// - switch: N cycles of loading all bundles from disk, serving a few bars and unloading them;
///   the ledger must be at the baseline after every cycle and RSS growth bounded.
/// - soak: N bars of the whole ensemble with the ledger sampled every `sample_every` bars; the
///   leak verdict (core/stats.h) combines the exact baseline check and the least-squares slope.
/// - server: open-loop Poisson arrivals at `rate` per second for `duration_s`, served by one
///   worker in arrival order; latency counts from the scheduled arrival, so queueing counts.
///   Valid (MLPerf server style) when p99 <= p99_ms and at least min_queries completed.
/// - tape (not in `all`: it needs `ticks`): a tape of prints replayed from memory as fast as it
///   goes through the streaming bar builder and the desk (serving/tape_stream.h), a decision per
///   closed bar: prints/s, bars/s and print-to-decision p50/p99 (from the closing print's line
///   being read to its decision). Passes when the tape gave at least one bar.
///
/// Instruments (`instruments` > 1): concurrent, soak and server serve that many synthetic
/// instruments through a Desk (serving/desk.h), every instrument's bar of a timestamp in one batch
/// per model; their latencies are per timestamp (the whole batch), `instrument_bars_per_s` is the
/// rate, and the leak verdict reads the instrument state too (declared to the ledger). concurrent
/// also serves one instrument through the Ensemble in the same run (`single_instrument_bars_per_s`,
/// `batching_gain`).
///
/// Memory: every model's weights are loaded, and every serving step runs, under the ledger
/// scope named after the model (memory/ledger.h), so per-model live bytes are exact. The baseline
/// of a leak check is taken after a warm-up (features and model histories full, first-call
/// allocations done). With a device profile or a MiB budget the cap is enforced for the whole
/// run (ledger cap on CPU, caching-allocator fraction on CUDA); a cap too small for the models
/// fails the scenario with the typed out-of-memory error, reported, never a crash.

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "foxhunt/core/device.h"
#include "foxhunt/memory/device_profile.h"

namespace foxhunt::harness {

/// What `foxhunt stress` runs.
struct StressOptions {
  /// Directory with dqn/ ppo/ mamba2/ tft/ bundles; "" = freshly built default models (seeded,
  /// untrained, with a normaliser fitted on synthetic bars).
  std::string bundles;
  /// "cpu", "cuda" or "cuda:N".
  Device device;
  /// The cap enforced for the whole run (none = uncapped).
  std::optional<memory::Budget> budget;
  /// Seed of the synthetic bars and the fresh models.
  uint64_t seed = 42;
  /// Models served by concurrent/soak/server/switch (empty = all four, in registry order).
  std::vector<std::string> models;
  /// concurrent: bars.
  int64_t iterations = 1000;
  /// concurrent, soak, server: synthetic instruments served per bar (1: one instrument through
  /// the Ensemble; more: a Desk, every instrument's bar of a timestamp in one batch per model).
  int64_t instruments = 1;
  /// soak: bars of the whole ensemble.
  int64_t soak = 10000;
  /// switch: load/unload cycles.
  int64_t switch_cycles = 100;
  /// switch: bars served per cycle.
  int64_t switch_bars = 2;
  /// train: RL environment steps, forecaster epochs and synthetic bars.
  int64_t train_steps = 1024;
  int64_t train_epochs = 1;
  int64_t train_bars = 1200;
  /// server: requested arrivals per second, duration, p99 bound and minimum completed queries.
  double rate = 200;
  double duration_s = 5;
  double p99_ms = 1.0;
  int64_t min_queries = 500;
  /// tape: the tape CSV to replay (data/tape.h).
  std::string ticks;
  /// tape: its bar spec ("" = the bundles' recorded spec, or time:1m for bundles without one).
  std::string bar_spec;
  /// soak: ledger sample interval in bars.
  int64_t sample_every = 100;
  /// Leak threshold on the least-squares slope, bytes per 1,000 inferences.
  double leak_threshold_bytes_per_1k = 1024;
  /// Test-only planted leak: keep one 4 KiB tensor every K bars of the soak (0 = off).
  int64_t plant_leak_every = 0;
};

/// One scenario's verdict, figures and plotted series.
struct ScenarioResult {
  std::string name;
  bool ok = false;
  std::string summary;     ///< one line for the terminal
  std::string error;       ///< what went wrong ("" when it ran to the end)
  std::string error_type;  ///< "", "out_of_memory", "input", "check" or "error"
  double seconds = 0;
  nlohmann::json details = nlohmann::json::object();  ///< every figure (also in the JSON)
  /// Memory timeline: x (bar index or cycle), total ledger live bytes, RSS, and per model.
  std::string memory_x_label = "bar";
  std::vector<double> memory_x, live_bytes, rss_bytes;
  std::map<std::string, std::vector<double>> model_live_bytes;
  /// The profiler's time series (memory/profiler.h, every 10 ms): seconds, ledger live bytes,
  /// RSS, and CUDA allocated bytes when a GPU is present (empty otherwise).
  std::vector<double> profile_t, profile_live, profile_rss, profile_device;
  /// Latencies of the measured steps, microseconds.
  std::vector<double> latencies_us;
  /// Throughput over time: window end (seconds since the scenario's start) and rate.
  std::vector<double> throughput_t, throughput_per_s;
};

/// The whole run.
struct StressReport {
  std::vector<ScenarioResult> scenarios;
  nlohmann::json environment = nlohmann::json::object();  ///< device, cap, threads, models
  /// True when every scenario ran and passed.
  bool ok() const;
  /// {ok, environment, scenarios: {name: {ok, summary, error, ..., details}}}.
  nlohmann::json to_json() const;
  /// Terminal table, one row per scenario (the HTML and Markdown pages: reports.h).
  std::string table() const;
};

/// Scenario names in the order `all` runs them.
const std::vector<std::string>& stress_scenarios();

/// Parses "all" or a comma-separated list of scenario names; InputError for an unknown name.
std::vector<std::string> parse_scenarios(const std::string& spec);

/// Runs `scenarios` in order (a failing scenario does not stop the next); `log` gets progress.
/// Throws InputError for bad options (unknown model, device, profile, bundle directory).
StressReport run_stress(const StressOptions& options, const std::vector<std::string>& scenarios,
                        std::ostream& log);

}  // namespace foxhunt::harness
