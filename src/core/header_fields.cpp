#include "foxhunt/core/header_fields.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "foxhunt/core/error.h"

namespace foxhunt {

std::string short_json(const nlohmann::json& j, std::size_t max_chars) {
  // Replace invalid UTF-8 rather than throw: the text only names what was received.
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
  return s;
}

HeaderFields::HeaderFields(const nlohmann::json& j, std::string component, std::string source,
                           std::string prefix)
    : j_(&j),
      component_(std::move(component)),
      source_(std::move(source)),
      prefix_(std::move(prefix)) {
  if (!j.is_object()) {
    const std::string name =
        prefix_.empty() ? "header" : "field '" + prefix_.substr(0, prefix_.size() - 1) + "'";
    throw InputError(component_, fmt::format("'{}': {}: expected a JSON object, got {}", source_,
                                             name, short_json(j)));
  }
}

void HeaderFields::refuse(const std::string& key, const std::string& expected,
                          const nlohmann::json& got) const {
  refuse_because(key, fmt::format("expected {}, got {}", expected, short_json(got)));
}

void HeaderFields::refuse_because(const std::string& key, const std::string& why) const {
  throw InputError(component_, fmt::format("'{}': field '{}': {}", source_, field(key), why));
}

const nlohmann::json& HeaderFields::at(const std::string& key) const {
  const auto it = j_->find(key);
  if (it == j_->end()) refuse_because(key, "missing");
  return *it;
}

HeaderFields HeaderFields::nested(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_object()) refuse(key, "a JSON object", v);
  return HeaderFields(v, component_, source_, field(key) + ".");
}

const nlohmann::json& HeaderFields::array(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_array()) refuse(key, "a JSON array", v);
  return v;
}

HeaderFields HeaderFields::element(const std::string& key, std::size_t i) const {
  const auto& list = array(key);
  const std::string name = fmt::format("{}[{}]", key, i);
  if (i >= list.size()) refuse_because(name, "missing");
  if (!list[i].is_object()) refuse(name, "a JSON object", list[i]);
  return HeaderFields(list[i], component_, source_, field(name) + ".");
}

std::string HeaderFields::text(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_string()) refuse(key, "a string", v);
  return v.get<std::string>();
}

std::string HeaderFields::text_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? text(key) : fallback;
}

std::int64_t HeaderFields::integer(const std::string& key, std::int64_t lo, std::int64_t hi) const {
  const auto& v = at(key);
  const auto expected = [&] {
    if (hi == std::numeric_limits<std::int64_t>::max()) return fmt::format("an integer >= {}", lo);
    return fmt::format("an integer in [{}, {}]", lo, hi);
  };
  // An unsigned value above int64's range is out of every domain read here.
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() &&
       v.get<std::uint64_t>() >
           static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())))
    refuse(key, expected(), v);
  const auto x = v.get<std::int64_t>();
  if (x < lo || x > hi) refuse(key, expected(), v);
  return x;
}

double HeaderFields::number(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>())) refuse(key, "a finite number", v);
  return v.get<double>();
}

double HeaderFields::positive(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
    refuse(key, "a finite number > 0", v);
  return v.get<double>();
}

double HeaderFields::non_negative(const std::string& key) const {
  const auto& v = at(key);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() >= 0))
    refuse(key, "a finite number >= 0", v);
  return v.get<double>();
}

}  // namespace foxhunt
