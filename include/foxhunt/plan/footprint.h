#pragma once
/// \file footprint.h
/// Exact, tagged memory footprint of one model, measured with the ledger (ledger.h) on real
/// training and inference steps, next to the closed forms of ARCHITECTURE.md ("Memory accounting").
/// Torch-free: the model is named by its registry name and built inside.
///
/// Tags (scopes) used for a model called M:
///   M/parameters   the module's construction: parameters + buffers stay live
///   M/gradients    the first backward: the .grad tensors stay live
///   M/optimizer    optimizer.step(): the optimizer state stays live
///   M/activations  batch creation + forward + backward of every later step (all freed)
///
/// The training step that is measured (and that the planner verifies under a cap) is the
/// trainer's own (StepKind::kTrainer, train/trainer_step.h), or the synthetic stand-in
/// (StepKind::kSynthetic):
///   optimizer.zero_grad(set_to_none = false); batch = example_batch(b); loss = model.loss(batch);
///   loss.backward(); optimizer.step(); (batch and loss released after the step).
/// Either way the step is split at the optimizer: its first half (batch, forward, backward) is
/// tagged M/activations (M/gradients on the first step), optimizer.step() M/optimizer. The
/// trainer's construction (its network, and for the DQN the target network) is M/parameters;
/// the DQN's target network is reported as trainer_state, host buffers as external.
/// Gradients are zeroed in place, so the fixed tags (parameters, buffers, gradients, optimizer
/// state) are all resident during forward and backward: the steady state of a training loop, and
/// an upper bound for a loop that frees gradients (set_to_none = true) between steps.
///
/// Definitions (all bytes as the ledger counts them: what LibTorch asks the CPU allocator for):
///   fixed       = parameters + buffers + gradients + optimizer state (live after a real step)
///   activations = peak live bytes during batch creation + forward + backward, minus fixed; it
///                 includes the batch's input and target tensors
///   step        = peak live bytes during optimizer.step(), minus fixed: its temporaries (Adam:
///                 two tensors the size of the largest parameter) plus the batch, which a
///                 training loop keeps alive until the step is over
///   training peak = fixed + max(activations, step)
///
/// Closed forms (ARCHITECTURE.md, "Memory accounting"), checked exactly by tests:
///   gradients = trainable parameter bytes;
///   optimizer state: adam/adamw 2 x trainable parameter bytes (exp_avg + exp_avg_sq), sgd with
///   momentum 1 x (momentum_buffer), sgd 0. LibTorch's C++ AdamParamState keeps `step` as an
///   int64_t field, not a tensor (Python keeps a 0-dim tensor per parameter), so the C++ state
///   has no step-counter bytes: measured, the state is exactly 2x (see footprint_test).
///
/// Measurements run on the CPU (the ledger counts CPU allocations; a card is emulated with its
/// usable bytes as a cap). All sizes are deterministic given the seed.

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "foxhunt/core/device.h"
#include "foxhunt/core/no_copy.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/train/env.h"

namespace foxhunt::models {
class Model;
}  // namespace foxhunt::models

