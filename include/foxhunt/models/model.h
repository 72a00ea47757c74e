#pragma once
/// \file model.h
/// The type-erased model handles. `ServingModel` is what serving needs (forward, the I/O spec,
/// metadata); `Model` adds the probing helpers the planner and tests use (a synthetic example
/// batch and a training loss) and the hooks the RL trainers train a policy through (policy.h).
/// Each of the four models (dqn, ppo, mamba2, tft) has a concrete
/// `torch::nn::Module` in its own header and a `ModelAdapter` (adapter.h) implementing `Model`;
/// `make_model` builds one by name. The inputs and explanations (batch.h), the input checks
/// (input_checks.h) and the device helpers (torch_device.h) that callers of a model use come
/// with this header.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/models/batch.h"
#include "foxhunt/models/input_checks.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/models/spec.h"
#include "foxhunt/models/torch_device.h"

namespace foxhunt::models {

class ModelStream;
class ValuePolicy;
class ActorCriticPolicy;

/// A model as serving sees it: forward, its I/O contract and metadata.
class ServingModel {
 public:
  virtual ~ServingModel() = default;

  /// Registry name: "dqn", "ppo", "mamba2" or "tft".
  virtual std::string name() const = 0;
  /// Numeric form of the weights (models/precision.h): kFp32 (every model as trained), kInt8
  /// (a converted INT8 TFT, models/tft_int8.h), kInt8Qat (an FP32 TFT training with fake
  /// quantization) or kBf16 (BF16 weights, models/bf16.h).
  virtual Precision precision() const { return Precision::kFp32; }
  /// The underlying module (parameters, buffers, train/eval, device moves).
  virtual torch::nn::Module& module() = 0;
  /// Shared handle to the underlying module (for optimizers and cloning).
  virtual std::shared_ptr<torch::nn::Module> module_ptr() = 0;
  /// The options as JSON (round-trips through the registry factory).
  virtual nlohmann::json options_json() const = 0;
  /// The I/O contract: named inputs with shapes and feature sets, outputs, window, horizon.
  virtual IoSpec spec() const = 0;

  /// Runs the forward pass after validating every input (rank, sizes, dtype, device, finite).
  /// Returns the model's outputs (e.g. {q} for dqn, {logits, value} for ppo).
  virtual std::vector<torch::Tensor> forward(const Batch& batch) = 0;
  /// Expected output shapes for a batch of `batch` samples with sequence length `seq_len`.
  virtual std::vector<std::vector<int64_t>> output_shapes(int64_t batch, int64_t seq_len) const = 0;

  /// Many instruments at once (serving/desk.h): a model whose first stage runs on each bar's past
  /// row alone (given the static id) can run it once per bar and keep its output per instrument,
  /// as its own single-instrument stream does. The width of that output; 0 (the default): no
  /// such stage, the desk runs forward().
  virtual int64_t cached_width() const { return 0; }
  /// The cached stage on the newest past rows of N instruments: `rows` [N, past features] float,
  /// `static_id` [N] int64 -> [N, cached_width()]. Validates its inputs. InputError for a model
  /// without such a stage.
  virtual torch::Tensor encode_rows(const torch::Tensor& rows, const torch::Tensor& static_id);
  /// forward() on a batch whose past input holds the cached rows [N, window, cached_width()]
  /// (the other inputs as forward takes them); returns the first output. InputError for a model
  /// without a cached stage.
  virtual torch::Tensor forward_cached(const Batch& batch);

  /// A stream over one instrument (models/streaming.h) that forecasts from the last `window`
  /// bars, bar by bar, equal to forward() over that window; none (the default) for a model
  /// without one, which serving then runs on the whole window at each bar. The stream shares
  /// this model's weights: it lives no longer than the model.
  virtual std::unique_ptr<ModelStream> make_stream(int64_t window);

  /// The explanation of the forecast for the first sample of `batch` (inputs as forward takes
  /// them); none (the default) for a model without interpretable parts.
  virtual std::optional<Explanation> explain(const Batch& batch) { return std::nullopt; }

  /// Names of the tensors in `Batch::inputs`, in order (from spec()).
  std::vector<std::string> input_names() const { return spec().input_names(); }
  /// Default sequence length (window) for sequence models; 0 for models without a time axis.
  int64_t default_seq_len() const { return spec().window; }
  /// Number of parameters (all, trainable or not).
  int64_t parameter_count();
  /// Bytes held by parameters (numel x element size).
  int64_t parameter_bytes();
  /// Bytes held by buffers (numel x element size).
  int64_t buffer_bytes();
  /// Moves the module to `device`.
  void to(const torch::Device& device) { module().to(device); }
};

/// A model with the probing/training helpers the planner, footprints and tests use.
class Model : public ServingModel {
 public:
  /// A deterministic synthetic batch (inputs and target) drawn from a local generator seeded
  /// with `seed` (the global RNG is untouched). `seq_len` 0 means the default window; ignored
  /// by models without a time axis.
  virtual Batch example_batch(int64_t batch, int64_t seq_len, const torch::Device& device,
                              uint64_t seed) const = 0;
  /// A scalar training loss for `batch` (uses `batch.target`). For the RL models this is the
  /// supervised surrogate their trainers minimise (TD Huber loss / PPO clipped objective) on
  /// synthetic targets, so that memory probes run a real forward + backward.
  virtual torch::Tensor loss(const Batch& batch) = 0;
  /// A quantile forecaster's output layer, whose bias holds one value per (horizon step, level)
  /// or one per level applied to every step: training starts it at the empirical quantiles of
  /// the targets (jobs/train_job.cpp). Empty (the default) for a model without one.
  virtual torch::nn::Linear quantile_head() { return torch::nn::Linear{nullptr}; }
  /// The action-value hooks (policy.h) a value-based RL trainer (train/dqn_trainer.h) trains
  /// this model through; null (the default) for a model without action values. Valid while the
  /// model lives.
  virtual ValuePolicy* as_value_policy() { return nullptr; }
  /// The actor-critic hooks (policy.h) a policy-gradient trainer (train/ppo_trainer.h) trains
  /// this model through; null (the default) for a model that is not an actor-critic. Valid
  /// while the model lives.
  virtual ActorCriticPolicy* as_actor_critic() { return nullptr; }
};

/// Builds a model by registry name, with options from JSON (missing keys take defaults; unknown
/// keys are an error). Throws foxhunt::InputError for an unknown name.
std::unique_ptr<Model> make_model(const std::string& name,
                                  const nlohmann::json& options = nlohmann::json::object());

/// The registered model names, in canonical order: dqn, ppo, mamba2, tft.
std::vector<std::string> model_names();

}  // namespace foxhunt::models
