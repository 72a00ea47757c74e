#include "foxhunt/core/units.h"

#include <cmath>

#include <fmt/format.h>

#include "foxhunt/core/error.h"

namespace foxhunt {

std::uint64_t mib_to_bytes(double mib, const char* component, const char* flag, bool allow_zero) {
  FOXHUNT_CHECK(std::isfinite(mib) && (allow_zero ? mib >= 0 : mib > 0) && mib < 1.7e13, component,
                flag, ": expected a ", allow_zero ? "non-negative" : "positive",
                " number of MiB, got ", mib);
  const auto bytes = static_cast<std::uint64_t>(std::llround(mib * static_cast<double>(kMiB)));
  FOXHUNT_CHECK(allow_zero || bytes > 0, component, flag, ": expected at least 1 byte, got ", mib,
                " MiB");
  return bytes;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  double v = bytes;
  while ((v >= 1024.0 || v <= -1024.0) && u < 4) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return fmt::format("{:.0f} B", v);
  return fmt::format("{:.2f} {}", v, units[u]);
}

}  // namespace foxhunt
