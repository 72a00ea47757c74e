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

#include "bench_main.h"

namespace {

using namespace foxhunt;

data::BarSeries bars(int64_t n, uint64_t seed) {
  return data::generate_synthetic({.bars = n, .seed = seed});
}

std::vector<serving::Bundle> bundles(const std::vector<std::string>& names) {
  static const data::MarketDataset ds(bars(1200, 3));
  std::vector<serving::Bundle> out;
  for (const auto& name : names) {
    torch::manual_seed(1);
    serving::Bundle b;
    b.model = models::make_model(name);
    b.normalizer = ds.normalizer();
    b.data = serving::fingerprint(ds.series());
    out.push_back(std::move(b));
  }
  return out;
}

void run(benchmark::State& state, const std::vector<std::string>& names, bool parallel) {
  serving::Ensemble e(bundles(names));
  e.set_parallel(parallel);
  // Warm-up: the feature bank (256 bars) plus the longest window (60).
  const auto series = bars(320 + 20000, 5);
  size_t i = 0;
  for (; i < 320; ++i) e.on_bar(series.bars[i]);
  std::vector<double> us;
  std::vector<double> model_us(names.size(), 0.0);
  for (auto _ : state) {
    if (i == series.bars.size()) {
      state.SkipWithError("ran out of bars");
      break;
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto d = e.on_bar(series.bars[i++]);
    us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    for (size_t k = 0; k < d.signals.size(); ++k) model_us[k] += d.signals[k].latency_us;
    benchmark::DoNotOptimize(d.decision);
  }
  // Mean time of each model's step inside the ensemble (concurrent steps overlap).
  for (size_t k = 0; k < names.size() && !us.empty(); ++k)
    state.counters[names[k] + "_us"] = model_us[k] / static_cast<double>(us.size());
  std::sort(us.begin(), us.end());
  if (!us.empty()) {
    state.counters["p50_us"] = us[us.size() / 2];
    state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
  }
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
