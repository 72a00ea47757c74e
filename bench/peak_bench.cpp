// The machine's own peak, one core: FP32 FMA (AVX-512, else AVX2), BF16 dot products
// (`vdpbf16ps`, where avx512_bf16 is), INT8 dot products (`vpdpbusd`: AVX-512 VNNI, else
// AVX-VNNI) from register-resident loops, and the read bandwidth of 16 KiB (L1), 512 KiB (L2)
// and 256 MiB (DRAM) buffers. The kernels (peak_kernels.h) carry their own target attributes and
// are picked at run time, so this builds for any x86-64.
//
// Counters: gflops / gops (over the run's CPU time: a core shared with other processes still
// gives its own rate) and best_gflops / best_gops (the best iteration, by the thread's CPU
// time), gbs and best_gbs. After the run the best figures go to BUILD/peak.json (or
// $FOXHUNT_PEAK_JSON), merged into what is there, for the other benchmarks (peak_fraction.h)
// and scripts:
//   {"fp32_gflops_per_core", "bf16_gflops_per_core", "int8_gops_per_core", "l1_gbs", "l2_gbs",
//    "dram_gbs", "cpu", "isa": {...}}     (null: not supported on this CPU)
// Run: ./build/peak_bench [--benchmark_filter=fp32]
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <iostream>
#include <map>
#include <memory>
#include <optional>

#include "foxhunt/core/file_io.h"
#include "peak_fraction.h"

namespace {

namespace pk = foxhunt::bench::peak;

// The best figure of each benchmark this run (GFLOP/s, GOP/s or GB/s), by peak.json key; an
// empty optional: not supported here.
std::map<std::string, std::optional<double>>& measured() {
  static std::map<std::string, std::optional<double>> m;
  return m;
}
std::map<std::string, std::string>& isa() {
  static std::map<std::string, std::string> m;
  return m;
}

// One multiply-add loop: ~0.1-0.5 ms a call (2^16 iterations).
void BM_Mac(benchmark::State& state, pk::MacLoop loop, std::string key, std::string unit) {
  const int64_t reps = int64_t{1} << 16;
  loop(reps);  // wakes the wide units up
  double best = 0, ops = 0;
  for (auto _ : state) {
    const double s = pk::seconds_of([&] { ops = loop(reps); });
    best = std::max(best, ops / s);
  }
  using C = benchmark::Counter;
  state.counters[unit] = C(ops * 1e-9, C::kIsIterationInvariantRate);
  state.counters["best_" + unit] = best * 1e-9;
  auto& m = measured()[key];
  m = std::max(m.value_or(0.0), best * 1e-9);
  state.SetLabel(pk::loop_isa(loop));
}

// A loop this CPU lacks: one empty iteration, "not supported" in the output and null in the JSON.
void BM_Unsupported(benchmark::State& state, std::string key, std::string why) {
  for (auto _ : state) {
  }
  measured()[key] = std::nullopt;
  state.SetLabel("not supported: " + why);
}

// Read bandwidth over one buffer of `bytes`: each iteration reads it enough times for ~2 ms.
void BM_Read(benchmark::State& state, size_t bytes, std::string key) {
  const auto caps = pk::cpu_caps();
  const pk::AlignedBuffer buf(bytes);
  const double t1 = pk::seconds_of([&] { pk::read_rate(caps, buf, 0.0, 1); });
  const int64_t passes = std::max<int64_t>(1, static_cast<int64_t>(2e-3 / std::max(t1, 1e-9)));
  double best = 0, read = 0;
  for (auto _ : state) {
    const double s = pk::seconds_of([&] {
      read = caps.avx512f    ? pk::read_avx512(buf.data(), buf.floats(), passes)
             : caps.avx2_fma ? pk::read_avx2(buf.data(), buf.floats(), passes)
                             : pk::read_sse2(buf.data(), buf.floats(), passes);
    });
    best = std::max(best, read / s);
  }
  using C = benchmark::Counter;
  state.counters["gbs"] = C(read * 1e-9, C::kIsIterationInvariantRate);
  state.counters["best_gbs"] = best * 1e-9;
  auto& m = measured()[key];
  m = std::max(m.value_or(0.0), best * 1e-9);
  state.SetLabel(fmt::format("{} KiB, {} loads", buf.bytes() >> 10,
                             caps.avx512f    ? "avx512"
                             : caps.avx2_fma ? "avx2"
                                             : "sse2"));
}

void register_all() {
  const auto caps = pk::cpu_caps();
  const auto mac = [](const char* name, pk::MacLoop loop, const char* key, const char* unit,
                      const char* missing) {
    if (loop == nullptr) {
      benchmark::RegisterBenchmark(name, BM_Unsupported, std::string(key), std::string(missing))
          ->Iterations(1);
      isa()[key] = "not supported";
      return;
    }
    isa()[key] = pk::loop_isa(loop);
    benchmark::RegisterBenchmark(name, BM_Mac, loop, std::string(key), std::string(unit))
        ->Unit(benchmark::kMillisecond);
  };
  mac("peak/fp32_fma", pk::fp32_loop(caps), "fp32_gflops_per_core", "gflops", "no avx2+fma");
  mac("peak/bf16_dot", pk::bf16_loop(caps), "bf16_gflops_per_core", "gflops", "no avx512_bf16");
  mac("peak/int8_dot", pk::int8_loop(caps), "int8_gops_per_core", "gops",
      "no avx512_vnni nor avx_vnni");
  for (auto [name, bytes, key] : {std::tuple{"bandwidth/l1_16KiB", pk::kL1Bytes, "l1_gbs"},
                                  std::tuple{"bandwidth/l2_512KiB", pk::kL2Bytes, "l2_gbs"},
                                  std::tuple{"bandwidth/dram_256MiB", pk::kDramBytes, "dram_gbs"}})
    benchmark::RegisterBenchmark(name, BM_Read, bytes, std::string(key))
        ->Unit(benchmark::kMillisecond);
}

// Merges this run's figures into peak.json (a filtered run keeps the others' figures).
void write_peak_json() {
  if (measured().empty()) return;
  const std::string path = foxhunt::bench::peak_json_path();
  nlohmann::json j = nlohmann::json::object();
  if (std::ifstream in(path); in) {
    auto old = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (old.is_object()) j = std::move(old);
  }
  for (const auto& [key, v] : measured()) j[key] = v ? nlohmann::json(*v) : nlohmann::json();
  for (const auto& [key, name] : isa()) j["isa"][key] = name;
  j["cpu"] = pk::cpu_model();
  foxhunt::write_file_atomic(path, j.dump(2) + "\n");
  std::cerr << "peak_bench: wrote " << path << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  try {
    write_peak_json();
  } catch (const std::exception& e) {
    std::cerr << "peak_bench: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
