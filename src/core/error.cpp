#include "foxhunt/core/error.h"

namespace foxhunt {

int exit_code_for(const std::exception& e) noexcept {
  return dynamic_cast<const InputError*>(&e) != nullptr ? kExitUsage : kExitCheckFailed;
}

}  // namespace foxhunt

namespace foxhunt::detail {

void internal_assert_fail(const char* file, int line, const char* cond, const std::string& msg) {
  throw Error("internal", cat("assertion `", cond, "` failed at ", file, ":", line,
                              msg.empty() ? "" : ": ", msg, " (this is a foxhunt bug)"));
}

}  // namespace foxhunt::detail
