#pragma once
/// \file spec.h
/// The model I/O contract: every model publishes what it reads and writes as values, so data
/// assembly, the trainers, the planner and serving read one declaration instead of per-model
/// constants or string matching on option keys. Torch-free.

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace foxhunt::models {

/// Where the values of one input come from when it is assembled from market data.
enum class InputRole {
  kState,         ///< one observation vector per sample [batch, features] (RL state)
  kPastFeatures,  ///< feature rows of the bars ending at the anchor [batch, steps, features]
  kKnownFuture,   ///< calendar rows of the bars after the anchor [batch, steps, features]
  kStaticId,      ///< one categorical id per sample [batch] (int64)
};

/// "state", "past_features", "known_future" or "static_id".
const char* role_name(InputRole role);

/// One named input tensor of a model.
struct InputSpec {
  std::string name;                    ///< tensor name, e.g. "past"
  InputRole role = InputRole::kState;  ///< what it holds
  std::string feature_set;             ///< data feature set it reads (data/features.h), "" for ids
  int64_t steps = 0;                   ///< time steps per sample (0: no time axis)
  int64_t features = 0;                ///< values per step (0: a scalar id)
  bool integer = false;                ///< int64 (ids) rather than float32

  /// Sizes for a batch of `batch` samples: [batch], [batch, features] or [batch, steps, features].
  std::vector<int64_t> shape(int64_t batch) const;
};

/// Everything a caller needs to feed a model and read its outputs.
struct IoSpec {
  std::vector<InputSpec> inputs;     ///< in `Batch::inputs` order
  std::vector<std::string> outputs;  ///< output names in forward() order, e.g. {"q"}
  int64_t window = 0;                ///< past bars per sample (0: no time axis)
  int64_t horizon = 0;               ///< future bars forecast (0: not a forecaster)
  std::vector<double> quantiles;     ///< forecast quantile levels (empty: not a forecaster)
  int64_t actions = 0;               ///< discrete actions (0: not a policy)

  /// The input names in order.
  std::vector<std::string> input_names() const;
  /// True for the market forecasters (a window and a horizon).
  bool is_forecaster() const { return window > 0 && horizon > 0; }
  /// The input called `name`; throws InputError naming the known inputs otherwise.
  const InputSpec& input(const std::string& name) const;
};

/// The spec of a policy over `actions` discrete actions that reads one RL state vector of
/// `state_dim` values ("rl_state"); `outputs` names its outputs in forward() order.
IoSpec policy_spec(int64_t state_dim, int64_t actions, std::vector<std::string> outputs);
/// The spec of a quantile forecaster with `inputs`, forecasting `horizon` bars after a window of
/// `window` bars at the levels `quantiles` (one output, "quantiles").
IoSpec forecaster_spec(std::vector<InputSpec> inputs, int64_t window, int64_t horizon,
                       std::vector<double> quantiles);

/// JSON form (stored in bundles and printed by `foxhunt models --json`).
void to_json(nlohmann::json& j, const InputSpec& s);
/// JSON form of the whole spec.
void to_json(nlohmann::json& j, const IoSpec& s);

}  // namespace foxhunt::models
