#pragma once
/// \file units.h
/// Human-readable units shared by reports (memory, models, profiler). Torch-free.

#include <string>

namespace foxhunt {

/// Formats a byte count with binary units: "512 B", "1.50 KiB", "3.00 GiB" (2 decimals above
/// bytes; negative values keep their sign, for deltas).
std::string human_bytes(double bytes);

}  // namespace foxhunt
