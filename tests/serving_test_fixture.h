#pragma once
// Helpers shared by serving_test.cpp (bundles, the decision rule, the ensemble) and
// serving_stream_test.cpp (streamed forecasts, predict, export/import): synthetic bars, fresh
// bundles saved as `train all` writes them, the live CSV predict streams, and the fixture;
// with test_util.h's TempDir and run_cli, all in the tests' namespace.
#include <torch/torch.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/serving/bundle.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt::testing {

inline data::BarSeries bars(int64_t n, uint64_t seed = 5) {
  return data::generate_synthetic({.bars = n, .seed = seed});
}

// Bundles of freshly initialised models with the normaliser of `ds` (what `train` writes,
// without the training).
inline std::vector<serving::Bundle> fresh_bundles(const data::MarketDataset& ds) {
  return untrained_bundles(ds, 77);
}

inline void save_all(const std::vector<serving::Bundle>& bundles,
                     const std::filesystem::path& dir) {
  for (const auto& b : bundles) {
    std::filesystem::create_directories(dir / b.name());
    serving::save_bundle(b, (dir / b.name() / serving::kBundleFile).string());
  }
}

// `train all`'s directory without the training: fresh bundles with the normaliser of `n`
// synthetic bars, saved under tmp/b. Returns that directory.
inline std::string saved_fresh_bundles(const TempDir& tmp, int64_t n) {
  save_all(fresh_bundles(data::MarketDataset(bars(n))), tmp.path() / "b");
  return (tmp.path() / "b").string();
}

// `series` written to tmp/live.csv, the file predict streams; returns its path.
inline std::string live_csv(const TempDir& tmp, const data::BarSeries& series) {
  const std::string csv = tmp.file("live.csv");
  data::write_bars_csv(csv, series);
  return csv;
}

/// The fixture of the serving tests (seeded).
class ServingTest : public SeededTest {};

}  // namespace foxhunt::testing

// The serving tests (namespace foxhunt::serving) call the helpers above unqualified.
namespace foxhunt::serving {
using foxhunt::testing::bars;
using foxhunt::testing::fresh_bundles;
using foxhunt::testing::live_csv;
using foxhunt::testing::run_cli;
using foxhunt::testing::save_all;
using foxhunt::testing::saved_fresh_bundles;
using foxhunt::testing::ServingTest;
using foxhunt::testing::TempDir;
}  // namespace foxhunt::serving