namespace foxhunt::plan {

/// Optimizers the footprint and the planner know (LibTorch's C++ optimizers).
enum class OptimizerKind {
  kAdam,         ///< torch::optim::Adam: exp_avg + exp_avg_sq per parameter
  kAdamW,        ///< torch::optim::AdamW: exp_avg + exp_avg_sq per parameter
  kSgd,          ///< torch::optim::SGD without momentum: no state
  kSgdMomentum,  ///< torch::optim::SGD with momentum 0.9: momentum_buffer per parameter
};

/// Which training step is measured and verified.
enum class StepKind {
  /// The step the trainer really runs (train/trainer_step.h): DqnTrainer's update (online and
  /// target networks, the double forward of the TD targets, the replay buffer declared as
  /// external bytes), PpoTrainer's minibatch step over a rollout on the device, the
  /// ForecastTrainer's step with its gradient clip. The trainers use Adam.
  kTrainer,
  /// The stand-in: example_batch + Model::loss + a LibTorch optimizer of any OptimizerKind
  /// (the first planner's step; kept to compare against and for the other optimizers).
  kSynthetic,
};

/// "trainer" or "synthetic".
std::string to_string(StepKind kind);
/// Parses one of the names of to_string(StepKind); InputError listing them otherwise.
StepKind parse_step_kind(const std::string& name);

/// "adam", "adamw", "sgd", "sgd-momentum".
std::string to_string(OptimizerKind kind);
/// Parses one of the names of to_string; InputError listing them otherwise.
OptimizerKind parse_optimizer(const std::string& name);
/// The closed-form optimizer state for `trainable_bytes` of trainable parameters
/// (2x for adam/adamw, 1x for sgd-momentum, 0 for sgd).
std::uint64_t optimizer_state_bytes(OptimizerKind kind, std::uint64_t trainable_bytes);

/// A training configuration.
struct TrainConfig {
  /// The step measured: the trainer's own (default) or the synthetic stand-in.
  StepKind step = StepKind::kTrainer;
  /// The trainer's options as JSON for StepKind::kTrainer (train/trainer_step.h; missing keys
  /// keep the trainer's defaults, e.g. the DQN's 100k-transition replay buffer).
  nlohmann::json trainer_options = nlohmann::json::object();
  /// RL environments for StepKind::kTrainer (null: a synthetic env of the model's shape).
  train::EnvFactory env;
  /// Optimizer whose state is measured (StepKind::kTrainer: adam, what the trainers use).
  OptimizerKind optimizer = OptimizerKind::kAdam;
  /// Device the step runs and is measured on: "cpu" (the ledger; a card is emulated by its
  /// usable bytes as the cap) or "cuda[:N]" (the caching allocator; memory/device_memory.h).
  Device device;
  /// Window length; 0 = the model's default; ignored by models without a time axis.
  std::int64_t seq_len = 0;
  /// Training batch size.
  std::int64_t batch = 32;
  /// Learning rate (does not change any byte count).
  double lr = 1e-3;
  /// Seed for the model's initialisation and the synthetic batches.
  std::uint64_t seed = 42;
  /// Data-parallel ranks the step runs on (> 1: each rank also holds the gradient all-reduce
  /// buckets, dist/gradient_sync.h, measured under M/comm_buckets). Batches are per rank.
  std::int64_t world_size = 1;
  /// Bucket size of the gradient all-reduce in MiB (world_size > 1).
  double bucket_mib = 25.0;
};

/// The bytes of one tag.
struct TagBytes {
  std::string tag;          ///< e.g. "dqn/optimizer"
  std::uint64_t bytes = 0;  ///< bytes measured for it
};

/// Footprint of one training configuration: fixed tags measured after a real optimizer step,
/// activations measured by a probe step at `config.batch`.
struct TrainingFootprint {
  std::string model;                            ///< registry name
  TrainConfig config;                           ///< as given
  std::int64_t seq_len = 0;                     ///< window used (0 for models without a time axis)
  std::uint64_t parameter_bytes = 0;            ///< numel x element size of all parameters
  std::uint64_t trainable_parameter_bytes = 0;  ///< of the parameters with requires_grad
  std::uint64_t buffer_bytes = 0;               ///< numel x element size of all buffers
  std::string step;  ///< the step measured, in words (TrainerStep::describe, or "synthetic ...")
  std::uint64_t construction_live_bytes = 0;  ///< measured: live bytes of M/parameters
  /// Measured (CPU): bytes a warm-up forward at the largest batch left live, the derived
  /// weights kept for serving (models/derived_cache.h), counted under M/parameters. 0 on CUDA.
  std::uint64_t derived_bytes = 0;
  /// Of construction_live_bytes, what the trainer holds besides the model (DQN: the target
  /// network): construction_live_bytes - parameter_bytes - buffer_bytes.
  std::uint64_t trainer_state_bytes = 0;
  std::uint64_t expected_trainer_state_bytes = 0;  ///< closed form (DQN: parameter_bytes)
  /// Host bytes the trainer declared to the ledger (replay buffer, environments' market copies).
  std::uint64_t host_bytes = 0;
  /// Of host_bytes, what counts against the device's budget: all of it on the CPU (the cap
  /// counts them, outside live_bytes; part of peak_bytes), none on CUDA (they are in host RAM).
  std::uint64_t external_bytes = 0;
  Device device;                        ///< the device measured (resolved: "cpu" or "cuda:N")
  std::uint64_t gradient_bytes = 0;     ///< measured: live bytes of M/gradients
  std::uint64_t optimizer_bytes = 0;    ///< measured: live bytes of M/optimizer
  std::uint64_t comm_bucket_bytes = 0;  ///< measured: live bytes of M/comm_buckets (world > 1)
  /// Closed form if world > 1: trainable bytes + the 4-byte float32 sample-weight element.
  std::uint64_t expected_comm_bucket_bytes = 0;
  std::uint64_t expected_gradient_bytes = 0;   ///< closed form
  std::uint64_t expected_optimizer_bytes = 0;  ///< closed form
  std::uint64_t fixed_bytes = 0;       ///< measured live bytes after the step (all fixed tags)
  std::uint64_t activation_bytes = 0;  ///< peak of batch+forward+backward beyond fixed
  std::uint64_t step_bytes = 0;        ///< peak of optimizer.step() beyond fixed
  std::uint64_t peak_bytes = 0;        ///< fixed + external + max(activations, step)
  std::uint64_t input_bytes = 0;       ///< bytes of the batch's input tensors
  std::uint64_t leaked_bytes = 0;      ///< live bytes a step left behind (0 when healthy)

