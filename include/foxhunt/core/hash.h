#pragma once
/// \file hash.h
/// FNV-1a 64 (Fowler-Noll-Vo, variant 1a, 64-bit), the one non-cryptographic hash of the
/// project: symbol shards, bundle data fingerprints and cross-rank weight checksums. Stable
/// across machines, runs and builds (a byte-order-free function of the bytes). Torch-free.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace foxhunt {

/// FNV-1a 64 offset basis (the hash of no bytes).
inline constexpr std::uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;
/// FNV-1a 64 prime.
inline constexpr std::uint64_t kFnv1aPrime = 0x100000001b3ULL;

/// Continues the FNV-1a 64 hash `h` over `n` bytes at `data` (start from kFnv1aOffset; chain
/// calls to hash several buffers as one). Example: fnv1a_64("a") == 0xaf63dc4c8601ec8c.
constexpr std::uint64_t fnv1a_64(const unsigned char* data, std::size_t n,
                                 std::uint64_t h = kFnv1aOffset) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= kFnv1aPrime;
  }
  return h;
}

/// FNV-1a 64 of the bytes of `text`.
constexpr std::uint64_t fnv1a_64(std::string_view text, std::uint64_t h = kFnv1aOffset) {
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= kFnv1aPrime;
  }
  return h;
}

}  // namespace foxhunt
