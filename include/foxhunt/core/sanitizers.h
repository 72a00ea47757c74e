#pragma once
/// \file sanitizers.h
/// Whether this build runs under a sanitizer, for the few checks whose bounds a sanitizer's own
/// bookkeeping moves (never to skip a check): AddressSanitizer keeps freed blocks in a
/// quarantine (256 MiB by default) before the process may reuse them, so resident memory grows
/// by up to that much where the allocator's live bytes do not.

#include <cstdint>

namespace foxhunt {

#if defined(__has_feature)
#define FOXHUNT_DETAIL_HAS_FEATURE(x) __has_feature(x)  // clang
#else
#define FOXHUNT_DETAIL_HAS_FEATURE(x) 0  // GCC says it with __SANITIZE_*__ instead
#endif

/// True in an AddressSanitizer build.
#if defined(__SANITIZE_ADDRESS__) || FOXHUNT_DETAIL_HAS_FEATURE(address_sanitizer)
inline constexpr bool kAddressSanitizer = true;
#else
inline constexpr bool kAddressSanitizer = false;
#endif

/// True in a ThreadSanitizer build.
#if defined(__SANITIZE_THREAD__) || FOXHUNT_DETAIL_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kThreadSanitizer = true;
#else
inline constexpr bool kThreadSanitizer = false;
#endif

/// True when a sanitizer's allocator replaces glibc's malloc (ASan, TSan): glibc's mallinfo2()
/// then sees none of the program's heap, so a cross-check against it has nothing to compare.
inline constexpr bool kSanitizerAllocator = kAddressSanitizer || kThreadSanitizer;

/// Resident bytes a sanitizer may hold beyond the program's own (ASan's default quarantine plus
/// its shadow pages for it); 0 without one.
inline constexpr std::uint64_t kSanitizerResidentSlackBytes =
    kAddressSanitizer ? std::uint64_t{320} * 1024 * 1024 : 0;

}  // namespace foxhunt
