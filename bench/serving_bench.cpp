// Per-bar latency of the serving runtime: the whole four-model ensemble (features, the models
// concurrently or one by one, the decision) and each model alone, on one intra-op thread, after
// every warm-up. Reports p50/p99 of the per-bar wall time beside Google Benchmark's mean.
// Run: ./build/serving_bench [--benchmark_filter=ensemble]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/bf16.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/serving.h"
#include "foxhunt/serving/thread_pool.h"
#include "foxhunt/serving/universe.h"

#include "bar_timing.h"
#include "bench_main.h"

namespace {

using namespace foxhunt;

void run(benchmark::State& state, const std::vector<std::string>& names, bool parallel,
         models::Precision precision) {
  auto bundles = bench::untrained_bundles(names);
  for (auto& b : bundles)  // the served form of the same weights (e.g. BF16: a cast)
    if (precision != models::Precision::kFp32)
      b.model = models::quantized_form(b.name(), precision, "serving_bench")
                    .quantize(*b.model, models::QuantizeRequest{})
                    .model;
  serving::Ensemble e(std::move(bundles));
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

// One timestamp of a desk of `instruments` synthetic instruments (serving/universe.h) through the
// four models, batched across the instruments, concurrently or one by one; the counters give the
// instrument-bars per second and each model's mean step (one batch over every instrument).
void desk(benchmark::State& state, int64_t instruments, bool parallel) {
  const std::vector<std::string> names{"dqn", "ppo", "mamba2", "tft"};
  serving::DeskOptions opts;
  opts.parallel = parallel;
  serving::Desk d(bench::untrained_bundles(names), {}, opts);
  serving::SyntheticUniverse u(5, instruments);
  for (int64_t i = 0; i < d.warmup_bars(); ++i) {
    auto bars = u.next();
    d.on_timestamp(u.timestamp(), bars);
  }
  std::vector<double> us, model_us(names.size(), 0.0);
  for (auto _ : state) {
    auto bars = u.next();
    const auto t0 = std::chrono::steady_clock::now();
    const auto out = d.on_timestamp(u.timestamp(), bars);
    us.push_back(bench::micros_since(t0));
    for (size_t k = 0; k < names.size(); ++k) model_us[k] += out[0].decision.signals[k].latency_us;
    benchmark::DoNotOptimize(out.data());
  }
  double total = 0;
  for (double x : us) total += x;
  state.counters["instrument_bars_per_s"] =
      total > 0 ? 1e6 * static_cast<double>(instruments * static_cast<int64_t>(us.size())) / total
                : 0.0;
  for (size_t k = 0; k < names.size() && !us.empty(); ++k)
    state.counters[names[k] + "_us"] = model_us[k] / static_cast<double>(us.size());
  bench::set_percentiles(state, us);
}

// The cost of lending a model the idle worker (ThreadPool::parallel_for): 2 trivial chunks
// published from task 0 of a run while the worker, done with task 1, spins. handoff_us is the
// time per parallel_for after the worker arrived (jobs 10.., the first ones overlap its
// wake-up); worker_share the fraction of those chunks it ran.
void handoff(benchmark::State& state) {
  serving::ThreadPool pool(1);
  constexpr int kJobs = 110, kSkip = 10;
  std::atomic<int64_t> on_worker{0};
  double ns = 0.0;
  int64_t jobs = 0;
  const auto caller = std::this_thread::get_id();
  const auto chunk = [&](int64_t) {
    if (std::this_thread::get_id() != caller) on_worker.fetch_add(1, std::memory_order_relaxed);
  };
  for (auto _ : state) {
    pool.run({[&] {
                for (int k = 0; k < kJobs; ++k) {
                  if (k == kSkip) on_worker = 0;
                  const auto t0 = std::chrono::steady_clock::now();
                  pool.parallel_for(2, chunk);
                  if (k >= kSkip)
                    ns += std::chrono::duration<double, std::nano>(
                              std::chrono::steady_clock::now() - t0)
                              .count();
                }
                jobs += kJobs - kSkip;
              },
              [] {}});
  }
  state.counters["handoff_us"] = jobs > 0 ? ns / 1000.0 / static_cast<double>(jobs) : 0.0;
  state.counters["worker_share"] =
      static_cast<double>(on_worker.load()) / static_cast<double>(2 * (kJobs - kSkip));
}

void register_all() {
  benchmark::RegisterBenchmark("pool/handoff", handoff)
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(2000);
  benchmark::RegisterBenchmark("ensemble/parallel", run,
                               std::vector<std::string>{"dqn", "ppo", "mamba2", "tft"}, true,
                               models::Precision::kFp32)
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(2000);
  benchmark::RegisterBenchmark("ensemble/serial", run,
                               std::vector<std::string>{"dqn", "ppo", "mamba2", "tft"}, false,
                               models::Precision::kFp32)
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(2000);
  for (const int64_t n : {1, 64})
    for (const bool parallel : {true, false})
      benchmark::RegisterBenchmark(
          fmt::format("desk/{}/{}", n, parallel ? "parallel" : "serial").c_str(), desk, n, parallel)
          ->Unit(benchmark::kMicrosecond)
          ->Iterations(n == 1 ? 2000 : 200);
  for (const char* m : {"dqn", "ppo", "mamba2", "tft"})
    benchmark::RegisterBenchmark((std::string("model/") + m).c_str(), run,
                                 std::vector<std::string>{m}, false, models::Precision::kFp32)
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(2000);
  // The BF16 TFT served bar by bar (its stream, the BF16 VSN kernel inside), where the CPU has
  // BF16.
  if (models::cpu_has_bf16())
    benchmark::RegisterBenchmark("model/tft/bf16", run, std::vector<std::string>{"tft"}, false,
                                 models::Precision::kBf16)
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(2000);
}

}  // namespace

int main(int argc, char** argv) {
  return foxhunt::bench::run_benchmarks(argc, argv, register_all);
}
