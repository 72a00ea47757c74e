#pragma once
/// \file state_io.h
/// Trainer state declared once: a trainer lists its fields in one `visit_state(f)` member
/// (`f("step", step_); f("returns", returns_); ...`) and the same list writes the checkpoint
/// (StateWriter) and reads it back (StateReader). Doubles map NaN to null and back; Rng and
/// RollingMean use their own serialised forms.

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "foxhunt/core/error.h"
#include "foxhunt/core/random.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::train {

/// Writes each visited field into a JSON object.
class StateWriter {
 public:
  /// Fields land in `out` (an object).
  explicit StateWriter(nlohmann::json& out) : out_(out) {}
  /// Writes one field.
  template <typename T>
  void operator()(const char* key, const T& value) {
    if constexpr (std::is_same_v<T, double>)
      out_[key] = json_number(value);
    else if constexpr (std::is_same_v<T, Rng>)
      out_[key] = value.state();
    else if constexpr (std::is_same_v<T, RollingMean>)
      out_[key] = value.to_json();
    else
      out_[key] = value;
  }

 private:
  nlohmann::json& out_;
};

/// Reads each visited field from a JSON object; a missing key or a wrong type throws
/// nlohmann::json::exception (the caller names the file).
class StateReader {
 public:
  /// Fields come from `in` (an object).
  explicit StateReader(const nlohmann::json& in) : in_(in) {}
  /// Reads one field.
  template <typename T>
  void operator()(const char* key, T& value) const {
    const auto& v = in_.at(key);
    if constexpr (std::is_same_v<T, double>)
      value = v.is_null() ? NAN : v.template get<double>();
    else if constexpr (std::is_same_v<T, Rng>)
      value.set_state(v.template get<std::string>());
    else if constexpr (std::is_same_v<T, RollingMean>)
      value.from_json(v);
    else
      value = v.template get<T>();
  }

 private:
  const nlohmann::json& in_;
};

/// Calls f(key, field) for each (key, field) pair: `visit_fields(f, "step", step_, "rng", rng_)`.
template <typename F, typename T, typename... Rest>
void visit_fields(F& f, const char* key, T& field, Rest&... rest) {
  f(key, field);
  if constexpr (sizeof...(Rest) > 0) visit_fields(f, rest...);
}

}  // namespace foxhunt::train
