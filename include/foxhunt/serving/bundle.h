#pragma once
/// \file bundle.h
/// Model bundles: one file per trained model holding everything serving needs, so serving never
/// reads the training CSV — weights, model options, the model's I/O spec, the feature spec (bank
/// column names, warm-up, the feature-set columns its inputs read), the normaliser fitted on the
/// training split, the target scaling, a fingerprint of the training data and the training
/// summary. A container file (core/container.h: versioned, CRC-checked, written atomically) with
/// header kind "bundle".

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/core/container.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/features.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/data/trading_env.h"
#include "foxhunt/models/model.h"

namespace foxhunt::serving {

/// Bundle layout version written: one format for a model trained on one series and on a panel
/// (its `instruments` list, empty for one series), with the trading environment recorded. Files
/// with a version this build does not read are rejected with a clear error.
inline constexpr int kBundleVersion = 3;
/// The oldest layout this build still reads: 1 (one series) and 2 (a panel; a build that read
/// only version 1 refused it rather than serve every symbol with one normaliser) load as before.
inline constexpr int kOldestBundleVersion = 1;
/// The longest window (`IoSpec::window`, bars) and horizon a served forecaster may have: serving
/// keeps `window` rows per instrument and model and forecasts `horizon` bars; a bundle beyond
/// them is refused at load.
inline constexpr int64_t kMaxServedWindow = 4096;
/// See kMaxServedWindow.
inline constexpr int64_t kMaxServedHorizon = 512;
/// The longest feature warm-up (bars) a bundle may record.
inline constexpr int64_t kMaxBundleWarmup = 1'000'000;
/// File name of a model's bundle inside its training output directory.
inline constexpr const char* kBundleFile = "bundle.fhb";

/// File name of the ensemble's decision rule inside an ensemble directory (serving.h).
inline constexpr const char* kRuleFile = "rule.json";

/// The layout of an ensemble directory, in one place: DIR/<model>/ is a model's training output
/// (its bundle, checkpoint, metrics) and DIR/<model>/bundle.fhb its bundle, for each catalog
/// model. `foxhunt train all --out DIR` writes it; `predict`, `backtest`, `stress --bundles DIR`
/// and validate read it.
class BundleDirectory {
 public:
  explicit BundleDirectory(std::string dir) : dir_(std::move(dir)) {}
  /// DIR.
  const std::string& dir() const { return dir_; }
  /// DIR/<model>: the model's training output directory.
  std::string model_dir(const std::string& model) const;
  /// DIR/<model>/bundle.fhb.
  std::string bundle_path(const std::string& model) const;
  /// DIR/rule.json: the decision rule `train all` fits (serving/rule_fit.h).
  std::string rule_path() const;
  /// True when the bundle of every catalog model exists.
  bool complete() const;
  /// OUT/bundle.fhb: the bundle inside one model's output directory.
  static std::string bundle_in(const std::string& model_out_dir);

