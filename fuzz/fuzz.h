#pragma once
// Shared by the fuzz targets. Each target is one libFuzzer entry point,
// LLVMFuzzerTestOneInput, over one reader of outside bytes. Its contract: any input either
// parses or is refused with foxhunt::InputError (a message naming the input); anything else
// (a crash, a sanitizer report, another exception, a hang) is a bug. The same files build into
// the normal build with replay_main.cpp, where ctest replays the seed corpora (label "fuzz").
#include <cstddef>
#include <cstdint>
#include <string>

#include "foxhunt/core/error.h"

namespace foxhunt::fuzz {

// The input as text (the readers take std::string / string_view).
inline std::string text_of(const uint8_t* data, size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// Runs `parse`; an InputError is a valid answer to bad input, every other exception escapes
// (libFuzzer reports it as a crash; the replay test fails).
template <typename F>
void expect_parse_or_input_error(F&& parse) {
  try {
    parse();
  } catch (const InputError&) {
  }
}

}  // namespace foxhunt::fuzz
