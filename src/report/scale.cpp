// The axis arithmetic of report/chart.h: nice ticks, value labels and min-max downsampling.
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/report/chart.h"
#include "scale.h"

namespace foxhunt {

namespace {

/// Drops trailing zeros after a decimal point ("1.50" -> "1.5", "2.00" -> "2"), and "-0" -> "0".
std::string trim_zeros(std::string s) {
  if (s.find('.') != std::string::npos && s.find('e') == std::string::npos) {
    while (!s.empty() && s.back() == '0') s.pop_back();
    if (!s.empty() && s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  return s;
}

}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  if (lo == hi) {
    const double d = lo == 0.0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  lo = std::clamp(lo, -kMaxAbs, kMaxAbs);
  hi = std::clamp(hi, -kMaxAbs, kMaxAbs);
  const double raw = (hi - lo) / static_cast<double>(std::max(target, 2) - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double nice = f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0;
  const double step = nice * mag;
  // The tolerance keeps 0.6 / 0.2 = 2.9999999999999996 from adding a tick below the range.
  const double k0 = std::floor(lo / step + 1e-9);
  const double k1 = std::ceil(hi / step - 1e-9);
  // Huge offsets against a tiny span (1e15 + 0.1) cannot be split; show the ends only.
  if (!(k1 - k0 <= 1000.0) || k0 * step == (k0 + 1.0) * step) return {lo, hi};
  std::vector<double> out;
  for (double k = k0; k <= k1; k += 1.0) {
    double v = k * step;  // multiples, not a running sum, so errors do not accumulate
    if (std::fabs(v) < step * 1e-9) v = 0.0;
    out.push_back(v);
  }
  return out;
}

std::string format_value(double value, const std::string& unit) {
  if (!std::isfinite(value)) return "n/a";
  const UnitScale sc = unit_scale(std::fabs(value), unit);
  const double s = value / sc.factor;
  const double a = std::fabs(s);
  if (a == 0.0) return "0" + sc.zero_suffix;
  std::string text;
  if (a >= 1e15) {
    text = fmt::format("{:.3g}", s);
  } else if (a >= 100.0) {
    text = fmt::format("{:.0f}", s);
  } else if (a >= 10.0) {
    text = fmt::format("{:.1f}", s);
  } else if (a >= 1.0) {
    text = fmt::format("{:.2f}", s);
  } else {
    text = fmt::format("{:.3g}", s);
  }
  return trim_zeros(text) + sc.suffix;
}

std::vector<size_t> downsample_min_max(const std::vector<double>& x, const std::vector<double>& y,
                                       size_t buckets) {
  FOXHUNT_CHECK(x.size() == y.size(), kReportComponent,
                "downsample_min_max: expected x and y of one ", "size, got ", x.size(), " x and ",
                y.size(), " y");
  FOXHUNT_CHECK(buckets > 0, kReportComponent, "downsample_min_max: expected buckets > 0, got 0");
  std::vector<size_t> finite;
  finite.reserve(x.size());
  Range xr;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!finite2(x[i], y[i])) continue;
    finite.push_back(i);
    xr.add(x[i]);
  }
  if (finite.size() <= 2 * buckets) return finite;
  const double lo = std::clamp(xr.lo, -kMaxAbs, kMaxAbs);
  const double span = std::clamp(xr.hi, -kMaxAbs, kMaxAbs) - lo;
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> min_i(buckets, kNone), max_i(buckets, kNone);
  for (size_t i : finite) {
    size_t b = 0;
    if (span > 0.0) {
      const double pos = (std::clamp(x[i], -kMaxAbs, kMaxAbs) - lo) / span;
      b = std::min(static_cast<size_t>(pos * static_cast<double>(buckets)), buckets - 1);
    }
    if (min_i[b] == kNone || y[i] < y[min_i[b]]) min_i[b] = i;
    if (max_i[b] == kNone || y[i] > y[max_i[b]]) max_i[b] = i;
  }
  std::vector<size_t> out;
  out.reserve(2 * buckets);
  for (size_t b = 0; b < buckets; ++b) {
    if (min_i[b] == kNone) continue;
    const size_t a = std::min(min_i[b], max_i[b]), c = std::max(min_i[b], max_i[b]);
    out.push_back(a);
    if (c != a) out.push_back(c);
  }
  return out;
}

}  // namespace foxhunt
