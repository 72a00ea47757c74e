#include "foxhunt/serving/bundle.h"

#include <fmt/format.h>

#include "foxhunt/data/dataset.h"
#include "foxhunt/data/flow_features.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "foxhunt/core/container.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/hash.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/precisions.h"

namespace foxhunt::serving {

std::string BundleDirectory::model_dir(const std::string& model) const {
  return (std::filesystem::path(dir_) / model).string();
}

std::string BundleDirectory::bundle_path(const std::string& model) const {
  return bundle_in(model_dir(model));
}

std::string BundleDirectory::rule_path() const {
  return (std::filesystem::path(dir_) / kRuleFile).string();
}

bool BundleDirectory::complete() const {
  if (dir_.empty()) return false;
  for (const auto& name : models::model_names())
    if (!std::filesystem::exists(bundle_path(name))) return false;
  return true;
}

std::string BundleDirectory::bundle_in(const std::string& model_out_dir) {
  return (std::filesystem::path(model_out_dir) / kBundleFile).string();
}

namespace {

constexpr const char* kBundleComponent = "bundle";

uint64_t fnv1a(uint64_t h, const void* data, size_t n) {
  return fnv1a_64(static_cast<const unsigned char*>(data), n, h);
}

}  // namespace

DataFingerprint fingerprint(const data::BarSeries& series) {
  DataFingerprint f;
  f.source = series.source;
  f.rows = series.size();
  if (!series.bars.empty()) {
    f.first_timestamp = series.bars.front().timestamp;
    f.last_timestamp = series.bars.back().timestamp;
  }
  uint64_t h = kFnv1aOffset;
  for (const auto& b : series.bars) {
    h = fnv1a(h, &b.timestamp, sizeof(b.timestamp));
    for (double v : {b.open, b.high, b.low, b.close, b.volume}) h = fnv1a(h, &v, sizeof(v));
  }
  f.hash = fmt::format("{:016x}", h);
  return f;
}

DataFingerprint fingerprint(const data::Panel& panel) {
  DataFingerprint f;
  f.source = panel.source;
  f.rows = panel.rows();
  if (!panel.timestamps.empty()) {
    f.first_timestamp = panel.timestamps.front();
    f.last_timestamp = panel.timestamps.back();
  }
  uint64_t h = kFnv1aOffset;
  for (const auto& ps : panel.symbols) {
    h = fnv1a(h, ps.symbol.data(), ps.symbol.size() + 1);  // the terminating 0 separates names
    const auto one = fingerprint(ps.series);
    h = fnv1a(h, one.hash.data(), one.hash.size());
  }
  f.hash = fmt::format("{:016x}", h);
  return f;
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(DataFingerprint, source, rows, first_timestamp, last_timestamp,
                                   hash)

Calibration Bundle::calibration() const {
  return {&normalizer, target_scale, instrument_id};
}

Calibration Bundle::calibration(const std::string& s) const {
  if (instruments.empty()) return calibration();
  for (const auto& i : instruments)
    if (i.symbol == s) return {&i.normalizer, i.target_scale, i.instrument_id};
  throw InputError(
      kBundleComponent,
      foxhunt::detail::cat("symbol '", s, "': the ", name(), " bundle was trained on a panel of ",
                  instruments.size(), " instruments (", symbols_text(),
                  ") and has no normaliser or instrument id for it; serve those "
                  "symbols, or train on a panel that includes it"));
}

std::string Bundle::symbols_text() const {
  std::string out;
  for (const auto& i : instruments) out += (out.empty() ? "" : ", ") + i.symbol;
  return out;
}

Bundle select_instrument(Bundle b, const std::string& symbol) {
  if (!b.panel()) return b;
  const auto c = b.calibration(symbol);  // InputError for a symbol it was not trained on
  for (const auto& i : b.instruments)
    if (i.symbol == symbol) b.data = i.data;
  b.normalizer = *c.normalizer;
  b.target_scale = c.target_scale;
  b.instrument_id = c.instrument_id;
  b.symbol = symbol;
  return b;
}

std::vector<Bundle> select_instrument(std::vector<Bundle> bundles, const std::string& symbol) {
  for (auto& b : bundles) b = select_instrument(std::move(b), symbol);
  return bundles;
}

void check_instrument_selected(const Bundle& b, const std::string& what) {
  FOXHUNT_CHECK(!b.panel() || !b.symbol.empty(), kBundleComponent, what, ": the ", b.name(),
                " bundle was trained on a panel of ", b.instruments.size(), " instruments (",
                b.symbols_text(),
                "); serve them with a panel (a CSV with a symbol column) or select one instrument");
}

std::optional<data::BarSpec> recorded_bar_spec(const std::vector<Bundle>& bundles,
                                               const std::string& dir) {
  std::optional<data::BarSpec> spec;
  const Bundle* first = nullptr;
  for (const auto& b : bundles) {
    const std::optional<data::BarSpec> mine =
        b.bars ? std::optional<data::BarSpec>(b.bars->spec) : std::nullopt;
    if (!first) {
      first = &b;
      spec = mine;
      continue;
    }
    const auto text = [](const std::optional<data::BarSpec>& s) {
      return s ? "bar spec '" + data::to_string(*s) + "'" : std::string("plain bars");
    };
    FOXHUNT_CHECK(mine == spec, kBundleComponent, BundleDirectory(dir).bundle_path(b.name()),
                  " was trained on ", text(mine), ", ",
                  BundleDirectory(dir).bundle_path(first->name()), " on ", text(spec),
                  ": expected one ensemble trained on the same bars");
  }
  return spec;
}

data::BarSpec tape_bar_spec(const std::vector<Bundle>& bundles, const std::string& dir,
                            const std::optional<data::BarSpec>& given) {
  const auto recorded = recorded_bar_spec(bundles, dir);
  FOXHUNT_CHECK(recorded || given, kBundleComponent, "the bundles in ", dir,
                " were trained on plain bars and record no bar spec: expected the tape's bar "
                "spec stated (--bar, ",
                data::kBarSpecForms, ")");
  if (!recorded) return *given;
  FOXHUNT_CHECK(!given || *given == *recorded, kBundleComponent, "bar spec '",
                data::to_string(*given), "' differs from '", data::to_string(*recorded), "' that ",
                BundleDirectory(dir).bundle_path(bundles.front().name()),
                " was trained on: expected the same spec (leave --bar out to use it, or train on '",
                data::to_string(*given), "' bars)");
  return *recorded;
}

nlohmann::json feature_spec(const models::IoSpec& spec, int64_t warmup, bool flow) {
  nlohmann::json sets = nlohmann::json::object();
  for (const auto& in : spec.inputs) {
    if (in.feature_set.empty()) continue;
    const auto& fs = data::feature_set(in.feature_set, flow);
    sets[fs.name] = {{"width", fs.width}, {"columns", fs.columns}};
  }
  nlohmann::json out = {{"bank", data::observed_feature_names()},
                        {"calendar", data::calendar_feature_names()},
                        {"warmup", warmup},
                        {"sets", sets}};
  if (flow) out["flow"] = data::flow_feature_names();  // absent: a bundle of plain bars
  return out;
}

void save_bundle(const Bundle& b, const std::string& path) {
  FOXHUNT_CHECK(b.model != nullptr, kBundleComponent, "'", path, "': expected a model to bundle");
  Container c;
  const auto spec = b.model->spec();
  nlohmann::json normalizer = b.normalizer;
  nlohmann::json spec_json = spec;
  c.header = {{"kind", "bundle"},
              {"bundle_version", kBundleVersion},
              {"foxhunt_version", FOXHUNT_VERSION},
              {"model", b.model->name()},
              {"precision", b.model->precision()},
              {"options", b.model->options_json()},
              {"spec", spec_json},
              {"features", feature_spec(spec, b.warmup, b.flow_features)},
              {"normalizer", normalizer},
              {"target_scale", b.target_scale},
              {"target_vol_feature", b.target_vol_feature},
              {"instrument_id", b.instrument_id},
              {"trading_env",
               {{"pnl_scale", b.trading_env.pnl_scale},
                {"cost_bps", b.trading_env.cost_bps},
                {"episode_length", b.trading_env.episode_length}}},
              {"data", b.data},
              {"training", b.training}};
  // Optional fields: a reader that predates them ignores them (plain bars, the old calendar).
  if (b.bars)
    c.header["bars"] = {{"spec", data::to_string(b.bars->spec)}, {"source", b.bars->source}};
  if (b.periods_per_year > 0)
    c.header["calendar"] = {{"periods_per_year", b.periods_per_year},
                            {"basis", b.periods_per_year_basis}};
  {
    nlohmann::json list = nlohmann::json::array();  // empty: a model of one series
    for (const auto& i : b.instruments) {
      FOXHUNT_CHECK(!i.symbol.empty() && i.target_scale > 0, kBundleComponent, "'", path,
                    "': an instrument needs a symbol and a target scale > 0");
      nlohmann::json n = i.normalizer;
      list.push_back({{"symbol", i.symbol},
                      {"instrument_id", i.instrument_id},
                      {"normalizer", n},
                      {"target_scale", i.target_scale},
                      {"data", i.data}});
    }
    c.header["instruments"] = list;
  }
  c.blobs["module"] = models::module_to_bytes(b.model->module());
  write_container(path, c);
}

namespace {

// Feature sets are named by what they hold; bundles written before name a set after the model
// that read it. A stored name this build does not know is the current set with the same columns
// and width (the bundle's feature spec lists them); any other name is returned as it is.
std::string current_set_name(const std::string& stored, const nlohmann::json& stored_sets) {
  const auto& sets = data::feature_sets();
  if (std::any_of(sets.begin(), sets.end(), [&](const auto& s) { return s.name == stored; }))
    return stored;
  const auto it = stored_sets.find(stored);
  if (it == stored_sets.end()) return stored;
  const auto columns = it->at("columns").get<std::vector<int64_t>>();
  const auto width = it->at("width").get<int64_t>();
  for (const auto& s : sets)
    if (s.columns == columns && s.width == width) return s.name;
  return stored;
}

}  // namespace

Bundle load_bundle(const std::string& path_in, const torch::Device& device,
                   const std::string& expected_model) {
  // A model's output directory (DIR/tft) names its bundle as well as DIR/tft/bundle.fhb does.
  std::string path = path_in;
  if (std::filesystem::is_directory(path)) {
    path = BundleDirectory::bundle_in(path_in);
    FOXHUNT_CHECK(std::filesystem::exists(path), kBundleComponent, "'", path_in,
                  "': expected a bundle file or a model directory holding ", kBundleFile,
                  " (a training run writes its out_dir/", kBundleFile, "); this directory has none",
                  BundleDirectory(path_in).complete()
                      ? " (it is an ensemble directory: name one model, e.g. " + path_in + "/tft)"
                      : std::string());
  }
  const Container c = read_container(path);  // magic, version, length and CRC checked
  const auto& h = c.header;
  const std::string kind = h.value("kind", std::string("?"));
  FOXHUNT_CHECK(
      kind == "bundle", kBundleComponent, "'", path,
      "': expected a model bundle (kind \"bundle\", ", "written by `foxhunt train`), got a '", kind,
      "' file",
      kind == "trainer" ? " (a trainer checkpoint; its directory also holds bundle.fhb)" : "");
  const int version = h.value("bundle_version", -1);
  FOXHUNT_CHECK(version >= kOldestBundleVersion && version <= kBundleVersion, kBundleComponent, "'",
                path, "': bundle version ", version, ", this foxhunt reads versions ",
                kOldestBundleVersion, " to ", kBundleVersion, "; retrain or convert it");
  Bundle b;
  try {
    // Bundles written before INT8 models have no precision: they are FP32.
    const std::string precision =
        h.value("precision", std::string(models::to_string(models::Precision::kFp32)));
    const auto p = models::try_parse_precision(precision);  // another text: refused below
    std::unique_ptr<models::Model> model;
    if (p == models::Precision::kFp32) {
      model = models::model_from_container(c, path, device, expected_model);
    } else {
      const std::string name = h.value("model", std::string("?"));
      FOXHUNT_CHECK(p && models::has_precision(name, *p), kBundleComponent, "'", path,
                    "': precision '", precision, "' of a '", name, "' model; this build serves ",
                    "fp32 models and ", models::quantized_forms_text());
      FOXHUNT_CHECK(expected_model.empty() || expected_model == name, kBundleComponent, "'", path,
                    "': expected a '", expected_model, "' bundle, got '", name, "'");
      auto it = c.blobs.find("module");
      FOXHUNT_CHECK(it != c.blobs.end(), kBundleComponent, "'", path, "': no 'module' blob");
      model = models::make_model_at(name, *p, h.at("options"), kBundleComponent);
      model->to(device);
      models::module_from_bytes(model->module(), it->second, path);
    }
    model->module().eval();
    // The stored spec must be what this build's model publishes for those options (feature sets
    // by their current names).
    const auto& features = h.at("features");
    nlohmann::json stored_spec = h.at("spec");
    for (auto& in : stored_spec.at("inputs"))
      if (const auto fs = in.find("feature_set"); fs != in.end() && fs->is_string())
        *fs = current_set_name(fs->get<std::string>(), features.at("sets"));
    const nlohmann::json spec = model->spec();
    FOXHUNT_CHECK(spec == stored_spec, kBundleComponent, "'", path,
                  "': the stored I/O spec differs from what this build's '", model->name(),
                  "' publishes for the same options: stored ", h.at("spec").dump(), ", now ",
                  spec.dump());
    const nlohmann::json bank = data::observed_feature_names();
    FOXHUNT_CHECK(features.at("bank") == bank, kBundleComponent, "'", path,
                  "': trained on a different feature bank (", features.at("bank").size(),
                  " columns) than this build computes (", bank.size(),
                  "); retrain the model with this version");
    b.warmup = features.at("warmup").get<int64_t>();
    // Trained on bars built from a tape: the flow columns follow the bank.
    b.flow_features = features.contains("flow");
    if (b.flow_features) {
      const nlohmann::json flow = data::flow_feature_names();
      FOXHUNT_CHECK(features.at("flow") == flow, kBundleComponent, "'", path,
                    "': trained on other flow features (", features.at("flow").dump(),
                    ") than this build computes (", flow.dump(),
                    "); retrain the model with this version");
    }
    for (const auto& [name, set] : features.at("sets").items()) {
      const auto& now =
          data::feature_set(current_set_name(name, features.at("sets")), b.flow_features);
      FOXHUNT_CHECK(set.at("columns").get<std::vector<int64_t>>() == now.columns, kBundleComponent,
                    "'", path, "': feature set '", name, "' has other columns than this build's");
    }
    b.normalizer = h.at("normalizer").get<data::Normalizer>();
    const int64_t market_width = data::market_feature_width(b.flow_features);
    FOXHUNT_CHECK(b.normalizer.cols() == market_width, kBundleComponent, "'", path,
                  "': normaliser over ", b.normalizer.cols(), " columns, expected ", market_width,
                  b.flow_features ? " (the bank and the flow columns)" : "");
    b.target_scale = h.at("target_scale").get<double>();
    FOXHUNT_CHECK(b.target_scale > 0 && std::isfinite(b.target_scale), kBundleComponent, "'", path,
                  "': target_scale must be > 0, got ", b.target_scale);
    // Bundles written before volatility-scaled targets have none.
    b.target_vol_feature = h.value("target_vol_feature", std::string());
    data::parse_target_vol(b.target_vol_feature, "'" + path + "' target_vol_feature");
    b.instrument_id = h.at("instrument_id").get<int64_t>();
    if (const auto env = h.find("trading_env"); env != h.end()) {
      // Bundles written before it was recorded were trained with the defaults.
      b.trading_env.pnl_scale = env->at("pnl_scale").get<double>();
      b.trading_env.cost_bps = env->at("cost_bps").get<double>();
      b.trading_env.episode_length = env->at("episode_length").get<int64_t>();
      FOXHUNT_CHECK(std::isfinite(b.trading_env.pnl_scale) &&
                        std::isfinite(b.trading_env.cost_bps) && b.trading_env.cost_bps >= 0 &&
                        b.trading_env.episode_length >= 0,
                    kBundleComponent, "'", path,
                    "': trading_env: expected a finite pnl_scale, cost_bps >= 0 and "
                    "episode_length >= 0, got ",
                    env->dump());
    }
    b.data = h.at("data").get<DataFingerprint>();
    b.training = h.at("training");
    if (const auto bars = h.find("bars"); bars != h.end()) {
      // Absent: plain bars (every bundle written before tapes).
      BarOrigin o;
      o.spec = data::parse_bar_spec(bars->at("spec").get<std::string>());
      o.source = bars->value("source", std::string("tape"));
      b.bars = o;
    }
    if (const auto cal = h.find("calendar"); cal != h.end()) {
      b.periods_per_year = cal->at("periods_per_year").get<double>();
      b.periods_per_year_basis = cal->value("basis", std::string());
      FOXHUNT_CHECK(std::isfinite(b.periods_per_year) && b.periods_per_year > 0, kBundleComponent,
                    "'", path, "': calendar: expected periods_per_year > 0, got ",
                    b.periods_per_year);
    }
    // Version 2: a panel, its instruments listed; version 3: listed, none for one series.
    constexpr int kPanelOnlyVersion = 2;
    const bool listed = version == kPanelOnlyVersion ||
                        (version > kPanelOnlyVersion && !h.at("instruments").empty());
    if (listed) {
      const auto& list = h.at("instruments");
      FOXHUNT_CHECK(list.is_array() && !list.empty(), kBundleComponent, "'", path,
                    "': a panel bundle (version ", kPanelOnlyVersion,
                    ") needs a non-empty 'instruments' list");
      // The option that sizes the model's instrument input (the catalog names it), if any.
      const auto& sizing = models::catalog_entry(model->name()).instrument_count_option;
      const int64_t categories =
          sizing.empty() ? -1 : model->options_json().value(sizing, int64_t{-1});
      for (const auto& j : list) {
        InstrumentCalibration i;
        i.symbol = j.at("symbol").get<std::string>();
        i.instrument_id = j.at("instrument_id").get<int64_t>();
        i.normalizer = j.at("normalizer").get<data::Normalizer>();
        i.target_scale = j.at("target_scale").get<double>();
        i.data = j.at("data").get<DataFingerprint>();
        FOXHUNT_CHECK(!i.symbol.empty() && i.normalizer.cols() == market_width &&
                          i.target_scale > 0 && std::isfinite(i.target_scale) &&
                          i.instrument_id >= 0 && (categories < 0 || i.instrument_id < categories),
                      kBundleComponent, "'", path, "': instrument '", i.symbol,
                      "': expected a symbol, a normaliser over ", market_width,
                      " columns, a target scale > 0 and an id in [0, ",
                      categories < 0 ? std::string("inf") : std::to_string(categories), "), got ",
                      i.normalizer.cols(), " columns, scale ", i.target_scale, ", id ",
                      i.instrument_id);
        b.instruments.push_back(std::move(i));
      }
    }
    b.model = std::move(model);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(kBundleComponent,
                     "'" + path + "': malformed bundle header (" + e.what() + ")");
  }
  return b;
}

}  // namespace foxhunt::serving
