// Bundle headers (serving/bundle.h): a real bundle of each catalog model (compact options,
// untrained weights) at fp32, then one of each model's bf16 form, with its header rewritten by
// the input, its weights kept. The input's first byte picks the bundle (0-3: the catalog's models
// at fp32, in catalog order; then the bf16 forms, in catalog order), the rest is a JSON merge
// patch (RFC 7386) applied to that bundle's header; a patch that is not an object replaces the
// whole header. On a CPU without BF16 arithmetic every bf16 bundle is refused at load.
//
// Contract, stronger than the other targets': the rewritten bundle is refused at load with an
// InputError, or it loads AND a desk over it serves 500 bars of a synthetic series with no
// exception at all and every decision and signal finite (decisions in [-1, 1]). A bundle that
// loads is a bundle that serves.
#include <torch/torch.h>

#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "foxhunt/core/container.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/desk.h"
#include "fuzz.h"

namespace foxhunt {
namespace {

constexpr int64_t kServedBars = 500;

struct RealBundles {
  std::vector<std::string> names;            // "model" (fp32), then "model@bf16"
  std::map<std::string, Container> bundles;  // by those names
  data::BarSeries series;                    // the bars served
};

// The bundles `train all` would write for compact models, untrained (made once per process).
const RealBundles& real() {
  static const RealBundles r = [] {
    torch::set_num_threads(1);
    RealBundles out;
    out.series = data::generate_synthetic({.bars = kServedBars, .seed = 11});
    const data::MarketDataset ds(data::generate_synthetic({.bars = 700, .seed = 3}));
    const auto dir = std::filesystem::temp_directory_path() /
                     ("foxhunt_fuzz_bundle_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto add = [&](const std::string& name, models::Precision precision) {
      torch::manual_seed(1);
      serving::Bundle b;
      b.model = models::make_model_at(name, precision,
                                      models::catalog_entry(name).compact_model_options, "fuzz");
      b.normalizer = ds.normalizer();
      b.target_scale = 250.0;
      b.data = serving::fingerprint(ds.series());
      b.training = {{"note", "untrained"}};
      const std::string key =
          precision == models::Precision::kFp32 ? name : name + "@" + models::to_string(precision);
      const auto path = (dir / (key + ".fhb")).string();
      serving::save_bundle(b, path);
      out.bundles[key] = read_container(path);
      out.names.push_back(key);
      // The writer's own bundle loads (where this CPU runs its precision): otherwise every
      // input would be refused and the contract hold vacuously.
      try {
        models::check_precision_runs_on(precision, torch::kCPU, "fuzz");
      } catch (const InputError&) {
        return;
      }
      try {
        (void)serving::bundle_from_container(out.bundles[key], path);
      } catch (const InputError& e) {
        throw std::logic_error("bundle_header: the writer's own " + key +
                               " bundle is refused: " + e.what());
      }
    };
    for (const auto& name : models::model_names()) add(name, models::Precision::kFp32);
    for (const auto& name : models::models_with_precision(models::Precision::kBf16))
      add(name, models::Precision::kBf16);
    std::filesystem::remove_all(dir);
    return out;
  }();
  return r;
}

[[noreturn]] void violated(const std::string& what) {
  throw std::logic_error("bundle_header contract: a bundle that loaded " + what);
}

// Serves the real series through a desk over `b`; any exception or non-finite value is a bug.
void serve(serving::Bundle b) {
  const std::string symbol = b.panel() ? b.instruments.front().symbol : std::string("FUZZ");
  serving::DeskOptions options;
  options.parallel = false;
  std::vector<serving::Bundle> one;
  one.push_back(std::move(b));
  try {
    serving::Desk desk(std::move(one), serving::DecisionRule{}, options);
    for (const auto& bar : real().series.bars) {
      for (const auto& d : desk.on_timestamp(bar.timestamp, {{symbol, bar}})) {
        const double x = d.decision.decision;
        if (!std::isfinite(x) || x < -1.0 || x > 1.0)
          violated("decided " + std::to_string(x) + " at " + std::to_string(bar.timestamp));
        for (const auto& s : d.decision.signals)
          if (!std::isfinite(s.signal))
            violated("gave model '" + s.model + "' a non-finite signal");
      }
    }
  } catch (const std::logic_error&) {
    throw;
  } catch (const std::exception& e) {
    violated(std::string("threw while serving: ") + e.what());
  }
}

}  // namespace
}  // namespace foxhunt

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace foxhunt;
  if (size == 0) return 0;
  const auto& r = real();
  const auto& name = r.names[data[0] % r.names.size()];
  nlohmann::json patch;
  try {
    // Not JSON, or nested deeper than a header may be: the container's own reader refuses such
    // a header (fuzz/container.cpp), and merging or encoding it would recurse that deep here.
    patch = parse_header(fuzz::text_of(data + 1, size - 1), "fuzz patch");
  } catch (const InputError&) {
    return 0;
  }
  Container c = r.bundles.at(name);
  c.header.merge_patch(patch);
  serving::Bundle b;
  try {
    // Through the bytes, as a file would be read (the CRC re-computed).
    b = serving::bundle_from_container(decode_container(encode_container(c), "fuzz.fhb"),
                                       "fuzz.fhb");
  } catch (const InputError&) {
    return 0;  // refused at load: a valid answer
  }
  serve(std::move(b));
  return 0;
}
