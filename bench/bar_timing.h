#pragma once
// Per-bar latency, shared by serving_bench and capi_bench: the synthetic bars, untrained seeded
// bundles of catalog models, a loop that times one bar per benchmark iteration, and the p50/p99
// counters.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bundle.h"

namespace foxhunt::bench {

/// `n` synthetic bars of seed `seed`.
inline data::BarSeries bench_bars(int64_t n, uint64_t seed) {
  return data::generate_synthetic({.bars = n, .seed = seed});
}

/// Untrained bundles of the catalog models `names` (LibTorch seeded with 1 before each), with the
/// normaliser and fingerprint of 1,200 synthetic bars (seed 3).
inline std::vector<serving::Bundle> untrained_bundles(const std::vector<std::string>& names) {
  static const data::MarketDataset ds(bench_bars(1200, 3));
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

/// Microseconds since `t0`.
inline double micros_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

/// Sets the "p50_us" and "p99_us" counters of `state` from `us` (sorted in place; none when
/// empty).
inline void set_percentiles(benchmark::State& state, std::vector<double>& us) {
  std::sort(us.begin(), us.end());
  if (us.empty()) return;
  state.counters["p50_us"] = us[us.size() / 2];
  state.counters["p99_us"] = us[std::min(us.size() - 1, us.size() * 99 / 100)];
}

/// Times `on_bar(bar)` on one bar of `series` per benchmark iteration, from bar `first` on (the
/// benchmark fails when the bars run out), then hands its result to `after` (not timed); returns
/// each iteration's microseconds.
template <typename OnBar, typename After>
std::vector<double> time_bars(benchmark::State& state, const data::BarSeries& series, size_t first,
                              OnBar on_bar, After after) {
  std::vector<double> us;
  size_t i = first;
  for (auto _ : state) {
    if (i == series.bars.size()) {
      state.SkipWithError("ran out of bars");
      break;
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto result = on_bar(series.bars[i++]);
    us.push_back(micros_since(t0));
    after(result);
  }
  return us;
}

/// time_bars with nothing after the timed step.
template <typename OnBar>
std::vector<double> time_bars(benchmark::State& state, const data::BarSeries& series, size_t first,
                              OnBar on_bar) {
  return time_bars(state, series, first, on_bar, [](const auto&) {});
}

}  // namespace foxhunt::bench
