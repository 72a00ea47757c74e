#include "foxhunt/models/json_get.h"

namespace foxhunt::models {

void check_known_keys(const nlohmann::json& j, const char* component,
                      const std::vector<std::string>& allowed) {
  FOXHUNT_CHECK(j.is_object(), component, "options: expected a JSON object, got ", j.type_name());
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == it.key();
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw InputError(component, "unknown option '" + it.key() + "'; expected one of: " + list);
    }
  }
}

}  // namespace foxhunt::models
