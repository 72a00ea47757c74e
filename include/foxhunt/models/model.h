#pragma once
/// \file model.h
/// The type-erased model handles. `ServingModel` is what serving needs (forward, the I/O spec,
/// metadata); `Model` adds the probing helpers the planner and tests use (a synthetic example
/// batch and a training loss). Each of the four models (dqn, ppo, mamba2, tft) has a concrete
/// `torch::nn::Module` in its own header and a `ModelAdapter` implementing `Model`.

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "foxhunt/core/device.h"
#include "foxhunt/core/error.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/models/spec.h"

namespace foxhunt::models {

class ModelStream;

/// The inputs of one forward pass plus an optional training target.
/// The meaning of each input tensor is model-specific and documented by `Model::input_names()`.
struct Batch {
  std::vector<torch::Tensor> inputs;  ///< e.g. {state} for dqn, {past, future, static_id} for tft
  torch::Tensor target;               ///< training target (undefined when only inferring)
  /// Batch size (first dimension of the first input).
  int64_t size() const { return inputs.empty() ? 0 : inputs.front().size(0); }
};

/// A model as serving sees it: forward, its I/O contract and metadata.
/// What a model's interpretable parts say about one forecast (the TFT's variable selection and
/// attention; pytorch-forecasting's interpret_output reports the same quantities).
struct Explanation {
  std::vector<double> past_weights;    ///< per past-observed variable: selection weight, mean
                                       ///< over the window (sums to 1)
  std::vector<double> future_weights;  ///< per known-future variable: mean over the horizon
  std::vector<double> attention;       ///< the first forecast step's attention over the window
                                       ///< bars, oldest first (head-averaged)
};

class ServingModel {
 public:
  virtual ~ServingModel() = default;

  /// Registry name: "dqn", "ppo", "mamba2" or "tft".
  virtual std::string name() const = 0;
  /// Numeric form of the weights (models/precision.h): kFp32 (every model as trained), kInt8
  /// (a converted INT8 TFT, quant/tft_int8.h) or kInt8Qat (an FP32 TFT training with fake
  /// quantization).
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
};

/// A synthetic batch for a policy model (seeded local generator): the spec's state input
/// ~ N(0, 1) [batch, state], and a target whose column 0 is a uniformly random action followed by
/// the columns `more(gen, batch)` returns (each [batch, k]).
Batch policy_example_batch(
    const IoSpec& spec, int64_t batch, const torch::Device& device, uint64_t seed,
    const std::function<std::vector<torch::Tensor>(at::Generator&, int64_t)>& more);
/// Throws InputError naming `component` unless a policy reading `state_dim` values and choosing
/// among `actions` discrete actions is well formed: state_dim > 0 and actions > 1.
void check_policy_sizes(const std::string& component, int64_t state_dim, int64_t actions);

/// Output shapes of a quantile forecaster: {[batch, horizon, Q]} from its spec.
std::vector<std::vector<int64_t>> forecaster_output_shapes(const IoSpec& spec, int64_t batch);
/// Training loss of a quantile forecaster: the pinball loss of `pred` [batch, horizon, Q] against
/// `target` [batch, horizon] (checked, naming `component`) at the spec's quantile levels.
torch::Tensor forecaster_loss(const std::string& component, const IoSpec& spec,
                              const torch::Tensor& pred, const torch::Tensor& target);

/// Throws InputError unless `batch` holds exactly the inputs of `spec` (names them).
void check_input_count(const std::string& component, const IoSpec& spec, const Batch& batch);

/// Shared plumbing of the registry adapters: name, module handles and options JSON for a
/// `TORCH_MODULE` holder `Net` whose Impl has an `options` member with an ADL `to_json`.
template <typename Net>
class ModelAdapter : public Model {
 public:
  /// Wraps `net` under the registry name `name`; `spec` is its I/O contract (fixed by the
  /// options, so it is computed once).
  ModelAdapter(std::string name, Net net, IoSpec spec)
      : name_(std::move(name)), net_(std::move(net)), spec_(std::move(spec)) {}
  std::string name() const override { return name_; }
  IoSpec spec() const override { return spec_; }
  torch::nn::Module& module() override { return *net_; }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return net_.ptr(); }
  nlohmann::json options_json() const override { return to_json(net_->options); }

 protected:
  /// Throws InputError unless `b` holds exactly the spec's inputs (cheap: no allocation).
  void check_inputs(const Batch& b) const { check_input_count(name_, spec_, b); }

  std::string name_;  ///< registry name
  Net net_;           ///< the module
  IoSpec spec_;       ///< the I/O contract
};

