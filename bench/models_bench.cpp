// Forward latency of each registered model at batch 1 and batch 64 under inference mode (CPU,
// default thread count), with its FLOPs and fraction of the machine's peak (gflops,
// peak_fraction, roofline_fraction: peak_fraction.h, forward_flops.h), one training step of each at
// batch 64 (samples/s), and the per-bar cost of the streaming sequence models against the
// full-window forward they reproduce. Run: ./build/models_bench [--benchmark_filter=stream]
//
// `models_bench --profile MODEL [STEPS]` prints the top ops of its training step (LibTorch's
// profiler, self CPU time); `models_bench --profile-forward MODEL BATCH [CALLS]` the same for
// its inference forward, with the time spent outside every op (our own kernels and glue).
//
// `models_bench --export DIR` instead writes DIR/<model>.safetensors for each registered model
// (the weights the benchmarks time: default options, seed 0, eval mode) with its example inputs
// and C++ outputs at batch 1 and 64, for bench/compare_python.py to time the same networks in
// PyTorch eager and compare the numbers.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include <torch/csrc/autograd/profiler_legacy.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>

#include "foxhunt/models/mamba2.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/safetensors.h"
#include "foxhunt/models/tft.h"

#include "bench_main.h"
#include "forward_flops.h"
#include "peak_fraction.h"

