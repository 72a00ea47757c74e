// The catalog holds every model's knowledge: a fifth model, defined in this file alone and
// registered at run time, trains, serves in the ensemble and the desk, budgets, backtests and is
// listed, with no other file knowing it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/models/adapter.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/summary.h"
#include "foxhunt/plan/budget.h"
#include "foxhunt/serving/backtest.h"
#include "foxhunt/serving/bar_stream.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/serving.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using foxhunt::testing::TempDir;

constexpr const char* kName = "linq";  // a linear quantile forecaster
constexpr int64_t kWindow = 8;
constexpr int64_t kInputs = 32;  // the compact named feature set

// The module: quantiles of the next bar's scaled return, linear in the window's last row.
struct LinqNetImpl : torch::nn::Cloneable<LinqNetImpl> {
  LinqNetImpl() { reset(); }
  void reset() override { head = register_module("head", torch::nn::Linear(kInputs, 3)); }
  torch::Tensor forward(const torch::Tensor& x) {
    return head->forward(x.select(1, x.size(1) - 1)).unsqueeze(1);  // [batch, 1, 3]
  }
  torch::nn::Linear head{nullptr};
};
TORCH_MODULE(LinqNet);

class LinqModel final : public models::Model {
 public:
  LinqModel()
      : spec_(models::forecaster_spec(
            {{"x", models::InputRole::kPastFeatures, "compact32", kWindow, kInputs}}, kWindow, 1,
            {0.1, 0.5, 0.9})) {}
  std::string name() const override { return kName; }
  torch::nn::Module& module() override { return *net_; }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return net_.ptr(); }
  nlohmann::json options_json() const override { return nlohmann::json::object(); }
  models::IoSpec spec() const override { return spec_; }
  std::vector<torch::Tensor> forward(const models::Batch& b) override {
    models::check_input_count(kName, spec_, b);
    models::check_float_input(kName, "x", b.inputs[0], {-1, -1, kInputs},
                              models::module_device(*net_));
    return {net_->forward(b.inputs[0])};
  }
  std::vector<std::vector<int64_t>> output_shapes(int64_t batch, int64_t) const override {
    return models::forecaster_output_shapes(spec_, batch);
  }
  models::Batch example_batch(int64_t batch, int64_t seq_len, const torch::Device& device,
                              uint64_t seed) const override {
    auto gen = at::detail::createCPUGenerator(seed);
    models::Batch b;
    b.inputs.push_back(
        torch::randn({batch, seq_len > 0 ? seq_len : kWindow, kInputs}, gen).to(device));
    b.target = torch::randn({batch, 1}, gen).to(device);
    return b;
  }
  torch::Tensor loss(const models::Batch& b) override {
    return models::forecaster_loss(kName, spec_, forward(b)[0], b.target);
  }
  torch::nn::Linear quantile_head() override { return net_->head; }

 private:
  LinqNet net_;
  models::IoSpec spec_;
};

void register_linq() {
  models::CatalogEntry e;
  e.name = kName;
  e.family = models::Family::kForecaster;
  e.trainer = models::TrainerKind::kForecast;
  e.description = "linear quantile forecaster (a test's fifth model)";
  e.make = [](const nlohmann::json&) -> std::unique_ptr<models::Model> {
    return std::make_unique<LinqModel>();
  };
  e.compact_model_options = nlohmann::json::object();
  e.compact_trainer_options = nlohmann::json::object();
  e.serving_target_cpu_bytes = e.serving_target_cuda_bytes = 4ull << 20;
  models::register_model(std::move(e));
}

// Registered for the test's life only: the other tests of the process see the four.
class FifthModelTest : public foxhunt::testing::SeededTest {
 protected:
  void SetUp() override {
    SeededTest::SetUp();
    register_linq();
  }
  void TearDown() override {
    models::unregister_model(kName);
    SeededTest::TearDown();
  }
};

