#include "foxhunt/serving/bundle.h"

#include <fmt/format.h>

#include "foxhunt/data/dataset.h"
#include "foxhunt/data/flow_features.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include "foxhunt/core/container.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/hash.h"
#include "foxhunt/core/header_fields.h"
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
                {"costs", data::to_json(b.trading_env.costs)},
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
// `stored_sets` was checked (check_stored_sets) before.
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

constexpr int64_t kAnyInt = std::numeric_limits<int64_t>::max();

// features.sets: {name: {"columns": [bank column...], "width": n}}, renamed to the current set
// names (the layout feature_spec writes).
nlohmann::json check_stored_sets(const HeaderFields& features, bool flow) {
  const int64_t market = data::market_feature_width(flow);
  int64_t widest = 0;  // the widest set this build computes ("rl_state")
  for (const auto& s : data::feature_sets())
    widest = std::max(widest, data::feature_set(s.name, flow).width);
  const auto sets = features.nested("sets");
  nlohmann::json renamed = nlohmann::json::object();
  for (const auto& [name, set] : sets.json().items()) {
    const auto one = sets.nested(name);
    one.integer("width", 0, widest);
    const auto& columns = one.array("columns");
    for (size_t k = 0; k < columns.size(); ++k)
      if (!columns[k].is_number_integer() || columns[k].get<int64_t>() < 0 ||
          columns[k].get<int64_t>() >= market)
        one.refuse(fmt::format("columns[{}]", k), fmt::format("a market column in [0, {})", market),
                   columns[k]);
    renamed[current_set_name(name, sets.json())] = set;
  }
  return renamed;
}

// What serving can feed and read, on the spec the model publishes for its options (so the
// refusal names 'options'): inputs as wide as the feature sets they read, a policy over the
// trading environment's actions, a forecaster's window, horizon and quantile levels.
void check_served_spec(const HeaderFields& h, const models::Model& model, bool flow) {
  const auto spec = model.spec();
  const auto refuse = [&](const std::string& why) { h.refuse_because("options", why); };
  const auto& sets = data::feature_sets();
  for (const auto& in : spec.inputs) {
    if (in.feature_set.empty()) continue;
    const auto set = std::find_if(sets.begin(), sets.end(),
                                  [&](const auto& s) { return s.name == in.feature_set; });
    if (set == sets.end())
      refuse(fmt::format("input '{}' reads feature set '{}', which this build does not compute",
                         in.name, in.feature_set));
    const int64_t width = data::feature_set(in.feature_set, flow).width;
    if (width != in.features)
      refuse(fmt::format("input '{}' takes {} values per bar, its feature set '{}' gives {}{}",
                         in.name, in.features, in.feature_set, width,
                         flow ? " (with the flow columns of tape bars)" : ""));
  }
  if (models::catalog_entry(model.name()).family == models::Family::kPolicy) {
    if (spec.actions != data::TradingEnv::kActions || spec.is_forecaster())
      refuse(fmt::format("expected a policy over {} actions (sell, hold, buy), got {} actions",
                         data::TradingEnv::kActions, spec.actions));
    return;
  }
  if (!spec.is_forecaster() || spec.window > kMaxServedWindow || spec.horizon > kMaxServedHorizon)
    refuse(fmt::format(
        "expected a forecaster with a window in [1, {}] and a horizon in [1, {}] bars, got window "
        "{} and horizon {}",
        kMaxServedWindow, kMaxServedHorizon, spec.window, spec.horizon));
  bool increasing = spec.quantiles.size() >= 2;
  for (size_t k = 0; k < spec.quantiles.size(); ++k)
    increasing = increasing && spec.quantiles[k] > 0 && spec.quantiles[k] < 1 &&
                 (k == 0 || spec.quantiles[k] > spec.quantiles[k - 1]);
  if (!increasing)
    refuse(fmt::format("expected at least 2 quantile levels strictly increasing in (0, 1), got {}",
                       short_json(spec.quantiles)));
}

data::Normalizer normalizer_field(const HeaderFields& h, const std::string& key, bool flow) {
  const auto fields = h.nested(key);
  data::Normalizer n;  // from_json checks the widths agree, std > 0 and clip >= 0
  try {
    n = fields.json().get<data::Normalizer>();
  } catch (const InputError& e) {
    h.refuse_because(key, e.what());
  } catch (const nlohmann::json::exception& e) {
    h.refuse_because(key, e.what());
  }
  const int64_t market = data::market_feature_width(flow);
  if (n.cols() != market)
    h.refuse_because(key, fmt::format("expected a normaliser over {} columns (the bank{}), got {}",
                                      market, flow ? " and the flow columns" : "", n.cols()));
  return n;
}

