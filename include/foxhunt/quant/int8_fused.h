#pragma once
/// \file int8_fused.h
/// Fused int8 CPU kernels over raw arrays: per-variable GRNs weighted by a selection (a variable
/// selection network) and an LSTM layer's recurrence, the int8 twins of the FP32 kernels
/// (src/models/tft_kernels.h, src/models/lstm_kernel.h). Raw arrays in, raw arrays out; the
/// INT8 TFT (models/tft_int8.h, src/models/tft_int8_kernels.cpp) wraps them.
#include <cstdint>

namespace foxhunt::quant::detail {

/// The per-variable GRNs of one VSN in the INT8 model's form (tft_int8.h), as raw row-major
/// arrays: V variables, Hi inner width, H output width. The two batched layers hold int8 codes
/// with, per variable, one activation scale s_x and one output scale s_x s_w.
struct VsnInt8Weights {
  int64_t variables = 0, inner = 0, hidden = 0;
  const float* fc2_slope = nullptr;        ///< [V, Hi] (the folded embedding map)
  const float* fc2_offset = nullptr;       ///< [V, Hi]
  const int8_t* fc1_codes = nullptr;       ///< [V, Hi, Hi] (in, out)
  const float* fc1_input_scale = nullptr;  ///< [V] s_x
  const float* fc1_scale = nullptr;        ///< [V] s_x s_w
  const float* fc1_bias = nullptr;         ///< [V, Hi]
  const int8_t* glu_codes = nullptr;       ///< [V, Hi, 2H] (in, out): value half, then gate half
  const float* glu_input_scale = nullptr;  ///< [V]
  const float* glu_scale = nullptr;        ///< [V]
  const float* glu_bias = nullptr;         ///< [V, 2H]
  const float* skip_slope = nullptr;       ///< [V, H]
  const float* skip_offset = nullptr;      ///< [V, H]
  const float* norm_weight = nullptr;      ///< [V, H]
  const float* norm_bias = nullptr;        ///< [V, H]
};

/// Widest inner / output widths the kernel takes (its per-lane values live on the stack).
inline constexpr int64_t kMaxInt8VsnInner = 64;
inline constexpr int64_t kMaxInt8VsnHidden = 256;

/// out [N, H] = sum over v of w[n, v] * GRN_v(x[n, v]) in eval mode, for x and w [N, V]
/// row-major: what the INT8 model's layer-by-layer VSN computes, in one pass with no [V, N, .]
/// intermediate. Each batched layer quantizes its input to codes (round half to even of
/// clamp(x / s_x, -127, 127)), sums the code products exactly (integers below 2^24 in fp32, as
/// int8 x int8 -> int32 would) and returns sum * s_x s_w + bias. Lanes are 16 positions, like the
/// FP32 kernel; large inputs split their positions across the intra-op threads.
void vsn_weighted_grns_int8(const VsnInt8Weights& p, const float* x, const float* w, int64_t n,
                            float* out);

/// Whether this CPU has AVX512-VNNI, which the VSN kernel uses at the default widths (inner 8,
/// hidden 32) for the GLU's code products; they sum the same integers as the portable path.
bool int8_vnni_available();
/// Allows (true, the default) or forbids the VNNI path process-wide; returns the previous value
/// (tests compare the two paths).
bool set_int8_vnni(bool enabled);

/// Calls of the two fused kernels since the process started: tests read them to tell which path
/// a forward took (the fused kernels and the layer-by-layer path may give the same floats).
struct Int8FusedCalls {
  int64_t vsn = 0;   ///< vsn_weighted_grns_int8
  int64_t lstm = 0;  ///< int8_lstm_recurrence
};
Int8FusedCalls int8_fused_calls();

/// Scratch floats int8_lstm_recurrence needs for hidden width H.
int64_t int8_lstm_scratch_floats(int64_t hidden);

/// The recurrence of one int8 LSTM layer over T steps of B rows: per step the state h is
/// quantized to codes at `input_scale` (s_x, as the layer-by-layer path does), the code products
/// with `codes` [H, 4H] (in, out) are summed exactly and the gates are gx + sum * scale[o]
/// (gx [B, T, 4H] the input projection with both biases, gate order i, f, g, o). h and c [B, H]
/// are updated in place; out [B, T, H] receives every h. H <= 1040 (exact fp32 sums).
void int8_lstm_recurrence(const float* gx, const int8_t* codes, const float* scale,
                          float input_scale, int64_t batch, int64_t steps, int64_t hidden, float* h,
                          float* c, float* out, float* scratch);

}  // namespace foxhunt::quant::detail
