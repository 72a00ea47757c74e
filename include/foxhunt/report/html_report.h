#pragma once
/// \file html_report.h
/// A small self-contained report builder: an HTML document with no external resources and no
/// JavaScript (inline style, inline SVG from report/chart.h), plus the same content as Markdown.
/// Torch-free.

#include <string>
#include <utility>
#include <vector>

#include "foxhunt/report/escape.h"

namespace foxhunt {

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
