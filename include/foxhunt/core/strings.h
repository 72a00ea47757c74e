#pragma once
/// \file strings.h
/// Small string helpers for messages and listings. Torch-free.
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

namespace foxhunt {

/// `items` joined by `separator`: join({"a", "b"}, ", ") == "a, b".
inline std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

/// printf-style formatting into a string as long as it needs (no fixed buffer to truncate):
/// strprintf("%.1f%%", 12.34) == "12.3%".
__attribute__((format(printf, 1, 2))) inline std::string strprintf(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list measure;
  va_copy(measure, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, measure);
  va_end(measure);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  va_end(args);
  return out;
}

}  // namespace foxhunt
