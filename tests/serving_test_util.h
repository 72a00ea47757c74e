#pragma once
// Helpers shared by the serving tests (ensemble, desk, rule fit, precision): untrained bundles.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/serving/bundle.h"

namespace foxhunt::testing {

/// Bundles of freshly initialised catalog models (LibTorch's RNG seeded with `seed` before each)
/// with the normaliser and fingerprint of `ds`: what `train all` writes, without the training.
/// Deterministic, and the four models give different signals.
inline std::vector<serving::Bundle> untrained_bundles(const data::MarketDataset& ds,
                                                      uint64_t seed) {
  std::vector<serving::Bundle> out;
  for (const auto& name : models::model_names()) {
    torch::manual_seed(seed);
    serving::Bundle b;
    b.model = models::make_model(name);
    b.normalizer = ds.normalizer();
    b.target_scale = 250.0;
    b.instrument_id = 0;
    b.data = serving::fingerprint(ds.series());
    b.training = {{"model", name}, {"note", "untrained"}};
    out.push_back(std::move(b));
  }
  return out;
}

/// Saves to `path` (and returns it) an untrained bundle of catalog model `model` built with
/// `options` (LibTorch's RNG seeded with `seed` first) over the embedded synthetic series, with
/// target scale 100: what `train` writes, without the training.
inline std::string save_untrained_synthetic_bundle(const std::string& model,
                                                   const nlohmann::json& options,
                                                   const std::string& path, uint64_t seed = 3) {
  auto series = data::generate_synthetic(data::SyntheticOptions{});
  data::DatasetOptions o;
  o.target_scale = 100.0;
  data::MarketDataset ds(series, o);
  torch::manual_seed(seed);
  serving::Bundle b;
  b.model = models::make_model(model, options);
  b.normalizer = ds.normalizer();
  b.target_scale = 100.0;
  b.data = serving::fingerprint(series);
  b.training = {{"note", "untrained"}};
  serving::save_bundle(b, path);
  return path;
}

/// Makes `b` a panel bundle of `symbols` (instrument ids 0, 1, ... in that order), each with the
/// normaliser and fingerprint of `ds` and target scale 2.
inline void add_panel_instruments(serving::Bundle& b, const data::MarketDataset& ds,
                                  const std::vector<std::string>& symbols) {
  for (const auto& symbol : symbols)
    b.instruments.push_back({.symbol = symbol,
                             .instrument_id = static_cast<int64_t>(b.instruments.size()),
                             .normalizer = ds.normalizer(),
                             .target_scale = 2.0,
                             .data = serving::fingerprint(ds.series())});
}

}  // namespace foxhunt::testing
