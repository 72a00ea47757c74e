// The typed inputs of a train job (jobs/train_job.h): the batch choice, the one merge of a
// trainer's options, the header of a resumed checkpoint; and `train all` reading its series once.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "foxhunt/core/container.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/log.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/train/checkpointing.h"
#include "test_util.h"
#include "train_test_util.h"

namespace foxhunt {
namespace {

using jobs::BatchChoice;
using jobs::OptionsPatch;
using jobs::TrainerFlags;
using testing::TempDir;

// ---- BatchChoice ------------------------------------------------------------------------------

TEST(BatchChoiceTest, ParsesDefaultAutoAndSizes) {
  const auto d = BatchChoice::parse("", "--batch");
  EXPECT_EQ(d.kind, BatchChoice::Kind::kDefault);
  EXPECT_TRUE(d.is_default());
  EXPECT_EQ(d.str(), "");
  const auto a = BatchChoice::parse("auto", "--batch");
  EXPECT_EQ(a.kind, BatchChoice::Kind::kAuto);
  EXPECT_TRUE(a.is_auto());
  EXPECT_EQ(a, BatchChoice::automatic());
  EXPECT_EQ(a.str(), "auto");
  const auto f = BatchChoice::parse("32", "--batch");
  EXPECT_EQ(f.kind, BatchChoice::Kind::kFixed);
  EXPECT_EQ(f.size, 32);
  EXPECT_EQ(f, BatchChoice::fixed(32));
  EXPECT_EQ(f.str(), "32");
  // str() is what parse() reads back.
  for (const auto& b : {d, a, f}) EXPECT_EQ(BatchChoice::parse(b.str(), "batch"), b);
  // A default-constructed job trains with the trainer's default.
  EXPECT_TRUE(jobs::TrainJob().batch.is_default());
}

TEST(BatchChoiceTest, BadTextIsAnInputErrorNamingWhatWasExpectedAndReceived) {
  for (const std::string text :
       {"abc", "0", "-3", "12x", "1.5", "AUTO", " 8", "99999999999999999999"})
    testing::expect_input_error(
        [&] { (void)BatchChoice::parse(text, "--batch"); }, "train",
        {"--batch: expected a positive integer or 'auto', got '" + text + "'"});
  EXPECT_THROW((void)BatchChoice::fixed(0), InputError);
}

// ---- the option merge -------------------------------------------------------------------------

// An option the patch does not name keeps the value it is layered over (here the trading
// defaults' hidden [128, 64], not the trainer's own [256, 256]); the patch beats the defaults,
// and the flags beat the patch.
TEST(TrainerOptionsTest, MergeLayersDefaultsThenPatchesThenFlags) {
  const auto defaults = train::DqnTrainerOptions().hidden({128, 64}).learning_rate(1e-4);
  const auto patch = OptionsPatch<train::DqnTrainerOptions>::parse(
      {{"learning_rate", 5e-4}, {"gamma", 0.9}, {"seed", 3}}, "options");
  EXPECT_EQ(patch.names().size(), 3u);
  TrainerFlags flags;
  flags.length = 1234;
  flags.batch_size = 32;
  flags.seed = 7;
  flags.device = torch::Device(torch::kCPU);
  const auto o =
      jobs::merge_trainer_options<train::DqnTrainerOptions>(defaults, std::nullopt, {patch}, flags);
  EXPECT_EQ(o.hidden(), (std::vector<int64_t>{128, 64}));  // defaults kept
  EXPECT_DOUBLE_EQ(o.learning_rate(), 5e-4);               // patch over defaults
  EXPECT_DOUBLE_EQ(o.gamma(), 0.9);
  EXPECT_EQ(o.seed(), 7u);  // flag over patch
  EXPECT_EQ(o.total_steps(), 1234);
  EXPECT_EQ(o.batch_size(), 32);
  EXPECT_EQ(o.buffer_size(), train::DqnTrainerOptions().buffer_size());

  // No patch and no flags: the defaults unchanged.
  const auto same = jobs::merge_trainer_options<train::DqnTrainerOptions>(defaults, std::nullopt,
                                                                          {}, TrainerFlags());
  EXPECT_EQ(to_json(same), to_json(defaults));
}

// Patches apply in order (a short series' compact sizes, then --options); --epochs is the
// forecaster's length.
TEST(TrainerOptionsTest, LaterPatchesWinAndEpochsSetTheForecastersLength) {
  using Options = train::ForecastTrainerOptions;
  const auto compact =
      OptionsPatch<Options>::parse({{"learning_rate", 3e-4}, {"patience", 2}}, "compact options");
  const auto given = OptionsPatch<Options>::parse({{"learning_rate", 1e-2}}, "options");
  TrainerFlags flags;
  flags.length = 9;
  const auto o =
      jobs::merge_trainer_options<Options>(Options(), std::nullopt, {compact, given}, flags);
  EXPECT_DOUBLE_EQ(o.learning_rate(), 1e-2);
  EXPECT_EQ(o.patience(), 2);
  EXPECT_EQ(o.epochs(), 9);
  const auto reversed =
      jobs::merge_trainer_options<Options>(Options(), std::nullopt, {given, compact}, {});
  EXPECT_DOUBLE_EQ(reversed.learning_rate(), 3e-4);
  EXPECT_EQ(reversed.epochs(), Options().epochs());
}

// Resuming, the checkpoint's options replace the defaults; the length and device flags still
// apply (run_train_job refuses --options, --batch and --seed on resume).
TEST(TrainerOptionsTest, ResumedOptionsReplaceTheDefaults) {
  const auto defaults = train::PpoTrainerOptions().hidden({128, 64}).learning_rate(1e-4);
  const auto resumed = train::PpoTrainerOptions().n_envs(4).learning_rate(2e-4).total_steps(100);
  TrainerFlags flags;
  flags.length = 500;
  const auto o = jobs::merge_trainer_options(defaults, std::optional(resumed), {}, flags);
  EXPECT_EQ(o.hidden(), train::PpoTrainerOptions().hidden());  // the checkpoint's, not defaults'
  EXPECT_DOUBLE_EQ(o.learning_rate(), 2e-4);
  EXPECT_EQ(o.n_envs(), 4);
  EXPECT_EQ(o.total_steps(), 500);
}

TEST(TrainerOptionsTest, PatchParseRefusesWhatTheTrainerDoesNotHave) {
  using Patch = OptionsPatch<train::DqnTrainerOptions>;
  testing::expect_input_error([] { (void)Patch::parse(nlohmann::json::array(), "options"); },
                              "train", {"options: expected a JSON object, got array"});
  testing::expect_input_error(
      [] {
        (void)Patch::parse({{"learning_rat", 1}}, "options");
      },
      "", {"learning_rat"});
  testing::expect_input_error(
      [] {
        (void)Patch::parse({{"batch_size", "x"}}, "options");
      },
      "", {"batch_size"});
  EXPECT_TRUE(Patch::parse(nlohmann::json::object(), "options").empty());
}

// ---- the resumed checkpoint's header ----------------------------------------------------------

Container forecast_checkpoint(const std::string& source) {
  Container c;
  c.header["kind"] = "trainer";
  c.header["model"] = "tft";
  c.header["options"] = {{"hidden", 8}};
  c.header["trainer"] = {
      {"version", train::kTrainerCheckpointVersion},
      {"algo", "forecast"},
      {"options", to_json(train::ForecastTrainerOptions().epochs(7).learning_rate(3e-4))},
      {"extra",
       {{"batch_size", 16},
        {"world_size", 2},
        {"data", {{"source", source}, {"target_vol_feature", "absret_mean_60"}}}}}};
  return c;
}

TEST(ResumedCheckpointTest, ReadsWhatTheJobResumesFrom) {
  const auto r = jobs::read_resumed_checkpoint(forecast_checkpoint("/data/bars.csv"), "x.ckpt",
                                               models::TrainerKind::kForecast);
  EXPECT_EQ(r.path, "x.ckpt");
  EXPECT_EQ(r.model, "tft");
  EXPECT_EQ(r.model_options, (nlohmann::json{{"hidden", 8}}));
  const auto& o = std::get<train::ForecastTrainerOptions>(r.trainer_options);
  EXPECT_EQ(o.epochs(), 7);
  EXPECT_DOUBLE_EQ(o.learning_rate(), 3e-4);
  EXPECT_EQ(r.batch_size, 16);
  EXPECT_EQ(r.world_size, 2);
  EXPECT_EQ(r.data_path, "/data/bars.csv");
  EXPECT_EQ(r.target_vol_feature, "absret_mean_60");
  // The embedded synthetic series is no file.
  EXPECT_EQ(jobs::read_resumed_checkpoint(forecast_checkpoint("synthetic(seed=42)"), "x.ckpt",
                                          models::TrainerKind::kForecast)
                .data_path,
            "");
}

TEST(ResumedCheckpointTest, DefaultsWhereOlderCheckpointsSayNothing) {
  auto c = forecast_checkpoint("");
  c.header["trainer"].erase("extra");
  const auto r = jobs::read_resumed_checkpoint(c, "x.ckpt", models::TrainerKind::kForecast);
  EXPECT_EQ(r.batch_size, 64);
  EXPECT_EQ(r.world_size, 1);
  EXPECT_EQ(r.data_path, "");
  EXPECT_EQ(r.target_vol_feature, "");
}

TEST(ResumedCheckpointTest, RefusesAnotherTrainersOrOneWithoutOptions) {
  testing::expect_input_error(
      [] {
        (void)jobs::read_resumed_checkpoint(forecast_checkpoint(""), "x.ckpt",
                                            models::TrainerKind::kDqn);
      },
      "checkpoint", {"'x.ckpt'", "expected a 'dqn' trainer checkpoint, got 'forecast'"});
  auto c = forecast_checkpoint("");
  c.header["trainer"].erase("options");
  testing::expect_input_error(
      [&] { (void)jobs::read_resumed_checkpoint(c, "x.ckpt", models::TrainerKind::kForecast); },
      "checkpoint", {"'x.ckpt': trainer options missing"});
}

// ---- train all reads its series once ----------------------------------------------------------

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every parameter of the model in a bundle, in order.
std::vector<torch::Tensor> bundle_weights(const serving::Bundle& b) {
  return b.model->module().parameters();
}

void expect_same_bundle(const std::string& a_path, const std::string& b_path,
                        const std::string& name) {
  const auto a = serving::load_bundle(a_path);
  const auto b = serving::load_bundle(b_path);
  EXPECT_EQ(nlohmann::json(a.data), nlohmann::json(b.data)) << name;
  EXPECT_EQ(a.normalizer.mean, b.normalizer.mean) << name;
  EXPECT_EQ(a.normalizer.stddev, b.normalizer.stddev) << name;
  EXPECT_EQ(a.target_scale, b.target_scale) << name;
  EXPECT_EQ(a.target_vol_feature, b.target_vol_feature) << name;
  EXPECT_EQ(a.model->options_json(), b.model->options_json()) << name;
  const auto wa = bundle_weights(a), wb = bundle_weights(b);
  ASSERT_EQ(wa.size(), wb.size()) << name;
  for (size_t i = 0; i < wa.size(); ++i)
    EXPECT_TRUE(torch::equal(wa[i], wb[i])) << name << " " << i;
}

// The CSV is deleted as soon as `train all` reports its first model: the run only completes if
// no model and not the rule fit reads the file again. Its bundles equal those of single-model
// runs that read the CSV themselves, and its rule equals a refit from the file.
TEST(TrainAllTest, ReadsTheSeriesOnceForEveryModelAndTheRule) {
  testing::OneThread one;  // bit-exact comparisons of weights
  TempDir dir;
  const auto csv = dir.file("bars.csv");
  data::SyntheticOptions so;
  so.bars = 1500;
  so.seed = 5;
  const auto series = data::generate_synthetic(so);
  data::write_bars_csv(csv, series);

  jobs::TrainJob base;
  base.data = csv;
  base.steps = 256;
  base.epochs = 1;
  base.eval_episodes = 1;
  base.progress = train::ProgressMode::kOff;

  // The reference: each model alone, loading the CSV itself.
  const std::vector<std::string> alone = {"dqn", "tft"};
  std::map<std::string, std::string> alone_bundles;
  for (const auto& name : alone) {
    jobs::TrainJob job = base;
    job.model = name;
    const bool rl = name == "dqn";
    job.env = rl ? "trading" : "";
    job.steps = rl ? base.steps : 0;
    job.epochs = rl ? 0 : base.epochs;
    job.out_dir = dir.file("alone/" + name);
    const auto s = jobs::run_train_job(job);
    ASSERT_TRUE(s.bundle.has_value()) << name;
    alone_bundles[name] = *s.bundle;
  }

  std::mutex m;
  bool deleted = false;
  auto previous = set_log_sink([&](LogLevel, std::string_view component, std::string_view) {
    std::lock_guard<std::mutex> lock(m);
    if (component == "train all" && !deleted) deleted = std::filesystem::remove(csv);
  });
  jobs::TrainJob job = base;
  job.out_dir = dir.file("all");
  jobs::TrainAllSummary all;
  try {
    all = jobs::run_train_all(job);
  } catch (...) {
    set_log_sink(std::move(previous));
    throw;
  }
  set_log_sink(std::move(previous));
  ASSERT_TRUE(deleted) << "train all logged nothing before its first model";
  ASSERT_FALSE(std::filesystem::exists(csv));
  ASSERT_TRUE(all.complete);
  ASSERT_FALSE(all.rule.empty()) << all.rule_fit.dump();

  for (const auto& name : alone)
    expect_same_bundle(serving::BundleDirectory(all.out).bundle_path(name), alone_bundles.at(name),
                       name);

  // The rule fitted on the loaded bars is the one fitted from the file.
  const auto rule = read_text(all.rule);
  data::write_bars_csv(csv, series);
  const auto refit = jobs::fit_ensemble_rule(all.out, csv);
  ASSERT_FALSE(refit.contains("error")) << refit.dump();
  EXPECT_EQ(refit, all.rule_fit);
  EXPECT_EQ(read_text(all.rule), rule);
}

}  // namespace
}  // namespace foxhunt
