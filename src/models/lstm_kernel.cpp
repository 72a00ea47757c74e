#include "lstm_kernel.h"

#include <algorithm>
#include <cmath>

#include "foxhunt/core/simd.h"

namespace foxhunt::models::kernels {

namespace {

using simd::kLanes;
using simd::v16;

// The recurrence on W_hh transposed (`wt` [H, 4H]), so a step is axpys over the 4H gates.
FOXHUNT_INLINE void recurrence_on(const float* xg, const float* wt, int64_t B, int64_t T, int64_t H,
                                  float* h, float* c, float* out, float* gates) {
  const int64_t G = 4 * H;
  const int64_t G128 = G / (8 * kLanes) * (8 * kLanes), G16 = G / kLanes * kLanes;
  // gates = xg_t + W_hh h: eight 16-gate accumulators at a time hide the FMA latency.
  simd::lstm_steps(
      xg, B, T, H, h, c, out,
      gates, [&](const float* x, const float* hb, float* g) __attribute__((always_inline)) {
        int64_t o0 = 0;
        for (; o0 < G128; o0 += 8 * kLanes) {
          v16 acc[8];
          for (int64_t v = 0; v < 8; ++v) acc[v] = simd::load(x + o0 + v * kLanes);
          for (int64_t k = 0; k < H; ++k) {
            const v16 hk = simd::splat(hb[k]);
            const float* row = wt + k * G + o0;
            for (int64_t v = 0; v < 8; ++v) acc[v] += hk * simd::load(row + v * kLanes);
          }
          for (int64_t v = 0; v < 8; ++v) simd::store(g + o0 + v * kLanes, acc[v]);
        }
        for (; o0 < G16; o0 += kLanes) {
          v16 acc = simd::load(x + o0);
          for (int64_t k = 0; k < H; ++k) acc += simd::splat(hb[k]) * simd::load(wt + k * G + o0);
          simd::store(g + o0, acc);
        }
        for (; o0 < G; ++o0) {
          float acc = x[o0];
          for (int64_t k = 0; k < H; ++k) acc += hb[k] * wt[k * G + o0];
          g[o0] = acc;
        }
      });
}

FOXHUNT_KERNEL_CLONES
void recurrence(const float* xg, const float* w_hh, int64_t B, int64_t T, int64_t H, float* h,
                float* c, float* out, float* scratch) {
  const int64_t G = 4 * H;
  float* wt = scratch;  // [H, 4H]
  for (int64_t o = 0; o < G; ++o)
    for (int64_t k = 0; k < H; ++k) wt[k * G + o] = w_hh[o * H + k];
  recurrence_on(xg, wt, B, T, H, h, c, out, wt + H * G);
}

FOXHUNT_KERNEL_CLONES
void recurrence_transposed(const float* xg, const float* w_hh_t, int64_t B, int64_t T, int64_t H,
                           float* h, float* c, float* out, float* gates) {
  recurrence_on(xg, w_hh_t, B, T, H, h, c, out, gates);
}

}  // namespace

int64_t lstm_scratch_floats(int64_t hidden) {
  return 4 * hidden * hidden + 4 * hidden;
}

void lstm_recurrence(const float* xg, const float* w_hh, int64_t batch, int64_t steps,
                     int64_t hidden, float* h, float* c, float* out, float* scratch) {
  recurrence(xg, w_hh, batch, steps, hidden, h, c, out, scratch);
}

void lstm_recurrence_transposed(const float* xg, const float* w_hh_t, int64_t batch, int64_t steps,
                                int64_t hidden, float* h, float* c, float* out, float* gates) {
  recurrence_transposed(xg, w_hh_t, batch, steps, hidden, h, c, out, gates);
}

}  // namespace foxhunt::models::kernels
