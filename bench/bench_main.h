#pragma once
// The common main of the benchmark programs: the accounting allocator and the thread default
// first (before any tensor exists), then the benchmarks `register_benchmarks` adds, then Google
// Benchmark's flags (--benchmark_filter=...).
#include <benchmark/benchmark.h>

#include "foxhunt/memory/runtime_init.h"

namespace foxhunt::bench {

/// Runs the registered benchmarks; returns main's exit code.
template <typename Register>
int run_benchmarks(int argc, char** argv, Register register_benchmarks) {
  foxhunt::runtime_init();
  register_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace foxhunt::bench
