#pragma once
/// \file json_get.h
/// Typed reads of JSON options: json_get (present keys only, the JSON type and the range of the
/// target type checked before conversion) and check_known_keys; the helpers behind
/// options_from_json (options_io.h).

#include <cmath>
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "foxhunt/core/error.h"

namespace foxhunt::models {

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
