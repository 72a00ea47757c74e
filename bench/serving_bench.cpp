// Per-bar latency of the serving runtime: the whole four-model ensemble (features, the models
// concurrently or one by one, the decision) and each model alone, on one intra-op thread, after
// every warm-up. Reports p50/p99 of the per-bar wall time beside Google Benchmark's mean.
// Run: ./build/serving_bench [--benchmark_filter=ensemble]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/serving.h"

#include "bar_timing.h"
#include "bench_main.h"

namespace {

using namespace foxhunt;

void run(benchmark::State& state, const std::vector<std::string>& names, bool parallel) {
  serving::Ensemble e(bench::untrained_bundles(names));
  e.set_parallel(parallel);
  // Warm-up: the feature bank (256 bars) plus the longest window (60).
  const auto series = bench::bench_bars(320 + 20000, 5);
  for (size_t i = 0; i < 320; ++i) e.on_bar(series.bars[i]);
  std::vector<double> model_us(names.size(), 0.0);
  auto us = bench::time_bars(
      state, series, 320, [&](const data::Bar& bar) { return e.on_bar(bar); },
      [&](const auto& d) {
        for (size_t k = 0; k < d.signals.size(); ++k) model_us[k] += d.signals[k].latency_us;
        benchmark::DoNotOptimize(d.decision);
      });
  // Mean time of each model's step inside the ensemble (concurrent steps overlap).
  for (size_t k = 0; k < names.size() && !us.empty(); ++k)
    state.counters[names[k] + "_us"] = model_us[k] / static_cast<double>(us.size());
  bench::set_percentiles(state, us);
}

void register_all() {
  benchmark::RegisterBenchmark("ensemble/parallel", run,
                               std::vector<std::string>{"dqn", "ppo", "mamba2", "tft"}, true)
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(2000);
  benchmark::RegisterBenchmark("ensemble/serial", run,
                               std::vector<std::string>{"dqn", "ppo", "mamba2", "tft"}, false)
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(2000);
  for (const char* m : {"dqn", "ppo", "mamba2", "tft"})
    benchmark::RegisterBenchmark((std::string("model/") + m).c_str(), run,
                                 std::vector<std::string>{m}, false)
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(2000);
}

}  // namespace

int main(int argc, char** argv) {
  return foxhunt::bench::run_benchmarks(argc, argv, register_all);
}
