// Cost of exact CPU memory accounting: the same work with the ledger counting (accounting:1) and
// with accounting switched off (accounting:0, allocations take the raw c10::alloc_cpu path).
//   ./build/memory_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/model.h"

#include "bench_main.h"

namespace {

using foxhunt::memory::set_accounting_enabled;

// Sets accounting for one benchmark run and restores it afterwards.
struct AccountingMode {
  explicit AccountingMode(bool on) : previous(set_accounting_enabled(on)) {}
  ~AccountingMode() { set_accounting_enabled(previous); }
  bool previous;
};

// One allocation and free of a small tensor: the allocator path alone.
void BM_AllocFree(benchmark::State& state) {
  AccountingMode mode(state.range(0) != 0);
  const int64_t n = state.range(1);
  for (auto _ : state) {
    auto t = torch::empty({n}, torch::kFloat);
    benchmark::DoNotOptimize(t.data_ptr());
  }
  state.counters["bytes"] = static_cast<double>(n * 4);
}
BENCHMARK(BM_AllocFree)
    ->ArgNames({"accounting", "floats"})
    ->Args({0, 64})
    ->Args({1, 64})
    ->Args({0, 262144})
    ->Args({1, 262144});

// Batch-1 DQN forward (validated input, as served) under InferenceMode.
void BM_DqnForwardBatch1(benchmark::State& state) {
  AccountingMode mode(state.range(0) != 0);
  auto model = foxhunt::models::make_model("dqn");
  model->module().eval();
  auto batch = model->example_batch(1, 0, torch::kCPU, 1);
  c10::InferenceMode guard;
  for (auto _ : state) {
    auto out = model->forward(batch);
    benchmark::DoNotOptimize(out.front().data_ptr());
  }
}
BENCHMARK(BM_DqnForwardBatch1)
    ->ArgName("accounting")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMicrosecond);

// One training step of the DQN net (forward + backward + Adam step), batch 32.
void BM_DqnTrainStep(benchmark::State& state) {
  AccountingMode mode(state.range(0) != 0);
  auto model = foxhunt::models::make_model("dqn");
  torch::optim::Adam opt(model->module().parameters(), torch::optim::AdamOptions(1e-4));
  auto batch = model->example_batch(32, 0, torch::kCPU, 1);
  const auto allocs_before = foxhunt::memory::ledger_stats().alloc_count;
  int64_t steps = 0;
  for (auto _ : state) {
    opt.zero_grad();
    auto loss = model->loss(batch);
    loss.backward();
    opt.step();
    ++steps;
  }
  state.counters["counted_allocs_per_step"] =
      static_cast<double>(foxhunt::memory::ledger_stats().alloc_count - allocs_before) /
      static_cast<double>(steps);
}
BENCHMARK(BM_DqnTrainStep)->ArgName("accounting")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  return foxhunt::bench::run_benchmarks(argc, argv, [] {});
}
