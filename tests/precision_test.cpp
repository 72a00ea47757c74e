// Precision as a typed key (models/precision.h): its text forms, the error for another text, and
// the catalog's quantized forms (models/precisions.h): a precision a model lacks is refused, and
// the quantize hook is reached through the catalog alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/jobs/quantize_job.h"
#include "foxhunt/models/adapter.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/plan/budget.h"
#include "foxhunt/serving/bundle.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using models::Precision;
using testing::input_error;

TEST(PrecisionTest, TextRoundTripsForAllFour) {
  const std::vector<std::pair<Precision, std::string>> all = {{Precision::kFp32, "fp32"},
                                                              {Precision::kInt8, "int8"},
                                                              {Precision::kInt8Qat, "int8-qat"},
                                                              {Precision::kBf16, "bf16"}};
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
            "[budget] precision: expected fp32, int8, int8-qat or bf16, got 'int4'");
  // Case and whitespace are not forgiven: the text forms are exact.
  EXPECT_EQ(input_error([] { models::parse_precision("FP32", "bundle"); }),
            "[bundle] precision: expected fp32, int8, int8-qat or bf16, got 'FP32'");
  EXPECT_EQ(input_error([] { models::parse_precision("", "x"); }),
            "[x] precision: expected fp32, int8, int8-qat or bf16, got ''");
  EXPECT_FALSE(models::try_parse_precision("int8 ").has_value());
  EXPECT_EQ(input_error([] { (void)nlohmann::json("int16").get<Precision>(); }),
            "[precision] precision: expected fp32, int8, int8-qat or bf16, got 'int16'");
  EXPECT_EQ(input_error([] { (void)nlohmann::json(8).get<Precision>(); }),
            "[precision] expected fp32, int8, int8-qat or bf16, got 8");
}

TEST(PrecisionTest, MakeModelAtRefusesAPrecisionTheModelLacks) {
  EXPECT_EQ(models::precisions("tft"),
            (std::vector<Precision>{Precision::kFp32, Precision::kInt8, Precision::kBf16}));
  EXPECT_EQ(models::precisions("dqn"), std::vector<Precision>{Precision::kFp32});
  EXPECT_TRUE(models::has_precision("tft", Precision::kInt8));
  EXPECT_FALSE(models::has_precision("dqn", Precision::kInt8));
  EXPECT_FALSE(models::has_precision("tft", Precision::kInt8Qat));  // a training form, not built
  EXPECT_EQ(models::models_with_precision(Precision::kInt8), std::vector<std::string>{"tft"});
  EXPECT_TRUE(models::models_with_precision(Precision::kInt8Qat).empty());

  EXPECT_EQ(input_error([] { models::make_model_at("dqn", Precision::kInt8, nullptr, "here"); }),
            "[here] precision of 'dqn': expected fp32, got 'int8'");
  EXPECT_EQ(input_error([] { models::make_model_at("tft", Precision::kInt8Qat, nullptr, "here"); }),
            "[here] precision of 'tft': expected fp32 or int8 or bf16, got 'int8-qat'");
  EXPECT_EQ(input_error([] {
              models::make_model_at("tft", models::parse_precision("int4", "here"), nullptr,
                                    "here");
            }),
            "[here] precision: expected fp32, int8, int8-qat or bf16, got 'int4'");
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
            "[budget] precision 'tft=int4': tft has fp32 and int8 and bf16, got 'int4'");
  EXPECT_EQ(input_error([] { plan::parse_precisions("tft=int8-qat"); }),
            "[budget] precision 'tft=int8-qat': tft has fp32 and int8 and bf16, got 'int8-qat'");
}

// ---- the quantize hook through the catalog alone ----------------------------------------------

constexpr const char* kFake = "fake8";
const nlohmann::json kSmallFake = {{"hidden", 8}, {"heads", 2}, {"window", 20}, {"dropout", 0.0}};

// A forecaster known to the catalog by its entry alone (a TFT network under another name), and
// its "int8" form: the same network reporting kInt8. Nothing above models/ knows either type.
class FakeForecaster : public models::ForecasterAdapter<models::TftNet> {
 public:
  explicit FakeForecaster(const nlohmann::json& options)
      : FakeForecaster(models::TftNet(models::tft_options_from_json(options))) {}
  std::vector<torch::Tensor> forward(const models::Batch& b) override {
    check_inputs(b);
    return {net_->forward(b.inputs[0], b.inputs[1], b.inputs[2])};
  }
  models::Batch example_batch(int64_t batch, int64_t seq_len, const torch::Device& device,
                              uint64_t seed) const override {
    return models::example_batch_of(net_->options, batch, seq_len, device, seed);
  }

 private:
  explicit FakeForecaster(models::TftNet net)
      : ForecasterAdapter(kFake, net, models::io_spec(net->options)) {}
};

class FakeInt8 final : public FakeForecaster {
 public:
  using FakeForecaster::FakeForecaster;
  models::Precision precision() const override { return Precision::kInt8; }
};