 private:
  std::string dir_;
};

/// Identity of the bars a model was trained on.
struct DataFingerprint {
  std::string source;           ///< file path or "synthetic(seed=...)"
  int64_t rows = 0;             ///< number of bars
  int64_t first_timestamp = 0;  ///< Unix seconds of the first bar
  int64_t last_timestamp = 0;   ///< Unix seconds of the last bar
  std::string hash;             ///< FNV-1a 64 of every bar's fields, 16 hex digits
};

/// The fingerprint of a series (hash over timestamp, open, high, low, close, volume bytes).
DataFingerprint fingerprint(const data::BarSeries& series);
/// JSON form {source, rows, first_timestamp, last_timestamp, hash}.
void to_json(nlohmann::json& j, const DataFingerprint& f);
/// Reads the JSON form; throws nlohmann::json::exception on a missing key.
void from_json(const nlohmann::json& j, DataFingerprint& f);

/// The fingerprint of a panel: its source, the bars over all symbols, the first and last
/// timestamps of the union and a hash over every symbol's name and bars.
DataFingerprint fingerprint(const data::Panel& panel);

/// One instrument of a bundle trained on a panel: what serving needs for it.
struct InstrumentCalibration {
  std::string symbol;           ///< as in the training panel
  int64_t instrument_id = 0;    ///< the TFT's static id (its index in the panel)
  data::Normalizer normalizer;  ///< bank normaliser fitted on its training split
  double target_scale = 1.0;    ///< its forecasting targets' scale
  DataFingerprint data = {};    ///< its bars
};

/// What serving reads of one instrument's calibration (pointers into a bundle that outlives it).
struct Calibration {
  const data::Normalizer* normalizer = nullptr;  ///< the bank normaliser
  double target_scale = 1.0;                     ///< forecasts / this = scaled returns
  int64_t instrument_id = 0;                     ///< the TFT's static id
};

/// How the bars a model trained on were made from prints (data/bar_builder.h). Recorded in the
/// bundle header as `"bars": {"spec": "time:1m", "source": "tape"}`; a bundle without it was
/// trained on plain bars (a bars CSV, a panel or the synthetic series), as every bundle written
/// before tapes was: the field is optional, so the layout version did not change.
struct BarOrigin {
  data::BarSpec spec;           ///< the sampling (time, tick, volume, dollar bars)
  std::string source = "tape";  ///< what the bars were built from
};

/// Everything serving needs for one model.
struct Bundle {
  std::shared_ptr<models::Model> model;  ///< built from the stored options, weights loaded
  data::Normalizer normalizer;           ///< bank normaliser fitted on the training split
  double target_scale = 1.0;  ///< forecasts are scaled returns: divide by this for log returns
  /// When set, targets were also divided by this raw bank column at the anchor (e.g. "rv_20"):
  /// multiply forecasts by its value at the forecast bar (data/dataset.h).
  std::string target_vol_feature;
  int64_t instrument_id = 0;              ///< static id fed to the TFT
  int64_t warmup = data::kFeatureWarmup;  ///< bars before the features are fully defined
  /// Trained on bars built from a tape: the normaliser covers the bank and the flow columns
  /// (data/flow_features.h) and the feature sets are their flow variants. Serving needs each
  /// bar's flow then, and refuses plain bars; a bundle without it refuses bars with a flow.
  /// Bundles written before flow features have none.
  bool flow_features = false;
  /// The trading environment a policy trained on: serving builds the RL state's position part
  /// with its pnl_scale, exactly as training did; its cost_bps and costs record the costs the
  /// policy trained under. Bundles written before it (or its costs) was recorded were trained
  /// with the defaults.
  data::TradingEnvOptions trading_env = {};
  DataFingerprint data;  ///< what it was trained on
  /// Trained on bars built from a tape: their spec (serving a tape builds the same bars, and
  /// refuses another spec). None: plain bars.
  std::optional<BarOrigin> bars = std::nullopt;
  /// Bars per year of the training data (data/calendar.h: inferred from its sessions, or given
  /// at training); resolve_rule annualises with it. 0: not recorded (bundles written before).
  double periods_per_year = 0.0;
  /// How periods_per_year was decided, in words (data::PeriodsPerYear::describe()).
  std::string periods_per_year_basis;
  nlohmann::json training = nlohmann::json::object();  ///< the training summary
  /// Trained on a panel: every instrument's calibration, in the panel's (symbol) order. Empty for
  /// a model trained on one series, which serves any symbol with the fields above.
  std::vector<InstrumentCalibration> instruments = {};
  /// The instrument whose calibration the fields above hold (select_instrument); "" for a model
  /// trained on one series, or a panel bundle none was selected for.
  std::string symbol;

