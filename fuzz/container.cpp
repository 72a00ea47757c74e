// The container format of bundles and checkpoints (core/container.h): magic, version, lengths,
// CRC, the JSON header and the named blobs.
#include <cstring>

#include "foxhunt/core/container.h"
#include "foxhunt/core/file_io.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace foxhunt;
  std::string bytes = fuzz::text_of(data, size);
  const auto check = [](const std::string& b) {
    fuzz::expect_parse_or_input_error([&] {
      const auto c = decode_container(b, "fuzz.fhb");
      // What decodes re-encodes to a container that decodes to the same header and blobs.
      const auto again = decode_container(encode_container(c), "fuzz-again.fhb");
      if (again.header != c.header || again.blobs != c.blobs) __builtin_trap();
    });
  };
  check(bytes);
  // The same bytes with a valid CRC, so that mutations reach the header and blob parsing
  // behind the checksum (little-endian u32 over everything before it).
  if (bytes.size() >= 4) {
    const uint32_t crc = crc32(bytes.data(), bytes.size() - 4);
    for (int k = 0; k < 4; ++k)
      bytes[bytes.size() - 4 + k] = static_cast<char>((crc >> (8 * k)) & 0xff);
    check(bytes);
  }
  return 0;
}
