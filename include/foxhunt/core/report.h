#pragma once
/// \file report.h
/// A small self-contained report builder: inline-SVG charts (lines, forecast bands, histograms)
/// and an HTML document with no external resources and no JavaScript, plus the same content as
/// Markdown. Torch-free. Charts never divide by zero and never print "nan" or "inf": non-finite
/// points are skipped, empty and constant series get a widened axis, and an empty chart says
/// "no data".

#include <cstddef>
#include <string>
#include <utility>
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

/// Escapes & < > " ' for HTML and XML text and attribute values.
std::string html_escape(const std::string& text);

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

/// Builds a report as a self-contained HTML document (inline style, inline SVG, no network, no
/// JavaScript) and as Markdown with the same headings, paragraphs, tables and preformatted
/// blocks (each SVG becomes a line "(plot: TITLE)").
class HtmlReport {
 public:
  /// A report titled `title` (the <title> and the top <h1>, or "# title" in Markdown).
  explicit HtmlReport(std::string title);

  /// A heading of `level` 1..6 (the report title is level 1). Throws InputError otherwise.
  void heading(std::string text, int level = 2);
  /// A paragraph of plain text (escaped in HTML).
  void paragraph(std::string text);
  /// A table; every row must have header.size() cells and the header must not be empty (throws
  /// InputError naming the row otherwise). Cells are plain text, escaped.
  void table(const std::vector<std::string>& header,
             const std::vector<std::vector<std::string>>& rows);
  /// Raw SVG markup, inserted as it is (the caller vouches for it, e.g. from line_chart_svg).
  /// `title` names it in Markdown; "" = the text of the markup's first <title> element.
  void svg(std::string svg_markup, std::string title = "");
  /// A preformatted block of plain text (escaped in HTML, fenced in Markdown).
  void preformatted(std::string text);

  /// The report title.
  const std::string& title() const noexcept { return title_; }
  /// The full HTML5 document.
  std::string html() const;
  /// The same content as Markdown.
  std::string markdown() const;
  /// Writes html() to `path` atomically (write_file_atomic). Throws foxhunt::Error on I/O failure.
  void write(const std::string& path) const;
  /// Writes markdown() to `path` atomically.
  void write_markdown(const std::string& path) const;

 private:
  enum class Kind { kHeading, kParagraph, kTable, kSvg, kPreformatted };
  struct Block {
    Block(Kind k, std::string t) : kind(k), text(std::move(t)) {}
    Kind kind;
    std::string text;   // heading/paragraph/preformatted text, or the SVG markup
    int level = 0;      // heading level
    std::string title;  // SVG title for Markdown
    std::vector<std::string> header;
    std::vector<std::vector<std::string>> rows;
  };
  std::string title_;
  std::vector<Block> blocks_;
};

}  // namespace foxhunt