TEST_F(FifthModelTest, ARegisteredModelTrainsServesBudgetsBacktestsAndIsListed) {
  EXPECT_THROW(register_linq(), InputError);                  // one name, one model
  EXPECT_THROW(models::unregister_model("tft"), InputError);  // the built-in ones stay
  // Listed, measured, and its name is a model name everywhere.
  const auto listed = models::describe_models();
  ASSERT_EQ(listed.size(), 5u);
  EXPECT_EQ(listed.back().name, kName);

  TempDir tmp;
  // Trained on the first 900 bars; the backtest scores the 600 after them.
  const auto series = data::generate_synthetic({.bars = 1500, .seed = 21});
  auto head = series;
  head.bars.resize(900);
  const auto csv = tmp.file("train.csv"), all_csv = tmp.file("all.csv");
  data::write_bars_csv(csv, head);
  data::write_bars_csv(all_csv, series);
  // Trains with the other four (train all: the catalog's models).
  jobs::TrainJob job;
  job.data = csv;
  job.steps = 300;
  job.epochs = 1;
  job.out_dir = tmp.file("ens");
  job.eval_episodes = 0;
  job.progress = train::ProgressMode::kOff;
  const auto all = jobs::run_train_all(job);
  ASSERT_TRUE(all.complete);
  ASSERT_TRUE(all.models.count(kName));
  EXPECT_TRUE(std::filesystem::exists(serving::BundleDirectory(job.out_dir).bundle_path(kName)));

  // Serves in the ensemble: a signal of its own once its window is full.
  auto ensemble = serving::Ensemble::load(job.out_dir);
  ASSERT_EQ(ensemble.model_names().size(), 5u);
  int64_t ready = 0;
  for (const auto& bar : data::generate_synthetic({.bars = 600, .seed = 4}).bars) {
    const auto d = ensemble.on_bar(bar);
    const auto it = std::find_if(d.signals.begin(), d.signals.end(),
                                 [](const auto& s) { return s.model == kName; });
    ASSERT_NE(it, d.signals.end());
    if (!it->ready) continue;
    ++ready;
    EXPECT_EQ(it->raw.size(), 3u);
    EXPECT_EQ(it->forecast.size(), 3u);
  }
  EXPECT_GT(ready, 50);

  // Serves in the desk, batched across two instruments.
  data::Panel panel;
  panel.source = "two";
  for (const char* s : {"A", "B"}) {
    data::PanelSymbol p;
    p.symbol = s;
    p.series = data::generate_synthetic({.bars = 500, .seed = s[0] == 'A' ? 6u : 7u});
    panel.symbols.push_back(std::move(p));
  }
  for (const auto& b : panel.symbols[0].series.bars) panel.timestamps.push_back(b.timestamp);
  serving::Desk desk(serving::load_ensemble_bundles(job.out_dir), {});
  int64_t desk_ready = 0;
  serving::stream_panel(desk, panel, {},
                        [&](int64_t, const std::vector<serving::InstrumentDecision>& ds) {
                          for (const auto& d : ds)
                            for (const auto& s : d.decision.signals)
                              desk_ready += s.model == kName && s.ready;
                        });
  EXPECT_GT(desk_ready, 50);

  // Budgets: a row of its own, within its catalog target.
  plan::BudgetOptions bo;
  bo.deployment_views = false;  // the rows are what this test needs
  const auto budget = plan::validate_budget(bo);
  const auto row = std::find_if(budget.rows.begin(), budget.rows.end(),
                                [](const auto& r) { return r.model == kName; });
  ASSERT_NE(row, budget.rows.end());
  EXPECT_GT(row->memory_bytes, 0u);
  EXPECT_TRUE(row->within_target) << row->status;

  // Backtests: its own strategy and forecast evaluation beside the others.
  serving::BacktestJob bt;
  bt.bundles = job.out_dir;
  bt.data = all_csv;
  bt.rule = serving::ensemble_rule(job.out_dir);
  std::ostringstream log;
  const auto run = serving::run_backtest_job(bt, log);
  EXPECT_TRUE(run.results.count(kName));
  EXPECT_TRUE(run.forecasts.count(kName));
}

}  // namespace
}  // namespace foxhunt
