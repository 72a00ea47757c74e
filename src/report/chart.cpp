#include "foxhunt/report/chart.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <utility>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/report/escape.h"
#include "scale.h"

namespace foxhunt {

namespace {

/// The common ten-colour categorical palette, used in order when a series has no colour.
constexpr const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                    "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

/// Estimated advance of one character of the 11-12 px sans-serif labels; only used for layout
/// (margins, legend wrapping), where a few pixels of error are harmless.
constexpr double kCharWidth = 6.6;

/// An SVG coordinate with one decimal; never "nan" or "inf" whatever comes in.
std::string num(double v) {
  if (!std::isfinite(v)) v = 0.0;
  v = std::clamp(v, -1e6, 1e6);
  return fmt::format("{:.1f}", v);
}

/// A finished axis: its drawn range, tick positions and tick labels.
struct Axis {
  double lo = 0.0;
  double hi = 1.0;
  std::vector<double> ticks;
  std::vector<std::string> labels;
};

/// Labels for ticks spaced `step` apart, all with the decimals the step needs.
std::vector<std::string> tick_labels(const std::vector<double>& ticks, double step,
                                     const UnitScale& sc) {
  std::vector<std::string> out;
  const double s = step / sc.factor;
  int decimals = 0;
  if (s > 0.0 && s < 1.0) decimals = static_cast<int>(std::ceil(-std::log10(s) - 1e-9));
  for (double t : ticks) {
    const double v = t / sc.factor;
    std::string text = decimals > 6 || std::fabs(v) >= 1e15
                           ? fmt::format("{:.3g}", v)  // extreme scales: short scientific labels
                           : fmt::format("{:.{}f}", v, decimals);
    if (text == "-0" ||
        (text.size() > 1 && text[0] == '-' && text.find_first_not_of("-0.") == std::string::npos)) {
      text = text.substr(1);  // "-0.0" from rounding a tiny negative tick
    }
    out.push_back(text + (t == 0.0 ? sc.zero_suffix : sc.suffix));
  }
  return out;
}

/// Builds an axis for data in [lo, hi] (`have_data` false: a placeholder [0, 1]). With `extend`
/// the range grows to the outer ticks (y axes: the data never touches the frame); without, it
/// stays on the data and only the ticks inside it are kept (x axes).
Axis make_axis(double lo, double hi, bool have_data, const std::string& unit, bool extend) {
  if (!have_data) {
    lo = 0.0;
    hi = 1.0;
  }
  lo = std::clamp(lo, -kMaxAbs, kMaxAbs);
  hi = std::clamp(hi, -kMaxAbs, kMaxAbs);
  if (lo == hi) {
    const double d = lo == 0.0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= d;
    hi += d;
  }
  const UnitScale sc = unit_scale(std::max(std::fabs(lo), std::fabs(hi)), unit);
  // Ticks are nice in display units, so byte axes step by 256 KiB rather than by 200000 B.
  std::vector<double> t = nice_ticks(lo / sc.factor, hi / sc.factor, 5);
  for (double& v : t) v *= sc.factor;
  Axis a;
  a.lo = lo;
  a.hi = hi;
  if (t.empty()) return a;
  const double step = t.size() >= 2 ? t[1] - t[0] : (hi - lo);
  if (extend) {
    a.lo = std::min(lo, t.front());
    a.hi = std::max(hi, t.back());
    a.ticks = t;
  } else {
    const double eps = step * 1e-6;
    for (double v : t) {
      if (v >= lo - eps && v <= hi + eps) a.ticks.push_back(v);
    }
  }
  a.labels = tick_labels(a.ticks, step, sc);
  return a;
}

/// One legend entry.
struct LegendItem {
  std::string name;
  std::string color;
  bool dashed = false;
  bool band = false;  // a filled swatch instead of a line
};

/// Legend entries placed in rows that fit the chart width.
struct LegendLayout {
  struct Placed {
    LegendItem item;
    double x = 0.0;
    int row = 0;
  };
  std::vector<Placed> placed;
  int rows = 0;
};

LegendLayout layout_legend(const std::vector<LegendItem>& items, double width) {
  LegendLayout out;
  const double x0 = 12.0;
  double x = x0;
  int row = 0;
  for (const LegendItem& it : items) {
    const double w = 22.0 + kCharWidth * static_cast<double>(it.name.size()) + 16.0;
    if (x > x0 && x + w > width - 8.0) {
      x = x0;
      ++row;
    }
    out.placed.push_back({it, x, row});
    x += w;
  }
  out.rows = items.empty() ? 0 : row + 1;
  return out;
}

/// The pixel frame of a chart: size, plot area and the two axes.
struct Frame {
  double width = 0.0, height = 0.0;
  double left = 0.0, top = 0.0, pw = 0.0, ph = 0.0;
  double legend_top = 0.0;
  Axis xa, ya;
  LegendLayout legend;

