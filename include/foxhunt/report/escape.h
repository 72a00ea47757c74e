#pragma once
/// \file escape.h
/// Escaping of text for HTML and XML (the report pages and their inline SVG). Torch-free.

#include <string>

namespace foxhunt {

/// Escapes & < > " ' for HTML and XML text and attribute values.
std::string html_escape(const std::string& text);

}  // namespace foxhunt
