#pragma once
/// \file bf16.h
/// The BF16 forms of the catalog's models (Precision::kBf16): the trained FP32 network with its
/// weights in BF16, served through the same runtime and desk. No calibration: the quantize hook
/// casts. Products run on BF16 operands with FP32 accumulation (oneDNN's BF16 GEMM on a CPU
/// with AVX512-BF16 or AMX-BF16; cuBLAS on CUDA); every forecast is returned as FP32.
///
/// What is BF16, per model (the parts kept FP32 are state carried from step to step, where
/// rounding would compound, and the fused FP32 kernels that already run them at memory speed):
///   - TFT: the two variable selection networks' per-variable embeddings and GRNs and their
///     selection GRNs' fc2 and skip (the layers that read the flattened embeddings): ~88% of the
///     default TFT's parameters and nearly all of its FLOPs. On a CPU the per-variable GRNs run
///     a fused BF16 kernel (vdpbf16ps on BF16 weight pairs, FP32 accumulation, elementwise work
///     at BF16 accuracy; its packed weights are a derived cache of the module, ~the BF16 bytes of
///     fc1 and the GLU again plus their FP32 vectors); everything those weights feed otherwise
///     (the folding, the selection network, any non-fused path) computes in FP32 on their upcast
///     values. Every other layer (static encoders, LSTMs, attention, the hidden-width GRNs, the
///     output head) keeps FP32 weights and runs the FP32 fused path: ~12% of the parameters,
///     where BF16 ATen ops made batch 1 5x slower than FP32. Measured at batch 64 on one core
///     (perf, AMD Zen 5): the BF16 kernel is 25% of the forward (the FP32 kernel 47% of FP32's),
///     the selection network's FP32 GEMMs over the folded weights 23%.
///   - Mamba-2: the four projections (embed, each block's in_proj and out_proj, head), weights
///     and biases; the residual stream, the RMS norms, the convolution and the SSD scan stay
///     FP32 (activations are cast to BF16 for each projection and back).
///
/// Where the CPU lacks BF16 arithmetic (no AVX512-BF16 and no AMX-BF16) the precision is refused
/// with an InputError naming the missing flags, when a BF16 model runs on that CPU or an FP32 one
/// is cast there (building one from options is not refused: a bundle may be bound for CUDA):
/// no silent slow path. FOXHUNT_ASSUME_NO_BF16=1 makes this process behave as on such a CPU
/// (tests of the refusal). CUDA devices are not checked here.
///
/// Example (what `foxhunt quantize tft --precision bf16` does, jobs/quantize_job.cpp):
///   const auto& form = models::quantized_form("tft", models::Precision::kBf16, "quantize");
///   auto q = form.quantize(*fp32_model, models::QuantizeRequest{});  // q.model: BF16
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>

#include "foxhunt/models/model.h"
#include "foxhunt/models/precisions.h"

namespace foxhunt::models {

/// True when this CPU has BF16 dot products (AVX512-BF16 or AMX-BF16) and FOXHUNT_ASSUME_NO_BF16
/// is not set to a non-empty value other than "0". Read once per process.
bool cpu_has_bf16();

/// Throws InputError naming `component` when `device` is a CPU without BF16 arithmetic (see
/// cpu_has_bf16): "[component] bf16 on the cpu: expected a CPU with avx512_bf16 or amx_bf16,
/// this one has neither; serve this model at fp32". Other devices pass.
void check_bf16_device(const torch::Device& device, const char* component);

/// Bytes per precision of the BF16 TFT at options JSON `options`: {"fp32": {"parameter_bytes"},
/// "bf16": {"parameter_bytes", "bf16_bytes", "fp32_bytes", "ratio_to_fp32"}}; a pure function of
/// the options (closed form, checked against the live module in tests).
nlohmann::json bf16_tft_bytes(const nlohmann::json& options);
/// The same for the BF16 Mamba-2.
nlohmann::json bf16_mamba2_bytes(const nlohmann::json& options);

/// The BF16 TFT built from options JSON (weights zero until loaded from a bundle).
std::unique_ptr<Model> make_bf16_tft_model(const nlohmann::json& options);
/// The BF16 Mamba-2 built from options JSON.
std::unique_ptr<Model> make_bf16_mamba2_model(const nlohmann::json& options);

/// The BF16 forms' quantize hook (QuantizedForm::quantize): `fp32` (an FP32 model of the form's
/// catalog entry; InputError otherwise) cast to BF16 on its own device. Refuses a QAT request
/// (there is nothing to fine-tune) and a CPU without BF16 (check_bf16_device). The result has
/// no calibration windows and no layer errors.
QuantizeResult quantize_bf16_tft(Model& fp32, const QuantizeRequest& request);
/// The same for Mamba-2.
QuantizeResult quantize_bf16_mamba2(Model& fp32, const QuantizeRequest& request);

}  // namespace foxhunt::models
