#pragma once
// A fused CPU inference kernel for the recurrence of an LSTM layer (private to models/).
#include <cstdint>

namespace foxhunt::models::kernels {

/// Floats of scratch `lstm_recurrence` needs for hidden width `hidden`.
int64_t lstm_scratch_floats(int64_t hidden);

/// The recurrence of one LSTM layer (LibTorch's gate order i, f, g, o) for `batch` sequences of
/// `steps` positions, from the input gates `xg` [batch, steps, 4 hidden] = x W_ih^T + b_ih + b_hh
/// (one GEMM over every position, done by the caller): gates = xg_t + W_hh h, c = f c + i g,
/// h = o tanh(c). `w_hh` [4 hidden, hidden] row-major; `h`, `c` [batch, hidden] hold the initial
/// state and receive the final one; `out` [batch, steps, hidden] every h. Steps run in order,
/// the batch inside each step (independent chains for the out-of-order core).
void lstm_recurrence(const float* xg, const float* w_hh, int64_t batch, int64_t steps,
                     int64_t hidden, float* h, float* c, float* out, float* scratch);

/// lstm_recurrence on W_hh already transposed (`w_hh_t` [hidden, 4 hidden] row-major, for a
/// caller that keeps it so between calls); `gates` is 4 hidden floats of scratch.
void lstm_recurrence_transposed(const float* xg, const float* w_hh_t, int64_t batch, int64_t steps,
                                int64_t hidden, float* h, float* c, float* out, float* gates);

}  // namespace foxhunt::models::kernels
