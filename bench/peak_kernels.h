#pragma once
// The machine's own peak, per core: register-resident multiply-add loops (FP32 FMA, BF16
// `vdpbf16ps`, INT8 `vpdpbusd`) and read bandwidth over buffers sized for L1, L2 and DRAM. Every
// kernel carries its own target attribute, so this header builds on any x86-64 and the caller
// picks a kernel at run time from `cpu_caps()` (__builtin_cpu_supports). Torch-free (it also
// builds alone: g++ -O2 -march=x86-64), shared by bench/peak_bench.cpp and peak_fraction.h.
//
// Counting: one FMA = 2 FLOPs per lane; one `vdpbf16ps` on 512 bits = 16 lanes x 2 pairs x 2 =
// 64 FLOPs; one `vpdpbusd` on 512 bits = 64 byte products + 64 adds = 128 ops (half on 256 bits).
// The loops keep 12-16 independent accumulator chains in registers: enough to cover the FMA
// latency (4-5 cycles) times the FMA ports (2) of current x86 cores.
#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

namespace foxhunt::bench::peak {

// Keeps every lane of a result alive (GCC 12's _mm512_reduce_* warn under -Wall).
template <typename V>
inline void keep(const V& v) {
  uint32_t lanes[sizeof(V) / sizeof(uint32_t)];
  std::memcpy(lanes, &v, sizeof v);
  uint32_t x = 0;
  for (uint32_t l : lanes) x ^= l;
  volatile uint32_t sink = x;
  (void)sink;
}

/// The instruction sets the kernels dispatch on.
struct CpuCaps {
  bool avx2_fma = false;
  bool avx512f = false;
  bool avx512_bf16 = false;
  bool avx512_vnni = false;
  bool avx_vnni = false;
};

/// This CPU's caps (cpuid through the compiler's builtins).
inline CpuCaps cpu_caps() {
  CpuCaps c;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  c.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  c.avx512f = __builtin_cpu_supports("avx512f");
  c.avx512_bf16 = c.avx512f && __builtin_cpu_supports("avx512bf16");
  c.avx512_vnni = c.avx512f && __builtin_cpu_supports("avx512vnni");
  // AVX-VNNI: CPUID.(EAX=7, ECX=1):EAX bit 4 (clang 14's builtin does not know the name); the
  // OS saves the ymm state when avx2 is reported.
  unsigned a = 0, b = 0, c1 = 0, d = 0;
  if (c.avx2_fma && __get_cpuid_count(7, 1, &a, &b, &c1, &d)) c.avx_vnni = (a >> 4) & 1u;
#endif
  return c;
}

/// "model name" of /proc/cpuinfo ("unknown" where there is none).
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) break;
    auto v = line.substr(colon + 1);
    v.erase(0, v.find_first_not_of(" \t"));
    return v;
  }
  return "unknown";
}

// ---- multiply-add loops: each returns the operations done in `reps` iterations ---------------

// 16 chains x 16 lanes x 2 FLOPs per iteration. a <- a * m + c converges to c / (1 - m) ~ 1:
// no overflow, no denormals, and the compiler cannot fold a chain of FMAs.
__attribute__((target("avx512f"), noinline)) inline double fp32_avx512(int64_t reps) {
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f);
  __m512 a[16];
  for (int i = 0; i < 16; ++i) a[i] = _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(i));
  for (int64_t r = 0; r < reps; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) a[i] = _mm512_fmadd_ps(a[i], m, c);
  }
  __m512 s = a[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, a[i]);
  keep(s);
  return 2.0 * 16 * 16 * static_cast<double>(reps);
}

// 12 chains (16 ymm registers) x 8 lanes x 2 FLOPs.
__attribute__((target("avx2,fma"), noinline)) inline double fp32_avx2(int64_t reps) {
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f);
  __m256 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(i));
  for (int64_t r = 0; r < reps; ++r) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm256_fmadd_ps(a[i], m, c);
  }
  __m256 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, a[i]);
  keep(s);
  return 2.0 * 12 * 8 * static_cast<double>(reps);
}

