// HtmlReport: the self-contained HTML and Markdown report documents (html_report.h).
#include "foxhunt/report/html_report.h"

#include <utility>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/report/escape.h"

namespace foxhunt {

namespace {

constexpr const char* kHtmlReportComponent = "report";

std::string html_unescape(const std::string& s) {
  static const std::pair<const char*, char> entities[] = {
      {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&#39;", '\''}};
  std::string out;
  for (size_t i = 0; i < s.size();) {
    bool matched = false;
    if (s[i] == '&') {
      for (const auto& [name, ch] : entities) {
        const size_t len = std::char_traits<char>::length(name);
        if (s.compare(i, len, name) == 0) {
          out += ch;
          i += len;
          matched = true;
          break;
        }
      }
    }
    if (!matched) out += s[i++];
  }
  return out;
}

/// A Markdown table cell: pipes escaped, line breaks folded (a pipe table row is one line).
std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') {
      out += "\\|";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

constexpr const char* kStyle = R"(
body { margin: 0; background: #ffffff; color: #1d232a;
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
main { max-width: 980px; margin: 0 auto; padding: 24px 28px 48px; }
h1 { font-size: 26px; margin: 0 0 16px; padding-bottom: 8px; border-bottom: 2px solid #e3e7ec; }
h2 { font-size: 20px; margin: 28px 0 10px; }
h3, h4, h5, h6 { font-size: 16px; margin: 20px 0 8px; }
p { margin: 8px 0; }
table { border-collapse: collapse; margin: 12px 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d8dee4; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #f3f5f7; font-weight: 600; }
tbody tr:nth-child(even) td { background: #fafbfc; }
pre { background: #f6f8fa; border: 1px solid #e3e7ec; border-radius: 4px; padding: 10px 12px;
  overflow-x: auto; font: 13px/1.45 ui-monospace, Menlo, Consolas, monospace; }
figure.plot { margin: 16px 0; }
figure.plot svg { display: block; max-width: 100%; height: auto; border: 1px solid #eef0f3; }
)";

}  // namespace

HtmlReport::HtmlReport(std::string title) : title_(std::move(title)) {}

void HtmlReport::heading(std::string text, int level) {
  FOXHUNT_CHECK(level >= 1 && level <= 6, kHtmlReportComponent, "report '", title_, "': heading '",
                text, "': expected a level in [1, 6], got ", level);
  Block b{Kind::kHeading, std::move(text)};
  b.level = level;
  blocks_.push_back(std::move(b));
}

void HtmlReport::paragraph(std::string text) {
  blocks_.push_back(Block{Kind::kParagraph, std::move(text)});
}

void HtmlReport::table(const std::vector<std::string>& header,
                       const std::vector<std::vector<std::string>>& rows) {
  FOXHUNT_CHECK(!header.empty(), kHtmlReportComponent, "report '", title_,
                "': table: expected at least one header cell, got none");
  for (size_t r = 0; r < rows.size(); ++r) {
    FOXHUNT_CHECK(rows[r].size() == header.size(), kHtmlReportComponent, "report '", title_,
                  "': table: ", "expected ", header.size(), " cells per row (the header's), got ",
                  rows[r].size(), " in row ", r);
  }
  Block b{Kind::kTable, ""};
  b.header = header;
  b.rows = rows;
  blocks_.push_back(std::move(b));
}

void HtmlReport::svg(std::string svg_markup, std::string title) {
  if (title.empty()) {
    const size_t open = svg_markup.find("<title>");
    const size_t close = open == std::string::npos ? open : svg_markup.find("</title>", open);
    if (close != std::string::npos) {
      title = html_unescape(svg_markup.substr(open + 7, close - open - 7));
    }
  }
  Block b{Kind::kSvg, std::move(svg_markup)};
  b.title = title.empty() ? "untitled" : std::move(title);
  blocks_.push_back(std::move(b));
}

void HtmlReport::preformatted(std::string text) {
  blocks_.push_back(Block{Kind::kPreformatted, std::move(text)});
}

std::string HtmlReport::html() const {
  std::ostringstream s;
  s << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<title>" << html_escape(title_) << "</title>\n<style>" << kStyle << "</style>\n"
    << "</head>\n<body>\n<main>\n<h1>" << html_escape(title_) << "</h1>\n";
  for (const Block& b : blocks_) {
    switch (b.kind) {
      case Kind::kHeading:
        s << "<h" << b.level << ">" << html_escape(b.text) << "</h" << b.level << ">\n";
        break;
      case Kind::kParagraph:
        s << "<p>" << html_escape(b.text) << "</p>\n";
        break;
      case Kind::kTable:
        s << "<table>\n<thead><tr>";
        for (const auto& h : b.header) s << "<th>" << html_escape(h) << "</th>";
        s << "</tr></thead>\n<tbody>\n";
        for (const auto& row : b.rows) {
          s << "<tr>";
          for (const auto& c : row) s << "<td>" << html_escape(c) << "</td>";
          s << "</tr>\n";
        }
        s << "</tbody>\n</table>\n";
        break;
      case Kind::kSvg:
        s << "<figure class=\"plot\">\n" << b.text << "</figure>\n";
        break;
      case Kind::kPreformatted:
        s << "<pre>" << html_escape(b.text) << "</pre>\n";
        break;
    }
  }
  s << "</main>\n</body>\n</html>\n";
  return s.str();
}

std::string HtmlReport::markdown() const {
  std::ostringstream s;
  s << "# " << title_ << "\n";
  for (const Block& b : blocks_) {
    s << "\n";
    switch (b.kind) {
      case Kind::kHeading:
        s << std::string(static_cast<size_t>(b.level), '#') << " " << b.text << "\n";
        break;
      case Kind::kParagraph:
        s << b.text << "\n";
        break;
      case Kind::kTable:
        s << "|";
        for (const auto& h : b.header) s << " " << md_cell(h) << " |";
        s << "\n|";
        for (size_t i = 0; i < b.header.size(); ++i) s << " --- |";
        s << "\n";
        for (const auto& row : b.rows) {
          s << "|";
          for (const auto& c : row) s << " " << md_cell(c) << " |";
          s << "\n";
        }
        break;
      case Kind::kSvg:
        s << "(plot: " << b.title << ")\n";
        break;
      case Kind::kPreformatted: {
        // A fence longer than any backtick run inside, so the text cannot close it early.
        size_t longest = 0, run = 0;
        for (char c : b.text) {
          run = c == '`' ? run + 1 : 0;
          longest = std::max(longest, run);
        }
        const std::string fence(std::max<size_t>(3, longest + 1), '`');
        s << fence << "\n"
          << b.text << (b.text.empty() || b.text.back() != '\n' ? "\n" : "") << fence << "\n";
        break;
      }
    }
  }
  return s.str();
}

void HtmlReport::write(const std::string& path) const {
  write_file_atomic(path, html());
}

void HtmlReport::write_markdown(const std::string& path) const {
  write_file_atomic(path, markdown());
}

}  // namespace foxhunt
