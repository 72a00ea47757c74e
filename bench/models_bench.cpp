// Forward latency of each registered model at batch 1 and batch 64 under inference mode (CPU,
// default thread count). Run: ./build/models_bench [--benchmark_filter=tft]
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "foxhunt/models/model.h"

#include "bench_main.h"

namespace {

void BM_Forward(benchmark::State& state, const std::string& name) {
  const int64_t batch = state.range(0);
  auto model = foxhunt::models::make_model(name);
  model->module().eval();
  auto b = model->example_batch(batch, 0, torch::kCPU, 1);
  c10::InferenceMode guard;
  for (int i = 0; i < 3; ++i) model->forward(b);  // warm-up (allocator, BLAS packing)
  for (auto _ : state) {
    auto out = model->forward(b);
    benchmark::DoNotOptimize(out.front().data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["threads"] = torch::get_num_threads();
}

// Forward without input validation cost isolated: the same path, validation is part of serving.
int register_all() {
  for (const auto& name : foxhunt::models::model_names()) {
    benchmark::RegisterBenchmark(("forward/" + name).c_str(), BM_Forward, name)
        ->Arg(1)
        ->Arg(64)
        ->Unit(benchmark::kMicrosecond);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return foxhunt::bench::run_benchmarks(argc, argv, [] { register_all(); });
}
