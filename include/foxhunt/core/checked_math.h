#pragma once
/// \file checked_math.h
/// Overflow-checked int64 arithmetic for sizes computed from outside values (options JSON, file
/// headers): an overflow is an InputError naming the component and the operands, never UB.

#include <cstdint>

#include "foxhunt/core/error.h"

namespace foxhunt {

/// a * b; InputError("[component] <what> overflows int64 (a x b)") when it does not fit.
inline int64_t checked_mul(int64_t a, int64_t b, const char* component, const char* what) {
  int64_t r = 0;
  FOXHUNT_CHECK(!__builtin_mul_overflow(a, b, &r), component, what, " overflows int64 (", a, " x ",
                b, ")");
  return r;
}

/// a + b; InputError("[component] <what> overflows int64 (a + b)") when it does not fit.
inline int64_t checked_add(int64_t a, int64_t b, const char* component, const char* what) {
  int64_t r = 0;
  FOXHUNT_CHECK(!__builtin_add_overflow(a, b, &r), component, what, " overflows int64 (", a, " + ",
                b, ")");
  return r;
}

}  // namespace foxhunt
