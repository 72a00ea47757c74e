#pragma once
// Private to report/ (only chart.cpp and scale.cpp include it): what they share: the error
// component, the clamp that keeps axis spans finite, the display scale of a unit (B, KiB, ...; k,
// M, ...) and a running range of finite values.

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace foxhunt {

inline constexpr const char* kReportComponent = "report";

/// Values beyond this are clamped so that hi - lo of any axis stays finite.
inline constexpr double kMaxAbs = 1e307;

/// How an axis or a value is scaled for display: divide by `factor`, then append `suffix`.
struct UnitScale {
  double factor = 1.0;
  std::string suffix;       // complete text after the number, e.g. " KiB", "k", "k us", " us"
  std::string zero_suffix;  // after a zero, which needs no prefix: "0 B", "0 us", "0" (not "0k")
};

inline UnitScale unit_scale(double magnitude, const std::string& unit) {
  UnitScale s;
  int k = 0;
  if (unit == "B") {
    static const char* const names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    while (k < 5 && magnitude >= s.factor * 1024.0) {
      s.factor *= 1024.0;
      ++k;
    }
    s.suffix = std::string(" ") + names[k];
    s.zero_suffix = " B";
    return s;
  }
  static const char* const prefixes[] = {"", "k", "M", "G", "T", "P"};
  // Below 10^4 plain numbers read better than "1.2k".
  if (magnitude >= 1e4) {
    while (k < 5 && magnitude >= s.factor * 1000.0) {
      s.factor *= 1000.0;
      ++k;
    }
  }
  s.zero_suffix = unit.empty() ? "" : " " + unit;
  s.suffix = prefixes[k] + s.zero_suffix;
  return s;
}

/// Running [min, max] of finite values.
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  bool any() const { return lo <= hi; }
  void add(double v) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
};

inline bool finite2(double a, double b) {
  return std::isfinite(a) && std::isfinite(b);
}

}  // namespace foxhunt
