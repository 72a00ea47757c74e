// safetensors import (`foxhunt import`, models/safetensors.h): the 8-byte header length, the JSON
// header, dtypes, shapes and data offsets.
#include "foxhunt/models/safetensors.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace foxhunt;
  fuzz::expect_parse_or_input_error(
      [&] { (void)models::decode_safetensors(fuzz::text_of(data, size), "fuzz.safetensors"); });
  return 0;
}
