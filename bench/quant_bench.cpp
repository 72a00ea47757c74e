// INT8 linear (int8 weights per output channel, dynamic per-row activations, at::_int_mm)
// against the fp32 Linear it replaces, at the TFT's shapes (rows = batch x positions): the
// measurement that picks the kernel path; the whole TFT at FP32 and INT8; the BF16 forms of the
// TFT and Mamba-2 against their FP32 models (models/bf16.h).
//   build/quant_bench [--benchmark_filter=Int8|Bf16]
#include "bench_main.h"
#include "foxhunt/models/bf16.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/models/tft_int8.h"
#include "foxhunt/quant/int8_fused.h"
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

// The whole default TFT (past_features 225, hidden 32, window 60) at batch range(1), FP32
// (range(0) = 0), INT8 after PTQ (1) or INT8 with the VSN kernel's VNNI products turned off
// (2: the portable path), under InferenceMode as served.
void BM_TftForward(benchmark::State& state) {
  const bool int8 = state.range(0) != 0;
  const bool vnni = foxhunt::quant::detail::set_int8_vnni(state.range(0) != 2);
  const int64_t batch = state.range(1);
  torch::manual_seed(1);
  foxhunt::models::TftNet net{foxhunt::models::TftOptions()};
  net->eval();
  const auto o = net->options;
  foxhunt::models::Int8Tft q{nullptr};
  if (int8) {
    foxhunt::models::TftCalibrator cal(net);
    for (uint64_t i = 0; i < 2; ++i) {
      auto b = foxhunt::models::example_batch_of(o, 64, 0, torch::kCPU, 100 + i);
      cal.observe(b.inputs[0], b.inputs[1], b.inputs[2]);
    }
    q = foxhunt::models::Int8Tft(foxhunt::models::Int8TftImpl::convert(*net, cal.scales()));
  }
  auto b = foxhunt::models::example_batch_of(o, batch, 0, torch::kCPU, 7);
  c10::InferenceMode guard;
  for (auto _ : state) {
    auto y = int8 ? q->forward(b.inputs[0], b.inputs[1], b.inputs[2])
                  : net->forward(b.inputs[0], b.inputs[1], b.inputs[2]);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  foxhunt::quant::detail::set_int8_vnni(vnni);
  state.SetItemsProcessed(state.iterations() * batch);
}

// A catalog forecaster (range(0): 0 = tft, 1 = mamba2) at its default options, FP32 (range(1) =
// 0) or its BF16 form (1, cast from the same FP32 weights), at batch range(2): Model::forward
// as served (input checks included), under InferenceMode. The targets: the TFT's BF16
// batch 64 <= 0.6x FP32's time, batch 1 no slower.
void BM_Bf16Forward(benchmark::State& state) {
  const char* name = state.range(0) == 0 ? "tft" : "mamba2";
  const bool bf16 = state.range(1) != 0;
  const int64_t batch = state.range(2);
  if (bf16 && !foxhunt::models::cpu_has_bf16()) {
    state.SkipWithError("this CPU has no avx512_bf16 or amx_bf16");
    return;
  }
  torch::manual_seed(1);
  std::shared_ptr<foxhunt::models::Model> model = foxhunt::models::make_model(name);
  model->module().eval();
  if (bf16)
    model = foxhunt::models::quantized_form(name, foxhunt::models::Precision::kBf16, "bench")
                .quantize(*model, foxhunt::models::QuantizeRequest{})
                .model;
  const auto b = model->example_batch(batch, 0, torch::kCPU, 7);
  c10::InferenceMode guard;
  for (auto _ : state) {
    auto y = model->forward(b);
    benchmark::DoNotOptimize(y[0].data_ptr());
  }
  state.SetItemsProcessed(state.iterations() * batch);
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
    benchmark::RegisterBenchmark("BM_TftForward", BM_TftForward)
        ->ArgNames({"int8", "batch"})
        ->Args({0, 1})
        ->Args({1, 1})
        ->Args({2, 1})
        ->Args({0, 64})
        ->Args({1, 64})
        ->Args({2, 64})
        ->Unit(benchmark::kMillisecond);
    // Named by model (range(0) is its index: "BM_Bf16Forward/tft/bf16:1/batch:64").
    for (int64_t m : {0, 1}) {
      auto* bf16 = benchmark::RegisterBenchmark(
                       m == 0 ? "BM_Bf16Forward/tft" : "BM_Bf16Forward/mamba2", BM_Bf16Forward)
                       ->ArgNames({"", "bf16", "batch"})
                       ->Unit(benchmark::kMillisecond);
      for (int64_t batch : {1, 64})
        for (int64_t bf : {0, 1}) bf16->Args({m, bf, batch});
    }
  });
}
