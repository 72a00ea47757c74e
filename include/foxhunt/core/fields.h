#pragma once
/// \file fields.h
/// Field lists: members named once where they are written out or carried over by name.
///
/// - `FOXHUNT_JSON_FIELDS(j, r, steps, seconds)` writes `j["steps"] = r.steps;
///   j["seconds"] = r.seconds;`. A key that differs from its member's name is written beside it
///   (`j["checkpoint"] = r.checkpoint_path;`). nlohmann::json keeps an object's keys sorted, so
///   the order of the list does not change the output. The write-only counterpart of nlohmann's
///   NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE (which also defines a reader, and so needs every member to
///   be readable).
/// - `FOXHUNT_COPY_FIELDS(to, from, steps, seconds)` is `to.steps = from.steps;
///   to.seconds = from.seconds;`: a result summarised into another type's same-named members.
///
/// Both are built on the expansion macros of nlohmann/json 3.11+ (at most 64 fields).

#include <nlohmann/json.hpp>
#include <optional>

/// Writes each named member of `obj` into the JSON object `j` under the member's own name.
#define FOXHUNT_JSON_FIELDS(j, obj, ...)                                     \
  do {                                                                       \
    auto& nlohmann_json_j = (j);                                             \
    const auto& nlohmann_json_t = (obj);                                     \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(NLOHMANN_JSON_TO, __VA_ARGS__)) \
  } while (false)

/// One member of FOXHUNT_COPY_FIELDS.
#define FOXHUNT_COPY_FIELD(f) foxhunt_fields_to.f = foxhunt_fields_from.f;

/// Assigns each named member of `from` to the member of the same name of `to`.
#define FOXHUNT_COPY_FIELDS(to, from, ...)                                     \
  [&](auto& foxhunt_fields_to, const auto& foxhunt_fields_from) {              \
    NLOHMANN_JSON_EXPAND(NLOHMANN_JSON_PASTE(FOXHUNT_COPY_FIELD, __VA_ARGS__)) \
  }((to), (from))

namespace foxhunt {

/// `*v` as JSON, or null when `v` is empty (nlohmann/json 3.11 has no std::optional conversion).
template <class T>
nlohmann::json json_or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace foxhunt