namespace {

// The benchmarked model: default options, weights from seed 0 (what --export writes).
std::unique_ptr<foxhunt::models::Model> bench_model(const std::string& name) {
  torch::manual_seed(0);
  auto model = foxhunt::models::make_model(name);
  model->module().eval();
  return model;
}

// The example batches the forward benchmarks time (seed 1) and --export writes.
constexpr int64_t kExportBatches[] = {1, 64};

void BM_Forward(benchmark::State& state, const std::string& name) {
  const int64_t batch = state.range(0);
  auto model = bench_model(name);
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
  foxhunt::bench::report_flops(state, foxhunt::bench::forward_flops(*model, batch),
                               static_cast<double>(model->parameter_bytes()),
                               torch::get_num_threads());
}

// The FLOPs and weight bytes of the catalog model `name` (default options) at batch 1: what
// the window forwards below compute.
void report_window_flops(benchmark::State& state, const std::string& name) {
  auto model = bench_model(name);
  foxhunt::bench::report_flops(state, foxhunt::bench::forward_flops(*model, 1),
                               static_cast<double>(model->parameter_bytes()),
                               torch::get_num_threads());
}

// One training step at batch `range(0)`: the model's training loss on an example batch, backward
// and an Adam step (train mode: dropout on). items/s = training samples per second.
// The benchmarked training step: the model in train mode on its example batch (seed 1), Adam.
struct TrainStep {
  TrainStep(const std::string& name, int64_t batch)
      : model(bench_model(name)),
        b((model->module().train(), model->example_batch(batch, 0, torch::kCPU, 1))),
        opt(model->module().parameters(), torch::optim::AdamOptions(1e-4)) {}
  double operator()() {
    opt.zero_grad();
    auto loss = model->loss(b);
    loss.backward();
    opt.step();
    return loss.item<double>();
  }
  std::unique_ptr<foxhunt::models::Model> model;
  foxhunt::models::Batch b;
  torch::optim::Adam opt;
};

void BM_TrainStep(benchmark::State& state, const std::string& name) {
  const int64_t batch = state.range(0);
  TrainStep step(name, batch);
  for (int i = 0; i < 2; ++i) step();
  for (auto _ : state) benchmark::DoNotOptimize(step());
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["threads"] = torch::get_num_threads();
}

// ---- streaming: one new bar vs the full window (batch 1, default options) ---------------------

namespace fm = foxhunt::models;

// Rows of random bars, split up front so the timed loop does no indexing.
std::vector<torch::Tensor> bar_rows(int64_t n, int64_t dim) {
  return torch::randn({n, dim}).unbind(0);
}

// Mamba2Stream::push on a warmed-up window (the cost of one new bar).
void BM_Mamba2StreamPush(benchmark::State& state) {
  fm::Mamba2Net net(fm::Mamba2Options{});
  net->eval();
  fm::Mamba2Stream stream(net);
  const auto rows = bar_rows(256, net->options.input_dim());
  size_t t = 0;
  for (; t < 2 * static_cast<size_t>(stream.window()); ++t) stream.push(rows[t % rows.size()]);
  for (auto _ : state) {
    auto y = stream.push(rows[t++ % rows.size()]);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["window"] = static_cast<double>(stream.window());
  state.counters["threads"] = torch::get_num_threads();
}

// What the stream replaces: forward over the bar's whole window.
void BM_Mamba2WindowForward(benchmark::State& state) {
  fm::Mamba2Net net(fm::Mamba2Options{});
  net->eval();
  auto x = torch::randn({1, net->options.window(), net->options.input_dim()});
  c10::InferenceMode guard;
  for (int i = 0; i < 3; ++i) net->forward(x);
  for (auto _ : state) {
    auto y = net->forward(x);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["threads"] = torch::get_num_threads();
  report_window_flops(state, "mamba2");
}

// For scale: the O(1) recurrent step with a state carried from the start of history (not equal
// to the window forward; see Mamba2Stream).
void BM_Mamba2CarriedStep(benchmark::State& state) {
  fm::Mamba2Net net(fm::Mamba2Options{});
  net->eval();
  c10::InferenceMode guard;
  auto st = net->zero_state(1);
  const auto rows = bar_rows(256, net->options.input_dim());
  size_t t = 0;
  for (; t < 8; ++t) net->step(st, rows[t].unsqueeze(0));
  for (auto _ : state) {
    auto y = net->step(st, rows[t++ % rows.size()].unsqueeze(0));
    benchmark::DoNotOptimize(y.data_ptr());
  }
}

// TftStream::push on a warmed-up window: one bar's past VSN, the horizon's future VSN, and the
// window-dependent stages (LSTMs, attention, output layers).
void BM_TftStreamPush(benchmark::State& state) {
  const fm::TftOptions o;
  fm::TftNet net(o);
  net->eval();
  fm::TftStream stream(net);
  const auto rows = bar_rows(256, o.past_features());
  const auto future = torch::randn({o.horizon(), o.future_features()});
  size_t t = 0;
  for (; t < 2 * static_cast<size_t>(stream.window()); ++t)
    stream.push(rows[t % rows.size()], future, 3);
  for (auto _ : state) {
    auto y = stream.push(rows[t++ % rows.size()], future, 3);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["window"] = static_cast<double>(stream.window());
  state.counters["threads"] = torch::get_num_threads();
}

void BM_TftWindowForward(benchmark::State& state) {
  const fm::TftOptions o;
  fm::TftNet net(o);
  net->eval();
  auto past = torch::randn({1, o.window(), o.past_features()});
  auto future = torch::randn({1, o.horizon(), o.future_features()});
  auto id = torch::full({1}, 3, torch::kLong);
  c10::InferenceMode guard;
  for (int i = 0; i < 3; ++i) net->forward(past, future, id);
  for (auto _ : state) {
    auto y = net->forward(past, future, id);
    benchmark::DoNotOptimize(y.data_ptr());
  }
  state.counters["threads"] = torch::get_num_threads();
  report_window_flops(state, "tft");
}

// Forward without input validation cost isolated: the same path, validation is part of serving.
int register_all() {
  for (const auto& name : foxhunt::models::model_names()) {
    benchmark::RegisterBenchmark(("forward/" + name).c_str(), BM_Forward, name)
        ->Arg(1)
        ->Arg(64)
        ->Unit(benchmark::kMicrosecond);
  }
  for (const auto& name : foxhunt::models::model_names()) {
    benchmark::RegisterBenchmark(("train_step/" + name).c_str(), BM_TrainStep, name)
        ->Arg(64)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("stream/mamba2/push", BM_Mamba2StreamPush)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("stream/mamba2/window_forward", BM_Mamba2WindowForward)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("stream/mamba2/carried_step", BM_Mamba2CarriedStep)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("stream/tft/push", BM_TftStreamPush)->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("stream/tft/window_forward", BM_TftWindowForward)
      ->Unit(benchmark::kMicrosecond);
  return 0;
}

}  // namespace

// --export DIR: each model's weights, example inputs ("input.b<B>.<i>") and C++ outputs
// ("output.b<B>.<j>") with the options and I/O names in the metadata.
int export_models(const std::string& dir) {
  namespace rt = foxhunt::models;
  foxhunt::runtime_init();
  for (const auto& name : foxhunt::models::model_names()) {
    auto model = bench_model(name);
    rt::NamedTensors tensors = rt::module_tensors(model->module());
    for (int64_t batch : kExportBatches) {
      auto b = model->example_batch(batch, 0, torch::kCPU, 1);
      c10::InferenceMode guard;
      const auto out = model->forward(b);
      // append, not operator+: GCC 12 sees a false -Wstringop-overflow in the concatenation.
      std::string tag("b");
      tag.append(std::to_string(batch)).append(".");
      for (size_t i = 0; i < b.inputs.size(); ++i)
        tensors.emplace_back("input." + tag + std::to_string(i), b.inputs[i]);
      for (size_t j = 0; j < out.size(); ++j)
        tensors.emplace_back("output." + tag + std::to_string(j), out[j]);
    }
    const auto spec = model->spec();
    const std::string path = dir + "/" + name + ".safetensors";
    rt::save_safetensors(path, tensors,
                         {{"model", name},
                          {"options", model->options_json().dump()},
                          {"inputs", nlohmann::json(spec.input_names()).dump()},
                          {"outputs", nlohmann::json(spec.outputs).dump()}});
    std::cout << path << "\n";
  }
  return 0;
}

// Runs `work` `calls` times under LibTorch's profiler and prints the top ops by self CPU time
// (time in the op minus its children) and the time outside every op (our own kernels, glue).
void profile_ops(const std::string& label, int calls, const std::function<void()>& work) {
  namespace prof = torch::autograd::profiler;
  struct Total {
    double self_us = 0, total_us = 0;
    int64_t calls = 0;
  };
  std::map<std::string, Total> ops;
  double wall_us = 0, top_us = 0;
  // FOXHUNT_PROFILE_SHAPES=1: one row per op and input shapes (which call of an op costs).
  const char* env = std::getenv("FOXHUNT_PROFILE_SHAPES");
  const bool shapes = env != nullptr && std::strcmp(env, "1") == 0;
  const auto key = [&](const prof::LegacyEvent& e) {
    std::string k = e.name();
    if (!shapes) return k;
    for (const auto& s : e.shapes()) {
      k += " [";
      for (size_t i = 0; i < s.size(); ++i) k.append(i ? "," : "").append(std::to_string(s[i]));
      k += "]";
    }
    return k;
  };
  {
    prof::TLSLegacyProfilerGuard guard(
        torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::CPU, shapes),
        [&](const prof::thread_event_lists& lists) {
          for (const auto& events : lists) {
            // Push/pop pairs nest per thread: self time = elapsed minus the children's elapsed.
            struct Open {
              const prof::LegacyEvent* push;
              double child_us;
            };
            std::vector<Open> stack;
            for (const auto& e : events) {
              if (e.kind() == prof::EventKind::PushRange) {
                stack.push_back({&e, 0.0});
              } else if (e.kind() == prof::EventKind::PopRange && !stack.empty()) {
                const auto open = stack.back();
                stack.pop_back();
                const double us = open.push->cpuElapsedUs(e);
                auto& t = ops[key(*open.push)];
                t.self_us += us - open.child_us;
                t.total_us += us;
                ++t.calls;
                if (!stack.empty())
                  stack.back().child_us += us;
                else
                  top_us += us;
              }
            }
          }
        });
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) work();
    wall_us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  }
  std::vector<std::pair<std::string, Total>> rows(ops.begin(), ops.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.self_us > b.second.self_us; });
  std::cout << label << ": " << calls << " calls, " << std::fixed << std::setprecision(3)
            << wall_us / calls / 1000.0 << " ms/call under the profiler; outside every op "
            << (wall_us - top_us) / calls / 1000.0 << " ms/call (" << std::setprecision(1)
            << 100.0 * (wall_us - top_us) / wall_us << "%)\n"
            << std::setprecision(3) << std::setw(48) << std::left << "op" << std::right
            << std::setw(12) << "self ms" << std::setw(8) << "self%" << std::setw(12) << "total ms"
            << std::setw(10) << "calls\n";
  for (size_t i = 0; i < std::min<size_t>(rows.size(), 25); ++i) {
    const auto& [op, t] = rows[i];
    std::cout << std::setw(48) << std::left << (shapes ? op : op.substr(0, 47)) << std::right
              << std::setw(12) << t.self_us / calls / 1000.0 << std::setw(8) << std::setprecision(1)
              << 100.0 * t.self_us / wall_us << std::setprecision(3) << std::setw(12)
              << t.total_us / calls / 1000.0 << std::setw(9) << t.calls / calls << "\n";
  }
}

// --profile MODEL [STEPS]: STEPS training steps at batch 64 (after two warm-up steps).
int profile_train_steps(const std::string& name, int steps) {
  foxhunt::runtime_init();
  TrainStep step(name, 64);
  for (int i = 0; i < 2; ++i) step();
  profile_ops("train_step/" + name + " batch 64", steps, [&] { step(); });
  return 0;
}

// --profile-forward MODEL BATCH [CALLS]: CALLS inference forwards (after three warm-up calls),
// the path forward/<model>/<batch> times.
int profile_forward(const std::string& name, int64_t batch, int calls) {
  foxhunt::runtime_init();
  auto model = bench_model(name);
  auto b = model->example_batch(batch, 0, torch::kCPU, 1);
  c10::InferenceMode guard;
  for (int i = 0; i < 3; ++i) model->forward(b);
  profile_ops("forward/" + name + "/" + std::to_string(batch), calls,
              [&] { benchmark::DoNotOptimize(model->forward(b)); });
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 4 && std::strcmp(argv[1], "--profile-forward") == 0) {
    try {
      return profile_forward(argv[2], std::max(1, std::atoi(argv[3])),
                             argc >= 5 ? std::max(1, std::atoi(argv[4])) : 100);
    } catch (const std::exception& e) {
      std::cerr << "models_bench: --profile-forward: " << e.what() << "\n";
      return 1;
    }
  }
  if (argc >= 3 && std::strcmp(argv[1], "--profile") == 0) {
    try {
      return profile_train_steps(argv[2], argc >= 4 ? std::max(1, std::atoi(argv[3])) : 3);
    } catch (const std::exception& e) {
      std::cerr << "models_bench: --profile: " << e.what() << "\n";
      return 1;
    }
  }
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--export") == 0) {
      if (i + 1 >= argc) {
        std::cerr << "models_bench: --export: expected a directory\n";
        return 2;
      }
      try {
        return export_models(argv[i + 1]);
      } catch (const std::exception& e) {
        std::cerr << "models_bench: --export: " << e.what() << "\n";
        return 1;
      }
    }
  }
  return foxhunt::bench::run_benchmarks(argc, argv, [] { register_all(); });
}
