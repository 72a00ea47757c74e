// The model catalog (models/catalog.h) and the precisions of its entries (models/precisions.h):
// every fact an entry states is checked against the model it builds.
#include <gtest/gtest.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/plan/budget.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"
#include "foxhunt/train/trainer_step.h"
#include "test_util.h"

namespace foxhunt {
namespace {

TEST(CatalogTest, EntriesDescribeTheModelsTheyBuild) {
  const auto& cat = models::catalog();
  ASSERT_EQ(models::model_names(), (std::vector<std::string>{"dqn", "ppo", "mamba2", "tft"}));
  for (const auto& e : cat) {
    SCOPED_TRACE(e.name);
    auto m = e.make(nlohmann::json::object());
    EXPECT_EQ(m->name(), e.name);
    EXPECT_EQ(m->spec().is_forecaster(), e.family == models::Family::kForecaster);
    EXPECT_EQ(e.trainer == models::TrainerKind::kForecast, e.family == models::Family::kForecaster);
    EXPECT_EQ(models::is_policy(e.name), e.family == models::Family::kPolicy);
    // The compact options build a smaller model of the same kind.
    auto compact = models::make_model(e.name, e.compact_model_options);
    EXPECT_LE(compact->parameter_bytes(), m->parameter_bytes());
    EXPECT_GT(e.serving_target_cpu_bytes, 0u);
    EXPECT_GE(e.serving_target_cuda_bytes, e.serving_target_cpu_bytes);
    EXPECT_FALSE(e.description.empty());
  }
  EXPECT_EQ(models::model_names(models::Family::kPolicy), (std::vector<std::string>{"dqn", "ppo"}));
  EXPECT_EQ(models::joined_model_names(models::Family::kForecaster, "/"), "mamba2/tft");
  EXPECT_EQ(models::joined_model_names(), "dqn, ppo, mamba2, tft");
}

TEST(CatalogTest, UnknownNamesAreInputErrorsListingTheCatalog) {
  EXPECT_FALSE(models::in_catalog("lstm"));
  try {
    models::catalog_entry("lstm", "here");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("[here]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected one of: dqn, ppo, mamba2, tft"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(models::make_model("lstm"), InputError);
  EXPECT_THROW(models::is_policy("lstm"), InputError);
}

TEST(CatalogTest, EveryEntryReachesItsTrainerAndTheBudgetAndTheEnsemble) {
  const auto weights = serving::default_ensemble_weights();
  const auto targets = plan::default_targets();
  for (const auto& name : models::model_names()) {
    SCOPED_TRACE(name);
    train::TrainerStepSpec spec;
    spec.model = name;
    if (name == "dqn") spec.trainer_options = {{"buffer_size", 1000}};
    const auto step = train::make_trainer_step(spec);
    EXPECT_EQ(step->model().name(), name);
    EXPECT_EQ(weights.at(name), 1.0);
    EXPECT_EQ(targets.at(name), models::catalog_entry(name).serving_target_cpu_bytes);
  }
  EXPECT_EQ(weights.size(), models::catalog().size());
}

TEST(CatalogTest, PrecisionsAreFp32AndTheRegisteredInt8Tft) {
  using models::Precision;
  EXPECT_EQ(models::models_with_precision(Precision::kInt8), std::vector<std::string>{"tft"});
  EXPECT_EQ(models::models_with_precision(Precision::kFp32), models::model_names());
  EXPECT_EQ(models::precisions("tft"),
            (std::vector<Precision>{Precision::kFp32, Precision::kInt8, Precision::kBf16}));
  EXPECT_EQ(models::precisions("mamba2"),
            (std::vector<Precision>{Precision::kFp32, Precision::kBf16}));
  EXPECT_EQ(models::models_with_precision(Precision::kBf16),
            (std::vector<std::string>{"mamba2", "tft"}));
  EXPECT_EQ(models::precisions("dqn"), std::vector<Precision>{Precision::kFp32});
  EXPECT_FALSE(models::has_precision("dqn", Precision::kInt8));
  EXPECT_FALSE(models::has_precision("lstm", Precision::kFp32));
  EXPECT_EQ(models::quantized_forms_text(), "the bf16 mamba2 and the int8 tft and the bf16 tft");
  auto i8 = models::make_model_at("tft", Precision::kInt8, nullptr, "t");
  EXPECT_EQ(i8->precision(), Precision::kInt8);
  EXPECT_EQ(models::make_model_at("ppo", Precision::kFp32, nullptr, "t")->precision(),
            Precision::kFp32);
  try {
    models::make_model_at("dqn", Precision::kInt8, nullptr, "here");
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("precision of 'dqn': expected fp32, got 'int8'"),
              std::string::npos)
        << e.what();
  }
  const auto bytes = models::precision_bytes("tft");
  EXPECT_LT(bytes["int8"]["parameter_bytes"].get<double>(),
            bytes["fp32"]["parameter_bytes"].get<double>());
  // Every form's row, merged (the int8 form's breakdown keeps its own keys).
  EXPECT_LT(bytes["bf16"]["parameter_bytes"].get<double>(),
            bytes["fp32"]["parameter_bytes"].get<double>());
  EXPECT_TRUE(bytes["int8"].contains("int8_bytes"));
  EXPECT_EQ(models::precision_bytes("dqn")["fp32"]["parameter_bytes"].get<std::int64_t>(),
            models::make_model("dqn")->parameter_bytes());
}

// The ensemble directory's layout lives in one type; complete() needs every catalog model.
TEST(CatalogTest, BundleDirectoryOwnsTheEnsembleLayout) {
  testing::TempDir tmp;
  const serving::BundleDirectory d(tmp.file("ens"));
  EXPECT_EQ(d.model_dir("tft"), tmp.file("ens/tft"));
  EXPECT_EQ(d.bundle_path("tft"), tmp.file("ens/tft/bundle.fhb"));
  EXPECT_EQ(serving::BundleDirectory::bundle_in(tmp.file("x")), tmp.file("x/bundle.fhb"));
  EXPECT_FALSE(d.complete());
  const auto names = models::model_names();
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_FALSE(d.complete()) << i << " of " << names.size() << " bundles";
    std::filesystem::create_directories(d.model_dir(names[i]));
    write_file_atomic(d.bundle_path(names[i]), "x");
  }
  EXPECT_TRUE(d.complete());
  EXPECT_FALSE(serving::BundleDirectory("").complete());
}

}  // namespace
}  // namespace foxhunt