  // Clamped like the axes so that x - lo cannot overflow for values near the double limit.
  double px(double x) const {
    return left + (std::clamp(x, -kMaxAbs, kMaxAbs) - xa.lo) / (xa.hi - xa.lo) * pw;
  }
  double py(double y) const {
    return top + ph - (std::clamp(y, -kMaxAbs, kMaxAbs) - ya.lo) / (ya.hi - ya.lo) * ph;
  }
};

void check_size(const ChartOptions& o) {
  FOXHUNT_CHECK(o.width >= 200 && o.width <= 8000, kReportComponent, "chart '", o.title,
                "': expected a width in [200, 8000] px, got ", o.width);
  FOXHUNT_CHECK(o.height >= 120 && o.height <= 8000, kReportComponent, "chart '", o.title,
                "': expected a height in [120, 8000] px, got ", o.height);
}

size_t max_label_chars(const std::vector<std::string>& labels) {
  size_t n = 0;
  for (const auto& l : labels) n = std::max(n, l.size());
  return n;
}

Frame make_frame(const ChartOptions& o, Axis xa, Axis ya, const std::vector<LegendItem>& legend) {
  Frame f;
  f.width = o.width;
  f.height = o.height;
  f.xa = std::move(xa);
  f.ya = std::move(ya);
  f.legend = layout_legend(legend, f.width);
  f.legend_top = 8.0 + (o.title.empty() ? 0.0 : 22.0);
  f.top = f.legend_top + 18.0 * f.legend.rows + 10.0;
  const double bottom = 8.0 + 18.0 + (o.x_label.empty() ? 0.0 : 18.0);
  f.left = 10.0 + (o.y_label.empty() ? 0.0 : 18.0) +
           kCharWidth * static_cast<double>(max_label_chars(f.ya.labels)) + 8.0;
  const double last_x_label =
      f.xa.labels.empty() ? 0.0 : kCharWidth * static_cast<double>(f.xa.labels.back().size());
  const double right = std::max(16.0, last_x_label / 2.0 + 6.0);
  f.pw = f.width - f.left - right;
  f.ph = f.height - f.top - bottom;
  FOXHUNT_CHECK(f.pw >= 40.0 && f.ph >= 30.0, kReportComponent, "chart '", o.title,
                "': expected room ", "for a plot area of at least 40x30 px, got ", f.pw, "x", f.ph,
                " px in a ", o.width, "x", o.height,
                " px chart (enlarge it or shorten the labels)");
  return f;
}

/// The opening tag, title, background, frame title, grid, axes, labels and legend.
std::string svg_head(const Frame& f, const ChartOptions& o) {
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << o.width << "\" height=\"" << o.height
    << "\" viewBox=\"0 0 " << o.width << " " << o.height
    << "\" role=\"img\" font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, Arial, "
       "sans-serif\" font-size=\"11\">\n";
  s << "<title>" << html_escape(o.title) << "</title>\n";
  s << "<rect x=\"0\" y=\"0\" width=\"" << o.width << "\" height=\"" << o.height
    << "\" fill=\"#ffffff\"/>\n";
  if (!o.title.empty()) {
    s << "<text x=\"" << num(f.width / 2.0) << "\" y=\"22\" text-anchor=\"middle\" "
      << "font-size=\"14\" font-weight=\"600\" fill=\"#1d232a\">" << html_escape(o.title)
      << "</text>\n";
  }
  // Horizontal grid and y labels.
  for (size_t i = 0; i < f.ya.ticks.size(); ++i) {
    const double y = f.py(f.ya.ticks[i]);
    s << "<line x1=\"" << num(f.left) << "\" y1=\"" << num(y) << "\" x2=\"" << num(f.left + f.pw)
      << "\" y2=\"" << num(y) << "\" stroke=\"#e6e9ed\" stroke-width=\"1\"/>\n";
    s << "<text x=\"" << num(f.left - 6.0) << "\" y=\"" << num(y + 4.0)
      << "\" text-anchor=\"end\" fill=\"#555\">" << html_escape(f.ya.labels[i]) << "</text>\n";
  }
  // x tick marks and labels.
  const double bottom_y = f.top + f.ph;
  for (size_t i = 0; i < f.xa.ticks.size(); ++i) {
    const double x = f.px(f.xa.ticks[i]);
    s << "<line x1=\"" << num(x) << "\" y1=\"" << num(bottom_y) << "\" x2=\"" << num(x)
      << "\" y2=\"" << num(bottom_y + 5.0) << "\" stroke=\"#888\" stroke-width=\"1\"/>\n";
    s << "<text x=\"" << num(x) << "\" y=\"" << num(bottom_y + 17.0)
      << "\" text-anchor=\"middle\" fill=\"#555\">" << html_escape(f.xa.labels[i]) << "</text>\n";
  }
  // Axis lines (left and bottom).
  s << "<path d=\"M" << num(f.left) << " " << num(f.top) << " V" << num(bottom_y) << " H"
    << num(f.left + f.pw) << "\" fill=\"none\" stroke=\"#888\" stroke-width=\"1\"/>\n";
  if (!o.x_label.empty()) {
    s << "<text x=\"" << num(f.left + f.pw / 2.0) << "\" y=\"" << num(f.height - 8.0)
      << "\" text-anchor=\"middle\" font-size=\"12\" fill=\"#333\">" << html_escape(o.x_label)
      << "</text>\n";
  }
  if (!o.y_label.empty()) {
    const double cy = f.top + f.ph / 2.0;
    s << "<text x=\"16\" y=\"" << num(cy) << "\" transform=\"rotate(-90 16 " << num(cy)
      << ")\" text-anchor=\"middle\" font-size=\"12\" fill=\"#333\">" << html_escape(o.y_label)
      << "</text>\n";
  }
  for (const auto& p : f.legend.placed) {
    const double y = f.legend_top + 18.0 * p.row + 9.0;
    const std::string color = html_escape(p.item.color);
    if (p.item.band) {
      s << "<rect x=\"" << num(p.x) << "\" y=\"" << num(y - 5.0)
        << "\" width=\"18\" height=\"10\" fill=\"" << color << "\" fill-opacity=\"0.25\"/>\n";
    } else {
      s << "<line x1=\"" << num(p.x) << "\" y1=\"" << num(y) << "\" x2=\"" << num(p.x + 18.0)
        << "\" y2=\"" << num(y) << "\" stroke=\"" << color << "\" stroke-width=\"2\""
        << (p.item.dashed ? " stroke-dasharray=\"5 3\"" : "") << "/>\n";
    }
    s << "<text x=\"" << num(p.x + 22.0) << "\" y=\"" << num(y + 4.0) << "\" fill=\"#333\">"
      << html_escape(p.item.name) << "</text>\n";
  }
  return s.str();
}

std::string no_data_text(const Frame& f) {
  return "<text x=\"" + num(f.left + f.pw / 2.0) + "\" y=\"" + num(f.top + f.ph / 2.0) +
         "\" text-anchor=\"middle\" font-size=\"13\" fill=\"#888\">no data</text>\n";
}

void check_series(const Series& s, size_t i) {
  FOXHUNT_CHECK(s.x.size() == s.y.size(), kReportComponent, "series ", i, " '", s.name,
                "': expected x and y of one size, got ", s.x.size(), " x and ", s.y.size(), " y");
}

std::string series_color(const Series& s, size_t i) {
  return s.color.empty() ? kPalette[i % kPaletteSize] : s.color;
}

std::vector<LegendItem> series_legend(const std::vector<Series>& series, size_t palette_offset) {
  std::vector<LegendItem> items;
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    if (s.name.empty()) continue;
    bool any = false;
    for (size_t j = 0; j < s.x.size() && !any; ++j) any = finite2(s.x[j], s.y[j]);
    items.push_back({any ? s.name : s.name + " (no data)", series_color(s, i + palette_offset),
                     s.dashed, false});
  }
  return items;
}

void add_series_range(const std::vector<Series>& series, Range& xr, Range& yr) {
  for (const Series& s : series) {
    for (size_t j = 0; j < s.x.size(); ++j) {
      if (!finite2(s.x[j], s.y[j])) continue;
      xr.add(s.x[j]);
      yr.add(s.y[j]);
    }
  }
}

/// Buckets for downsampling: one per pixel column, at most 1000 (so at most ~2000 points).
size_t plot_buckets(const Frame& f) {
  return std::clamp<size_t>(static_cast<size_t>(f.pw), 1, 1000);
}

std::string series_markup(const std::vector<Series>& series, const Frame& f,
                          size_t palette_offset) {
  std::ostringstream s;
  for (size_t i = 0; i < series.size(); ++i) {
    const Series& ser = series[i];
    const std::vector<size_t> idx = downsample_min_max(ser.x, ser.y, plot_buckets(f));
    if (idx.empty()) continue;
    const std::string color = html_escape(series_color(ser, i + palette_offset));
    s << "<polyline fill=\"none\" stroke=\"" << color
      << "\" stroke-width=\"1.5\" stroke-linejoin=\"round\" stroke-linecap=\"round\""
      << (ser.dashed ? " stroke-dasharray=\"6 4\"" : "") << " points=\"";
    for (size_t k = 0; k < idx.size(); ++k) {
      s << (k ? " " : "") << num(f.px(ser.x[idx[k]])) << "," << num(f.py(ser.y[idx[k]]));
    }
    s << "\"/>\n";
    if (idx.size() == 1) {
      // A one-point polyline draws nothing; the dot makes the point visible.
      s << "<circle cx=\"" << num(f.px(ser.x[idx[0]])) << "\" cy=\"" << num(f.py(ser.y[idx[0]]))
        << "\" r=\"3\" fill=\"" << color << "\"/>\n";
    }
  }
  return s.str();
}

Axis y_axis_for(Range yr, const ChartOptions& o) {
  if (o.y_from_zero && yr.any()) yr.add(0.0);
  return make_axis(yr.lo, yr.hi, yr.any(), o.y_unit, true);
}

}  // namespace

