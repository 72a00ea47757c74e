// The device-profiles file (`--profiles FILE`, memory/device_profile.h).
#include "foxhunt/memory/device_profile.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace foxhunt;
  fuzz::expect_parse_or_input_error(
      [&] { (void)memory::parse_profiles(fuzz::text_of(data, size), "fuzz.json"); });
  return 0;
}
