#pragma once
// Every forward against the machine's own peak: the figures bench/peak_bench.cpp writes to
// BUILD/peak.json (next to the benchmark programs), or, where that file is missing, a quick FP32
// peak measured in-process (~0.2 s, bandwidths then unknown). A forward benchmark calls
// `report_flops` after its loop; the counters it adds:
//   gflops             FLOPs per second (FLOPs per call / time per call)
//   peak_fraction      gflops / (the FP32 peak per core x cores)
//   roofline_fraction  the roofline's lower bound on the call's time / its measured time: the
//                      bound is max(FLOPs / peak, weight bytes / bandwidth), with the bandwidth of
//                      the level the weights fit in (L2 when they fit the 512 KiB probe, else
//                      DRAM: a conservative bound for weights held in L3)
// Rates are over Google Benchmark's time (CPU time of the calling thread unless the benchmark
// uses real time); `cores` is how many cores the call may use (the intra-op threads).
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include <unistd.h>

#include "peak_kernels.h"

namespace foxhunt::bench {

/// The machine's peak per core (0 where not measured or not supported).
struct MachinePeak {
  double fp32_gflops = 0;  ///< FP32 FMA, GFLOP/s per core
  double bf16_gflops = 0;  ///< BF16 dot products (vdpbf16ps), GFLOP/s per core
  double int8_gops = 0;    ///< INT8 dot products (vpdpbusd), GOP/s per core
  double l1_gbs = 0;       ///< read bandwidth of a 16 KiB buffer, GB/s
  double l2_gbs = 0;       ///< ... of 512 KiB
  double dram_gbs = 0;     ///< ... of 256 MiB
  std::string cpu;         ///< model name
  std::string source;      ///< the file read, or "measured in-process (fp32 only)"
};

/// Where peak_bench writes and the other benchmarks read: $FOXHUNT_PEAK_JSON, else peak.json
/// in the directory of the running program (the build directory).
inline std::string peak_json_path() {
  if (const char* env = std::getenv("FOXHUNT_PEAK_JSON"); env != nullptr && *env != '\0')
    return env;
  std::string exe;
  exe.resize(4096);
  const auto n = ::readlink("/proc/self/exe", exe.data(), exe.size());
  exe.resize(n > 0 ? static_cast<size_t>(n) : 0);
  const auto slash = exe.rfind('/');
  return (slash == std::string::npos ? std::string(".") : exe.substr(0, slash)) + "/peak.json";
}

/// The figures of a peak.json (null and missing keys read as 0); false when the file is missing
/// or unreadable.
inline bool read_peak_json(const std::string& path, MachinePeak& out) {
  std::ifstream in(path);
  if (!in) return false;
  const auto j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return false;
  const auto num = [&j](const char* key) {
    const auto it = j.find(key);
    return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
  };
  // peak.json's key of each figure (peak_bench.cpp writes them).
  constexpr std::pair<const char*, double MachinePeak::*> kFigures[] = {
      {"fp32_gflops_per_core", &MachinePeak::fp32_gflops},
      {"bf16_gflops_per_core", &MachinePeak::bf16_gflops},
      {"int8_gops_per_core", &MachinePeak::int8_gops},
      {"l1_gbs", &MachinePeak::l1_gbs},
      {"l2_gbs", &MachinePeak::l2_gbs},
      {"dram_gbs", &MachinePeak::dram_gbs}};
  for (const auto& [key, figure] : kFigures) out.*figure = num(key);
  out.cpu = j.value("cpu", std::string("unknown"));
  out.source = path;
  return out.fp32_gflops > 0;
}

/// peak.json when there is one (with an FP32 figure), else a quick in-process FP32 measurement;
/// read or measured once per program.
inline const MachinePeak& machine_peak() {
  static const MachinePeak p = [] {
    MachinePeak m;
    if (read_peak_json(peak_json_path(), m)) return m;
    const auto caps = peak::cpu_caps();
    m.fp32_gflops = peak::mac_rate(peak::fp32_loop(caps), 0.2) * 1e-9;
    m.cpu = peak::cpu_model();
    m.source = "measured in-process (fp32 only)";
    return m;
  }();
  return p;
}

/// Adds gflops, peak_fraction and roofline_fraction (see the file comment) for a call of
/// `flops` FLOPs that reads `weight_bytes` of weights, on `cores` cores at most.
inline void report_flops(benchmark::State& state, double flops, double weight_bytes,
                         int cores = 1) {
  const auto& p = machine_peak();
  const double peak_flops = p.fp32_gflops * 1e9 * std::max(1, cores);
  using C = benchmark::Counter;
  state.counters["flops"] = flops;
  state.counters["gflops"] = C(flops * 1e-9, C::kIsIterationInvariantRate);
  if (peak_flops <= 0) return;
  state.counters["peak_fraction"] = C(flops / peak_flops, C::kIsIterationInvariantRate);
  const double bw =
      (weight_bytes <= static_cast<double>(peak::kL2Bytes) ? p.l2_gbs : p.dram_gbs) * 1e9;
  const double bound_s = std::max(flops / peak_flops, bw > 0 ? weight_bytes / bw : 0.0);
  state.counters["roofline_fraction"] = C(bound_s, C::kIsIterationInvariantRate);
}

}  // namespace foxhunt::bench