// 16 chains of vdpbf16ps: 64 FLOPs each. Inputs of 1e-3: each chain grows by 2e-6 an iteration.
__attribute__((target("avx512f,avx512bf16"), noinline)) inline double bf16_avx512(int64_t reps) {
  const __m512 x = _mm512_set1_ps(1e-3f);
  const __m512bh a = _mm512_cvtne2ps_pbh(x, x), b = _mm512_cvtne2ps_pbh(x, x);
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t r = 0; r < reps; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  keep(s);
  return 64.0 * 16 * static_cast<double>(reps);
}

// 16 chains of vpdpbusd on 512 bits: 128 ops each (int32 lanes wrap harmlessly).
__attribute__((target("avx512f,avx512vnni"), noinline)) inline double int8_avx512(int64_t reps) {
  const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
  __m512i acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_epi32(i);
  for (int64_t r = 0; r < reps; ++r) {
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
  }
  __m512i s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_epi32(s, acc[i]);
  keep(s);
  return 128.0 * 16 * static_cast<double>(reps);
}

// 12 chains of the VEX-encoded vpdpbusd on 256 bits: 64 ops each.
__attribute__((target("avx2,avxvnni"), noinline)) inline double int8_avx_vnni(int64_t reps) {
  const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2);
  __m256i acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_epi32(i);
  for (int64_t r = 0; r < reps; ++r) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_dpbusd_avx_epi32(acc[i], a, b);
  }
  __m256i s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_epi32(s, acc[i]);
  keep(s);
  return 64.0 * 12 * static_cast<double>(reps);
}

// ---- read bandwidth: sums `floats` (a multiple of 128) floats `passes` times; returns bytes ---

__attribute__((target("avx512f"), noinline)) inline double read_avx512(const float* p,
                                                                       size_t floats,
                                                                       int64_t passes) {
  __m512 s[8];
  for (auto& v : s) v = _mm512_setzero_ps();
  for (int64_t r = 0; r < passes; ++r)
    for (size_t i = 0; i < floats; i += 128) {
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) s[k] = _mm512_add_ps(s[k], _mm512_load_ps(p + i + 16 * k));
    }
  for (int k = 1; k < 8; ++k) s[0] = _mm512_add_ps(s[0], s[k]);
  keep(s[0]);
  return static_cast<double>(floats) * sizeof(float) * static_cast<double>(passes);
}

__attribute__((target("avx2"), noinline)) inline double read_avx2(const float* p, size_t floats,
                                                                  int64_t passes) {
  __m256 s[8];
  for (auto& v : s) v = _mm256_setzero_ps();
  for (int64_t r = 0; r < passes; ++r)
    for (size_t i = 0; i < floats; i += 64) {
#pragma GCC unroll 8
      for (int k = 0; k < 8; ++k) s[k] = _mm256_add_ps(s[k], _mm256_load_ps(p + i + 8 * k));
    }
  for (int k = 1; k < 8; ++k) s[0] = _mm256_add_ps(s[0], s[k]);
  keep(s[0]);
  return static_cast<double>(floats) * sizeof(float) * static_cast<double>(passes);
}

// SSE2 (every x86-64): the fallback of both loops.
inline double read_sse2(const float* p, size_t floats, int64_t passes) {
  __m128 s[8];
  for (auto& v : s) v = _mm_setzero_ps();
  for (int64_t r = 0; r < passes; ++r)
    for (size_t i = 0; i < floats; i += 32)
      for (int k = 0; k < 8; ++k) s[k] = _mm_add_ps(s[k], _mm_load_ps(p + i + 4 * k));
  for (int k = 1; k < 8; ++k) s[0] = _mm_add_ps(s[0], s[k]);
  keep(s[0]);
  return static_cast<double>(floats) * sizeof(float) * static_cast<double>(passes);
}

/// One multiply-add loop: operations done in `reps` iterations (0 when the CPU lacks it).
using MacLoop = double (*)(int64_t reps);

