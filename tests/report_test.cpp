// Tests of foxhunt/report/ (chart.h, html_report.h): escaping, ticks, SVG charts, the
// HTML/Markdown documents, and a real render in headless Chromium checked by
// tests/python/check_screenshot.py.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/report/chart.h"
#include "foxhunt/report/html_report.h"
#include "test_util.h"

#ifndef FOXHUNT_SOURCE_DIR
#error "FOXHUNT_SOURCE_DIR must name the repository root (the build defines it)"
#endif

namespace foxhunt {
namespace {

namespace fs = std::filesystem;
using foxhunt::testing::kNaN;
constexpr double kInf = std::numeric_limits<double>::infinity();

/// A fresh directory under the system temp dir, removed with everything in it at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() / ("foxhunt_report_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter.fetch_add(1)));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

size_t count(const std::string& haystack, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos;
       pos = haystack.find(needle, pos + needle.size())) {
    ++n;
  }
  return n;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

/// "" when every element opened in `markup` is closed in order (void HTML elements and <!...>
/// declarations aside), else a description of the first problem. Attribute values never hold a
/// raw '>' because the builder escapes them.
std::string tag_balance_error(const std::string& markup) {
  static const std::vector<std::string> kVoid = {"meta", "br", "hr", "img", "link", "input"};
  std::vector<std::string> open;
  for (size_t pos = markup.find('<'); pos != std::string::npos; pos = markup.find('<', pos + 1)) {
    const size_t end = markup.find('>', pos);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(pos);
    const std::string tag = markup.substr(pos + 1, end - pos - 1);
    if (tag.empty()) return "empty tag at " + std::to_string(pos);
    if (tag[0] == '!') continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) {
        return "</" + name + "> at " + std::to_string(pos) + " closes " +
               (open.empty() ? "nothing" : "<" + open.back() + ">");
      }
      open.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    if (tag.back() == '/' || std::find(kVoid.begin(), kVoid.end(), name) != kVoid.end()) continue;
    open.push_back(name);
  }
  return open.empty() ? "" : "<" + open.back() + "> is never closed";
}

/// Checks the invariants every chart must hold: one <svg> element, balanced tags, no NaN or
/// infinity printed, nothing fetched from the network.
void expect_valid_svg(const std::string& svg, const std::string& what) {
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << what;
  EXPECT_EQ(count(svg, "<svg"), 1u) << what;
  EXPECT_EQ(count(svg, "</svg>"), 1u) << what;
  EXPECT_EQ(tag_balance_error(svg), "") << what;
  const std::string l = lower(svg);
  EXPECT_EQ(l.find("nan"), std::string::npos) << what << "\n" << svg;
  EXPECT_EQ(l.find("inf"), std::string::npos) << what << "\n" << svg;
  EXPECT_EQ(count(svg, "http"), count(svg, "http://www.w3.org/2000/svg")) << what;
}

/// The point list of the `k`-th <polyline> in `svg`, as (x, y) pixel pairs.
std::vector<std::pair<double, double>> polyline_points(const std::string& svg, size_t k) {
  size_t pos = 0;
  for (size_t i = 0; i <= k; ++i) {
    pos = svg.find("<polyline", i == 0 ? 0 : pos + 1);
    if (pos == std::string::npos) return {};
  }
  const size_t start = svg.find("points=\"", pos) + 8;
  const size_t end = svg.find('"', start);
  std::vector<std::pair<double, double>> out;
  std::string list = svg.substr(start, end - start);
  for (size_t p = 0; p < list.size();) {
    size_t next = list.find(' ', p);
    if (next == std::string::npos) next = list.size();
    const std::string pair = list.substr(p, next - p);
    const size_t comma = pair.find(',');
    out.emplace_back(std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1)));
    p = next + 1;
  }
  return out;
}

template <typename F>
void expect_report_error(F&& f, const std::string& needle) {
  foxhunt::testing::expect_input_error(f, "", {needle});
}

Series make_series(std::string name, std::vector<double> x, std::vector<double> y) {
  Series s;
  s.name = std::move(name);
  s.x = std::move(x);
  s.y = std::move(y);
  return s;
}

/// A range 0..n-1 and f(i) over it.
template <typename F>
Series generated(std::string name, int n, F f) {
  Series s;
  s.name = std::move(name);
  for (int i = 0; i < n; ++i) {
    s.x.push_back(i);
    s.y.push_back(f(i));
  }
  return s;
}

