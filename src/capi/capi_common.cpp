// The C ABI's version, errors and strings (include/foxhunt/foxhunt.h).
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "foxhunt/core/error.h"
#include "foxhunt/foxhunt.h"
#include "foxhunt/memory/ledger.h"
#include "guard.h"

namespace foxhunt::capi {

std::string& last_error() {
  thread_local std::string message;
  return message;
}

foxhunt_status status_of_current_exception() noexcept {
  // Any failure while classifying (a message that cannot be copied) still leaves a status.
  try {
    try {
      throw;
    } catch (const Error&) {
      throw;  // foxhunt's own types say their class themselves
    } catch (const std::bad_alloc&) {
      throw;
    } catch (...) {
      // A ledger refusal or a CUDA out-of-memory error that LibTorch wrapped in c10::Error:
      // rethrown as the typed OutOfMemoryError; anything else comes back here unchanged.
      memory::rethrow_if_oom(std::current_exception());
      throw;
    }
  } catch (const OutOfMemoryError& e) {
    last_error() = e.what();
    return FOXHUNT_ERR_OOM;
  } catch (const InputError& e) {
    last_error() = e.what();
    return FOXHUNT_ERR_INPUT;
  } catch (const std::bad_alloc& e) {
    last_error() = std::string("[capi] out of memory: ") + e.what();
    return FOXHUNT_ERR_OOM;
  } catch (const std::exception& e) {
    last_error() = e.what();
    return FOXHUNT_ERR_FAILED;
  } catch (...) {
    try {
      last_error() = "[capi] an exception of an unknown type (not a std::exception)";
    } catch (...) {
    }
    return FOXHUNT_ERR_FAILED;
  }
}

char* copy_out(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

}  // namespace foxhunt::capi

extern "C" {

FOXHUNT_API const char* foxhunt_version(void) {
  return FOXHUNT_VERSION;
}

FOXHUNT_API int32_t foxhunt_abi_version(void) {
  return FOXHUNT_ABI_VERSION;
}

FOXHUNT_API foxhunt_status foxhunt_check_abi(int32_t header_abi_version) {
  return foxhunt::capi::guarded([&] {
    FOXHUNT_CHECK(header_abi_version == FOXHUNT_ABI_VERSION, foxhunt::capi::kCapiComponent,
                  "ABI: the caller's foxhunt.h is ABI version ", header_abi_version,
                  ", the loaded libfoxhunt_c (", FOXHUNT_VERSION, ") implements ABI version ",
                  FOXHUNT_ABI_VERSION, ": build against the header installed with the library");
  });
}

FOXHUNT_API const char* foxhunt_last_error(void) {
  return foxhunt::capi::last_error().c_str();
}

FOXHUNT_API const char* foxhunt_status_name(int32_t status) {
  switch (status) {
    case FOXHUNT_OK:
      return "ok";
    case FOXHUNT_ERR_FAILED:
      return "failed";
    case FOXHUNT_ERR_INPUT:
      return "input";
    case FOXHUNT_ERR_OOM:
      return "out of memory";
  }
  return "unknown";
}

FOXHUNT_API void foxhunt_free_string(char* s) {
  std::free(s);
}

}  // extern "C"
