#pragma once
// The common main of the benchmark programs: the accounting allocator and the thread default
// first (before any tensor exists), then the benchmarks `register_benchmarks` adds, then Google
// Benchmark's flags (--benchmark_filter=...).
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdlib>

#include "foxhunt/memory/runtime_init.h"

namespace foxhunt::bench {

/// Runs the registered benchmarks; returns main's exit code.
/// FOXHUNT_BENCH_NO_LEDGER=1 skips the accounting allocator (threads as runtime_init sets them):
/// the ledger's own cost is the difference between a run with and without it.
template <typename Register>
int run_benchmarks(int argc, char** argv, Register register_benchmarks) {
  if (std::getenv("FOXHUNT_BENCH_NO_LEDGER") == nullptr) {
    foxhunt::runtime_init();
  } else {
    const char* env = std::getenv("FOXHUNT_THREADS");
    torch::set_num_threads(env ? std::max(1, std::atoi(env)) : 1);
  }
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace foxhunt::bench