std::string line_chart_svg(const std::vector<Series>& series, const ChartOptions& opts) {
  check_size(opts);
  for (size_t i = 0; i < series.size(); ++i) check_series(series[i], i);
  Range xr, yr;
  add_series_range(series, xr, yr);
  const Frame f = make_frame(opts, make_axis(xr.lo, xr.hi, xr.any(), opts.x_unit, false),
                             y_axis_for(yr, opts), series_legend(series, 0));
  std::string out = svg_head(f, opts);
  if (!xr.any()) out += no_data_text(f);
  out += series_markup(series, f, 0);
  out += "</svg>\n";
  return out;
}

std::string band_chart_svg(const std::vector<double>& x, const std::vector<double>& lower,
                           const std::vector<double>& upper, const std::vector<Series>& lines,
                           const ChartOptions& opts, const std::string& band_label) {
  check_size(opts);
  FOXHUNT_CHECK(x.size() == lower.size() && x.size() == upper.size(), kReportComponent,
                "band chart '", opts.title, "': expected x, lower and upper of one size, got ",
                x.size(), ", ", lower.size(), " and ", upper.size());
  for (size_t i = 0; i < lines.size(); ++i) check_series(lines[i], i);
  Range xr, yr;
  std::vector<size_t> band;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!finite2(x[i], lower[i]) || !std::isfinite(upper[i])) continue;
    band.push_back(i);
    xr.add(x[i]);
    yr.add(lower[i]);
    yr.add(upper[i]);
  }
  add_series_range(lines, xr, yr);
  // The band takes the first palette colour; the lines continue from the second.
  const std::string band_color = kPalette[0];
  std::vector<LegendItem> legend;
  if (!band_label.empty()) legend.push_back({band_label, band_color, false, true});
  for (auto& item : series_legend(lines, 1)) legend.push_back(std::move(item));
  const Frame f = make_frame(opts, make_axis(xr.lo, xr.hi, xr.any(), opts.x_unit, false),
                             y_axis_for(yr, opts), legend);
  std::string out = svg_head(f, opts);
  if (!xr.any()) out += no_data_text(f);
  if (band.size() >= 2) {
    // Upper edge left to right, lower edge back; per bucket the widest extent survives.
    std::vector<std::pair<double, double>> top, bottom;
    const size_t buckets = plot_buckets(f);
    if (band.size() <= 2 * buckets) {
      for (size_t i : band) {
        top.emplace_back(x[i], upper[i]);
        bottom.emplace_back(x[i], lower[i]);
      }
    } else {
      std::vector<double> bx, bu, bl;
      for (size_t i : band) {
        bx.push_back(x[i]);
        bu.push_back(upper[i]);
        bl.push_back(-lower[i]);  // the minimum of lower is the maximum of -lower
      }
      for (size_t k : downsample_min_max(bx, bu, buckets)) top.emplace_back(bx[k], bu[k]);
      for (size_t k : downsample_min_max(bx, bl, buckets)) bottom.emplace_back(bx[k], -bl[k]);
    }
    out += "<polygon fill=\"" + band_color + "\" fill-opacity=\"0.25\" stroke=\"none\" points=\"";
    bool first = true;
    auto emit = [&](double px, double py) {
      out += (first ? "" : " ") + num(f.px(px)) + "," + num(f.py(py));
      first = false;
    };
    for (const auto& [px, py] : top) emit(px, py);
    for (auto it = bottom.rbegin(); it != bottom.rend(); ++it) emit(it->first, it->second);
    out += "\"/>\n";
  }
  out += series_markup(lines, f, 1);
  out += "</svg>\n";
  return out;
}