/// The widest FP32 FMA loop this CPU runs (never null: AVX2 or AVX-512; null only without FMA).
inline MacLoop fp32_loop(const CpuCaps& c) {
  return c.avx512f ? fp32_avx512 : c.avx2_fma ? fp32_avx2 : nullptr;
}
/// The BF16 dot-product loop, or null where avx512_bf16 is missing.
inline MacLoop bf16_loop(const CpuCaps& c) {
  return c.avx512_bf16 ? bf16_avx512 : nullptr;
}
/// The INT8 dot-product loop (AVX-512 VNNI, else AVX-VNNI), or null.
inline MacLoop int8_loop(const CpuCaps& c) {
  return c.avx512_vnni ? int8_avx512 : c.avx_vnni ? int8_avx_vnni : nullptr;
}
/// Name of the instructions a loop uses, for the report.
inline const char* loop_isa(MacLoop f) {
  if (f == fp32_avx512) return "avx512 vfmadd";
  if (f == fp32_avx2) return "avx2 vfmadd";
  if (f == bf16_avx512) return "avx512 vdpbf16ps";
  if (f == int8_avx512) return "avx512 vpdpbusd";
  if (f == int8_avx_vnni) return "avx-vnni vpdpbusd";
  return "not supported";
}

/// CPU time of the calling thread, seconds: a core shared with other processes still gives
/// its own rate (wall time ran up to 3x the CPU time on a busy 2-core VM).
inline double thread_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

/// Thread CPU seconds of `f()`.
template <typename F>
double seconds_of(F&& f) {
  const double t0 = thread_seconds();
  f();
  return thread_seconds() - t0;
}

/// Best rate (operations per second) of `loop` over `trials` runs of ~`seconds` / trials each,
/// after a calibration run (the first also wakes the wide units up from their low-power state).
inline double mac_rate(MacLoop loop, double seconds, int trials = 3) {
  if (loop == nullptr) return 0.0;
  int64_t reps = 1 << 14;
  while (seconds_of([&] { loop(reps); }) < 0.01 && reps < (int64_t{1} << 40)) reps *= 2;
  const double t1 = seconds_of([&] { loop(reps); });
  const auto per_trial =
      std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(reps) * seconds / trials / t1));
  double best = 0;
  for (int i = 0; i < trials; ++i) {
    double ops = 0;
    const double t = seconds_of([&] { ops = loop(per_trial); });
    best = std::max(best, ops / t);
  }
  return best;
}

/// A 64-byte aligned, initialised float buffer of `bytes` (rounded down to 512 bytes).
class AlignedBuffer {
 public:
  explicit AlignedBuffer(size_t bytes) : floats_(std::max<size_t>(bytes / 512, 1) * 128) {
    p_ = static_cast<float*>(std::aligned_alloc(64, floats_ * sizeof(float)));
    if (p_ == nullptr) throw std::bad_alloc();
    for (size_t i = 0; i < floats_; ++i) p_[i] = 1e-3f * static_cast<float>(i % 1000);
  }
  ~AlignedBuffer() { std::free(p_); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  const float* data() const { return p_; }
  size_t floats() const { return floats_; }
  size_t bytes() const { return floats_ * sizeof(float); }

 private:
  size_t floats_;
  float* p_ = nullptr;
};

/// Best read bandwidth (bytes per second) over `buf`, the widest loads this CPU has, passes
/// sized for ~`seconds` in all (at least one pass a trial; a warm-up pass first).
inline double read_rate(const CpuCaps& c, const AlignedBuffer& buf, double seconds,
                        int trials = 3) {
  const auto read = [&](int64_t passes) {
    return c.avx512f    ? read_avx512(buf.data(), buf.floats(), passes)
           : c.avx2_fma ? read_avx2(buf.data(), buf.floats(), passes)
                        : read_sse2(buf.data(), buf.floats(), passes);
  };
  const double t1 = seconds_of([&] { read(1); });
  const auto passes =
      std::max<int64_t>(1, static_cast<int64_t>(seconds / trials / std::max(t1, 1e-9)));
  double best = 0;
  for (int i = 0; i < trials; ++i) {
    double bytes = 0;
    const double t = seconds_of([&] { bytes = read(passes); });
    best = std::max(best, bytes / t);
  }
  return best;
}

/// The buffer sizes of the three bandwidth figures.
inline constexpr size_t kL1Bytes = 16 << 10, kL2Bytes = 512 << 10, kDramBytes = size_t{256} << 20;

}  // namespace foxhunt::bench::peak