  /// The model's registry name.
  std::string name() const { return model->name(); }
  /// True when trained on a panel (instruments is not empty).
  bool panel() const { return !instruments.empty(); }
  /// The fields above as a calibration.
  Calibration calibration() const;
  /// The calibration serving `symbol`: its instrument's for a panel bundle (InputError naming the
  /// bundle's symbols when it is not one of them: its normaliser and id were never fitted), else
  /// the fields above (a one-series model serves any symbol).
  Calibration calibration(const std::string& symbol) const;
  /// The instruments' symbols, comma-separated ("" for a one-series bundle).
  std::string symbols_text() const;
};

/// `b` serving the instrument `symbol` of its panel: normaliser, target scale, instrument id and
/// data fingerprint become the instrument's and `symbol` is set. A one-series bundle is returned
/// unchanged. InputError when the panel bundle has no such instrument.
Bundle select_instrument(Bundle b, const std::string& symbol);
/// select_instrument on each bundle.
std::vector<Bundle> select_instrument(std::vector<Bundle> bundles, const std::string& symbol);
/// Throws InputError when `b` is a panel bundle with no instrument selected (a single-instrument
/// runtime would not know whose normaliser to use). `what` names the caller.
void check_instrument_selected(const Bundle& b, const std::string& what);

/// The bar spec the bundles record, the same in each; none when none records one (plain bars).
/// InputError naming two bundles that differ (`dir` names the ensemble directory).
std::optional<data::BarSpec> recorded_bar_spec(const std::vector<Bundle>& bundles,
                                               const std::string& dir);

/// The bar spec to build a tape's bars with for `bundles` (of the ensemble in `dir`): `given`
/// (the user's --bar) when set, else the spec the bundles record. InputError when the two differ
/// ("... bar spec 'tick:500' differs from 'time:1m' that DIR/tft/bundle.fhb was trained on"),
/// or when neither is set (bundles trained on plain bars need the spec stated).
data::BarSpec tape_bar_spec(const std::vector<Bundle>& bundles, const std::string& dir,
                            const std::optional<data::BarSpec>& given);

/// The feature spec stored in a bundle: bank column names, calendar names, warm-up, and for each
/// feature set the model's inputs read, its columns; with `flow` also the flow column names
/// ("flow", data/flow_features.h) and the sets' flow variants.
nlohmann::json feature_spec(const models::IoSpec& spec, int64_t warmup, bool flow = false);

/// Writes `b` atomically to `path`. Throws InputError when the bundle has no model.
void save_bundle(const Bundle& b, const std::string& path);

/// Reads a bundle onto `device`. A bundle that loads is one a training run could have written:
/// every header field read is checked against its domain (types; window, horizon and quantile
/// levels strictly increasing in (0, 1); pnl_scale and target_scale finite > 0; cost_bps
/// finite >= 0; episode_length >= 0; the trading env's costs, where recorded, as
/// data::check_cost_model; instrument symbols and ids unique, ids within the model's
/// instrument count; normalisers over the bank's columns) and, where this build computes it,
/// against the build's value (the spec from the options, the feature bank, calendar and sets
/// from the spec, the parameter count from the options against the weights' bytes, checked
/// before anything is allocated). A refusal is an InputError naming the file and the field
/// ("'F': field 'trading_env.pnl_scale': expected a finite number > 0, got -3"). `path` is the
/// bundle file or a model's output directory holding it (DIR/tft for DIR/tft/bundle.fhb); a
/// directory without one is an InputError that says so. Throws InputError naming the file for a
/// missing, truncated or corrupted file, a foreign file (a trainer checkpoint, another program's
/// file), another bundle version, a model other than `expected_model` (when not empty), or a
/// feature spec this build does not compute (the bank changed since training). Nothing is returned
/// half-loaded.
Bundle load_bundle(const std::string& path, const torch::Device& device = torch::kCPU,
                   const std::string& expected_model = "");

/// load_bundle on a container already read (`source` names it in errors), with the same checks.
Bundle bundle_from_container(const Container& c, const std::string& source,
                             const torch::Device& device = torch::kCPU,
                             const std::string& expected_model = "");

}  // namespace foxhunt::serving