std::string bar_chart_svg(const std::vector<std::string>& labels, const std::vector<double>& values,
                          const ChartOptions& opts) {
  check_size(opts);
  FOXHUNT_CHECK(labels.size() == values.size(), kReportComponent, "bar chart '", opts.title,
                "': expected one value per label, got ", values.size(), " values for ",
                labels.size(), " labels");
  double max_value = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    FOXHUNT_CHECK(std::isfinite(values[i]) && values[i] >= 0, kReportComponent, "bar chart '",
                  opts.title, "': expected finite values >= 0, got ", values[i], " at index ", i);
    max_value = std::max(max_value, values[i]);
  }
  constexpr double kRow = 18.0, kTop = 36.0;
  const double label_w =
      std::min(0.45 * opts.width, static_cast<double>(max_label_chars(labels)) * kCharWidth + 12.0);
  const double bar_w = opts.width - label_w - 70.0;
  const int height = static_cast<int>(kTop + kRow * static_cast<double>(labels.size()) + 12.0);
  std::ostringstream s;
  s << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << opts.width << "\" height=\""
    << height << "\" viewBox=\"0 0 " << opts.width << " " << height
    << "\" role=\"img\" font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, Arial, "
       "sans-serif\" font-size=\"11\">\n";
  s << "<title>" << html_escape(opts.title) << "</title>\n";
  s << "<rect x=\"0\" y=\"0\" width=\"" << opts.width << "\" height=\"" << height
    << "\" fill=\"#ffffff\"/>\n";
  s << "<text x=\"" << num(opts.width / 2.0)
    << "\" y=\"22\" text-anchor=\"middle\" font-size=\"14\" font-weight=\"600\" "
       "fill=\"#1d232a\">"
    << html_escape(opts.title) << "</text>\n";
  for (size_t i = 0; i < labels.size(); ++i) {
    const double y = kTop + kRow * static_cast<double>(i);
    const double w = max_value > 0 ? bar_w * values[i] / max_value : 0.0;
    s << "<text x=\"" << num(label_w - 6) << "\" y=\"" << num(y + 12)
      << "\" text-anchor=\"end\" fill=\"#1d232a\">" << html_escape(labels[i]) << "</text>\n";
    s << "<rect x=\"" << num(label_w) << "\" y=\"" << num(y + 2) << "\" width=\""
      << num(std::max(w, 0.5)) << "\" height=\"" << num(kRow - 5) << "\" fill=\"#4e79a7\"/>\n";
    s << "<text x=\"" << num(label_w + w + 5) << "\" y=\"" << num(y + 12) << "\" fill=\"#444444\">"
      << html_escape(format_value(values[i], opts.x_unit)) << "</text>\n";
  }
  s << "</svg>\n";
  return s.str();
}

