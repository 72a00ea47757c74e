#pragma once
/// \file chart.h
/// Self-contained inline-SVG charts (lines, forecast bands, histograms, bars) and the axis
/// arithmetic behind them (nice ticks, value labels, min-max downsampling), for the pages of
/// report/html_report.h. Torch-free. Charts never divide by zero and never print "nan" or "inf":
/// non-finite points are skipped, empty and constant series get a widened axis, and an empty
/// chart says "no data".

#include <cstddef>
#include <string>
#include <vector>

#include "foxhunt/core/stats.h"

namespace foxhunt {

/// One line of a chart: points (x[i], y[i]); points where x or y is not finite are skipped.
struct Series {
  std::string name;       ///< legend text ("" = no legend entry)
  std::vector<double> x;  ///< x values, same size as y
  std::vector<double> y;  ///< y values
  std::string color;      ///< any SVG colour ("#1f77b4", "teal"); "" = the next palette colour
  bool dashed = false;    ///< draw dashed (e.g. a baseline or a threshold)
};

/// Layout and labelling of a chart.
struct ChartOptions {
  std::string title;         ///< drawn on top, and the SVG <title> (the Markdown plot line)
  std::string x_label;       ///< text under the x axis
  std::string y_label;       ///< text along the y axis
  int width = 720;           ///< pixels, in [200, 8000]
  int height = 300;          ///< pixels, in [120, 8000]
  bool y_from_zero = false;  ///< include 0 in the y range
  std::string y_unit;        ///< tick label unit; "B" = bytes with KiB/MiB/GiB steps of 1024
  std::string x_unit;        ///< same for the x axis
};

/// "Nice" axis ticks covering [lo, hi]: a step of 1, 2 or 5 x 10^k chosen so that about `target`
/// ticks fall on the range (step = span / (target - 1) rounded to the nearest nice number), from
/// the multiple of the step at or below `lo` to the one at or above `hi`. For example [0, 97]
/// gives 0, 20, 40, 60, 80, 100. A zero-width range is widened (by 10% of |lo|, or by 1 at 0);
/// swapped ends are reordered; non-finite ends give no ticks.
std::vector<double> nice_ticks(double lo, double hi, int target = 5);

/// Formats `value` for a label with `unit`: "B" scales by 1024 (B, KiB, MiB, GiB, TiB, PiB), any
/// other unit by 1000 from 10^4 up (k, M, G, T, P; the unit follows after a space). The scaled
/// number keeps its integer digits and about three significant digits, trailing zeros dropped:
/// 1536 "B" -> "1.5 KiB", 1023 "B" -> "1023 B", 12345 "us" -> "12.3k us", 0.000123 -> "0.000123".
/// A non-finite value gives "n/a".
std::string format_value(double value, const std::string& unit = "");

/// Indices of the points of (x, y) to draw with at most about 2 * `buckets` points: when there
/// are more finite points than that, the x range is split into `buckets` equal buckets and each
/// keeps its smallest and largest y (in index order), so single spikes survive. Indices come
/// in x order when reduced, in input order otherwise; points with a non-finite x or y are
/// dropped. Throws InputError when x and y differ in size or `buckets` is 0.
std::vector<size_t> downsample_min_max(const std::vector<double>& x, const std::vector<double>& y,
                                       size_t buckets);

/// An SVG line chart of `series`: axes with nice ticks, grid, tick labels (with the units of
/// `opts`), a legend, one <polyline> per series that has a finite point (at most about two
/// points per pixel column, see downsample_min_max), and a dot for a single-point series.
/// Throws InputError for a series whose x and y differ in size or for a size out of range.
std::string line_chart_svg(const std::vector<Series>& series, const ChartOptions& opts);

/// A forecast fan chart: the band between `lower` and `upper` (e.g. P10 and P90) at `x`, shaded
/// and labelled `band_label` in the legend, with `lines` (e.g. the median and the actuals) drawn
/// over it as in line_chart_svg. Throws InputError when x, lower and upper differ in size.
std::string band_chart_svg(const std::vector<double>& x, const std::vector<double>& lower,
                           const std::vector<double>& upper, const std::vector<Series>& lines,
                           const ChartOptions& opts, const std::string& band_label = "P10–P90");

/// An SVG bar chart of a histogram (log10 x axis when h.log_scale). When there are more bins
/// than pixel columns each column shows its tallest bin. y starts at 0 and counts are integers.
/// Throws InputError when edges.size() != counts.size() + 1 or the edges are not finite and
/// increasing.
std::string histogram_svg(const Histogram& h, const ChartOptions& opts);

/// A horizontal bar chart: one bar per label with its value (e.g. variable importance), longest
/// scale at the largest value; opts.height is ignored (one 18 px row per bar). Throws InputError
/// when the sizes differ or a value is negative or not finite.
std::string bar_chart_svg(const std::vector<std::string>& labels, const std::vector<double>& values,
                          const ChartOptions& opts);

}  // namespace foxhunt
