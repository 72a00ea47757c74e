// The BF16 variable-selection kernel (tft_bf16_kernels.h): packing and the threaded driver around
// tft_bf16_lanes.h's lane loop.
#include "tft_bf16_kernels.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "foxhunt/core/error.h"

namespace foxhunt::models::kernels {

namespace {

#if defined(FOXHUNT_BF16_KERNEL)
// The default TFT's widths (embedding 8, hidden 32), then any: compiled for AVX512-BF16 only.
FOXHUNT_BF16_TARGET void bf16_vsn_variables_8_32(const Bf16VsnWeights& p, const float* xt,
                                                 const float* wt, int64_t np, int64_t first,
                                                 int64_t last, float* acc) {
  bf16_lanes::variables<8, 32>(p, xt, wt, np, first, last, acc);
}
FOXHUNT_BF16_TARGET void bf16_vsn_variables_any(const Bf16VsnWeights& p, const float* xt,
                                                const float* wt, int64_t np, int64_t first,
                                                int64_t last, float* acc) {
  bf16_lanes::variables<0, 0>(p, xt, wt, np, first, last, acc);
}
void bf16_vsn_variables(const Bf16VsnWeights& p, const float* xt, const float* wt, int64_t np,
                        int64_t first, int64_t last, float* acc) {
  if (p.inner == 8 && p.hidden == 32)
    bf16_vsn_variables_8_32(p, xt, wt, np, first, last, acc);
  else
    bf16_vsn_variables_any(p, xt, wt, np, first, last, acc);
}
#else
void bf16_vsn_variables(const Bf16VsnWeights&, const float*, const float*, int64_t, int64_t,
                        int64_t, float*) {
  FOXHUNT_INTERNAL_ASSERT(false,
                          "bf16 vsn: no kernel on this architecture (cpu_has_bf16 is false)");
}
#endif

// [V, in, out] row-major FP32 -> [V, (in + 1) / 2, out] pair words over the input axis.
void pack_pairs(const float* src, int64_t v, int64_t in, int64_t out, uint32_t* dst) {
  const int64_t pairs = (in + 1) / 2;
  for (int64_t i = 0; i < v; ++i) {
    const float* s = src + i * in * out;
    for (int64_t q = 0; q < pairs; ++q)
      for (int64_t j = 0; j < out; ++j) {
        const float hi = 2 * q + 1 < in ? s[(2 * q + 1) * out + j] : 0.0f;
        *dst++ = bf16_pair(s[2 * q * out + j], hi);
      }
  }
}

}  // namespace

int64_t Bf16VsnPack::bytes() const {
  return static_cast<int64_t>(pairs.nbytes() + floats.nbytes());
}

Bf16VsnPack pack_bf16_vsn(const VsnGrnWeights& w) {
  const int64_t v = w.variables, hi = w.inner, h = w.hidden, hp = (hi + 1) / 2;
  FOXHUNT_INTERNAL_ASSERT(v > 0 && hi > 0 && h > 0 && hi <= kMaxVsnInner && h <= kMaxVsnHidden,
                          "bf16 vsn: widths within the kernel's");
  Bf16VsnPack pack;
  pack.pairs = torch::empty({v * hp * (hi + 2 * h)}, torch::kInt);
  auto* words = reinterpret_cast<uint32_t*>(pack.pairs.mutable_data_ptr<int32_t>());
  pack_pairs(w.fc1_weight, v, hi, hi, words);
  pack_pairs(w.glu_weight, v, hi, 2 * h, words + v * hp * hi);
  // fc2 slope, offset, fc1 bias [V, Hi]; GLU bias [V, 2H]; skip slope, offset, norm w, b [V, H].
  pack.floats = torch::empty({v * (3 * hi + 6 * h)}, torch::kFloat);
  float* f = pack.floats.mutable_data_ptr<float>();
  const auto copy = [&f](const float* src, int64_t count) {
    const float* start = f;
    f = std::copy(src, src + count, f);
    return start;
  };
  auto& p = pack.weights;
  p.variables = v;
  p.inner = hi;
  p.hidden = h;
  p.norm_eps = w.norm_eps;
  p.fc1_pairs = words;
  p.glu_pairs = words + v * hp * hi;
  p.fc2_slope = copy(w.fc2_slope, v * hi);
  p.fc2_offset = copy(w.fc2_offset, v * hi);
  p.fc1_bias = copy(w.fc1_bias, v * hi);
  p.glu_bias = copy(w.glu_bias, v * 2 * h);
  p.skip_slope = copy(w.skip_slope, v * h);
  p.skip_offset = copy(w.skip_offset, v * h);
  p.norm_weight = copy(w.norm_weight, v * h);
  p.norm_bias = copy(w.norm_bias, v * h);
  return pack;
}

void vsn_weighted_grns_bf16(const Bf16VsnWeights& p, const float* x, const float* w, int64_t n,
                            float* out) {
  FOXHUNT_INTERNAL_ASSERT(p.inner <= kMaxVsnInner && p.hidden <= kMaxVsnHidden,
                          "bf16 vsn: widths within the kernel's");
  const int64_t v = p.variables, h = p.hidden;
  if (n <= 0) return;
  constexpr int64_t kLanes = 16;  // positions per lane block (tft_bf16_lanes.h)
  // Chunks of up to 256 positions, each laid out, run through every variable and written back on
  // its own: the chunk's inputs and sums (~0.5 MB at V = 225) stay in L2, where one whole-batch
  // layout (7 MB at batch 64 x 60) was allocated, page-faulted and streamed on every call.
  constexpr int64_t kChunk = 16 * kLanes;
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  const auto run = [&](int64_t c0, int64_t c1) {
    // Through LibTorch's allocator (the ledger counts it), once per task.
    const int64_t width = std::min(kChunk, (n + kLanes - 1) / kLanes * kLanes);
    auto scratch = torch::empty({(2 * v + h) * width}, torch::kFloat);
    float* xt = scratch.mutable_data_ptr<float>();
    float* wt = xt + v * width;
    float* acc = wt + v * width;
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = c * kChunk, len = std::min(kChunk, n - r0);
      const int64_t np = (len + kLanes - 1) / kLanes * kLanes;  // zero-padded: weight 0
      to_lanes(x + r0 * v, len, v, np, xt);
      to_lanes(w + r0 * v, len, v, np, wt);
      std::fill(acc, acc + h * np, 0.0f);
      bf16_vsn_variables(p, xt, wt, np, 0, np / kLanes, acc);
      from_lanes(acc, len, h, np, out + r0 * h);
    }
  };
  if (chunks < 2 || at::get_num_threads() == 1 || at::in_parallel_region())
    run(0, chunks);
  else
    at::parallel_for(0, chunks, 1, run);
}

}  // namespace foxhunt::models::kernels