std::string histogram_svg(const Histogram& h, const ChartOptions& opts) {
  check_size(opts);
  const bool empty = h.edges.empty() && h.counts.empty();
  FOXHUNT_CHECK(empty || h.edges.size() == h.counts.size() + 1, kReportComponent,
                "histogram chart '", opts.title, "': expected counts.size() + 1 edges, got ",
                h.edges.size(), " edges for ", h.counts.size(), " counts");
  for (size_t i = 0; i < h.edges.size(); ++i) {
    FOXHUNT_CHECK(std::isfinite(h.edges[i]) && (!h.log_scale || h.edges[i] > 0.0), kReportComponent,
                  "histogram chart '", opts.title, "': expected finite",
                  h.log_scale ? " positive" : "", " edges, got ", h.edges[i], " at index ", i);
    FOXHUNT_CHECK(i == 0 || h.edges[i] > h.edges[i - 1], kReportComponent, "histogram chart '",
                  opts.title, "': expected increasing edges, got ", h.edges[i - 1], " then ",
                  h.edges[i], " at index ", i);
  }
  const bool have = !h.counts.empty();
  uint64_t max_count = 0;
  for (uint64_t c : h.counts) max_count = std::max(max_count, c);

  // The x axis works in log10 units when the bins are logarithmic.
  auto xpos = [&](double e) { return h.log_scale ? std::log10(e) : e; };
  Axis xa;
  if (have && h.log_scale) {
    const double llo = xpos(h.edges.front()), lhi = xpos(h.edges.back());
    xa.lo = llo;
    xa.hi = lhi;
    const double first = std::ceil(llo - 1e-9), last = std::floor(lhi + 1e-9);
    if (last - first >= 1.0) {
      // Two or more whole decades: ticks on powers of ten, at most about 7.
      const double stride = std::max(1.0, std::ceil((last - first + 1.0) / 7.0));
      for (double d = first; d <= last; d += stride) xa.ticks.push_back(d);
    } else {
      for (double t : nice_ticks(llo, lhi, 5)) {
        if (t >= llo - 1e-9 && t <= lhi + 1e-9) xa.ticks.push_back(t);
      }
    }
    for (double t : xa.ticks) xa.labels.push_back(format_value(std::pow(10.0, t), opts.x_unit));
  } else if (have) {
    xa = make_axis(h.edges.front(), h.edges.back(), true, opts.x_unit, false);
  } else {
    xa = make_axis(0.0, 1.0, false, opts.x_unit, false);
  }
  // At least 0..4 so small counts keep whole-number ticks.
  Axis ya = make_axis(0.0, std::max<double>(static_cast<double>(max_count), 4.0), true, "", true);
  const Frame f = make_frame(opts, xa, ya, {});
  std::string out = svg_head(f, opts);
  if (!have) {
    out += no_data_text(f);
    out += "</svg>\n";
    return out;
  }
  const size_t nb = h.counts.size();
  std::ostringstream s;
  auto bar = [&](double x0, double x1, uint64_t count) {
    if (count == 0) return;
    const double y = f.py(static_cast<double>(count));
    s << "<rect x=\"" << num(x0) << "\" y=\"" << num(y) << "\" width=\""
      << num(std::max(x1 - x0, 0.5)) << "\" height=\"" << num(f.top + f.ph - y)
      << "\" fill=\"#4e79a7\"/>\n";
  };
  if (static_cast<double>(nb) <= f.pw) {
    for (size_t i = 0; i < nb; ++i) {
      const double x0 = f.px(xpos(h.edges[i])), x1 = f.px(xpos(h.edges[i + 1]));
      const double gap = x1 - x0 > 4.0 ? 1.0 : 0.0;  // separates wide bars, not hairlines
      bar(x0 + gap / 2.0, x1 - gap / 2.0, h.counts[i]);
    }
  } else {
    // More bins than pixels: one bar per pixel column showing its tallest bin.
    long col = -1;
    uint64_t col_max = 0;
    for (size_t i = 0; i < nb; ++i) {
      const double mid = (f.px(xpos(h.edges[i])) + f.px(xpos(h.edges[i + 1]))) / 2.0;
      const long c = static_cast<long>(std::floor(mid - f.left));
      if (c != col) {
        if (col >= 0) bar(f.left + col, f.left + col + 1.0, col_max);
        col = c;
        col_max = 0;
      }
      col_max = std::max(col_max, h.counts[i]);
    }
    if (col >= 0) bar(f.left + col, f.left + col + 1.0, col_max);
  }
  out += s.str();
  out += "</svg>\n";
  return out;
}

}  // namespace foxhunt
