#include "foxhunt/models/precision.h"

#include <nlohmann/json.hpp>

#include <ostream>

#include "foxhunt/core/error.h"

namespace foxhunt::models {

std::optional<Precision> try_parse_precision(std::string_view text) {
  for (const Precision p : kAllPrecisions)
    if (text == to_string(p)) return p;
  return std::nullopt;
}

Precision parse_precision(std::string_view text, const char* where) {
  const auto p = try_parse_precision(text);
  FOXHUNT_CHECK(p.has_value(), where, "precision: expected fp32, int8, int8-qat or bf16, got '",
                text, "'");
  return *p;
}

std::string precisions_text(const std::vector<Precision>& items, const char* separator) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += to_string(items[i]);
  }
  return out;
}

std::ostream& operator<<(std::ostream& os, Precision p) {
  return os << to_string(p);
}

void to_json(nlohmann::json& j, Precision p) {
  j = to_string(p);
}

void from_json(const nlohmann::json& j, Precision& p) {
  FOXHUNT_CHECK(j.is_string(), "precision", "expected fp32, int8, int8-qat or bf16, got ",
                j.dump());
  p = parse_precision(j.get_ref<const std::string&>(), "precision");
}

}  // namespace foxhunt::models
