#pragma once
/// \file strings.h
/// Small string helpers for messages and listings. Torch-free.
#include <cstddef>
#include <string>
#include <vector>

namespace foxhunt {

/// `items` joined by `separator`: join({"a", "b"}, ", ") == "a, b".
inline std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : separator) + s;
  return out;
}

/// The name of enum value `value` in `names`, which lists the names of the values 0, 1, ... in
/// the enum's order; `fallback` for a value outside the list.
/// Example: `enum_name(BarKind::kTick, {"time", "tick"}, "unknown") == "tick"`.
template <typename Enum, std::size_t N>
constexpr const char* enum_name(Enum value, const char* const (&names)[N],
                                const char* fallback = "?") {
  const auto i = static_cast<std::size_t>(value);
  return i < N ? names[i] : fallback;
}

}  // namespace foxhunt