DataFingerprint data_field(const HeaderFields& h, const std::string& key) {
  const auto d = h.nested(key);
  DataFingerprint f;
  f.source = d.text("source");
  f.rows = d.integer("rows", 0, kAnyInt);
  f.first_timestamp = d.integer("first_timestamp", std::numeric_limits<int64_t>::min(), kAnyInt);
  f.last_timestamp = d.integer("last_timestamp", f.first_timestamp, kAnyInt);
  f.hash = d.text("hash");
  // Empty: a bundle assembled by a library caller without fingerprinting its data.
  if (!f.hash.empty() &&
      (f.hash.size() != 16 || f.hash.find_first_not_of("0123456789abcdef") != std::string::npos))
    d.refuse("hash", "16 lowercase hex digits (FNV-1a 64), or none", f.hash);
  return f;
}

// The instrument count the model embeds (its catalog's instrument_count_option), -1 for none.
int64_t instrument_categories(const models::Model& model) {
  const auto& sizing = models::catalog_entry(model.name()).instrument_count_option;
  if (sizing.empty()) return -1;
  return model.options_json().value(sizing, int64_t{-1});
}

std::vector<InstrumentCalibration> instruments_field(const HeaderFields& h, int64_t max_id,
                                                     bool flow) {
  std::vector<InstrumentCalibration> out;
  const auto& list = h.array("instruments");
  std::set<std::string> symbols;
  std::set<int64_t> ids;
  for (size_t k = 0; k < list.size(); ++k) {
    const auto e = h.element("instruments", k);
    InstrumentCalibration i;
    i.symbol = e.text("symbol");
    if (i.symbol.empty() || !symbols.insert(i.symbol).second)
      e.refuse("symbol", "a symbol, not empty and not listed before", i.symbol);
    i.instrument_id = e.integer("instrument_id", 0, max_id);
    if (!ids.insert(i.instrument_id).second)
      e.refuse("instrument_id", "an id no instrument listed before has", i.instrument_id);
    i.normalizer = normalizer_field(e, "normalizer", flow);
    i.target_scale = e.positive("target_scale");
    i.data = data_field(e, "data");
    out.push_back(std::move(i));
  }
  return out;
}

