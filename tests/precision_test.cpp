// Precision as a typed key (models/precision.h): its text forms, the error for another text, and
// the catalog's quantized forms (models/precisions.h): a precision a model lacks is refused, and
// the quantize hook is reached through the catalog alone.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/plan/budget.h"
#include "foxhunt/models/precisions.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using models::Precision;
using testing::input_error;

TEST(PrecisionTest, TextRoundTripsForAllThree) {
  const std::vector<std::pair<Precision, std::string>> all = {
      {Precision::kFp32, "fp32"}, {Precision::kInt8, "int8"}, {Precision::kInt8Qat, "int8-qat"}};
  ASSERT_EQ(models::kAllPrecisions.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& [p, text] = all[i];
    SCOPED_TRACE(text);
    EXPECT_EQ(models::kAllPrecisions[i], p);
    EXPECT_EQ(std::string(models::to_string(p)), text);
    EXPECT_EQ(models::parse_precision(text, "test"), p);
    EXPECT_EQ(models::try_parse_precision(text), p);
    std::ostringstream os;
    os << p;
    EXPECT_EQ(os.str(), text);
    const nlohmann::json j = p;
    EXPECT_EQ(j, nlohmann::json(text));
    EXPECT_EQ(j.get<Precision>(), p);
  }
  EXPECT_EQ(models::precisions_text({Precision::kFp32, Precision::kInt8}, " or "), "fp32 or int8");
}

TEST(PrecisionTest, AnotherTextNamesTheAcceptedValuesAndWhatCame) {
  EXPECT_EQ(input_error([] { models::parse_precision("int4", "budget"); }),
            "[budget] precision: expected fp32, int8 or int8-qat, got 'int4'");
  // Case and whitespace are not forgiven: the text forms are exact.
  EXPECT_EQ(input_error([] { models::parse_precision("FP32", "bundle"); }),
            "[bundle] precision: expected fp32, int8 or int8-qat, got 'FP32'");
  EXPECT_EQ(input_error([] { models::parse_precision("", "x"); }),
            "[x] precision: expected fp32, int8 or int8-qat, got ''");
  EXPECT_FALSE(models::try_parse_precision("int8 ").has_value());
  EXPECT_EQ(input_error([] { (void)nlohmann::json("int16").get<Precision>(); }),
            "[precision] precision: expected fp32, int8 or int8-qat, got 'int16'");
  EXPECT_EQ(input_error([] { (void)nlohmann::json(8).get<Precision>(); }),
            "[precision] expected fp32, int8 or int8-qat, got 8");
}

TEST(PrecisionTest, MakeModelAtRefusesAPrecisionTheModelLacks) {
  EXPECT_EQ(models::precisions("tft"), (std::vector<Precision>{Precision::kFp32, Precision::kInt8}));
  EXPECT_EQ(models::precisions("dqn"), std::vector<Precision>{Precision::kFp32});
  EXPECT_TRUE(models::has_precision("tft", Precision::kInt8));
  EXPECT_FALSE(models::has_precision("dqn", Precision::kInt8));
  EXPECT_FALSE(models::has_precision("tft", Precision::kInt8Qat));  // a training form, not built
  EXPECT_EQ(models::models_with_precision(Precision::kInt8), std::vector<std::string>{"tft"});
  EXPECT_TRUE(models::models_with_precision(Precision::kInt8Qat).empty());

  EXPECT_EQ(input_error([] { models::make_model_at("dqn", Precision::kInt8, nullptr, "here"); }),
            "[here] precision of 'dqn': expected fp32, got 'int8'");
  EXPECT_EQ(input_error([] { models::make_model_at("tft", Precision::kInt8Qat, nullptr, "here"); }),
            "[here] precision of 'tft': expected fp32 or int8, got 'int8-qat'");
  EXPECT_EQ(input_error([] {
              models::make_model_at("tft", models::parse_precision("int4", "here"), nullptr, "here");
            }),
            "[here] precision: expected fp32, int8 or int8-qat, got 'int4'");
  EXPECT_EQ(models::make_model_at("tft", Precision::kInt8, nullptr, "t")->precision(),
            Precision::kInt8);
  EXPECT_EQ(models::make_model_at("ppo", Precision::kFp32, nullptr, "t")->precision(),
            Precision::kFp32);
}

// The budget's precision map: typed values, parsed from the --precision flag's text.
TEST(PrecisionTest, BudgetPrecisionMapParsesItsTextPairs) {
  const plan::PrecisionMap m = {{"tft", Precision::kInt8}};
  EXPECT_EQ(m.of("tft"), Precision::kInt8);
  EXPECT_EQ(m.of("dqn"), Precision::kFp32);
  EXPECT_EQ(plan::parse_precisions("tft=int8"), m);
  EXPECT_EQ(input_error([] { plan::parse_precisions("tft=int4"); }),
            "[budget] precision 'tft=int4': tft has fp32 and int8, got 'int4'");
  EXPECT_EQ(input_error([] { plan::parse_precisions("tft=int8-qat"); }),
            "[budget] precision 'tft=int8-qat': tft has fp32 and int8, got 'int8-qat'");
}

}  // namespace
}  // namespace foxhunt
