#pragma once
/// \file options_io.h
/// One field list per options struct: an `OptionsSchema` built from `FOXHUNT_OPTION` entries
/// generates the JSON writer, the reader (missing keys keep their defaults, unknown keys and
/// wrong types are InputErrors naming the component and key) and the known-key list, so each
/// option is named once. Works with TORCH_ARG accessors; `torch::Device` fields read and write
/// as strings ("cpu", "cuda:0").
///
/// Example (in the namespace of DqnOptions):
///   FOXHUNT_OPTIONS_JSON(DqnOptions, "dqn", dqn_options_from_json, state_dim, hidden, actions)

#include <torch/torch.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "foxhunt/models/json_get.h"

namespace foxhunt::models {

/// Reads the optional string key `key` of `j` as a device ("cpu", "cuda", "cuda:N") into `device`
/// (unchanged when absent). Throws InputError("[component] option 'key': ...") when unparsable.
void read_device_option(const nlohmann::json& j, const char* component, const char* key,
                        torch::Device& device);

/// One field of an options struct T: its JSON key and how to write and read it.
template <typename T>
struct OptionField {
  const char* key;                                                   ///< JSON key
  std::function<void(const T&, nlohmann::json&)> write;              ///< j[key] = value
  std::function<void(const nlohmann::json&, T&, const char*)> read;  ///< value = j[key] if present
};

/// A field from an accessor `access(o)` returning a reference (const for const `o`).
template <typename T, typename Access>
OptionField<T> option_field(const char* key, Access access) {
  return {key,
          [key, access](const T& o, nlohmann::json& j) {
            const auto& v = access(o);
            if constexpr (std::is_same_v<std::decay_t<decltype(v)>, torch::Device>)
              j[key] = v.str();
            else
              j[key] = v;
          },
          [key, access](const nlohmann::json& j, T& o, const char* component) {
            auto& v = access(o);
            if constexpr (std::is_same_v<std::decay_t<decltype(v)>, torch::Device>)
              read_device_option(j, component, key, v);
            else
              json_get(j, component, key, v);
          }};
}

/// The field `name` of options struct `T` (a TORCH_ARG accessor `o.name()`), keyed "name".
#define FOXHUNT_OPTION(T, name) \
  ::foxhunt::models::option_field<T>(#name, [](auto& o) -> decltype(auto) { return o.name(); })

/// The JSON mapping of options struct T, declared once as a field list (FOXHUNT_OPTIONS_JSON).
template <typename T>
class OptionsSchema {
 public:
  /// `component` prefixes errors ("[component] option 'key': ...").
  OptionsSchema(const char* component, std::vector<OptionField<T>> fields)
      : component_(component), fields_(std::move(fields)) {
    for (const auto& f : fields_) keys_.emplace_back(f.key);
  }
  /// Every field as JSON.
  nlohmann::json to_json(const T& o) const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& f : fields_) f.write(o, j);
    return j;
  }
  /// `base` with the keys present in `j` applied. Unknown keys and wrong types are InputErrors.
  T from_json(const nlohmann::json& j, T base = T()) const {
    check_known_keys(j, component_, keys_);
    for (const auto& f : fields_) f.read(j, base, component_);
    return base;
  }
  /// The keys, in declaration order.
  const std::vector<std::string>& keys() const { return keys_; }

 private:
  const char* component_;
  std::vector<OptionField<T>> fields_;
  std::vector<std::string> keys_;
};

/// Runs `validate(o)` when T's namespace declares one (found by ADL), else nothing.
template <typename T>
void validate_options(const T& o) {
  if constexpr (requires { validate(o); }) validate(o);
}

/// `T` read from JSON through the schema FOXHUNT_OPTIONS_JSON declared for it (found by ADL).
template <typename T>
T options_from_json(const nlohmann::json& j) {
  return options_schema(static_cast<const T*>(nullptr)).from_json(j);
}

}  // namespace foxhunt::models

// One FOXHUNT_OPTION per listed field (C++20 __VA_OPT__ recursion, up to 64 fields).
#define FOXHUNT_DETAIL_PARENS ()
#define FOXHUNT_DETAIL_EXPAND(...) \
  FOXHUNT_DETAIL_EXPAND3(FOXHUNT_DETAIL_EXPAND3(FOXHUNT_DETAIL_EXPAND3(__VA_ARGS__)))
#define FOXHUNT_DETAIL_EXPAND3(...) \
  FOXHUNT_DETAIL_EXPAND2(FOXHUNT_DETAIL_EXPAND2(FOXHUNT_DETAIL_EXPAND2(__VA_ARGS__)))
#define FOXHUNT_DETAIL_EXPAND2(...) \
  FOXHUNT_DETAIL_EXPAND1(FOXHUNT_DETAIL_EXPAND1(FOXHUNT_DETAIL_EXPAND1(__VA_ARGS__)))
#define FOXHUNT_DETAIL_EXPAND1(...) __VA_ARGS__
#define FOXHUNT_DETAIL_FIELDS(T, ...) \
  __VA_OPT__(FOXHUNT_DETAIL_EXPAND(FOXHUNT_DETAIL_FIELDS_STEP(T, __VA_ARGS__)))
#define FOXHUNT_DETAIL_FIELDS_STEP(T, name, ...) \
  FOXHUNT_OPTION(T, name)                        \
  __VA_OPT__(, FOXHUNT_DETAIL_FIELDS_AGAIN FOXHUNT_DETAIL_PARENS(T, __VA_ARGS__))
#define FOXHUNT_DETAIL_FIELDS_AGAIN() FOXHUNT_DETAIL_FIELDS_STEP

/// Declares, in T's namespace, the one field list of options struct T: its OptionsSchema
/// (`options_schema(const T*)`), `nlohmann::json to_json(const T&)` and `T from_json_fn(j)`
/// (missing keys keep defaults; then `validate(o)` when T has one). `component` prefixes errors.
#define FOXHUNT_OPTIONS_JSON(T, component, from_json_fn, ...)           \
  const ::foxhunt::models::OptionsSchema<T>& options_schema(const T*) { \
    static const ::foxhunt::models::OptionsSchema<T> schema(            \
        component, {FOXHUNT_DETAIL_FIELDS(T, __VA_ARGS__)});            \
    return schema;                                                      \
  }                                                                     \
  nlohmann::json to_json(const T& o) {                                  \
    return options_schema(&o).to_json(o);                               \
  }                                                                     \
  T from_json_fn(const nlohmann::json& j) {                             \
    T o = options_schema(static_cast<const T*>(nullptr)).from_json(j);  \
    ::foxhunt::models::validate_options(o);                             \
    return o;                                                           \
  }
