#pragma once
// The TFT's layers after the variable selection on a few rows of raw float32 (private to
// models/): what TftStream's push runs per bar on the CPU instead of ~60 LibTorch ops, each of
// which cost more in dispatch and allocation than its arithmetic on rows of 32 floats.
#include <cstdint>
#include <vector>

namespace foxhunt::models::kernels {

/// A linear layer on pre-transposed weights: `wt` [in, out] row-major, `b` [out] (null: none).
struct RowLinear {
  const float* wt = nullptr;
  const float* b = nullptr;
  int64_t in = 0, out = 0;
};

/// y [n, out] = x W + bias, x [n, in] with row stride `ldx`; `bias` (when not null) replaces the
/// layer's own (a per-instrument fold).
void rows_linear(const RowLinear& l, const float* x, int64_t ldx, int64_t n, float* y,
                 const float* bias = nullptr);

/// GateAddNorm: y = LayerNorm(skip + v * sigmoid(g)) with [v | g] = glu(x), width glu.out / 2.
struct RowGan {
  RowLinear glu;
  const float* ln_w = nullptr;
  const float* ln_b = nullptr;
  float eps = 1e-5f;
};

/// rows_gan's scratch floats for n rows.
int64_t rows_gan_scratch(const RowGan& g, int64_t n);
/// y [n, glu.out / 2] = GateAddNorm(x [n, glu.in], skip [n, glu.out / 2] with row stride
/// `ldskip`).
void rows_gan(const RowGan& g, const float* x, const float* skip, int64_t ldskip, int64_t n,
              float* y, float* scratch);

/// A gated residual network without context: GateAddNorm(fc1(ELU(fc2 a + fc2_bias)), skip(a)).
struct RowGrn {
  RowLinear fc2, fc1, skip;  // skip.wt null: identity
  RowGan gan;
};

/// rows_grn's scratch floats for n rows.
int64_t rows_grn_scratch(const RowGrn& g, int64_t n);
/// y [n, out] = GRN(a [n, fc2.in]) with fc2's bias `fc2_bias` (a static context folded in).
void rows_grn(const RowGrn& g, const float* a, const float* fc2_bias, int64_t n, float* y,
              float* scratch);

/// A stacked LSTM (LibTorch's gate order) on pre-transposed weights: per layer `ih` [in_l, 4H]
/// with bias b_ih + b_hh, and `hh_t` [H, 4H] (W_hh transposed).
struct RowLstm {
  int64_t hidden = 0;
  std::vector<RowLinear> ih;
  std::vector<const float*> hh_t;
};

/// rows_lstm's scratch floats for `steps` rows.
int64_t rows_lstm_scratch(const RowLstm& m, int64_t steps);
/// Runs `steps` rows of x (row stride `ldx`) through every layer from the state h, c
/// [layers, H] (advanced in place); out [steps, H] the last layer's outputs.
void rows_lstm(const RowLstm& m, const float* x, int64_t ldx, int64_t steps, float* h, float* c,
               float* out, float* scratch);

/// The TFT's interpretable attention of the horizon's `queries` rows over `keys` rows, the query
/// j at key position keys - queries + j seeing the keys up to its own: per head h the softmax of
/// q_h . k_h (scale folded into q), the weights summed over heads, times the shared values (1 /
/// heads folded into v). q [queries, heads * dk], k [keys, heads * dk], v [keys, dv];
/// out [queries, dv]; scratch 2 x keys floats.
void rows_attention(const float* q, const float* k, const float* v, int64_t queries, int64_t keys,
                    int64_t heads, int64_t dk, int64_t dv, float* out, float* scratch);

}  // namespace foxhunt::models::kernels
