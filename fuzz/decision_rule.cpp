// The decision-rule JSON (DIR/rule.json, `--rule FILE`; serving/serving.h).
#include "foxhunt/serving/serving.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace foxhunt;
  fuzz::expect_parse_or_input_error(
      [&] { (void)serving::parse_decision_rule(fuzz::text_of(data, size), "fuzz.json"); });
  return 0;
}
