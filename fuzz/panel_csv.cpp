// The panel CSV reader (data/panel.h): long format with a symbol column, or a single series.
#include "foxhunt/data/panel.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace foxhunt;
  const std::string text = fuzz::text_of(data, size);
  (void)data::has_symbol_column(text);  // never throws
  fuzz::expect_parse_or_input_error([&] {
    const auto p = data::parse_panel_csv(text, "fuzz.csv");
    (void)data::summarize_panel(p);
  });
  return 0;
}
