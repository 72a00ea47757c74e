#include "foxhunt/models/catalog.h"

#include <algorithm>

#include "foxhunt/core/error.h"
#include "foxhunt/core/strings.h"
#include "foxhunt/models/bf16.h"
#include "foxhunt/models/dqn.h"
#include "foxhunt/models/mamba2.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/ppo.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/models/tft_int8.h"

namespace foxhunt::models {
namespace {

constexpr std::uint64_t kMiB = 1024ull * 1024;
constexpr std::ptrdiff_t kBuiltInModels = 4;  // dqn, ppo, mamba2, tft

// The RL trainers' sizing hooks of a policy whose options have state_dim, hidden and actions.
template <typename Options>
nlohmann::json sized_options(const PolicyShape& s) {
  return to_json(Options().state_dim(s.state_dim).hidden(s.hidden).actions(s.actions));
}
template <typename Options, Options (*from_json)(const nlohmann::json&)>
PolicyShape shape_of(const nlohmann::json& options) {
  const Options o = from_json(options);
  return {o.state_dim(), o.hidden(), o.actions()};
}

// The parameter_count hook of a model whose options struct has a closed-form count.
template <typename Options, Options (*from_json)(const nlohmann::json&)>
std::int64_t count_of(const nlohmann::json& options) {
  return parameter_count(from_json(options));
}

}  // namespace

namespace {
std::vector<CatalogEntry>& mutable_catalog();
}  // namespace

const std::vector<CatalogEntry>& catalog() {
  return mutable_catalog();
}

void register_model(CatalogEntry entry) {
  FOXHUNT_CHECK(!entry.name.empty() && entry.make != nullptr, "models",
                "register_model: expected a name and a factory, got name '", entry.name, "'",
                entry.make == nullptr ? " and no factory" : "");
  FOXHUNT_CHECK(!in_catalog(entry.name), "models", "register_model: a model named '", entry.name,
                "' is already registered (", joined_model_names(), ")");
  mutable_catalog().push_back(std::move(entry));
}

void unregister_model(const std::string& name) {
  auto& entries = mutable_catalog();
  const auto it = std::find_if(entries.begin(), entries.end(),
                               [&](const CatalogEntry& e) { return e.name == name; });
  FOXHUNT_CHECK(it != entries.end(), "models", "unregister_model: no model named '", name, "' (",
                joined_model_names(), ")");
  FOXHUNT_CHECK(it - entries.begin() >= kBuiltInModels, "models", "unregister_model: '", name,
                "' is built in; only models added by register_model can be removed");
  entries.erase(it);
}

namespace {
std::vector<CatalogEntry>& mutable_catalog() {
  // Serving targets: twice the fp32 batch-64 footprint measured when set (2026-12-01: dqn
  // 337.5 KiB, ppo 498.5 KiB, tft 27.48 MiB; Mamba-2 2026-12-03 with its fused kernel, 5.29 MiB,
  // and on an H200 2026-12-04 without it, 15.03 MiB), rounded up to whole MiB. A change that
  // doubles a model's memory fails `foxhunt budget`.
  // Compact options: see compact_model_options() in jobs/train_job.cpp for the measurements.
  static std::vector<CatalogEntry> entries = {
      {"dqn", Family::kPolicy, TrainerKind::kDqn, "double DQN policy (MLP over the state)",
       &make_dqn_model, nlohmann::json::object(), nlohmann::json::object(), 1 * kMiB, 1 * kMiB,
       6 * kMiB, 1.0, "", &sized_options<DqnOptions>,
       &shape_of<DqnOptions, &dqn_options_from_json>},
      {"ppo", Family::kPolicy, TrainerKind::kPpo, "PPO actor-critic policy (MLP trunk, two heads)",
       &make_ppo_model, nlohmann::json::object(), nlohmann::json::object(), 1 * kMiB, 1 * kMiB,
       145 * kMiB, 1.0, "", &sized_options<PpoOptions>,
       &shape_of<PpoOptions, &ppo_options_from_json>},
      {"mamba2",
       Family::kForecaster,
       TrainerKind::kForecast,
       "Mamba-2 (SSD) quantile forecaster over a window of bars",
       &make_mamba2_model,
       nlohmann::json{{"d_model", 16}, {"n_layers", 1}},
       nlohmann::json::object(),
       11 * kMiB,
       31 * kMiB,
       164 * kMiB,
       1.0,
       "",
       nullptr,
       nullptr,
       {{Precision::kBf16, &make_bf16_mamba2_model, &bf16_mamba2_bytes, &quantize_bf16_mamba2}},
       {{"x", "input_dim"}}},
      {"tft",
       Family::kForecaster,
       TrainerKind::kForecast,
       "Temporal Fusion Transformer quantile forecaster",
       &make_tft_model,
       nlohmann::json{{"hidden", 8}, {"heads", 2}, {"dropout", 0.2}},
       nlohmann::json{{"learning_rate", 3e-4}},
       55 * kMiB,
       55 * kMiB,
       125 * kMiB,
       1.0,
       "static_categories",
       nullptr,
       nullptr,
       {{Precision::kInt8, &make_int8_tft_model, &int8_tft_bytes, &quantize_int8_tft},
        {Precision::kBf16, &make_bf16_tft_model, &bf16_tft_bytes, &quantize_bf16_tft}},
       {{"past", "past_features"}}},
  };
  static const bool counted = [] {
    entries[0].parameter_count = &count_of<DqnOptions, &dqn_options_from_json>;
    entries[1].parameter_count = &count_of<PpoOptions, &ppo_options_from_json>;
    entries[2].parameter_count = &count_of<Mamba2Options, &mamba2_options_from_json>;
    entries[3].parameter_count = &count_of<TftOptions, &tft_options_from_json>;
    return true;
  }();
  (void)counted;
  return entries;
}
}  // namespace

const CatalogEntry& catalog_entry(const std::string& name, const char* component) {
  for (const auto& e : catalog())
    if (e.name == name) return e;
  throw InputError(component,
                   "unknown model '" + name + "'; expected one of: " + joined_model_names());
}

bool in_catalog(const std::string& name) {
  for (const auto& e : catalog())
    if (e.name == name) return true;
  return false;
}

std::vector<std::string> model_names(Family family) {
  std::vector<std::string> names;
  for (const auto& e : catalog())
    if (e.family == family) names.push_back(e.name);
  return names;
}

std::string joined_model_names(const char* separator) {
  return join(model_names(), separator);
}

std::string joined_model_names(Family family, const char* separator) {
  return join(model_names(family), separator);
}

bool is_policy(const std::string& name) {
  return catalog_entry(name).family == Family::kPolicy;
}

const CatalogEntry& trainer_model(TrainerKind kind) {
  for (const auto& e : catalog())
    if (e.trainer == kind) return e;
  // The built-in models cannot be removed, and each trainer kind trains one of them.
  FOXHUNT_FAIL("models", "no catalog entry for trainer kind ", static_cast<int>(kind));
}

std::string trainer_algo(TrainerKind kind) {
  switch (kind) {
    case TrainerKind::kDqn:
    case TrainerKind::kPpo:
      return trainer_model(kind).name;
    case TrainerKind::kForecast:
      return "forecast";
  }
  FOXHUNT_FAIL("models", "unknown trainer kind ", static_cast<int>(kind));
}

namespace {

// The entry of `name`, which must have the policy hook `hook` (named `hook_name` in the error).
template <typename Hook>
const CatalogEntry& policy_entry(const std::string& name, Hook CatalogEntry::*hook,
                                 const char* hook_name, const char* component) {
  const auto& e = catalog_entry(name, component);
  FOXHUNT_CHECK(e.*hook != nullptr, component, "model '", name,
                "': expected a policy an RL trainer can size (",
                joined_model_names(Family::kPolicy, ", "),
                "), got one without CatalogEntry::", hook_name);
  return e;
}

}  // namespace

nlohmann::json policy_options(const std::string& name, const PolicyShape& shape,
                              const char* component) {
  return policy_entry(name, &CatalogEntry::policy_options, "policy_options", component)
      .policy_options(shape);
}

nlohmann::json sized_inputs(const std::string& name, nlohmann::json options,
                            const std::function<std::int64_t(const InputSpec&)>& width,
                            const char* component) {
  const auto& e = catalog_entry(name, component);
  const auto past_inputs = [&](const nlohmann::json& o) {
    std::vector<InputSpec> out;
    for (const auto& in : make_model(name, o)->spec().inputs)
      if (in.role == InputRole::kPastFeatures) out.push_back(in);
    return out;
  };
  bool changed = false;
  for (const auto& in : past_inputs(options)) {
    const std::int64_t want = width(in);
    if (want == in.features) continue;
    const auto it = std::find_if(e.input_width_options.begin(), e.input_width_options.end(),
                                 [&](const auto& p) { return p.first == in.name; });
    FOXHUNT_CHECK(it != e.input_width_options.end(), component, "model '", name, "' input '",
                  in.name, "': expected ", want, " values per bar ('", in.feature_set,
                  "' of this data), the model reads ", in.features,
                  " and its catalog entry names no option that sizes the input "
                  "(CatalogEntry::input_width_options)");
    options[it->second] = want;
    changed = true;
  }
  if (!changed) return options;
  for (const auto& in : past_inputs(options))
    FOXHUNT_CHECK(width(in) == in.features, component, "model '", name, "' input '", in.name,
                  "': expected ", width(in), " values per bar once sized, the model reads ",
                  in.features);
  return options;
}

PolicyShape policy_shape(const std::string& name, const nlohmann::json& options,
                         const char* component) {
  return policy_entry(name, &CatalogEntry::policy_shape, "policy_shape", component)
      .policy_shape(options.is_null() ? nlohmann::json::object() : options);
}

}  // namespace foxhunt::models
