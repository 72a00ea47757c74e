#include "foxhunt/core/fp_env.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#define FOXHUNT_HAVE_MXCSR 1
#endif

namespace foxhunt {

namespace {
// MXCSR bit 15: flush-to-zero (denormal results become 0); bit 6: denormals-are-zero (denormal
// operands read as 0).
constexpr unsigned kFlushBits = (1u << 15) | (1u << 6);
}  // namespace

FlushDenormalsGuard::FlushDenormalsGuard() {
#ifdef FOXHUNT_HAVE_MXCSR
  saved_ = _mm_getcsr();
  _mm_setcsr(saved_ | kFlushBits);
#endif
}

FlushDenormalsGuard::~FlushDenormalsGuard() {
#ifdef FOXHUNT_HAVE_MXCSR
  _mm_setcsr((_mm_getcsr() & ~kFlushBits) | (saved_ & kFlushBits));
#endif
}

bool FlushDenormalsGuard::active() {
#ifdef FOXHUNT_HAVE_MXCSR
  return (_mm_getcsr() & kFlushBits) == kFlushBits;
#else
  return false;
#endif
}

}  // namespace foxhunt
