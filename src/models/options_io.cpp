#include "foxhunt/models/options_io.h"

#include <string>

#include "foxhunt/core/error.h"

namespace foxhunt::models {

void read_device_option(const nlohmann::json& j, const char* component, const char* key,
                        torch::Device& device) {
  std::string text = device.str();
  json_get(j, component, key, text);
  try {
    device = torch::Device(text);
  } catch (const c10::Error&) {
    throw InputError(component, std::string("option '") + key +
                                    "': expected e.g. \"cpu\" or \"cuda:0\", got \"" + text + "\"");
  }
}

}  // namespace foxhunt::models
