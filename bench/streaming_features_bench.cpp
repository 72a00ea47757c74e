// Per-bar cost of the feature bank: StreamingFeatures::update (O(1) amortised per feature) vs
// compute_observed_features (recomputes every window per bar) divided by the bar count. Both run
// over the same seeded synthetic series; the `per_bar` counter is the time per bar.
// Run: ./build/streaming_features_bench [--benchmark_filter=stream]
#include <benchmark/benchmark.h>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/features.h"
#include "foxhunt/data/streaming_features.h"

namespace {

using foxhunt::data::BarSeries;

const BarSeries& bars(int64_t n) {
  static BarSeries s;
  if (s.size() != n) {
    foxhunt::data::SyntheticOptions o;
    o.bars = n;
    o.seed = 7;
    s = foxhunt::data::generate_synthetic(o);
  }
  return s;
}

void set_per_bar(benchmark::State& state, int64_t n) {
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["per_bar"] =
      benchmark::Counter(static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                                     benchmark::Counter::kInvert);
}

// A fresh engine fed the whole series (warm-up included, as a live feed starts).
void BM_StreamingUpdate(benchmark::State& state) {
  const BarSeries& s = bars(state.range(0));
  for (auto _ : state) {
    foxhunt::data::StreamingFeatures f;
    for (const auto& b : s.bars) benchmark::DoNotOptimize(f.update(b).data());
  }
  set_per_bar(state, s.size());
}

void BM_BatchFeatures(benchmark::State& state) {
  const BarSeries& s = bars(state.range(0));
  for (auto _ : state) {
    auto m = foxhunt::data::compute_observed_features(s);
    benchmark::DoNotOptimize(m.data.data());
  }
  set_per_bar(state, s.size());
}

BENCHMARK(BM_StreamingUpdate)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_BatchFeatures)->Arg(10000)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
