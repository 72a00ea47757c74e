#pragma once
/// \file strings.h
/// Small string helpers for messages and listings. Torch-free.
#include <string>
#include <vector>

namespace foxhunt {

/// `items` joined by `separator`: join({"a", "b"}, ", ") == "a, b".
inline std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

}  // namespace foxhunt