/// Exit status of a shell command (-1 when it did not exit normally).
int run_shell(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  return rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

bool have_command(const std::string& name) {
  return run_shell("command -v " + name + " >/dev/null 2>&1") == 0;
}

bool have_chromium() {
  return fs::exists("/usr/bin/chromium") || have_command("chromium") ||
         have_command("chromium-browser") || have_command("google-chrome");
}

const std::string kSourceDir = FOXHUNT_SOURCE_DIR;

TEST(Report, HtmlEscape) {
  EXPECT_EQ(html_escape("<a href=\"x\">Tom & Jerry's</a>"),
            "&lt;a href=&quot;x&quot;&gt;Tom &amp; Jerry&#39;s&lt;/a&gt;");
  EXPECT_EQ(html_escape(""), "");
  EXPECT_EQ(html_escape("plain µs"), "plain µs");  // UTF-8 passes through
}

TEST(Report, NiceTicks) {
  // Rule: step = span / (target - 1) rounded to 1, 2 or 5 x 10^k; ticks cover the range.
  const std::vector<double> expected = {0, 20, 40, 60, 80, 100};
  const auto t = nice_ticks(0, 97);
  ASSERT_EQ(t.size(), expected.size());
  for (size_t i = 0; i < t.size(); ++i) EXPECT_NEAR(t[i], expected[i], 1e-9) << i;
  // [0, 1]: 0.25 rounds to 0.2; ticks are multiples (0.6 prints as 0.6, not 0.6000000000000001).
  const auto u = nice_ticks(0, 1);
  ASSERT_EQ(u.size(), 6u);
  EXPECT_NEAR(u[3], 0.6, 1e-12);
  // [-7, 13] -> step 5 -> -10 .. 15.
  const auto v = nice_ticks(-7, 13);
  EXPECT_NEAR(v.front(), -10, 1e-9);
  EXPECT_NEAR(v.back(), 15, 1e-9);
  EXPECT_NEAR(v[1] - v[0], 5, 1e-9);
  // Swapped ends, a zero-width range, non-finite ends.
  EXPECT_EQ(nice_ticks(97, 0), t);
  const auto w = nice_ticks(3, 3);
  ASSERT_GE(w.size(), 2u);
  EXPECT_LE(w.front(), 3.0);
  EXPECT_GE(w.back(), 3.0);
  EXPECT_TRUE(nice_ticks(kNaN, 1).empty());
  EXPECT_TRUE(nice_ticks(0, kInf).empty());
  // Byte-scale ranges stay a handful of ticks.
  const auto b = nice_ticks(0, 3.2e9);
  EXPECT_GE(b.size(), 4u);
  EXPECT_LE(b.size(), 8u);
}

TEST(Report, FormatValue) {
  EXPECT_EQ(format_value(1536, "B"), "1.5 KiB");
  EXPECT_EQ(format_value(1023, "B"), "1023 B");
  EXPECT_EQ(format_value(3.0 * 1024 * 1024, "B"), "3 MiB");
  EXPECT_EQ(format_value(12345, "us"), "12.3k us");
  EXPECT_EQ(format_value(250, "us"), "250 us");
  EXPECT_EQ(format_value(0.000123), "0.000123");
  EXPECT_EQ(format_value(0), "0");
  EXPECT_EQ(format_value(-2.5), "-2.5");
  EXPECT_EQ(format_value(kNaN, "B"), "n/a");
}

TEST(Report, LineChartIsSelfContainedSvg) {
  ChartOptions o;
  o.title = "Latency <p99>";
  o.x_label = "request";
  o.y_label = "latency";
  o.y_unit = "us";
  std::vector<Series> s = {
      generated("p50", 100, [](int i) { return 100.0 + i; }),
      generated("p99", 100, [](int i) { return 300.0 + 2.0 * i; }),
      make_series("empty", {}, {}),
  };
  s[1].dashed = true;
  s[1].color = "teal";
  const std::string svg = line_chart_svg(s, o);
  expect_valid_svg(svg, "line chart");
  EXPECT_EQ(count(svg, "<polyline"), 2u);  // one per non-empty series
  EXPECT_NE(svg.find("<title>Latency &lt;p99&gt;</title>"), std::string::npos);
  EXPECT_NE(svg.find(">p50</text>"), std::string::npos);
  EXPECT_NE(svg.find(">empty (no data)</text>"), std::string::npos);
  EXPECT_NE(svg.find("stroke=\"teal\""), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find(" us</text>"), std::string::npos);  // y tick labels carry the unit
}

TEST(Report, ByteAxisUsesBinaryUnits) {
  ChartOptions o;
  o.title = "live bytes";
  o.y_unit = "B";
  const std::string svg =
      line_chart_svg({generated("live", 50, [](int i) { return 1048576.0 + 4096.0 * i; })}, o);
  expect_valid_svg(svg, "byte axis");
  EXPECT_NE(svg.find(" MiB</text>"), std::string::npos) << svg;
  // Zero carries the unit but no prefix: "0 B", and "0" rather than "0k" on a scaled x axis.
  o.y_from_zero = true;
  const std::string zero =
      line_chart_svg({generated("live", 20001, [](int i) { return 2048.0 * i; })}, o);
  EXPECT_NE(zero.find(">0 B</text>"), std::string::npos) << zero;
  EXPECT_NE(zero.find(">0</text>"), std::string::npos);
  EXPECT_NE(zero.find(">10k</text>"), std::string::npos);
  EXPECT_EQ(zero.find(">0k</text>"), std::string::npos);
}

TEST(Report, DegenerateSeriesGiveValidSvg) {
  ChartOptions o;
  o.title = "degenerate";
  const std::vector<std::pair<std::string, std::vector<Series>>> cases = {
      {"no series", {}},
      {"empty series", {make_series("a", {}, {})}},
      {"all NaN", {make_series("a", {1, 2, 3}, {kNaN, kNaN, kNaN})}},
      {"some NaN", {make_series("a", {1, 2, kNaN, 4}, {1, kNaN, 3, 4})}},
      {"infinities", {make_series("a", {1, 2, 3, kInf}, {kInf, 2, -kInf, 1})}},
      {"single point", {make_series("a", {5}, {7})}},
      {"constant y", {make_series("a", {1, 2, 3}, {4, 4, 4})}},
      {"constant zero", {make_series("a", {1, 2, 3}, {0, 0, 0})}},
      {"constant x", {make_series("a", {2, 2, 2}, {1, 2, 3})}},
      {"huge values", {make_series("a", {-1e308, 1e308}, {-1.7e308, 1.7e308})}},
      {"tiny span", {make_series("a", {0, 1}, {1e15, 1e15 + 0.125})}},
  };
  for (const auto& [what, series] : cases) {
    const std::string svg = line_chart_svg(series, o);
    expect_valid_svg(svg, what);
  }
  const std::string none = line_chart_svg({}, o);
  EXPECT_NE(none.find("no data"), std::string::npos);
  EXPECT_EQ(count(none, "<polyline"), 0u);
  const std::string one = line_chart_svg({make_series("a", {5}, {7})}, o);
  EXPECT_EQ(count(one, "<polyline"), 1u);
  EXPECT_EQ(count(one, "<circle"), 1u);  // a lone point is drawn as a dot
  expect_report_error(
      [&] {
        line_chart_svg({make_series("bad", {1, 2}, {1})}, o);
      },
      "expected x and y of one size, got 2 x and 1 y");
  ChartOptions tiny = o;
  tiny.width = 10;
  expect_report_error([&] { line_chart_svg({}, tiny); }, "expected a width in [200, 8000] px");
}

TEST(Report, DownsamplingKeepsTheSpike) {
  const int n = 200000;
  const int spike = 123457;
  const int dip = 77777;
  Series s = generated("noisy", n, [](int i) { return std::sin(i * 0.01); });
  s.y[spike] = 1000.0;
  s.y[dip] = -500.0;
  const auto idx = downsample_min_max(s.x, s.y, 500);
  EXPECT_LE(idx.size(), 1000u);
  EXPECT_NE(std::find(idx.begin(), idx.end(), static_cast<size_t>(spike)), idx.end());
  EXPECT_NE(std::find(idx.begin(), idx.end(), static_cast<size_t>(dip)), idx.end());
  EXPECT_TRUE(std::is_sorted(idx.begin(), idx.end()));
  // Few points come back as they are; NaN points are dropped.
  EXPECT_EQ(downsample_min_max({1, 2, 3}, {1, kNaN, 3}, 10), (std::vector<size_t>{0, 2}));
  expect_report_error([] { downsample_min_max({1}, {1}, 0); }, "expected buckets > 0");

  ChartOptions o;
  o.title = "spike";
  const std::string svg = line_chart_svg({s}, o);
  expect_valid_svg(svg, "spike chart");
  const auto pts = polyline_points(svg, 0);
  EXPECT_LE(pts.size(), 2000u);
  EXPECT_GT(pts.size(), 100u);
  // The spike is the highest point drawn (smallest pixel y), far above the +-1 band.
  double top = 1e9, median_band = 0.0;
  for (const auto& p : pts) top = std::min(top, p.second);
  std::vector<double> ys;
  for (const auto& p : pts) ys.push_back(p.second);
  std::nth_element(ys.begin(), ys.begin() + ys.size() / 2, ys.end());
  median_band = ys[ys.size() / 2];
  EXPECT_LT(top, median_band - 100.0);
}

TEST(Report, BandChart) {
  std::vector<double> x, lo, hi;
  for (int i = 0; i < 48; ++i) {
    x.push_back(i);
    lo.push_back(100.0 - 0.5 * i);
    hi.push_back(100.0 + 0.5 * i);
  }
  ChartOptions o;
  o.title = "forecast";
  Series median = generated("P50", 48, [](int) { return 100.0; });
  Series actual = generated("actual", 48, [](int i) { return 100.0 + std::sin(i * 0.3) * 5.0; });
  actual.dashed = true;
  const std::string svg = band_chart_svg(x, lo, hi, {median, actual}, o);
  expect_valid_svg(svg, "band chart");
  EXPECT_EQ(count(svg, "<polygon"), 1u);
  EXPECT_EQ(count(svg, "<polyline"), 2u);
  EXPECT_NE(svg.find(">P10–P90</text>"), std::string::npos);
  // A band with NaN and nothing else still renders.
  expect_valid_svg(band_chart_svg({1, 2}, {kNaN, kNaN}, {kNaN, kNaN}, {}, o), "empty band");
  // Long bands are reduced like lines.
  std::vector<double> bx(50000), bl(50000), bh(50000);
  for (int i = 0; i < 50000; ++i) {
    bx[i] = i;
    bl[i] = -1.0 - (i == 30000 ? 50.0 : 0.0);
    bh[i] = 1.0;
  }
  const std::string big = band_chart_svg(bx, bl, bh, {}, o);
  expect_valid_svg(big, "long band");
  EXPECT_LT(big.size(), 100000u);
  expect_report_error(
      [&] {
        band_chart_svg({1, 2}, {1}, {1, 2}, {}, o);
      },
      "expected x, lower and upper of one size, got 2, 1 and 2");
}

TEST(Report, HistogramChart) {
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back(std::exp(std::sin(i * 0.7) * 3.0));
  ChartOptions o;
  o.title = "latency histogram";
  o.x_unit = "us";
  const Histogram h = histogram(v, 30);
  const std::string svg = histogram_svg(h, o);
  expect_valid_svg(svg, "histogram");
  const size_t nonzero = std::count_if(h.counts.begin(), h.counts.end(), [](auto c) { return c; });
  EXPECT_EQ(count(svg, "<rect") - 1, nonzero);  // minus the background
  const std::string log_svg = histogram_svg(histogram(v, 30, true), o);
  expect_valid_svg(log_svg, "log histogram");
  // More bins than pixels: one bar per column at most.
  const std::string dense = histogram_svg(histogram(v, 5000), o);
  expect_valid_svg(dense, "dense histogram");
  EXPECT_LT(count(dense, "<rect"), 800u);
  expect_valid_svg(histogram_svg(histogram({4, 4, 4}, 3), o), "constant histogram");
  const std::string empty = histogram_svg(Histogram{}, o);
  expect_valid_svg(empty, "empty histogram");
  EXPECT_NE(empty.find("no data"), std::string::npos);
  Histogram bad;
  bad.edges = {0, 1};
  bad.counts = {1, 2};
  expect_report_error([&] { histogram_svg(bad, o); }, "expected counts.size() + 1 edges, got 2");
  bad.edges = {0, 2, 1};
  expect_report_error([&] { histogram_svg(bad, o); }, "expected increasing edges");
}

HtmlReport sample_report() {
  HtmlReport r("Bench <report> & co");
  r.heading("Latency");
  r.paragraph("p99 <= 250 us & \"stable\"; <script>alert(1)</script>");
  r.table({"metric", "value"}, {{"p50", "120 us"}, {"a|b", "<b>"}});
  ChartOptions o;
  o.title = "Latency & load";
  o.y_unit = "us";
  r.svg(line_chart_svg({generated("p99", 200, [](int i) { return 200.0 + (i % 17); })}, o));
  ChartOptions ho;
  ho.title = "Distribution";
  std::vector<double> v;
  for (int i = 0; i < 500; ++i) v.push_back(100.0 + (i * 37) % 91);
  r.svg(histogram_svg(histogram(v, 20), ho));
  r.heading("Details", 3);
  r.preformatted("raw ``` fence\n<tag>");
  return r;
}

TEST(Report, HtmlDocumentIsSelfContained) {
  const std::string html = sample_report().html();
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
  EXPECT_NE(html.find("<style>"), std::string::npos);
  EXPECT_NE(html.find("<title>Bench &lt;report&gt; &amp; co</title>"), std::string::npos);
  EXPECT_EQ(tag_balance_error(html), "");
  EXPECT_EQ(count(html, "<svg"), 2u);
  EXPECT_EQ(count(html, "</svg>"), 2u);
  EXPECT_EQ(count(html, "<polyline"), 1u);
  // Nothing from the network, no scripts: the only URL is the SVG namespace.
  EXPECT_EQ(count(html, "http://") + count(html, "https://"),
            count(html, "http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
  EXPECT_NE(html.find("<td>a|b</td><td>&lt;b&gt;</td>"), std::string::npos);
  EXPECT_NE(html.find("<h3>Details</h3>"), std::string::npos);
  EXPECT_NE(html.find("<pre>raw ``` fence\n&lt;tag&gt;</pre>"), std::string::npos);
}

TEST(Report, MarkdownMirrorsTheContent) {
  const std::string md = sample_report().markdown();
  EXPECT_EQ(md.rfind("# Bench <report> & co\n", 0), 0u);
  EXPECT_NE(md.find("\n## Latency\n"), std::string::npos);
  EXPECT_NE(md.find("| metric | value |\n| --- | --- |\n| p50 | 120 us |\n| a\\|b | <b> |\n"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("\n(plot: Latency & load)\n"), std::string::npos) << md;
  EXPECT_NE(md.find("\n(plot: Distribution)\n"), std::string::npos);
  EXPECT_NE(md.find("\n### Details\n"), std::string::npos);
  EXPECT_NE(md.find("\n````\nraw ``` fence\n<tag>\n````\n"), std::string::npos) << md;
  EXPECT_EQ(md.find("<svg"), std::string::npos);
  HtmlReport r("t");
  r.svg("<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>", "named");
  r.svg("<svg xmlns=\"http://www.w3.org/2000/svg\"></svg>");
  EXPECT_NE(r.markdown().find("(plot: named)\n\n(plot: untitled)"), std::string::npos);
}

TEST(Report, RejectsBadStructure) {
  HtmlReport r("t");
  expect_report_error([&] { r.heading("x", 0); }, "expected a level in [1, 6], got 0");
  expect_report_error([&] { r.heading("x", 7); }, "got 7");
  expect_report_error([&] { r.table({}, {}); }, "expected at least one header cell");
  expect_report_error(
      [&] {
        r.table({"a", "b"}, {{"1", "2"}, {"3"}});
      },
      "expected 2 cells per row (the header's), got 1 in row 1");
}

TEST(Report, WriteIsAtomic) {
  ScratchDir dir;
  const HtmlReport r = sample_report();
  const std::string path = dir.file("report.html");
  r.write(path);
  EXPECT_EQ(read_file(path), r.html());
  r.write_markdown(dir.file("report.md"));
  EXPECT_EQ(read_file(dir.file("report.md")), r.markdown());
  // A crash between writing and renaming leaves the previous file whole and no temp file.
  HtmlReport other("other");
  testing_hooks::fail_before_rename = true;
  EXPECT_ANY_THROW(other.write(path));
  testing_hooks::fail_before_rename = false;
  EXPECT_EQ(read_file(path), r.html());
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
  }
  EXPECT_EQ(files, 2u);
}

// ---- the screenshot checker and the headless render ----------------------------------------

void put_be32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s += static_cast<char>((v >> shift) & 0xFF);
}

std::string png_chunk(const std::string& type, const std::string& body) {
  std::string out;
  put_be32(out, static_cast<uint32_t>(body.size()));
  const std::string typed = type + body;
  out += typed;
  put_be32(out, crc32(typed.data(), typed.size()));
  return out;
}

/// zlib stream of stored (uncompressed) deflate blocks: valid input for zlib.decompress.
std::string zlib_stored(const std::string& data) {
  std::string out = "\x78\x01";
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(65535, data.size() - pos);
    const bool last = pos + n == data.size();
    out += static_cast<char>(last ? 1 : 0);
    out += static_cast<char>(n & 0xFF);
    out += static_cast<char>(n >> 8);
    out += static_cast<char>(~n & 0xFF);
    out += static_cast<char>((~n >> 8) & 0xFF);
    out.append(data, pos, n);
    pos += n;
  } while (pos < data.size());
  uint32_t a = 1, b = 0;
  for (unsigned char c : data) {
    a = (a + c) % 65521;
    b = (b + a) % 65521;
  }
  put_be32(out, (b << 16) | a);
  return out;
}

/// An 8-bit PNG of `pixels` (rows of width * channels bytes) whose scanlines cycle through all
/// five filter types, so the checker's decoder is exercised on each.
std::string encode_png(int width, int height, int channels,
                       const std::vector<std::vector<uint8_t>>& pixels) {
  const size_t stride = static_cast<size_t>(width * channels);
  std::string raw;
  const std::vector<uint8_t> zero(stride, 0);
  for (int y = 0; y < height; ++y) {
    const auto& row = pixels[y];
    const auto& up = y > 0 ? pixels[y - 1] : zero;
    const int filter = y % 5;
    raw += static_cast<char>(filter);
    for (size_t i = 0; i < stride; ++i) {
      const int a = i >= static_cast<size_t>(channels) ? row[i - channels] : 0;
      const int b = up[i];
      const int c = i >= static_cast<size_t>(channels) ? up[i - channels] : 0;
      int pred = 0;
      if (filter == 1) pred = a;
      if (filter == 2) pred = b;
      if (filter == 3) pred = (a + b) / 2;
      if (filter == 4) {
        const int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
        pred = pa <= pb && pa <= pc ? a : (pb <= pc ? b : c);
      }
      raw += static_cast<char>((row[i] - pred) & 0xFF);
    }
  }
  std::string ihdr;
  put_be32(ihdr, static_cast<uint32_t>(width));
  put_be32(ihdr, static_cast<uint32_t>(height));
  ihdr += static_cast<char>(8);
  ihdr += static_cast<char>(channels == 3 ? 2 : 6);
  ihdr += std::string(3, '\0');
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) +
         png_chunk("IDAT", zlib_stored(raw)) + png_chunk("IEND", "");
}

