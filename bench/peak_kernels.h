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

// Defines NAME(reps) under the target attribute TARGET: CHAINS independent accumulators of type
// VEC, accumulator i started at INIT (an expression of i) and advanced by STEP (an expression of
// acc[i]) once per iteration, unrolled so that the chains interleave; then summed with ADD and
// kept alive. Returns OPS x reps (OPS: operations per iteration over all chains). The trailing
// arguments are the loop's constants (a declaration). A macro, not a template: the intrinsics
// must expand inside the function that carries their target attribute.
#define FOXHUNT_MAC_LOOP(NAME, TARGET, VEC, CHAINS, OPS, INIT, STEP, ADD, ...) \
  __attribute__((target(TARGET), noinline)) inline double NAME(int64_t reps) { \
    __VA_ARGS__;                                                               \
    VEC acc[CHAINS];                                                           \
    for (int i = 0; i < (CHAINS); ++i) acc[i] = (INIT);                        \
    for (int64_t r = 0; r < reps; ++r) {                                       \
      _Pragma("GCC unroll 16") for (int i = 0; i < (CHAINS); ++i) {            \
        acc[i] = (STEP);                                                       \
      }                                                                        \
    }                                                                          \
    VEC sum = acc[0];                                                          \
    for (int i = 1; i < (CHAINS); ++i) sum = ADD(sum, acc[i]);                 \
    keep(sum);                                                                 \
    return (OPS) * static_cast<double>(reps);                                  \
  }

// FP32 FMA, 16 chains x 16 lanes x 2 FLOPs per iteration. a <- a * m + c converges to
// c / (1 - m) ~ 1: no overflow, no denormals, and the compiler cannot fold a chain of FMAs.
FOXHUNT_MAC_LOOP(fp32_avx512, "avx512f", __m512, 16, 2.0 * 16 * 16,
                 _mm512_set1_ps(1.0f + 0.01f * static_cast<float>(i)),
                 _mm512_fmadd_ps(acc[i], m, c), _mm512_add_ps,
                 const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-6f))
// The same on AVX2: 12 chains (16 ymm registers) x 8 lanes x 2 FLOPs.
FOXHUNT_MAC_LOOP(fp32_avx2, "avx2,fma", __m256, 12, 2.0 * 12 * 8,
                 _mm256_set1_ps(1.0f + 0.01f * static_cast<float>(i)),
                 _mm256_fmadd_ps(acc[i], m, c), _mm256_add_ps,
                 const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-6f))
// BF16: 16 chains of vdpbf16ps, 64 FLOPs each. Inputs of 1e-3: a chain grows by 2e-6 an
// iteration.
FOXHUNT_MAC_LOOP(bf16_avx512, "avx512f,avx512bf16", __m512, 16, 64.0 * 16, _mm512_setzero_ps(),
                 _mm512_dpbf16_ps(acc[i], a, a), _mm512_add_ps,
                 const __m512 x = _mm512_set1_ps(1e-3f);
                 const __m512bh a = _mm512_cvtne2ps_pbh(x, x))
// INT8: 16 chains of vpdpbusd on 512 bits, 128 ops each (int32 lanes wrap harmlessly).
FOXHUNT_MAC_LOOP(int8_avx512, "avx512f,avx512vnni", __m512i, 16, 128.0 * 16, _mm512_set1_epi32(i),
                 _mm512_dpbusd_epi32(acc[i], a, b), _mm512_add_epi32,
                 const __m512i a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2))
// 12 chains of the VEX-encoded vpdpbusd on 256 bits: 64 ops each.
FOXHUNT_MAC_LOOP(int8_avx_vnni, "avx2,avxvnni", __m256i, 12, 64.0 * 12, _mm256_set1_epi32(i),
                 _mm256_dpbusd_avx_epi32(acc[i], a, b), _mm256_add_epi32,
                 const __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(-2))
#undef FOXHUNT_MAC_LOOP

// ---- read bandwidth: sums `floats` (a multiple of 128) floats `passes` times; returns bytes ---

// The body of the three read loops: 8 accumulators of VEC (LANES floats), each pass reading
// the buffer once in blocks of 8 vectors.
#define FOXHUNT_PEAK_READ(VEC, LANES, ZERO, ADD, LOAD)      \
  VEC s[8];                                                 \
  for (auto& v : s) v = ZERO();                             \
  for (int64_t r = 0; r < passes; ++r)                      \
    for (size_t i = 0; i < floats; i += 8 * (LANES)) {      \
      _Pragma("GCC unroll 8") for (int k = 0; k < 8; ++k) { \
        s[k] = ADD(s[k], LOAD(p + i + (LANES)*k));          \
      }                                                     \
    }                                                       \
  for (int k = 1; k < 8; ++k) s[0] = ADD(s[0], s[k]);       \
  keep(s[0]);                                               \
  return static_cast<double>(floats) * sizeof(float) * static_cast<double>(passes)

__attribute__((target("avx512f"), noinline)) inline double read_avx512(const float* p,
                                                                       size_t floats,
                                                                       int64_t passes) {
  FOXHUNT_PEAK_READ(__m512, 16, _mm512_setzero_ps, _mm512_add_ps, _mm512_load_ps);
}

__attribute__((target("avx2"), noinline)) inline double read_avx2(const float* p, size_t floats,
                                                                  int64_t passes) {
  FOXHUNT_PEAK_READ(__m256, 8, _mm256_setzero_ps, _mm256_add_ps, _mm256_load_ps);
}

// SSE2 (every x86-64): the fallback of both loops.
inline double read_sse2(const float* p, size_t floats, int64_t passes) {
  FOXHUNT_PEAK_READ(__m128, 4, _mm_setzero_ps, _mm_add_ps, _mm_load_ps);
}
#undef FOXHUNT_PEAK_READ

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

/// The best of `trials` runs of `work(count)` (which returns what it did: operations, bytes),
/// per thread CPU second.
template <typename Work>
double best_rate(int trials, int64_t count, Work&& work) {
  double best = 0;
  for (int i = 0; i < trials; ++i) {
    double done = 0;
    const double t = seconds_of([&] { done = work(count); });
    best = std::max(best, done / t);
  }
  return best;
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
  return best_rate(trials, per_trial, loop);
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
  return best_rate(trials, passes, read);
}

/// The buffer sizes of the three bandwidth figures.
inline constexpr size_t kL1Bytes = 16 << 10, kL2Bytes = 512 << 10, kDramBytes = size_t{256} << 20;

}  // namespace foxhunt::bench::peak
