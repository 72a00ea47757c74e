// The bars CSV readers (data/bars.h): the whole-file parser and the line-by-line reader that
// `predict` streams stdin through.
#include <sstream>

#include "foxhunt/data/bars.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace foxhunt;
  const std::string text = fuzz::text_of(data, size);
  fuzz::expect_parse_or_input_error([&] { (void)data::parse_bars_csv(text, "fuzz.csv"); });
  fuzz::expect_parse_or_input_error([&] {
    data::BarCsvReader reader("fuzz.csv");
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      try {
        (void)reader.read_line(line);
      } catch (const InputError&) {  // a bad line: predict --skip-bad goes on with the next
      }
    }
  });
  return 0;
}
