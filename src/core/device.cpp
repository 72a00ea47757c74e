#include "foxhunt/core/device.h"

#include <nlohmann/json.hpp>
#include <ostream>

#include "foxhunt/core/error.h"

namespace foxhunt {

Device::Device(const char* text) : Device(parse(text, "device")) {}
Device::Device(const std::string& text) : Device(parse(text, "device")) {}

Device Device::parse(const std::string& text, const char* component) {
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda();
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 9) {
    int index = 0;
    bool digits = true;
    for (std::size_t i = 5; i < text.size(); ++i) {
      digits = digits && text[i] >= '0' && text[i] <= '9';
      if (digits) index = index * 10 + (text[i] - '0');
    }
    if (digits) return cuda(index);
  }
  throw InputError(component, "device: expected cpu, cuda or cuda:N, got '" + text + "'");
}

std::string Device::str() const {
  if (!cuda_) return "cpu";
  return index_ < 0 ? "cuda" : "cuda:" + std::to_string(index_);
}

std::ostream& operator<<(std::ostream& os, const Device& d) {
  return os << d.str();
}

void to_json(nlohmann::json& j, const Device& d) {
  j = d.str();
}

void from_json(const nlohmann::json& j, Device& d) {
  if (!j.is_string())
    throw InputError(
        "device",
        std::string("device: expected a string (cpu, cuda or cuda:N), got ") + j.type_name());
  d = Device::parse(j.get<std::string>(), "device");
}

}  // namespace foxhunt
