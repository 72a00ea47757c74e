#pragma once
/// \file units.h
/// Byte units, in one place: constants, MiB parsing for flags, and the human-readable form
/// every report uses. Torch-free.

#include <cstdint>
#include <string>

namespace foxhunt {

inline constexpr std::uint64_t kKiB = 1024;         ///< bytes in a KiB
inline constexpr std::uint64_t kMiB = 1024 * kKiB;  ///< bytes in a MiB
inline constexpr std::uint64_t kGiB = 1024 * kMiB;  ///< bytes in a GiB

/// Bytes of `mib` MiB, rounded to the nearest byte. Throws InputError "[component] flag:
/// expected a positive (or non-negative) number, got X" for a non-finite, negative (or zero,
/// unless `allow_zero`) value, or one that rounds to 0 bytes.
std::uint64_t mib_to_bytes(double mib, const char* component, const char* flag,
                           bool allow_zero = false);

/// Formats a byte count with binary units: "512 B", "1.50 KiB", "3.00 GiB" (2 decimals above
/// bytes; negative values keep their sign, for deltas).
std::string human_bytes(double bytes);

}  // namespace foxhunt
