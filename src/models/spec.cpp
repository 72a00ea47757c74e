#include "foxhunt/models/spec.h"

#include <nlohmann/json.hpp>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"

namespace foxhunt::models {

const char* role_name(InputRole role) {
  static constexpr const char* kNames[] = {"state", "past_features", "known_future", "static_id"};
  return kNames[static_cast<int>(role)];
}

std::vector<int64_t> InputSpec::shape(int64_t batch) const {
  std::vector<int64_t> s{batch};
  if (steps > 0) s.push_back(steps);
  if (features > 0) s.push_back(features);
  return s;
}

std::vector<std::string> IoSpec::input_names() const {
  std::vector<std::string> names;
  for (const auto& i : inputs) names.push_back(i.name);
  return names;
}

const InputSpec& IoSpec::input(const std::string& name) const {
  for (const auto& i : inputs)
    if (i.name == name) return i;
  std::string known;
  for (const auto& i : inputs) known += (known.empty() ? "" : ", ") + i.name;
  throw InputError("models", "no input '" + name + "'; the model's inputs are: " + known);
}

IoSpec policy_spec(int64_t state_dim, int64_t actions, std::vector<std::string> outputs) {
  IoSpec s;
  s.inputs = {{"state", InputRole::kState, "rl_state", 0, state_dim}};
  s.outputs = std::move(outputs);
  s.actions = actions;
  return s;
}

IoSpec forecaster_spec(std::vector<InputSpec> inputs, int64_t window, int64_t horizon,
                       std::vector<double> quantiles) {
  IoSpec s;
  s.inputs = std::move(inputs);
  s.outputs = {"quantiles"};
  s.window = window;
  s.horizon = horizon;
  s.quantiles = std::move(quantiles);
  return s;
}

void to_json(nlohmann::json& j, const InputSpec& s) {
  j = {{"role", role_name(s.role)},
       {"dtype", s.integer ? "int64" : "float32"},
       {"shape", s.shape(-1)}};
  FOXHUNT_JSON_FIELDS(j, s, name, feature_set, steps, features);
}

void to_json(nlohmann::json& j, const IoSpec& s) {
  j = nlohmann::json::object();
  FOXHUNT_JSON_FIELDS(j, s, inputs, outputs, window, horizon, quantiles, actions);
}

}  // namespace foxhunt::models