/// 40x30 image: the top-left 20x15 quarter in varied dark colours (alpha `alpha` there when
/// RGBA), the rest white, with some near-white (250) pixels that must count as white.
std::vector<std::vector<uint8_t>> quarter_image(int channels, uint8_t alpha) {
  std::vector<std::vector<uint8_t>> rows;
  for (int y = 0; y < 30; ++y) {
    std::vector<uint8_t> row;
    for (int x = 0; x < 40; ++x) {
      const bool dark = x < 20 && y < 15;
      const uint8_t near_white = (x + y) % 3 == 0 ? 250 : 255;
      row.push_back(dark ? static_cast<uint8_t>(x * 9) : near_white);
      row.push_back(dark ? static_cast<uint8_t>(y * 13) : 255);
      row.push_back(dark ? static_cast<uint8_t>(100 + x) : near_white);
      if (channels == 4) row.push_back(dark ? alpha : 255);
    }
    rows.push_back(row);
  }
  return rows;
}

struct CheckResult {
  int exit_code = -1;
  nlohmann::json json;
};

CheckResult run_checker(const std::string& png, const ScratchDir& dir) {
  const std::string out = dir.file("check.json");
  CheckResult r;
  r.exit_code = run_shell("python3 " + kSourceDir + "/tests/python/check_screenshot.py '" + png +
                          "' > '" + out + "'");
  r.json = nlohmann::json::parse(read_file(out), nullptr, false);
  return r;
}

