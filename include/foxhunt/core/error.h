#pragma once
/// \file error.h
/// The project's error types, their exit codes, and the check macros:
/// | type | meaning | exit |
/// |---|---|---|
/// | InputError | bad input or usage (arguments, file contents, shapes) | 2 |
/// | CheckFailure | a run-time check did not hold (divergence, a failed verification) | 1 |
/// | OutOfMemoryError | an allocation refused under a cap, or the device is full | 1 |
/// | Error (other) | any other failure (I/O, environment, internal) | 1 |
/// Torch-free on purpose: every header may include it.

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace foxhunt {

/// Process exit codes used by the CLI: 0 ok, 1 a check failed, 2 bad input or usage.
enum ExitCode : int { kExitOk = 0, kExitCheckFailed = 1, kExitUsage = 2 };

/// The one error type of the project. `what()` reads "[component] message".
class Error : public std::runtime_error {
 public:
  /// Builds an error for `component` (e.g. "tft", "checkpoint") with a human message.
  Error(std::string component, const std::string& message)
      : std::runtime_error("[" + component + "] " + message),
        component_(std::move(component)),
        message_(message) {}

  /// The component prefix without brackets.
  const std::string& component() const noexcept { return component_; }
  /// The message without the component prefix.
  const std::string& message() const noexcept { return message_; }

 private:
  std::string component_;
  std::string message_;
};

/// Bad input from a user (file contents, arguments, shapes); the CLI maps it to exit code 2.
class InputError : public Error {
 public:
  using Error::Error;
};

/// A run-time check that did not hold although the input was valid: a diverging loss, a
/// verification or a budget that failed. The CLI maps it to exit code 1.
class CheckFailure : public Error {
 public:
  using Error::Error;
};

/// Allocation refused because it would exceed an enforced memory cap (or the device is full).
class OutOfMemoryError : public Error {
 public:
  /// `requested` bytes were asked for while `live` bytes were in use under a cap of `limit`.
  OutOfMemoryError(std::string component, const std::string& message, std::uint64_t requested,
                   std::uint64_t live, std::uint64_t limit)
      : Error(std::move(component), message), requested_(requested), live_(live), limit_(limit) {}

  std::uint64_t requested() const noexcept { return requested_; }
  std::uint64_t live() const noexcept { return live_; }
  std::uint64_t limit() const noexcept { return limit_; }

 private:
  std::uint64_t requested_;
  std::uint64_t live_;
  std::uint64_t limit_;
};

/// The CLI exit code of an exception: 2 for InputError, 1 for everything else (CheckFailure,
/// OutOfMemoryError, any other Error or std::exception).
int exit_code_for(const std::exception& e) noexcept;

namespace detail {
inline void append_all(std::ostringstream&) {}
template <typename T, typename... Rest>
void append_all(std::ostringstream& os, const T& first, const Rest&... rest) {
  os << first;
  append_all(os, rest...);
}
/// Concatenates any streamable values into one string.
template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  append_all(os, args...);
  return os.str();
}
[[noreturn]] void internal_assert_fail(const char* file, int line, const char* cond,
                                       const std::string& msg);
}  // namespace detail

}  // namespace foxhunt

/// Throws foxhunt::InputError("[component] ...") when `cond` is false. Message parts are streamed.
/// Example: FOXHUNT_CHECK(x.dim() == 3, "tft", "past input: expected rank 3, got ", x.dim());
#define FOXHUNT_CHECK(cond, component, ...)                                                     \
  do {                                                                                          \
    if (!(cond)) throw ::foxhunt::InputError((component), ::foxhunt::detail::cat(__VA_ARGS__)); \
  } while (0)

/// Throws foxhunt::CheckFailure("[component] ...") when a run-time check `cond` is false: the
/// input was valid but the result is not (e.g. a non-finite training loss). Exit code 1.
#define FOXHUNT_ENSURE(cond, component, ...)                                                      \
  do {                                                                                            \
    if (!(cond)) throw ::foxhunt::CheckFailure((component), ::foxhunt::detail::cat(__VA_ARGS__)); \
  } while (0)

/// Throws foxhunt::Error for failures that are not the user's input (I/O, environment).
#define FOXHUNT_FAIL(component, ...) \
  throw ::foxhunt::Error((component), ::foxhunt::detail::cat(__VA_ARGS__))

/// Internal invariant: a failure here is a bug in foxhunt, not bad input.
#define FOXHUNT_INTERNAL_ASSERT(cond, ...)                                             \
  do {                                                                                 \
    if (!(cond))                                                                       \
      ::foxhunt::detail::internal_assert_fail(__FILE__, __LINE__, #cond,               \
                                              ::foxhunt::detail::cat("" __VA_ARGS__)); \
  } while (0)
