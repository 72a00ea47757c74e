// A bundle that loads is a bundle a training run could have written: every header field the
// loader reads is checked against its domain and, where the build computes it, against the
// build's value. Each case below writes a real bundle, rewrites one header field (the container
// re-encoded, so the CRC is right) and expects the InputError naming the file and that field.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "foxhunt/core/container.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/bf16.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/serving/bundle.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt::serving {
namespace {

using foxhunt::testing::TempDir;
using Json = nlohmann::json;

// One rewrite of one header field and the field the refusal must name.
struct FieldCase {
  std::string model;                  // whose bundle is rewritten
  std::string field;                  // named in the error: "field '<field>'"
  std::function<void(Json& h)> edit;  // the rewrite
  std::string why = "";               // a further part of the message, when given
};

std::vector<FieldCase> field_cases() {
  const Json many_params = {{"hidden", {1 << 20, 1 << 20}}};
  return {
      {"dqn", "kind", [](Json& h) { h["kind"] = "trainer"; }, "trainer checkpoint"},
      {"dqn", "kind", [](Json& h) { h["kind"] = 3; }},
      {"dqn", "bundle_version", [](Json& h) { h["bundle_version"] = "3"; }, "an integer"},
      {"dqn", "bundle_version", [](Json& h) { h["bundle_version"] = 0; }, "reads versions 1 to 3"},
      {"dqn", "bundle_version", [](Json& h) { h["bundle_version"] = 3.5; }},
      {"dqn", "precision", [](Json& h) { h["precision"] = 7; }, "a string"},
      {"dqn", "precision", [](Json& h) { h["precision"] = "int8"; }},
      {"dqn", "model", [](Json& h) { h["model"] = 5; }},
      {"dqn", "model", [](Json& h) { h["model"] = "lstm"; }, "unknown model 'lstm'"},
      {"dqn", "options", [](Json& h) { h["options"] = Json::array(); }, "a JSON object"},
      {"dqn", "options", [](Json& h) { h["options"]["bogus"] = 1; }, "bogus"},
      {"dqn", "options", [=](Json& h) { h["options"].update(many_params); },
       "more than the file's"},
      {"dqn", "options", [](Json& h) { h["options"]["actions"] = 2; }, "policy over 3 actions"},
      // Options for fewer parameters than the file holds: the weights' shapes are not the
      // model's (torch's loader would take the stored shapes and serve another network).
      {"dqn", "options",
       [](Json& h) {
         h["options"]["hidden"] = {64, 32};
       },
       "stored Float ["},
      {"dqn", "options", [](Json& h) { h["options"]["state_dim"] = 10; }, "feature set 'rl_state'"},
      {"dqn", "spec", [](Json& h) { h["spec"]["window"] = 5; }, "stored I/O spec differs"},
      {"dqn", "spec", [](Json& h) { h["spec"] = "x"; }, "a JSON object"},
      {"dqn", "features", [](Json& h) { h["features"] = 1; }},
      {"dqn", "features.warmup", [](Json& h) { h["features"]["warmup"] = -1; }},
      {"dqn", "features.warmup", [](Json& h) { h["features"]["warmup"] = "256"; }},
      {"dqn", "features.bank", [](Json& h) { h["features"]["bank"][3] = "renamed"; },
       "different feature bank"},
      {"dqn", "features.calendar", [](Json& h) { h["features"]["calendar"] = Json::array(); }},
      {"dqn", "features.sets",
       [](Json& h) {
         h["features"]["sets"]["past225"] = {{"width", 1}, {"columns", {0}}};
       }},
      {"dqn", "normalizer",
       [](Json& h) {
         h["normalizer"]["mean"] = {0.0, 1.0};
       }},
      {"dqn", "normalizer", [](Json& h) { h["normalizer"]["std"][7] = 0.0; }},
      {"dqn", "normalizer", [](Json& h) { h["normalizer"]["std"][7] = -2.0; }},
      {"dqn", "normalizer", [](Json& h) { h["normalizer"]["clip"] = "big"; }},
      {"dqn", "target_scale", [](Json& h) { h["target_scale"] = -3; }, "got -3"},
      {"dqn", "target_scale", [](Json& h) { h["target_scale"] = 0; }},
      {"dqn", "target_scale", [](Json& h) { h["target_scale"] = "250"; }},
      {"dqn", "target_vol_feature", [](Json& h) { h["target_vol_feature"] = "bogus"; }},
      {"dqn", "target_vol_feature", [](Json& h) { h["target_vol_feature"] = 5; }},
      {"dqn", "target_vol_feature",
       [](Json& h) {
         h["target_vol_feature"] = "absret_mean_200";
         h["features"]["warmup"] = 100;
       },
       "warm-up"},
      {"dqn", "instrument_id", [](Json& h) { h["instrument_id"] = -1; }},
      {"dqn", "instrument_id", [](Json& h) { h["instrument_id"] = 1.5; }},
      {"dqn", "trading_env", [](Json& h) { h["trading_env"] = "x"; }},
      {"dqn", "trading_env.pnl_scale", [](Json& h) { h["trading_env"]["pnl_scale"] = -3; },
       "expected a finite number > 0, got -3"},
      {"dqn", "trading_env.pnl_scale", [](Json& h) { h["trading_env"]["pnl_scale"] = 0; }},
      {"dqn", "trading_env.pnl_scale", [](Json& h) { h["trading_env"]["pnl_scale"] = nullptr; }},
      {"dqn", "trading_env.cost_bps", [](Json& h) { h["trading_env"]["cost_bps"] = -1; }},
      {"dqn", "trading_env.costs.spread_bps",
       [](Json& h) { h["trading_env"]["costs"]["spread_bps"] = -1; }},
      {"dqn", "trading_env.costs.contract_multiplier",
       [](Json& h) { h["trading_env"]["costs"]["contract_multiplier"] = 0; }},
      {"dqn", "trading_env.costs.window", [](Json& h) { h["trading_env"]["costs"]["window"] = 1; }},
      {"dqn", "trading_env.episode_length",
       [](Json& h) { h["trading_env"]["episode_length"] = -1; }},
      {"dqn", "trading_env.episode_length",
       [](Json& h) { h["trading_env"].erase("episode_length"); }, "missing"},
      {"dqn", "data", [](Json& h) { h["data"] = Json::array(); }},
      {"dqn", "data.source", [](Json& h) { h["data"]["source"] = 3; }},
      {"dqn", "data.rows", [](Json& h) { h["data"]["rows"] = -1; }},
      {"dqn", "data.last_timestamp",
       [](Json& h) {
         h["data"]["last_timestamp"] = h["data"]["first_timestamp"].get<int64_t>() - 1;
       }},
      {"dqn", "data.hash", [](Json& h) { h["data"]["hash"] = "xyz"; }},
      {"dqn", "training", [](Json& h) { h["training"] = Json::array(); }},
      {"dqn", "instruments", [](Json& h) { h["instruments"] = Json::object(); }},
      {"dqn", "instruments", [](Json& h) { h.erase("instruments"); }, "missing"},
      {"dqn", "instruments[0]", [](Json& h) { h["instruments"] = {1}; }},
      // Forecasters: the quantile levels, the window, the bank columns of their feature sets and
      // the instrument ids within the TFT's categories.
      {"tft", "options",
       [](Json& h) {
         h["options"]["quantiles"] = {0.5, 0.1, 0.9};
       },
       "strictly increasing"},
      {"tft", "options",
       [](Json& h) {
         h["options"]["quantiles"] = {0.1, 0.1, 0.9};
       },
       "strictly increasing"},
      {"tft", "options", [](Json& h) { h["options"]["quantiles"] = {0.5}; }},
      {"tft", "options", [](Json& h) { h["options"]["window"] = kMaxServedWindow + 1; },
       "window in [1, 4096]"},
      {"tft", "options", [](Json& h) { h["options"]["horizon"] = 0; }},
      {"tft", "options", [](Json& h) { h["options"]["static_categories"] = 1 << 24; },
       "parameters"},
      {"tft", "options", [](Json& h) { h["options"]["hidden"] = int64_t{1} << 40; }},
      {"tft", "instrument_id", [](Json& h) { h["instrument_id"] = 16; }, "[0, 15]"},
      {"tft", "features.sets.past225.columns[0]",
       [](Json& h) { h["features"]["sets"]["past225"]["columns"][0] = 999; }},
      {"tft", "features.sets", [](Json& h) { h["features"]["sets"].erase("calendar"); }},
      // An fp32 file read as bf16: torch's loader would reinterpret the float bytes as bf16
      // ones (found by fuzz/bundle_header: NaN forecasts).
      {"tft", "precision", [](Json& h) { h["precision"] = "bf16"; }, "stored Float"},
      {"mamba2", "precision", [](Json& h) { h["precision"] = "bf16"; }, "holds BFloat16"},
      {"mamba2", "options", [](Json& h) { h["options"]["input_dim"] = 31; },
       "feature set 'compact32'"},
      {"mamba2", "options", [](Json& h) { h["options"]["d_model"] = int64_t{1} << 62; },
       "overflows"},
      {"ppo", "options", [](Json& h) { h["options"]["hidden"] = {-4}; }},
  };
}

// A panel bundle's instruments: symbols and ids unique, ids within the model's categories.
std::vector<FieldCase> instrument_cases() {
  return {
      {"tft", "instruments[1].symbol", [](Json& h) { h["instruments"][1]["symbol"] = "AAA"; },
       "not listed before"},
      {"tft", "instruments[0].symbol", [](Json& h) { h["instruments"][0]["symbol"] = ""; }},
      {"tft", "instruments[1].instrument_id",
       [](Json& h) { h["instruments"][1]["instrument_id"] = 0; }, "no instrument listed before"},
      {"tft", "instruments[1].instrument_id",
       [](Json& h) { h["instruments"][1]["instrument_id"] = 16; }},
      {"tft", "instruments[0].target_scale",
       [](Json& h) { h["instruments"][0]["target_scale"] = 0; }},
      {"tft", "instruments[0].normalizer",
       [](Json& h) { h["instruments"][0]["normalizer"]["mean"] = {1.0}; }},
      {"tft", "instruments[1].data.hash", [](Json& h) { h["instruments"][1]["data"]["hash"] = 7; }},
  };
}

void expect_refused(const std::string& good, const FieldCase& c, const TempDir& tmp, int n) {
  Container k = read_container(good);
  c.edit(k.header);
  const std::string bad = tmp.file("case" + std::to_string(n) + ".fhb");
  write_container(bad, k);
  std::vector<std::string> parts = {"'" + bad + "'", "field '" + c.field + "'"};
  if (!c.why.empty()) parts.push_back(c.why);
  SCOPED_TRACE(c.model + " " + c.field + " case " + std::to_string(n));
  foxhunt::testing::expect_input_error([&] { (void)load_bundle(bad); }, "bundle", parts);
}

class BundleContractTest : public foxhunt::testing::SeededTest {};

TEST_F(BundleContractTest, EveryHeaderFieldOutsideItsDomainIsRefusedNamingFileAndField) {
  TempDir tmp;
  const data::MarketDataset ds(data::generate_synthetic({.bars = 600, .seed = 4}));
  std::map<std::string, std::string> good;
  for (auto& b : foxhunt::testing::untrained_bundles(ds, 8)) {
    good[b.name()] = tmp.file(b.name() + ".fhb");
    save_bundle(b, good[b.name()]);
    EXPECT_NO_THROW((void)load_bundle(good[b.name()])) << b.name();  // the writer's own bundle
  }
  int n = 0;
  for (const auto& c : field_cases()) expect_refused(good.at(c.model), c, tmp, n++);

  // A panel bundle of the TFT (two instruments) loads, and each instrument field is checked.
  auto panel = foxhunt::testing::untrained_bundles(ds, 8).back();
  ASSERT_EQ(panel.name(), "tft");
  foxhunt::testing::add_panel_instruments(panel, ds, {"AAA", "BBB"});
  const std::string panel_file = tmp.file("panel.fhb");
  save_bundle(panel, panel_file);
  EXPECT_EQ(load_bundle(panel_file).instruments.size(), 2u);
  for (const auto& c : instrument_cases()) expect_refused(panel_file, c, tmp, n++);
}

TEST_F(BundleContractTest, ValuesInsideTheDomainStillLoad) {
  // The checks refuse what no run writes, not what a run can: 0 episode length (whole range),
  // 0 cost, another pnl scale, a data set of one bar, an older bundle without trading_env.
  TempDir tmp;
  const data::MarketDataset ds(data::generate_synthetic({.bars = 600, .seed = 4}));
  auto b = foxhunt::testing::untrained_bundles(ds, 8).front();
  const std::string good = tmp.file("good.fhb");
  save_bundle(b, good);
  Container c = read_container(good);
  c.header["trading_env"] = {{"pnl_scale", 50.0}, {"cost_bps", 0}, {"episode_length", 0}};
  c.header["data"]["rows"] = 1;
  c.header["data"]["last_timestamp"] = c.header["data"]["first_timestamp"];
  write_container(tmp.file("edge.fhb"), c);
  const auto loaded = load_bundle(tmp.file("edge.fhb"));
  EXPECT_EQ(loaded.trading_env.pnl_scale, 50.0);
  EXPECT_EQ(loaded.trading_env.episode_length, 0);
  c.header.erase("trading_env");
  write_container(tmp.file("old.fhb"), c);
  EXPECT_EQ(load_bundle(tmp.file("old.fhb")).trading_env.pnl_scale,
            data::TradingEnvOptions{}.pnl_scale);
}

// A bf16 bundle is held to the same contract: its options are bounded by the bf16 weights its
// file holds (the fp32 parameter count is no bound on a cast file, so without this an option
// rewrite builds a model the weights do not fit), and where this CPU cannot run bf16 it is
// refused at load, naming the precision, not at the first bar served.
TEST_F(BundleContractTest, Bf16BundlesAreBoundedByTheirWeightsAndRefusedWhereTheCpuLacksBf16) {
  TempDir tmp;
  const data::MarketDataset ds(data::generate_synthetic({.bars = 600, .seed = 4}));
  struct Form {
    std::string model;
    Json options;  // compact
    Json bigger;   // the same model, at least 16 times the bf16 weights
  };
  const std::vector<Form> forms = {
      {"tft", {{"hidden", 8}, {"heads", 2}}, {{"hidden", 256}}},
      {"mamba2", {{"d_model", 16}, {"n_layers", 1}}, {{"d_model", 256}}},
  };
  ASSERT_EQ(models::models_with_precision(models::Precision::kBf16).size(), forms.size());
  int n = 0;
  for (const auto& f : forms) {
    SCOPED_TRACE(f.model);
    torch::manual_seed(5);
    Bundle b;
    b.model = models::make_model_at(f.model, models::Precision::kBf16, f.options, "test");
    b.normalizer = ds.normalizer();
    b.target_scale = 250.0;
    b.data = fingerprint(ds.series());
    b.training = {{"note", "untrained"}};
    const std::string good = tmp.file(f.model + "-bf16.fhb");
    save_bundle(b, good);
    if (models::cpu_has_bf16()) {
      EXPECT_EQ(load_bundle(good).model->precision(), models::Precision::kBf16);
    }
    // Bigger options than the file's bf16 weights: refused before the model is built.
    expect_refused(good,
                   {f.model, "options", [&](Json& h) { h["options"].update(f.bigger); },
                    "bytes of bf16 weights, more than the file's"},
                   tmp, n++);
    // Options a bf16 form cannot take are named as the fp32 ones are.
    expect_refused(good, {f.model, "options", [](Json& h) { h["options"]["bogus"] = 1; }, "bogus"},
                   tmp, n++);
    // The same file read as fp32: refused at load, naming the file and the field (the options,
    // by the fp32 byte bound; or where the archive's overhead hides the difference, the
    // precision, by the weights' element type).
    {
      Container k = read_container(good);
      k.header["precision"] = "fp32";
      const std::string bad = tmp.file("case" + std::to_string(n++) + ".fhb");
      write_container(bad, k);
      try {
        (void)load_bundle(bad);
        ADD_FAILURE() << "a bf16 file read as fp32 loaded";
      } catch (const InputError& e) {
        const std::string m = e.what();
        EXPECT_EQ(e.component(), "bundle") << m;
        EXPECT_NE(m.find("'" + bad + "'"), std::string::npos) << m;
        EXPECT_TRUE(m.find("field 'options'") != std::string::npos ||
                    m.find("field 'precision'") != std::string::npos)
            << m;
      }
    }
    {
      // As on a CPU without BF16 (models/bf16.h), for this scope.
      struct AssumeNoBf16 {
        AssumeNoBf16() { ::setenv("FOXHUNT_ASSUME_NO_BF16", "1", 1); }
        ~AssumeNoBf16() { ::unsetenv("FOXHUNT_ASSUME_NO_BF16"); }
      } no_bf16;
      foxhunt::testing::expect_input_error(
          [&] { (void)load_bundle(good); }, "bundle",
          {"'" + good + "'", "field 'precision'", "avx512_bf16", "serve this model at fp32"});
    }
  }
}

TEST_F(BundleContractTest, ModelCheckpointHeadersNameTheirFields) {
  TempDir tmp;
  auto model = models::make_model("ppo");
  const std::string good = tmp.file("m.ckpt");
  models::save_model(*model, good);
  EXPECT_NO_THROW((void)models::load_model(good));
  const std::vector<std::pair<std::string, std::function<void(Json&)>>> cases = {
      {"model", [](Json& h) { h["model"] = 3; }},
      {"model", [](Json& h) { h["model"] = "gru"; }},
      {"options", [](Json& h) { h["options"] = "big"; }},
      {"options",
       [](Json& h) {
         h["options"]["hidden"] = {1 << 20, 1 << 20};
       }},
      {"options", [](Json& h) { h["options"]["state_dim"] = int64_t{1} << 62; }},
  };
  for (const auto& [field, edit] : cases) {
    Container c = read_container(good);
    edit(c.header);
    write_container(tmp.file("bad.ckpt"), c);
    foxhunt::testing::expect_input_error(
        [&] { (void)models::load_model(tmp.file("bad.ckpt")); }, "checkpoint",
        {"'" + tmp.file("bad.ckpt") + "'", "field '" + field + "'"});
  }
}

}  // namespace
}  // namespace foxhunt::serving
