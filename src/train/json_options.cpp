#include "foxhunt/train/json_options.h"

#include "foxhunt/models/model.h"

namespace foxhunt::train {

torch::Device device_option(const nlohmann::json& j, const char* component,
                            const torch::Device& fallback) {
  std::string device = fallback.str();
  models::json_get(j, component, "device", device);
  try {
    return torch::Device(device);
  } catch (const c10::Error&) {
    throw InputError(
        component, "option 'device': expected e.g. \"cpu\" or \"cuda:0\", got \"" + device + "\"");
  }
}

}  // namespace foxhunt::train