TEST(Report, ScreenshotCheckerDecodesEveryFilter) {
  if (!have_command("python3")) GTEST_SKIP() << "python3 not found";
  ScratchDir dir;
  const std::string rgb = dir.file("rgb.png");
  write_file_atomic(rgb, encode_png(40, 30, 3, quarter_image(3, 255)));
  const CheckResult a = run_checker(rgb, dir);
  EXPECT_EQ(a.exit_code, 0) << a.json.dump();
  EXPECT_EQ(a.json.value("non_white_pixels", -1), 300);  // exactly the dark quarter
  EXPECT_DOUBLE_EQ(a.json.value("non_white_fraction", -1.0), 0.25);

  const std::string rgba = dir.file("rgba.png");
  write_file_atomic(rgba, encode_png(40, 30, 4, quarter_image(4, 255)));
  EXPECT_EQ(run_checker(rgba, dir).json.value("non_white_pixels", -1), 300);

  // Transparent dark pixels composite to white: a blank page.
  const std::string clear = dir.file("clear.png");
  write_file_atomic(clear, encode_png(40, 30, 4, quarter_image(4, 0)));
  const CheckResult c = run_checker(clear, dir);
  EXPECT_EQ(c.exit_code, 1) << c.json.dump();
  EXPECT_EQ(c.json.value("non_white_pixels", -1), 0);

  std::vector<std::vector<uint8_t>> white(30, std::vector<uint8_t>(120, 255));
  const std::string blank = dir.file("blank.png");
  write_file_atomic(blank, encode_png(40, 30, 3, white));
  const CheckResult w = run_checker(blank, dir);
  EXPECT_EQ(w.exit_code, 1) << w.json.dump();
  EXPECT_EQ(w.json.value("ok", true), false);

  write_file_atomic(dir.file("junk.png"), "not a png");
  EXPECT_EQ(run_checker(dir.file("junk.png"), dir).exit_code, 2);
}

