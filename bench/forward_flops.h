#pragma once
// FLOPs of one inference forward of a catalog model at a batch, for the fraction-of-peak
// counters (peak_fraction.h). Multiply-adds count 2 FLOPs; elementwise work (activations, norms,
// biases, gates) is left out.
//
//  - MLPs (DQN, PPO: every weight matrix applied once per sample): 2 x sum(in x out) x batch,
//    exact for the matmuls (PPO's actor and critic both run).
//  - Sequence models: every weight tensor of 2+ dimensions (Linear, LSTM W_ih / W_hh, the VSN's
//    per-variable [v, in, out] stacks, the depthwise conv taps) times the positions it is
//    applied over per sample (below), plus the terms without weights. APPROXIMATE:
//      Mamba-2 (window W): every weight over W positions but the head (1); per layer and
//        position the SSD chunked scan, 2 x (Q x N x G + Q x d_inner + 2 x N x d_inner) with
//        chunk Q, d_state N, groups G (the full Q x Q intra-chunk block, not its causal half).
//      TFT (window W, horizon K): static_* once; past_vsn, encoder over W; future_vsn, decoder
//        over K; lstm_gate, enrichment over W + K; attention query / out over K, key / value over
//        W + K, scores and weighted values 2 x 2 x K x (W + K) x hidden; the gates after it,
//        positionwise and output over K. The static embedding is a lookup (0). The variable
//        selection networks count as their kernels compute them (models/tft.cpp, VsnFolding):
//        each variable's Linear(1 -> E) embedding folded into what consumes it (the variable's
//        fc2 and skip, the selection GRN's fc2 and skip), so those weights count 1/E of their
//        size and the embedding none.
#include <torch/torch.h>

#include <cstdint>
#include <string>

#include "foxhunt/models/model.h"

namespace foxhunt::bench {

namespace detail {

// Positions per sample that the weight `name` of `model` is applied over.
inline int64_t weight_positions(const std::string& model, const std::string& name, int64_t w,
                                int64_t k) {
  const auto top = name.substr(0, name.find('.'));
  if (model == "mamba2") return top == "head" ? 1 : w;
  if (model == "tft") {
    if (top.rfind("static_", 0) == 0) return 1;
    if (top == "past_vsn" || top == "encoder") return w;
    if (top == "future_vsn" || top == "decoder") return k;
    if (top == "lstm_gate" || top == "enrichment") return w + k;
    if (top == "attention")
      return name.find(".key.") != std::string::npos || name.find(".value.") != std::string::npos
                 ? w + k
                 : k;
    return k;  // attention_gate, positionwise, output_gate, output
  }
  return 1;
}

// Multiply-adds per application of the weight `name` (`p`) of `model`: its size, less where the
// kernels fold the TFT's variable embeddings (E = real_embedding) into it.
inline double weight_macs(const std::string& model, const std::string& name, const torch::Tensor& p,
                          int64_t e) {
  const auto n = static_cast<double>(p.numel());
  if (model != "tft" || name.find("_vsn.") == std::string::npos || e <= 0) return n;
  const auto leaf = name.substr(name.rfind('.') + 1);
  if (leaf == "emb_weight") return 0.0;
  if (leaf == "fc2_weight" || leaf == "skip_weight") return n / static_cast<double>(e);
  if (name.find(".selection.fc2.") != std::string::npos ||
      name.find(".selection.skip.") != std::string::npos)
    return n / static_cast<double>(e);
  return n;
}

// A matmul weight: 2+ dimensions (norm scales are 1-D but the VSN's per-variable [V, H]
// "norm_weight"), not the static embedding table (a lookup).
inline bool is_matmul_weight(const std::string& name, const torch::Tensor& p) {
  if (p.dim() < 2) return false;
  const auto leaf = name.substr(name.rfind('.') + 1);
  if (leaf.find("weight") == std::string::npos || leaf == "norm_weight") return false;
  return name.rfind("static_embedding", 0) != 0;
}

}  // namespace detail

/// FLOPs of `model.forward` on `batch` samples (see the file comment; approximate for the
/// sequence models).
inline double forward_flops(models::Model& model, int64_t batch) {
  const std::string name = model.name();
  const auto spec = model.spec();
  const int64_t w = std::max<int64_t>(1, spec.window), k = std::max<int64_t>(1, spec.horizon);
  const auto o = model.options_json();
  const auto get = [&o](const char* key) { return o.value(key, int64_t{0}); };
  double per_sample = 0;
  for (const auto& p : model.module().named_parameters())
    if (detail::is_matmul_weight(p.key(), p.value()))
      per_sample += 2.0 * detail::weight_macs(name, p.key(), p.value(), get("real_embedding")) *
                    static_cast<double>(detail::weight_positions(name, p.key(), w, k));
  if (name == "mamba2") {
    const double q = static_cast<double>(get("chunk_size")),
                 n = static_cast<double>(get("d_state"));
    const double g = static_cast<double>(get("ngroups"));
    const double di = static_cast<double>(get("expand") * get("d_model"));
    per_sample +=
        static_cast<double>(get("n_layers") * w) * 2.0 * (q * n * g + q * di + 2 * n * di);
  } else if (name == "tft") {
    per_sample += 4.0 * static_cast<double>(k * (w + k) * get("hidden"));
  }
  return per_sample * static_cast<double>(batch);
}

}  // namespace foxhunt::bench
