// One bundle format: every bundle is written as version 3 (one series or a panel), and the
// bundles written before (version 1, feature sets named after the models) still load and serve
// the same numbers.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "foxhunt/core/container.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/serving/bundle.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt::serving {
namespace {

using foxhunt::testing::TempDir;

// `c` as an older build wrote it: version 1, no instruments list, no trading environment, and
// the feature sets under the names they had then.
void make_version_1(Container& c) {
  auto& h = c.header;
  h["bundle_version"] = 1;
  h.erase("instruments");
  h.erase("trading_env");
  const std::map<std::string, std::string> old_names = {{"compact32", "mamba2"},
                                                        {"past225", "tft_past"}};
  for (auto& in : h["spec"]["inputs"]) {
    const auto it = old_names.find(in.value("feature_set", std::string()));
    if (it != old_names.end()) in["feature_set"] = it->second;
  }
  nlohmann::json sets = nlohmann::json::object();
  for (const auto& [name, set] : h["features"]["sets"].items()) {
    const auto it = old_names.find(name);
    sets[it == old_names.end() ? name : it->second] = set;
  }
  h["features"]["sets"] = sets;
}

TEST(BundleCompatTest, EveryBundleIsVersion3AndVersion1BundlesStillServeTheSameNumbers) {
  TempDir tmp;
  const data::MarketDataset ds(data::generate_synthetic({.bars = 600, .seed = 9}));
  int64_t renamed = 0;
  for (auto& b : foxhunt::testing::untrained_bundles(ds, 3)) {
    const auto now = tmp.file(b.name() + ".fhb");
    save_bundle(b, now);
    Container c = read_container(now);
    EXPECT_EQ(c.header.at("bundle_version"), kBundleVersion);
    EXPECT_EQ(kBundleVersion, 3);
    ASSERT_TRUE(c.header.at("instruments").is_array());
    EXPECT_TRUE(c.header.at("instruments").empty());  // one series: no instruments listed
    const std::string before = c.header.at("spec").dump();
    make_version_1(c);
    renamed += c.header.at("spec").dump() != before;
    const auto old = tmp.file(b.name() + "-v1.fhb");
    write_container(old, c);

    const auto fresh = load_bundle(now);
    const auto legacy = load_bundle(old);
    EXPECT_FALSE(legacy.panel());
    EXPECT_EQ(legacy.trading_env.pnl_scale, data::TradingEnvOptions{}.pnl_scale);
    const nlohmann::json spec_now = fresh.model->spec(), spec_old = legacy.model->spec();
    EXPECT_EQ(spec_old, spec_now);
    auto batch = fresh.model->example_batch(3, 0, torch::kCPU, 17);
    torch::NoGradGuard no_grad;
    EXPECT_TRUE(torch::equal(fresh.model->forward(batch)[0], legacy.model->forward(batch)[0]))
        << b.name();
  }
  EXPECT_EQ(renamed, 2);  // the two forecasters' sets had other names

  // A panel bundle as version 2 wrote it (instruments listed, no trading environment) loads as
  // a panel; written today (version 3) it lists them the same way.
  auto panel = foxhunt::testing::untrained_bundles(ds, 3).front();
  foxhunt::testing::add_panel_instruments(panel, ds, {"AAA", "BBB"});
  save_bundle(panel, tmp.file("panel.fhb"));
  Container v2 = read_container(tmp.file("panel.fhb"));
  EXPECT_EQ(v2.header.at("instruments").size(), 2u);
  v2.header["bundle_version"] = 2;
  v2.header.erase("trading_env");
  write_container(tmp.file("panel-v2.fhb"), v2);
  for (const char* file : {"panel.fhb", "panel-v2.fhb"}) {
    const auto b = load_bundle(tmp.file(file));
    ASSERT_TRUE(b.panel()) << file;
    EXPECT_EQ(b.symbols_text(), "AAA, BBB") << file;
    EXPECT_EQ(b.calibration("BBB").instrument_id, 1) << file;
  }
  // A version this build never wrote is refused, naming the versions it reads.
  Container c = read_container(tmp.file("dqn.fhb"));
  c.header["bundle_version"] = 4;
  write_container(tmp.file("v4.fhb"), c);
  foxhunt::testing::expect_input_error([&] { load_bundle(tmp.file("v4.fhb")); }, "",
                                       {"bundle version 4", "reads versions 1 to 3"});
}

}  // namespace
}  // namespace foxhunt::serving