Bundle load_checked(const Container& c, const std::string& path, const torch::Device& device,
                    const std::string& expected_model) {
  const HeaderFields h(c.header, kBundleComponent, path);
  const auto kind_it = c.header.find("kind");
  const std::string kind = kind_it == c.header.end() ? std::string("?")
                           : kind_it->is_string()    ? kind_it->get<std::string>()
                                                     : short_json(*kind_it);
  if (kind != "bundle")
    h.refuse_because(
        "kind", fmt::format("expected a model bundle (kind \"bundle\", written by `foxhunt "
                            "train`), got a '{}' file{}",
                            kind,
                            kind == "trainer"
                                ? " (a trainer checkpoint; its directory also holds bundle.fhb)"
                                : ""));
  const auto& version_json = h.at("bundle_version");
  if (!version_json.is_number_integer()) h.refuse("bundle_version", "an integer", version_json);
  const bool known = version_json.is_number_unsigned()
                         ? version_json.get<uint64_t>() <= uint64_t{kBundleVersion}
                         : version_json.get<int64_t>() <= kBundleVersion;
  if (!known || version_json.get<int64_t>() < kOldestBundleVersion)
    h.refuse_because("bundle_version",
                     fmt::format("bundle version {}, this foxhunt reads versions {} to {}; retrain "
                                 "or convert it",
                                 short_json(version_json), kOldestBundleVersion, kBundleVersion));
  const int version = static_cast<int>(version_json.get<int64_t>());
  // Bundles written before INT8 models have no precision: they are FP32.
  const std::string precision =
      h.text_or("precision", std::string(models::to_string(models::Precision::kFp32)));
  const std::string name = h.text("model");
  if (!models::in_catalog(name))
    h.refuse_because("model", fmt::format("unknown model '{}'; this build serves {}", name,
                                          models::joined_model_names()));
  if (!expected_model.empty() && expected_model != name)
    h.refuse_because("model",
                     fmt::format("expected a '{}' bundle, got '{}'", expected_model, name));
  const auto p = models::try_parse_precision(precision);
  if (!p || !models::has_precision(name, *p))
    h.refuse_because(
        "precision",
        fmt::format("precision '{}' of a '{}' model; this build serves fp32 models and "
                    "{}",
                    precision, name, models::quantized_forms_text()));
  const auto blob = c.blobs.find("module");
  FOXHUNT_CHECK(blob != c.blobs.end(), kBundleComponent, "'", path, "': no 'module' blob");
  const bool fp32 = *p == models::Precision::kFp32;
  if (!fp32) {
    // A quantized form folds and drops some fp32 parameters, so the fp32 count is no bound on
    // its file; the bytes it stores at its own width are (its closed-form byte table's
    // "<precision>_bytes": int8 codes, bf16 weights), checked before the model is built.
    const std::string form = models::to_string(*p);
    const auto& options = h.at("options");
    if (!options.is_object()) h.refuse("options", "a JSON object", options);
    nlohmann::json table;
    try {
      table = models::quantized_form(name, *p, kBundleComponent).bytes(options);
    } catch (const nlohmann::json::exception& e) {
      h.refuse_because("options", e.what());
    } catch (const InputError& e) {
      // An option out of its domain, or a product that overflows: named as model_from_options
      // names them.
      h.refuse_because("options", e.what());
    }
    // The stored weights' bytes where the form breaks them out, else its parameter bytes (the
    // catalog's contract: models/catalog.h, QuantizedForm::bytes).
    const auto& row = table.at(form);
    const int64_t own = row.value(form + "_bytes", row.value("parameter_bytes", int64_t{-1}));
    FOXHUNT_INTERNAL_ASSERT(own >= 0, "the ", form, " form's byte table lists its ", form,
                            "_bytes or parameter_bytes");
    if (own > static_cast<int64_t>(blob->second.size()))
      h.refuse_because("options",
                       fmt::format("the options describe a {} '{}' model of {} bytes of {} "
                                   "weights, more than the file's {} bytes of weights hold",
                                   form, name, own, form, blob->second.size()));
  }
  std::shared_ptr<models::Model> model = models::model_from_options(
      name, h.at("options"), blob->second.size(), fp32 ? sizeof(float) : 0, kBundleComponent, path,
      [&](const nlohmann::json& o) {
        return fp32 ? models::make_model(name, o)
                    : models::make_model_at(name, *p, o, kBundleComponent);
      });
  // Trained on bars built from a tape: the flow columns follow the bank in every input.
  const auto features = h.nested("features");
  const bool flow = features.has("flow");
  if (flow && features.at("flow") != nlohmann::json(data::flow_feature_names()))
    features.refuse("flow", "this build's flow features " + short_json(data::flow_feature_names()),
                    features.at("flow"));
  check_served_spec(h, *model, flow);
  const int64_t categories = instrument_categories(*model);
  const int64_t max_id = categories < 0 ? kAnyInt : categories - 1;
  model->to(device);
  // Weights of another element type or shape than the header describes: the header's precision
  // or options are not the file's (a float read as bf16 would serve garbage).
  models::module_from_bytes(model->module(), blob->second, path, [&](const auto& mismatch) {
    h.refuse_because(mismatch.dtype ? "precision" : "options",
                     fmt::format("the file's weights are not those of the {} '{}' model the "
                                 "header describes: {}",
                                 precision, name, mismatch.text));
  });
  model->module().eval();

  Bundle b;
  b.flow_features = flow;
  b.warmup = features.integer("warmup", 0, kMaxBundleWarmup);
  const nlohmann::json sets = check_stored_sets(features, flow);
  // The stored spec must be what this build's model publishes for those options (feature sets
  // by their current names).
  nlohmann::json stored_spec = h.nested("spec").json();
  if (const auto in = stored_spec.find("inputs"); in != stored_spec.end() && in->is_array())
    for (auto& one : *in)
      if (const auto fs = one.find("feature_set"); fs != one.end() && fs->is_string())
        *fs = current_set_name(fs->get<std::string>(), features.at("sets"));
  const nlohmann::json spec = model->spec();
  if (spec != stored_spec)
    h.refuse_because("spec",
                     fmt::format("the stored I/O spec differs from what this build's '{}' "
                                 "publishes for the same options: stored {}, now {}",
                                 name, short_json(h.at("spec"), 400), short_json(spec, 400)));
  // The feature spec must be what this build computes for that spec.
  const nlohmann::json now = feature_spec(model->spec(), b.warmup, flow);
  if (features.at("bank") != now.at("bank"))
    features.refuse_because(
        "bank", fmt::format("trained on a different feature bank ({} columns) than this build "
                            "computes ({}); retrain the model with this version",
                            features.at("bank").is_array() ? features.at("bank").size() : 0,
                            now.at("bank").size()));
  if (features.at("calendar") != now.at("calendar"))
    features.refuse("calendar", "this build's calendar features " + short_json(now.at("calendar")),
                    features.at("calendar"));
  if (sets != now.at("sets"))
    features.refuse("sets",
                    "the feature sets the model's inputs read, as this build computes them (" +
                        short_json(now.at("sets"), 120) + ")",
                    features.at("sets"));
  b.normalizer = normalizer_field(h, "normalizer", flow);
  b.target_scale = h.positive("target_scale");
  // Bundles written before volatility-scaled targets have none.
  b.target_vol_feature = h.text_or("target_vol_feature", std::string());
  try {
    const auto vol = data::parse_target_vol(b.target_vol_feature, "target_vol_feature");
    if (vol.window > b.warmup)
      h.refuse_because("target_vol_feature",
                       fmt::format("'{}' needs {} returns before the first bar, more than the "
                                   "bundle's warm-up of {} bars",
                                   b.target_vol_feature, vol.window, b.warmup));
  } catch (const InputError& e) {
    if (e.message().rfind("'" + path + "'", 0) == 0) throw;
    h.refuse_because("target_vol_feature", e.what());
  }
  b.instrument_id = h.integer("instrument_id", 0, max_id);
  if (h.has("trading_env")) {
    // Bundles written before it was recorded were trained with the defaults.
    const auto env = h.nested("trading_env");
    b.trading_env.pnl_scale = env.positive("pnl_scale");
    b.trading_env.cost_bps = env.non_negative("cost_bps");
    // 0: episodes ran from the start to the end of the range (data/trading_env.h).
    b.trading_env.episode_length = env.integer("episode_length", 0, kAnyInt);
    if (env.has("costs")) {
      // Bundles written before the cost model trained under cost_bps alone (the defaults).
      const auto c = env.nested("costs");
      auto& m = b.trading_env.costs;
      m.spread_bps = c.non_negative("spread_bps");
      m.fee_bps = c.non_negative("fee_bps");
      m.fee_per_contract = c.non_negative("fee_per_contract");
      m.contract_multiplier = c.positive("contract_multiplier");
      m.notional = c.non_negative("notional");
      m.impact_k = c.non_negative("impact_k");
      m.window = c.integer("window", 2, kAnyInt);
    }
  }
  b.data = data_field(h, "data");
  b.training = h.nested("training").json();
  if (h.has("bars")) {
    // Absent: plain bars (every bundle written before tapes).
    const auto bars = h.nested("bars");
    BarOrigin o;
    try {
      o.spec = data::parse_bar_spec(bars.text("spec"));
    } catch (const InputError& e) {
      if (e.message().rfind("'" + path + "'", 0) == 0) throw;
      bars.refuse_because("spec", e.what());
    }
    o.source = bars.text_or("source", std::string("tape"));
    b.bars = o;
  }
  if (h.has("calendar")) {
    const auto cal = h.nested("calendar");
    b.periods_per_year = cal.positive("periods_per_year");
    b.periods_per_year_basis = cal.text_or("basis", std::string());
  }
  // Version 2: a panel, its instruments listed; version 3: listed, none for one series.
  constexpr int kPanelOnlyVersion = 2;
  if (version >= kPanelOnlyVersion) {
    b.instruments = instruments_field(h, max_id, flow);
    if (version == kPanelOnlyVersion && b.instruments.empty())
      h.refuse("instruments", "a non-empty list (a version 2 bundle is a panel's)",
               h.at("instruments"));
  }
  // Every field holds; last, the device must run this precision (bf16 on a CPU without BF16
  // arithmetic is refused here, not at the first bar served).
  try {
    models::check_precision_runs_on(*p, device, kBundleComponent);
  } catch (const InputError& e) {
    h.refuse_because("precision", e.message());
  }
  b.model = std::move(model);
  return b;
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
  // Magic, version, length and CRC checked.
  return bundle_from_container(read_container(path), path, device, expected_model);
}

Bundle bundle_from_container(const Container& c, const std::string& source,
                             const torch::Device& device, const std::string& expected_model) {
  try {
    return load_checked(c, source, device, expected_model);
  } catch (const nlohmann::json::exception& e) {
    // Every field is read by type above; this is a safety net naming the file.
    throw InputError(kBundleComponent,
                     "'" + source + "': malformed bundle header (" + e.what() + ")");
  }
}

}  // namespace foxhunt::serving
