// INT8 linear (int8 weights per output channel, dynamic per-row activations, at::_int_mm)
// against the fp32 Linear it replaces, at the TFT's shapes (rows = batch x positions): the
// measurement that picks the kernel path.
//   build/quant_bench [--benchmark_filter=Int8]
#include "bench_main.h"
#include "foxhunt/quant/int8_linear.h"

namespace {

// Args: rows, in, out.
void BM_Fp32Linear(benchmark::State& state) {
  torch::NoGradGuard ng;
  torch::nn::Linear l(torch::nn::LinearOptions(state.range(1), state.range(2)));
  const auto x = torch::randn({state.range(0), state.range(1)});
  for (auto _ : state) benchmark::DoNotOptimize(l->forward(x));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_Int8Linear(benchmark::State& state) {
  torch::NoGradGuard ng;
  torch::nn::Linear l(torch::nn::LinearOptions(state.range(1), state.range(2)));
  const auto q = foxhunt::quant::Int8Linear::from_float(l->weight, l->bias);
  const auto x = torch::randn({state.range(0), state.range(1)});
  for (auto _ : state) benchmark::DoNotOptimize(q.forward(x));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void shapes(benchmark::internal::Benchmark* b) {
  // TFT hidden 32: a GLU (32 -> 64) for one row (batch 1, one position) and for batch 64 over
  // 65 positions; the same at hidden 128; and the 512 x 512 layer of the old PLATFORM table.
  for (auto rows : {1, 64, 4160})
    for (auto [in, out] : {std::pair{32, 64}, std::pair{128, 256}, std::pair{512, 512}})
      b->Args({rows, in, out});
}

}  // namespace

int main(int argc, char** argv) {
  return foxhunt::bench::run_benchmarks(argc, argv, [] {
    benchmark::RegisterBenchmark("BM_Fp32Linear", BM_Fp32Linear)
        ->Apply(shapes)
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark("BM_Int8Linear", BM_Int8Linear)
        ->Apply(shapes)
        ->Unit(benchmark::kMicrosecond);
  });
}
