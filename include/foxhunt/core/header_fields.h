#pragma once
/// \file header_fields.h
/// Typed reads of a file header's fields (a container's JSON header, core/container.h): each read
/// refuses a missing field, a wrong type or a value outside its domain with an InputError that
/// names the file and the field, so a header no writer could have produced never loads.
///
/// Example:
///   HeaderFields h(container.header, "bundle", "m.fhb");
///   const double s = h.nested("trading_env").positive("pnl_scale");
///   // "[bundle] 'm.fhb': field 'trading_env.pnl_scale': expected a finite number > 0, got -3"

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace foxhunt {

/// The fields of one JSON object of a header, named by their path from the header's root.
class HeaderFields {
 public:
  /// The object `j` of file `source`; errors carry `component` and the field path `prefix` + key.
  /// InputError (naming the prefix, or "header" at the root) when `j` is not an object.
  HeaderFields(const nlohmann::json& j, std::string component, std::string source,
               std::string prefix = "");

  /// The JSON object read.
  const nlohmann::json& json() const { return *j_; }
  /// The file named in errors.
  const std::string& source() const { return source_; }
  /// The full name of field `key` ("trading_env.pnl_scale").
  std::string field(const std::string& key) const { return prefix_ + key; }
  /// True when the object has `key`.
  bool has(const std::string& key) const { return j_->contains(key); }

  /// The value of `key`; InputError when it is missing.
  const nlohmann::json& at(const std::string& key) const;
  /// The object at `key`, as fields named "key.<name>".
  HeaderFields nested(const std::string& key) const;
  /// The array at `key` (any length).
  const nlohmann::json& array(const std::string& key) const;
  /// Element `i` of the array at `key`, an object, as fields named "key[i].<name>".
  HeaderFields element(const std::string& key, std::size_t i) const;
  /// The string at `key`.
  std::string text(const std::string& key) const;
  /// The string at `key`, or `fallback` when the key is absent.
  std::string text_or(const std::string& key, const std::string& fallback) const;
  /// The integer at `key` in [lo, hi] (a JSON integer: 3.0 and 3.5 are refused).
  std::int64_t integer(const std::string& key, std::int64_t lo, std::int64_t hi) const;
  /// The finite number at `key`.
  double number(const std::string& key) const;
  /// The finite number at `key`, > 0.
  double positive(const std::string& key) const;
  /// The finite number at `key`, >= 0.
  double non_negative(const std::string& key) const;

  /// Throws "'<source>': field '<prefix+key>': expected <expected>, got <got as JSON>".
  [[noreturn]] void refuse(const std::string& key, const std::string& expected,
                           const nlohmann::json& got) const;
  /// Throws "'<source>': field '<prefix+key>': <why>".
  [[noreturn]] void refuse_because(const std::string& key, const std::string& why) const;

 private:
  const nlohmann::json* j_;
  std::string component_;
  std::string source_;
  std::string prefix_;
};

/// A JSON value as a short text for messages: its dump, cut at `max_chars` (with "...").
std::string short_json(const nlohmann::json& j, std::size_t max_chars = 80);

}  // namespace foxhunt