/// A ModelAdapter for a quantile forecaster: the output shapes ({[batch, horizon, Q]}) and the
/// training loss (the pinball loss of forward()'s output against `batch.target`) follow from the
/// spec; the model adds forward() and example_batch().
template <typename Net>
class ForecasterAdapter : public ModelAdapter<Net> {
 public:
  using ModelAdapter<Net>::ModelAdapter;
  /// {[batch, horizon, Q]} (forecaster_output_shapes).
  std::vector<std::vector<int64_t>> output_shapes(int64_t batch, int64_t) const override {
    return forecaster_output_shapes(this->spec_, batch);
  }
  /// The pinball loss of the forecasts against `b.target` (forecaster_loss).
  torch::Tensor loss(const Batch& b) override {
    return forecaster_loss(this->name_, this->spec_, this->forward(b)[0], b.target);
  }
};

/// Builds a model by registry name, with options from JSON (missing keys take defaults; unknown
/// keys are an error). Throws foxhunt::InputError for an unknown name.
std::unique_ptr<Model> make_model(const std::string& name,
                                  const nlohmann::json& options = nlohmann::json::object());

/// The registered model names, in canonical order: dqn, ppo, mamba2, tft.
std::vector<std::string> model_names();

/// Input validation helper shared by all models: checks rank, sizes (-1 = any), dtype, device and
/// (for floating tensors) that every value is finite. Names the component, the tensor, and the
/// expected vs received values in the error.
void check_input(const std::string& component, const std::string& tensor_name,
                 const torch::Tensor& t, const std::vector<int64_t>& expected_sizes,
                 torch::ScalarType dtype, const torch::Device& device);

/// While alive on this thread, the input checks skip the finite-value scan of tensors that are
/// not on the CPU, because the caller scanned the values on the host before copying them (the
/// serving runtime does): serving on CUDA then never waits for the device in an input check.
/// Rank, sizes, dtype and device are still checked, and CPU tensors are always scanned.
class HostValidatedInputs {
 public:
  HostValidatedInputs();
  ~HostValidatedInputs();
  HostValidatedInputs(const HostValidatedInputs&) = delete;  // a scope, not a value
  /// True while a scope is alive on this thread.
  static bool active();

 private:
  bool previous_;
};

/// Same as check_input, but the dtype may be any floating type.
void check_float_input(const std::string& component, const std::string& tensor_name,
                       const torch::Tensor& t, const std::vector<int64_t>& expected_sizes,
                       const torch::Device& device);

/// Formats sizes as "[a, b, c]" (-1 printed as "*").
std::string shape_str(const std::vector<int64_t>& sizes);

/// Device of the first parameter of a module (CPU when it has none).
torch::Device module_device(const torch::nn::Module& m);

/// The torch::Device of a parsed device value (a plain "cuda" stays the current CUDA device).
torch::Device to_torch(const Device& d);

namespace json_detail {
template <typename T>
struct IsVector : std::false_type {};
template <typename U, typename A>
struct IsVector<std::vector<U, A>> : std::true_type {};

/// What `v` should have been to read as T exactly ("" when it does): the JSON type, and the
/// range of T, checked before get<T>(), whose conversions of an out-of-range number are
/// undefined behaviour (1e80 into an int64_t, 1e300 into a float).
template <typename T>
std::string json_mismatch(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v.is_boolean() ? "" : "true or false";
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return "an integer";
    const bool fits = v.is_number_unsigned() ? std::in_range<T>(v.get<uint64_t>())
                                             : std::in_range<T>(v.get<int64_t>());
    return fits ? ""
                : "an integer in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                      std::to_string(std::numeric_limits<T>::max()) + "]";
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return "a number";
    const double d = v.get<double>();
    return std::isfinite(d) && std::abs(d) > static_cast<double>(std::numeric_limits<T>::max())
               ? "a number within the range of " + std::string(sizeof(T) == 4 ? "float" : "double")
               : "";
  } else if constexpr (std::is_same_v<T, std::string>) {
    return v.is_string() ? "" : "a string";
  } else if constexpr (IsVector<T>::value) {
    using U = typename T::value_type;
    if (!v.is_array()) return "an array";
    for (const auto& e : v)
      if (auto inner = json_mismatch<U>(e); !inner.empty()) return "an array of " + inner;
    return "";
  } else {
    return "";  // other types: get<T>() says what is wrong
  }
}
}  // namespace json_detail

/// Reads `key` from `j` into `value` when present; the helper behind options_from_json.
/// Throws InputError naming the component and the key when the type or range does not match.
template <typename T>
void json_get(const nlohmann::json& j, const char* component, const char* key, T& value) {
  auto it = j.find(key);
  if (it == j.end()) return;
  // The JSON type is checked first, so that a wrong type is said in words (and 2.5 is not
  // silently truncated to an integer option's 2).
  const std::string expected = json_detail::json_mismatch<T>(*it);
  if (!expected.empty())
    throw InputError(component, std::string("option '") + key + "': expected " + expected +
                                    ", got " + it->type_name() + " " + it->dump());
  try {
    value = it->template get<T>();
  } catch (const std::exception& e) {
    throw InputError(component, std::string("option '") + key + "': " + e.what());
  }
}

/// Rejects keys of `j` not in `allowed` with an error listing the allowed ones.
void check_known_keys(const nlohmann::json& j, const char* component,
                      const std::vector<std::string>& allowed);

}  // namespace foxhunt::models