/// Runs scripts/render-report.sh on `html` and returns its exit code.
int render(const std::string& html, const std::string& png, const ScratchDir& dir) {
  const auto start = std::chrono::steady_clock::now();
  const int rc =
      run_shell(kSourceDir + "/scripts/render-report.sh '" + html + "' '" + png + "' > '" +
                dir.file("render.json") + "' 2> '" + dir.file("render.log") + "'");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[render] %s -> exit %d in %.2f s: %s\n", html.c_str(), rc, s,
              read_file(dir.file("render.json")).c_str());
  return rc;
}

TEST(Report, RendersInHeadlessChromium) {
  if (!have_chromium()) GTEST_SKIP() << "chromium not found (/usr/bin/chromium or on PATH)";
  if (!have_command("python3")) GTEST_SKIP() << "python3 not found";
  ScratchDir dir;
  const std::string html = dir.file("report.html");
  sample_report().write(html);
  const std::string png = dir.file("report.png");
  const int rc = render(html, png, dir);
  EXPECT_EQ(rc, 0) << read_file(dir.file("render.log"));
  EXPECT_TRUE(fs::exists(png));
  const auto j = nlohmann::json::parse(read_file(dir.file("render.json")), nullptr, false);
  EXPECT_GT(j.value("non_white_fraction", 0.0), 0.01) << j.dump();
}

TEST(Report, BlankPageFailsTheRenderCheck) {
  if (!have_chromium()) GTEST_SKIP() << "chromium not found (/usr/bin/chromium or on PATH)";
  if (!have_command("python3")) GTEST_SKIP() << "python3 not found";
  ScratchDir dir;
  const std::string html = dir.file("blank.html");
  write_file_atomic(html,
                    "<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body>"
                    "</body></html>\n");
  const int rc = render(html, dir.file("blank.png"), dir);
  EXPECT_EQ(rc, 1) << read_file(dir.file("render.log"));
  EXPECT_EQ(run_shell(kSourceDir + "/scripts/render-report.sh '" + dir.file("missing.html") +
                      "' '" + dir.file("x.png") + "' 2>/dev/null"),
            2);
}

}  // namespace
}  // namespace foxhunt
