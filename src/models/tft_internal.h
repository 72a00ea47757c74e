#pragma once
// What tft.cpp, tft_net.cpp and tft_stream.cpp share (private to models/).
#include <torch/torch.h>

#include <tuple>

namespace foxhunt::models::detail {

/// ELU; at inference on contiguous CPU fp32 the vector kernel (kernels::elu), else LibTorch's.
torch::Tensor fast_elu(const torch::Tensor& x);

/// Xavier-uniform weights and zero bias for a linear layer.
void init_xavier(torch::nn::Linear& l);

using LstmState = std::tuple<torch::Tensor, torch::Tensor>;

/// An LSTM over x [B, T, in] from `state0` (h0, c0 [layers, B, H]), returning what the module
/// returns: (out [B, T, H], (h_n, c_n)). CPU fp32 inference runs one GEMM for the input gates of
/// every position and the fused recurrence kernel per layer; autograd, other devices or dtypes,
/// dropout between layers in train mode and projections run the module.
std::tuple<torch::Tensor, LstmState> run_lstm(torch::nn::LSTMImpl& m, const torch::Tensor& x,
                                              const LstmState& state0);

}  // namespace foxhunt::models::detail