  /// True when parameters+buffers (+ the trainer's state), gradients and optimizer state equal
  /// their closed forms.
  bool matches_closed_form() const;
  /// The tags with their bytes: parameters, buffers, trainer_state, gradients, optimizer,
  /// comm_buckets, external, activations.
  std::vector<TagBytes> tags() const;
  /// JSON with every field, the tags and the closed-form check.
  nlohmann::json to_json() const;
};

/// Builds model `model` (registry name, `model_options` as for models::make_model) on the CPU,
/// runs one real training step at `config.batch` (which allocates gradients and optimizer
/// state), then one probe step at the same batch, and reports every tag. Throws InputError for a
/// bad name, options or config.
TrainingFootprint measure_training_footprint(const std::string& model, const TrainConfig& config,
                                             const nlohmann::json& model_options = {});

/// Peak memory of one probe training step at one batch size.
struct ProbeResult {
  std::int64_t batch = 0;              ///< batch size probed
  std::uint64_t activation_bytes = 0;  ///< peak of batch+forward+backward beyond fixed
  std::uint64_t step_bytes = 0;        ///< peak of optimizer.step() beyond fixed (batch alive)
  std::uint64_t peak_bytes = 0;        ///< fixed + external + max(activation_bytes, step_bytes)
};

/// A model and its optimizer kept alive for repeated probe steps (the planner's measuring tool).
/// The constructor builds the model under M/parameters and runs one real step at `warm_batch`
/// so that gradients and optimizer state exist; probe() then runs the canonical training step.
class TrainingProbe {
 public:
  /// Builds `model` and warms it up with one training step at `warm_batch`.
  TrainingProbe(const std::string& model, const TrainConfig& config,
                const nlohmann::json& model_options = {}, std::int64_t warm_batch = 1);
  ~TrainingProbe();
  FOXHUNT_NO_COPY(TrainingProbe);

  /// Runs one real training step at `batch` and returns its peaks.
  ProbeResult probe(std::int64_t batch);
  /// The fixed tags and closed forms (activation/step/peak fields are those of the warm step).
  const TrainingFootprint& footprint() const;
  /// Peak live bytes (beyond what was live before) while the model was being built.
  std::uint64_t construction_peak_bytes() const;
  /// Input elements of one sample (all input tensors), for the reference estimate.
  std::int64_t input_elements_per_sample() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Inference footprint of one batch size.
struct InferenceRun {
  std::int64_t batch = 0;              ///< batch size
  std::uint64_t input_bytes = 0;       ///< bytes of the input tensors
  std::uint64_t activation_bytes = 0;  ///< peak beyond the model's held bytes: inputs + forward
  std::uint64_t total_bytes = 0;       ///< parameters + buffers + derived + activation_bytes
};

/// Inference footprint (eval mode, c10::InferenceMode): parameters + buffers + what the model
/// derives from them and keeps for serving (the MLPs' transposed weights, the TFT's folded
/// selection layers) + peak activations.
struct InferenceFootprint {
  std::string model;                          ///< registry name
  Device device;                              ///< the device measured (resolved: "cpu" or "cuda:N")
  std::int64_t seq_len = 0;                   ///< window used (0 for models without a time axis)
  std::uint64_t parameter_bytes = 0;          ///< numel x element size of all parameters
  std::uint64_t buffer_bytes = 0;             ///< numel x element size of all buffers
  std::uint64_t construction_live_bytes = 0;  ///< measured: live bytes of M/parameters
  /// Measured (CPU): bytes a warm-up forward at the largest batch left live, the derived
  /// weights kept for serving (models/derived_cache.h), counted under M/parameters. 0 on CUDA.
  std::uint64_t derived_bytes = 0;
  std::vector<InferenceRun> runs;  ///< one per batch size asked for, in order
  /// The largest total over the runs.
  std::uint64_t peak_total_bytes() const;
  /// JSON with every field.
  nlohmann::json to_json() const;
};

/// Builds `model` in eval mode and runs one forward pass under c10::InferenceMode at each batch
/// size of `batches` (e.g. {1, 64}), after a warm-up forward at the largest (derived_bytes).
/// `seq_len` 0 = the model's default window. `precision` kInt8 measures the INT8 TFT
/// (models/tft_int8.h) in its exact layout (the bytes do not depend on the values, so no
/// calibration is needed); other models have only kFp32. `device` "cpu" measures with the ledger
/// (tags M/parameters, M/activations); "cuda[:N]" builds on the CPU, moves the model to the card
/// and measures allocated bytes there (construction = allocated growth of the move, activations =
/// the allocator's peak beyond it). The INT8 TFT runs on the CPU only (InputError on CUDA).
InferenceFootprint measure_inference_footprint(
    const std::string& model, const std::vector<std::int64_t>& batches, std::int64_t seq_len = 0,
    std::uint64_t seed = 42, const nlohmann::json& model_options = {},
    models::Precision precision = models::Precision::kFp32, const Device& device = Device::cpu());
/// The model `name` at `precision` (kFp32, or kInt8 for the TFT); InputError otherwise.
std::unique_ptr<models::Model> make_model_at(const std::string& name, models::Precision precision,
                                             const nlohmann::json& model_options = {});

/// JSON of a TrainConfig: {step, trainer_options, optimizer, seq_len, batch, lr, seed, ...}.
nlohmann::json to_json(const TrainConfig& c);

}  // namespace foxhunt::plan
