#pragma once
// What mamba2.cpp and mamba2_stream.cpp share (private to models/).
#include <torch/torch.h>

#include "foxhunt/models/mamba2.h"
#include "mamba2_kernels.h"

namespace foxhunt::models::mamba2_detail {

/// RMS normalisation over the last dimension, computed in at least fp32.
torch::Tensor rms_normalize(const torch::Tensor& x, double eps);

/// Whether the mixer's weights between its projections can feed the fused kernel with `like`'s
/// device and dtype.
bool core_weights_fit(const Mamba2MixerImpl& m, const torch::Tensor& like);

/// The mixer's weights between its projections as raw arrays for the fused kernel.
kernels::Mamba2CoreWeights core_weights(const Mamba2MixerImpl& m);

}  // namespace foxhunt::models::mamba2_detail
