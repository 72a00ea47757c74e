#pragma once
// The InputError checks shared by the test suite (test_util.h includes them). Torch-free, for the
// torch-free tests too.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "foxhunt/core/error.h"

namespace foxhunt::testing {

/// Runs `f` and returns the InputError message ("" when nothing was thrown).
template <typename Fn>
std::string input_error(Fn&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

/// Runs `f` and expects an InputError from `component` ("" = any) whose message contains every
/// one of `parts`.
template <typename F>
void expect_input_error(F&& f, const std::string& component,
                        const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an InputError from [" << component << "]";
  } catch (const InputError& e) {
    if (!component.empty()) {
      EXPECT_EQ(e.component(), component) << e.what();
    }
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "expected '" << p << "' in: " << e.what();
  }
}

}  // namespace foxhunt::testing
