// What a bar costs through the C ABI (include/foxhunt/foxhunt.h) against the C++ call it wraps:
// the four-model series desk on the same bundles and bars, after every warm-up, on one intra-op
// thread. "bar/cpp" is Ensemble::on_bar; "bar/capi" is foxhunt_desk_push_bar plus the reads an
// engine makes per bar (foxhunt_desk_decision, foxhunt_desk_signals); "reads/capi" is those reads
// alone. The overhead of the boundary is bar/capi - bar/cpp (p50 counters beside the means). A
// Rust engine calls the same functions (examples/rust: plus one CString per call that names a
// symbol, none on a series desk).
// Run: ./build/capi_bench [--benchmark_filter=bar]
#include <benchmark/benchmark.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "bar_timing.h"
#include "bench_main.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/foxhunt.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"

namespace {

namespace fs = std::filesystem;
using namespace foxhunt;

using bench::bench_bars;

// Untrained seeded bundles of every catalog model, saved as `train all` writes them, once.
struct BundleDir {
  fs::path dir = fs::temp_directory_path() / ("foxhunt_capi_bench_" + std::to_string(::getpid()));
  BundleDir() {
    for (const auto& b : bench::untrained_bundles(models::model_names())) {
      fs::create_directories(dir / b.name());
      serving::save_bundle(b, (dir / b.name() / serving::kBundleFile).string());
    }
  }
  ~BundleDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
};

const std::string& bundle_dir() {
  static const BundleDir d;
  static const std::string path = d.dir.string();
  return path;
}

// Warm-up: the feature bank plus the longest window; then the timed bars.
constexpr int64_t kWarmup = 320;
constexpr int64_t kTimed = 20000;

void bar_cpp(benchmark::State& state) {
  auto e = serving::Ensemble::load(bundle_dir());
  const auto series = bench_bars(kWarmup + kTimed, 5);
  for (size_t i = 0; i < kWarmup; ++i) e.on_bar(series.bars[i]);
  auto us = bench::time_bars(state, series, kWarmup, [&](const data::Bar& bar) {
    auto d = e.on_bar(bar);
    benchmark::DoNotOptimize(d.decision);
    benchmark::DoNotOptimize(d.signals.data());
    return d;
  });
  bench::set_percentiles(state, us);
}

foxhunt_bar to_c(const data::Bar& b) {
  return {b.timestamp, b.open, b.high, b.low, b.close, b.volume, nullptr};
}

// `push`: feed a bar before the reads (bar/capi); without, the reads alone (reads/capi).
void capi(benchmark::State& state, bool push) {
  foxhunt_desk* desk = nullptr;
  if (foxhunt_desk_open(bundle_dir().c_str(), nullptr, &desk) != FOXHUNT_OK) {
    state.SkipWithError(foxhunt_last_error());
    return;
  }
  const auto series = bench_bars(kWarmup + kTimed, 5);
  size_t i = 0;
  for (; i < kWarmup; ++i) {
    const auto b = to_c(series.bars[i]);
    foxhunt_desk_push_bar(desk, &b);
  }
  size_t models = 0;
  foxhunt_desk_model_count(desk, &models);
  std::vector<double> signals(models);
  std::vector<double> us;
  for (auto _ : state) {
    if (i == series.bars.size()) {
      state.SkipWithError("ran out of bars");
      break;
    }
    const auto b = to_c(series.bars[i]);
    const auto t0 = std::chrono::steady_clock::now();
    if (push) {
      ++i;
      if (foxhunt_desk_push_bar(desk, &b) != FOXHUNT_OK) {
        state.SkipWithError(foxhunt_last_error());
        break;
      }
    }
    foxhunt_decision d;
    size_t n = 0;
    foxhunt_desk_decision(desk, nullptr, &d);
    foxhunt_desk_signals(desk, nullptr, signals.data(), signals.size(), &n);
    benchmark::DoNotOptimize(d.decision);
    benchmark::DoNotOptimize(signals.data());
    us.push_back(bench::micros_since(t0));
  }
  bench::set_percentiles(state, us);
  foxhunt_desk_close(desk);
}

void register_all() {
  benchmark::RegisterBenchmark("bar/cpp", bar_cpp)->Unit(benchmark::kMicrosecond)->Iterations(2000);
  benchmark::RegisterBenchmark("bar/capi", capi, true)
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(2000);
  benchmark::RegisterBenchmark("reads/capi", capi, false)
      ->Unit(benchmark::kMicrosecond)
      ->Iterations(200000);
}

}  // namespace

int main(int argc, char** argv) {
  return foxhunt::bench::run_benchmarks(argc, argv, register_all);
}
