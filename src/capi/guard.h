#pragma once
// The C ABI's boundary (private to src/capi/): the thread's last error, the status of an
// exception, and `guarded`, which runs an entry point's body so that no exception leaves it.
#include <cstddef>
#include <exception>
#include <string>
#include <utility>

#include "foxhunt/core/error.h"
#include "foxhunt/foxhunt.h"

namespace foxhunt::capi {

/// The component of the C ABI's own messages ("[capi] ...").
inline constexpr const char* kCapiComponent = "capi";

/// The calling thread's last error message ("" after a call that succeeded).
std::string& last_error();

/// The status of the exception being handled (call inside a catch block), its message stored as
/// the thread's last error. OutOfMemoryError, and any out-of-memory condition LibTorch wrapped
/// (memory::rethrow_if_oom) or std::bad_alloc: FOXHUNT_ERR_OOM; InputError: FOXHUNT_ERR_INPUT;
/// anything else: FOXHUNT_ERR_FAILED.
foxhunt_status status_of_current_exception() noexcept;

/// Runs `body` (returning nothing) as an entry point's work: clears the last error, and turns any
/// exception into its status and message.
template <typename F>
foxhunt_status guarded(F&& body) noexcept {
  try {
    last_error().clear();
    std::forward<F>(body)();
    return FOXHUNT_OK;
  } catch (...) {
    return status_of_current_exception();
  }
}

/// Throws InputError "[capi] FUNCTION: NAME: expected ..., got NULL" when `p` is null.
template <typename T>
void check_not_null(const T* p, const char* function, const char* name, const char* expected) {
  FOXHUNT_CHECK(p != nullptr, kCapiComponent, function, ": ", name, ": expected ", expected,
                ", got NULL");
}

/// A copy of `s` in memory the caller frees with foxhunt_free_string.
char* copy_out(const std::string& s);

}  // namespace foxhunt::capi
