// Model and trainer options JSON (`--options`, `--model-options`, bundle headers): every
// model's and trainer's options_from_json. Parsed only: building a model from fuzzed sizes would
// allocate whatever the input asks for.
#include <nlohmann/json.hpp>

#include "foxhunt/models/dqn.h"
#include "foxhunt/models/mamba2.h"
#include "foxhunt/models/ppo.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/train/dqn_trainer.h"
#include "foxhunt/train/forecast_trainer.h"
#include "foxhunt/train/ppo_trainer.h"
#include "fuzz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace foxhunt;
  const auto j = nlohmann::json::parse(fuzz::text_of(data, size), nullptr, false);
  if (j.is_discarded()) return 0;  // not JSON: the callers refuse it before these parsers
  fuzz::expect_parse_or_input_error([&] { (void)models::dqn_options_from_json(j); });
  fuzz::expect_parse_or_input_error([&] { (void)models::ppo_options_from_json(j); });
  fuzz::expect_parse_or_input_error([&] { (void)models::mamba2_options_from_json(j); });
  fuzz::expect_parse_or_input_error([&] { (void)models::tft_options_from_json(j); });
  fuzz::expect_parse_or_input_error([&] { (void)train::dqn_trainer_options_from_json(j); });
  fuzz::expect_parse_or_input_error([&] { (void)train::ppo_trainer_options_from_json(j); });
  fuzz::expect_parse_or_input_error([&] { (void)train::forecast_trainer_options_from_json(j); });
  return 0;
}