// What the fake hook saw: calls, and the model and request it was given.
struct HookLog {
  int calls = 0;
  std::string model;
  int64_t calibration_windows = 0;
};
HookLog& hook_log() {
  static HookLog log;
  return log;
}

models::QuantizeResult fake_quantize(models::Model& fp32, const models::QuantizeRequest& r) {
  auto& log = hook_log();
  ++log.calls;
  log.model = fp32.name();
  log.calibration_windows = r.calibration_windows;
  models::QuantizeResult out;
  out.model = std::make_unique<FakeInt8>(fp32.options_json());
  out.calibration_windows = std::min(r.calibration_batch(0).size(), r.calibration_windows);
  out.layer_errors = {{"fake.layer", 42.0, 0.01}};
  return out;
}

class QuantizeHookTest : public foxhunt::testing::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    hook_log() = {};
    models::CatalogEntry e;
    e.name = kFake;
    e.family = models::Family::kForecaster;
    e.trainer = models::TrainerKind::kForecast;
    e.description = "a test's forecaster with a fake int8 form";
    e.make = [](const nlohmann::json& o) -> std::unique_ptr<models::Model> {
      return std::make_unique<FakeForecaster>(o);
    };
    e.compact_model_options = nlohmann::json::object();
    e.compact_trainer_options = nlohmann::json::object();
    e.quantized_forms = {{Precision::kInt8,
                          [](const nlohmann::json& o) -> std::unique_ptr<models::Model> {
                            return std::make_unique<FakeInt8>(o);
                          },
                          [](const nlohmann::json& o) -> nlohmann::json {
                            return {{"fp32", {{"parameter_bytes", 4}}},
                                    {"int8", {{"parameter_bytes", 1}}},
                                    {"options", o}};
                          },
                          &fake_quantize}};
    models::register_model(std::move(e));
  }
  void TearDown() override { models::unregister_model(kFake); }

  // An untrained bundle of `model` over the embedded synthetic series.
  static std::string bundle_of(const std::string& model, const nlohmann::json& options,
                               foxhunt::testing::TempDir& tmp) {
    return foxhunt::testing::save_untrained_synthetic_bundle(model, options,
                                                             tmp.file(model + ".fhb"));
  }
};

TEST_F(QuantizeHookTest, ARegisteredFormIsListedBuiltAndQuantizedThroughTheCatalog) {
  EXPECT_EQ(models::models_with_precision(Precision::kInt8),
            (std::vector<std::string>{"tft", kFake}));
  EXPECT_EQ(models::precisions(kFake),
            (std::vector<Precision>{Precision::kFp32, Precision::kInt8}));
  EXPECT_TRUE(models::has_precision(kFake, Precision::kInt8));
  EXPECT_EQ(models::quantized_forms_text(),
            "the bf16 mamba2 and the int8 tft and the bf16 tft and the int8 fake8");
  EXPECT_EQ(models::make_model_at(kFake, Precision::kInt8, nullptr, "t")->precision(),
            Precision::kInt8);
  EXPECT_EQ(models::precision_bytes(kFake)["int8"]["parameter_bytes"], 1);

  // The quantize job finds the form by the bundle's name and runs its hook.
  foxhunt::testing::TempDir tmp;
  jobs::QuantizeJob job;
  job.bundle = bundle_of(kFake, kSmallFake, tmp);
  job.out = tmp.file("int8.fhb");
  job.calib = 16;
  const auto s = jobs::run_quantize_job(job);
  EXPECT_EQ(hook_log().calls, 1);
  EXPECT_EQ(hook_log().model, kFake);
  EXPECT_EQ(hook_log().calibration_windows, 16);
  EXPECT_EQ(s.quantization.calibration_windows, 16);
  ASSERT_EQ(s.layer_errors.size(), 1u);
  EXPECT_EQ(s.layer_errors[0].layer, "fake.layer");
  // The form's bytes at the bundle's own options.
  EXPECT_EQ(s.precisions["int8"]["parameter_bytes"], 1);
  EXPECT_EQ(s.precisions["options"]["hidden"], 8);
  EXPECT_EQ(s.precisions["options"]["window"], 20);
  EXPECT_EQ(serving::load_bundle(job.out).model->precision(), Precision::kInt8);
}

TEST_F(QuantizeHookTest, AModelWithoutAnInt8FormIsRefusedNamingTheModelsWithOne) {
  EXPECT_EQ(input_error([] { models::quantized_form("dqn", Precision::kInt8, "quantize"); }),
            "[quantize] 'dqn' has no int8 form; the models with one: tft, fake8");
  foxhunt::testing::TempDir tmp;
  jobs::QuantizeJob job;
  job.bundle = bundle_of("dqn", nlohmann::json::object(), tmp);
  job.out = tmp.file("int8.fhb");
  const auto error = input_error([&] { jobs::run_quantize_job(job); });
  EXPECT_NE(error.find("expected a bundle of a model with an INT8 form (tft, fake8), got 'dqn'"),
            std::string::npos)
      << error;
  EXPECT_EQ(hook_log().calls, 0);
  EXPECT_FALSE(std::filesystem::exists(job.out));
}

}  // namespace
}  // namespace foxhunt
