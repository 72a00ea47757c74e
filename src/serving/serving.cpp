#include "foxhunt/serving/serving.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <exception>
#include <filesystem>
#include <numeric>
#include <optional>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/strings.h"
#include "foxhunt/data/calendar.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/features.h"
#include "foxhunt/data/forecast_eval.h"
#include "foxhunt/data/trading_env.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/streaming.h"
#include "foxhunt/serving/desk.h"
#include "model_inputs.h"

namespace foxhunt::serving {

namespace {

constexpr const char* kServingComponent = "serving";

}  // namespace

// ---- decision rule ------------------------------------------------------------------------------

namespace {

const char* forecast_rule_name(ForecastRule r) {
  return r == ForecastRule::kMedian ? "median" : "distribution";
}

}  // namespace

void to_json(nlohmann::json& j, const DecisionRule& r) {
  j = nlohmann::json::object();
  FOXHUNT_JSON_FIELDS(j, r, weights, target_volatility, full_edge, cost_bps, periods_per_year,
                      forecast_gain, policy_temperature, dead_band, max_position);
  if (r.vol_target_weight != 0.0) j["vol_target_weight"] = r.vol_target_weight;
  if (r.band != 0.0) j["band"] = r.band;
  j["forecast_rule"] = forecast_rule_name(r.forecast_rule);
  if (!r.fit.empty()) j["fit"] = r.fit;
}

void from_json(const nlohmann::json& j, DecisionRule& r) {
  const char* c = "decision";
  static const std::vector<std::string> keys = {
      "weights",   "forecast_rule",    "target_volatility", "full_edge",
      "cost_bps",  "periods_per_year", "forecast_gain",     "policy_temperature",
      "dead_band", "max_position",     "vol_target_weight", "band",
      "fit"};
  FOXHUNT_CHECK(j.is_object(), c, "expected a JSON object, got ", j.type_name());
  for (const auto& [key, value] : j.items())
    FOXHUNT_CHECK(std::find(keys.begin(), keys.end(), key) != keys.end(), c, "unknown key '", key,
                  "'; expected one of ", join(keys, ", "));
  // Each key is read on its own so that a value of the wrong type names its key.
  auto number = [&](const char* key, double& field) {
    if (!j.contains(key)) return;
    FOXHUNT_CHECK(j.at(key).is_number(), c, key, ": expected a number, got ", j.at(key).type_name(),
                  " ", j.at(key).dump());
    field = j.at(key).get<double>();
    FOXHUNT_CHECK(std::isfinite(field), c, key, ": expected a finite number, got ", field);
  };
  if (j.contains("weights")) {
    FOXHUNT_CHECK(j.at("weights").is_object(), c,
                  "weights: expected an object {model: weight}, got ", j.at("weights").type_name());
    for (const auto& [model, w] : j.at("weights").items()) {
      FOXHUNT_CHECK(r.weights.count(model) > 0, c, "weights: unknown model '", model,
                    "'; expected ", models::joined_model_names());
      FOXHUNT_CHECK(w.is_number(), c, "weights.", model, ": expected a number, got ",
                    w.type_name());
      const double v = w.get<double>();
      FOXHUNT_CHECK(std::isfinite(v) && v >= 0, c, "weights.", model, ": expected >= 0, got ", v);
      r.weights[model] = v;
    }
  }
  if (j.contains("forecast_rule")) {
    const auto& v = j.at("forecast_rule");
    FOXHUNT_CHECK(v.is_string() && (v == "distribution" || v == "median"), c,
                  "forecast_rule: expected \"distribution\" or \"median\", got ", v.dump());
    r.forecast_rule = v == "median" ? ForecastRule::kMedian : ForecastRule::kDistribution;
  }
  number("target_volatility", r.target_volatility);
  number("full_edge", r.full_edge);
  number("cost_bps", r.cost_bps);
  number("periods_per_year", r.periods_per_year);
  number("forecast_gain", r.forecast_gain);
  number("policy_temperature", r.policy_temperature);
  number("dead_band", r.dead_band);
  number("max_position", r.max_position);
  number("vol_target_weight", r.vol_target_weight);
  number("band", r.band);
  if (j.contains("fit")) {
    FOXHUNT_CHECK(j.at("fit").is_object(), c, "fit: expected an object, got ",
                  j.at("fit").type_name());
    r.fit = j.at("fit");
  }
  FOXHUNT_CHECK(r.target_volatility > 0, c,
                "target_volatility: expected > 0 (annual, 0.1 = 10%), got ", r.target_volatility);
  FOXHUNT_CHECK(r.full_edge > 0 && r.full_edge <= 1, c, "full_edge: expected in (0, 1], got ",
                r.full_edge);
  FOXHUNT_CHECK(r.cost_bps >= 0, c, "cost_bps: expected >= 0, got ", r.cost_bps);
  FOXHUNT_CHECK(r.periods_per_year >= 0, c,
                "periods_per_year: expected > 0, or 0 for the training data's, got ",
                r.periods_per_year);
  FOXHUNT_CHECK(r.forecast_gain > 0, c, "forecast_gain: expected > 0, got ", r.forecast_gain);
  FOXHUNT_CHECK(r.policy_temperature >= 0, c,
                "policy_temperature: expected >= 0 (0: the greedy action), got ",
                r.policy_temperature);
  FOXHUNT_CHECK(r.dead_band >= 0 && r.dead_band < 1, c, "dead_band: expected in [0, 1), got ",
                r.dead_band);
  FOXHUNT_CHECK(r.max_position > 0 && r.max_position <= 1, c,
                "max_position: expected in (0, 1], got ", r.max_position);
  FOXHUNT_CHECK(r.vol_target_weight >= 0, c, "vol_target_weight: expected >= 0, got ",
                r.vol_target_weight);
  FOXHUNT_CHECK(r.band >= 0 && r.band <= 1, c,
                "band: expected a no-trade band in [0, 1] (0: trade every change), got ", r.band);
}

DecisionRule load_decision_rule(const std::string& path) {
  FOXHUNT_CHECK(std::filesystem::exists(path), "decision", "'", path,
                "': expected a decision rule JSON file; it does not exist");
  FOXHUNT_CHECK(!std::filesystem::is_directory(path), "decision", "'", path,
                "': expected a decision rule JSON file, got a directory");
  return parse_decision_rule(read_file(path), path);
}

DecisionRule parse_decision_rule(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("decision", "'" + path + "': not valid JSON (" + e.what() + ")");
  }
  DecisionRule r;
  try {
    from_json(j, r);
  } catch (const InputError& e) {
    throw InputError("decision", "'" + path + "': " + e.message());
  }
  return r;
}

void save_decision_rule(const DecisionRule& rule, const std::string& path) {
  nlohmann::json j = rule;
  write_file_atomic(path, j.dump(2) + "\n");
}

DecisionRule ensemble_rule(const std::string& dir, const std::string& override_path) {
  if (!override_path.empty()) return load_decision_rule(override_path);
  const auto path = BundleDirectory(dir).rule_path();
  if (std::filesystem::exists(path)) return load_decision_rule(path);
  return DecisionRule{};
}

DecisionRule resolve_rule(DecisionRule rule, const std::vector<Bundle>& bundles) {
  if (rule.periods_per_year > 0) return rule;
  // The calendar a bundle recorded at training (data/calendar.h: a short intraday span's
  // sessions), of the bundle trained on the most bars.
  int64_t rows = 0;
  for (const auto& b : bundles)
    if (b.periods_per_year > 0 && b.data.rows > rows) {
      rows = b.data.rows;
      rule.periods_per_year = b.periods_per_year;
    }
  if (rule.periods_per_year > 0) return rule;
  rule.periods_per_year = 252.0;
  for (const auto& b : bundles) {
    const double span_years =
        static_cast<double>(b.data.last_timestamp - b.data.first_timestamp) / (365.25 * 86400.0);
    if (b.data.rows > rows && b.data.rows >= 2 && span_years >= 30.0 / 365.25) {
      rows = b.data.rows;
      rule.periods_per_year = static_cast<double>(b.data.rows - 1) / span_years;
    }
  }
  return rule;
}

std::string periods_per_year_basis(const DecisionRule& rule, const std::vector<Bundle>& bundles) {
  const DecisionRule r = resolve_rule(rule, bundles);
  const std::string v = data::format_count(r.periods_per_year);
  if (rule.periods_per_year > 0) return v + " (the rule's)";
  int64_t rows = 0;
  const Bundle* recorded = nullptr;
  for (const auto& b : bundles)
    if (b.periods_per_year > 0 && b.data.rows > rows) {
      rows = b.data.rows;
      recorded = &b;
    }
  if (recorded)
    return recorded->periods_per_year_basis.empty() ? v + " (recorded in the bundles)"
                                                    : recorded->periods_per_year_basis;
  for (const auto& b : bundles)
    if (b.data.rows >= 2 &&
        static_cast<double>(b.data.last_timestamp - b.data.first_timestamp) >= 30.0 * 86400.0)
      return v + " (from the training data's span)";
  return v + " (default)";
}

double policy_signal(const std::vector<float>& p) {
  FOXHUNT_CHECK(p.size() == 3, kServingComponent,
                "policy signal: expected 3 action probabilities, got ", p.size());
  return static_cast<double>(p[2]) - static_cast<double>(p[0]);
}

double forecast_signal(double p10, double p50, double p90, double gain) {
  const double width = p90 - p10;
  if (!(width > 1e-12) || !std::isfinite(p50)) return 0.0;
  return std::clamp(gain * p50 / width, -1.0, 1.0);
}

double forecast_probability_above(const std::vector<double>& taus, const std::vector<double>& q,
                                  double x) {
  FOXHUNT_CHECK(taus.size() == q.size() && taus.size() >= 2, kServingComponent,
                "forecast distribution: expected as many quantiles as levels (at least 2), got ",
                q.size(), " quantiles for ", taus.size(), " levels");
  std::vector<double> v = q;
  for (size_t k = 0; k < v.size(); ++k)
    FOXHUNT_CHECK(std::isfinite(v[k]) && std::isfinite(taus[k]), kServingComponent,
                  "forecast distribution: quantile ", k, " is not finite (", v[k], ")");
  FOXHUNT_CHECK(std::isfinite(x), kServingComponent, "forecast distribution: threshold ", x,
                " is not finite");
  std::sort(v.begin(), v.end());  // crossing quantiles: the rearranged (monotone) forecast
  const size_t n = v.size();
  // The segment [k, k+1] holding x; the outermost segments extend beyond the ends.
  size_t k = 0;
  while (k + 2 < n && x > v[k + 1]) ++k;
  const double dq = v[k + 1] - v[k];
  double cdf;
  if (dq <= 0) {
    cdf = x < v[k] ? taus[k] : taus[k + 1];  // a point mass between two levels
    if (x < v[k] && k == 0) cdf = 0.0;
    if (x >= v[k + 1] && k + 2 == n) cdf = 1.0;
  } else {
    cdf = taus[k] + (x - v[k]) * (taus[k + 1] - taus[k]) / dq;
  }
  return 1.0 - std::clamp(cdf, 0.0, 1.0);
}

double forecast_signal(const std::vector<double>& taus, const std::vector<double>& q,
                       const DecisionRule& rule) {
  FOXHUNT_CHECK(rule.periods_per_year > 0, kServingComponent,
                "forecast signal: the rule's periods_per_year is not resolved (resolve_rule)");
  const double c = rule.cost_bps * 1e-4;
  const double up = forecast_probability_above(taus, q, c);
  const double down = 1.0 - forecast_probability_above(taus, q, -c);
  const double edge = up - down;
  // The forecast's own volatility from its outermost levels (normal-consistent scale).
  const auto lo = std::min_element(taus.begin(), taus.end()) - taus.begin();
  const auto hi = std::max_element(taus.begin(), taus.end()) - taus.begin();
  const double spread = std::abs(q[static_cast<size_t>(hi)] - q[static_cast<size_t>(lo)]);
  const double z = data::inverse_normal_cdf(taus[static_cast<size_t>(hi)]) -
                   data::inverse_normal_cdf(taus[static_cast<size_t>(lo)]);
  if (!(spread > 1e-12) || !(z > 0)) return 0.0;
  const double sigma_annual = spread / z * std::sqrt(rule.periods_per_year);
  const double size = std::min(1.0, rule.target_volatility / sigma_annual);
  const double strength = std::min(1.0, std::abs(edge) / rule.full_edge);
  return (edge > 0 ? 1.0 : edge < 0 ? -1.0 : 0.0) * strength * size;
}

double combine_signals(const DecisionRule& rule, const std::vector<ModelSignal>& signals,
                       double vol_target) {
  // The baseline first: a ready signal from the first bar (0 until its volatility is known).
  double num = rule.vol_target_weight * vol_target, den = rule.vol_target_weight;
  for (const auto& s : signals) {
    if (!s.ready) continue;
    auto it = rule.weights.find(s.model);
    const double w = it == rule.weights.end() ? 0.0 : it->second;
    num += w * s.signal;
    den += w;
  }
  if (den <= 0) return 0.0;
  const double d = std::clamp(num / den, -rule.max_position, rule.max_position);
  return std::abs(d) < rule.dead_band ? 0.0 : d;
}

double decide_position(const DecisionRule& rule, const std::vector<ModelSignal>& signals,
                       double vol_target, double current) {
  return data::apply_no_trade_band(combine_signals(rule, signals, vol_target), current, rule.band);
}

// ---- ensemble -----------------------------------------------------------------------------------

nlohmann::json to_json(const BarDecision& d) {
  nlohmann::json signals = nlohmann::json::object(), models = nlohmann::json::object();
  for (const auto& s : d.signals) {
    signals[s.model] = s.ready ? nlohmann::json(s.signal) : nlohmann::json(nullptr);
    models[s.model] = {{"ready", s.ready}, {"raw", s.raw}, {"latency_us", s.latency_us}};
    if (s.explanation) models[s.model]["explain"] = explanation_json(*s.explanation);
  }
  return {{"timestamp", d.timestamp}, {"signals", signals},         {"decision", d.decision},
          {"position", d.position},   {"latency_us", d.latency_us}, {"models", models}};
}

const std::vector<std::string>& explained_past_names() {
  static const std::vector<std::string> names = data::past_feature_names();
  return names;
}

const std::vector<std::string>& explained_future_names() {
  return data::calendar_feature_names();
}

nlohmann::json explanation_json(const models::Explanation& e, size_t top) {
  auto ranked = [top](const std::vector<double>& w, const std::vector<std::string>& names) {
    std::vector<size_t> idx(w.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return w[a] > w[b]; });
    nlohmann::json out = nlohmann::json::array();
    for (size_t k = 0; k < std::min(top, idx.size()); ++k) {
      const size_t i = idx[k];
      out.push_back({i < names.size() ? names[i] : "var" + std::to_string(i), w[i]});
    }
    return out;
  };
  return {{"past", ranked(e.past_weights, explained_past_names())},
          {"future", ranked(e.future_weights, explained_future_names())},
          {"attention", e.attention}};
}

std::map<std::string, double> default_ensemble_weights() {
  std::map<std::string, double> w;
  for (const auto& e : models::catalog()) w[e.name] = e.ensemble_weight;
  return w;
}

std::vector<Bundle> load_ensemble_bundles(const std::string& dir, const torch::Device& device) {
  std::vector<Bundle> bundles;
  std::string problems;
  for (const auto& name : models::model_names()) {
    const auto path = BundleDirectory(dir).bundle_path(name);
    try {
      FOXHUNT_CHECK(std::filesystem::exists(path), "bundle", "'", path,
                    "' does not exist (a train all run into ", dir, " writes it)");
      bundles.push_back(load_bundle(path, device, name));
    } catch (const InputError& e) {
      problems += std::string(problems.empty() ? "" : "; ") + e.what();
    }
  }
  FOXHUNT_CHECK(problems.empty(), kServingComponent, "bundles ", dir, ": expected the bundles ",
                models::joined_model_names(), ": ", problems);
  return bundles;
}

Ensemble Ensemble::load(const std::string& dir, std::optional<DecisionRule> rule,
                        const torch::Device& device) {
  auto r = rule ? std::move(*rule) : ensemble_rule(dir);
  return Ensemble(load_ensemble_bundles(dir, device), r);
}

Ensemble::Ensemble(std::vector<Bundle> bundles, const DecisionRule& rule) {
  FOXHUNT_CHECK(!bundles.empty(), kServingComponent, "an ensemble needs at least one bundle");
  for (const auto& b : bundles) {
    FOXHUNT_CHECK(b.model != nullptr, kServingComponent, "served model: the bundle has no model");
    check_instrument_selected(b, "serving one instrument");
  }
  // The instrument: the one selected from a panel bundle; a one-series bundle serves any.
  symbol_ = bundles.front().symbol.empty() ? "series" : bundles.front().symbol;
  DeskOptions o;
  o.streams = true;                 // one instrument: each model's own stream is fastest
  o.name_symbol_in_errors = false;  // a bad bar's message as the feature engine says it
  desk_ = std::make_unique<Desk>(std::move(bundles), rule, o);
}

Ensemble::~Ensemble() = default;
Ensemble::Ensemble(Ensemble&&) noexcept = default;

namespace {
SymbolBar symbol_bar(const std::string& symbol, const data::Bar& bar, const data::BarFlow* flow) {
  return SymbolBar{symbol, bar, flow ? std::optional<data::BarFlow>(*flow) : std::nullopt};
}
}  // namespace

bool Ensemble::flow_features() const {
  return desk_->flow_features();
}

bool Ensemble::try_on_bar(const data::Bar& bar, BarDecision* out, std::string* why,
                          const data::BarFlow* flow) {
  try {
    desk_->check(bar.timestamp, {symbol_bar(symbol_, bar, flow)});  // no state changes
  } catch (const InputError& e) {
    if (why) *why = e.what();
    return false;
  }
  auto d = on_bar(bar, flow);  // an error past the checks is not the bar's: it propagates
  if (out) *out = std::move(d);
  return true;
}

BarDecision Ensemble::on_bar(const data::Bar& bar, const data::BarFlow* flow) {
  auto out = desk_->on_timestamp(bar.timestamp, {symbol_bar(symbol_, bar, flow)});
  return std::move(out.front().decision);
}

void Ensemble::set_parallel(bool parallel) {
  desk_->set_parallel(parallel);
}

std::vector<std::string> Ensemble::dispatch_order() const {
  return desk_->dispatch_order();
}

void Ensemble::set_explain(bool on) {
  desk_->set_explain(on);
}

void Ensemble::set_memory_scopes(bool on) {
  desk_->set_memory_scopes(on);
}

std::vector<std::string> Ensemble::model_names() const {
  return desk_->model_names();
}

int64_t Ensemble::warmup_bars() const {
  return desk_->warmup_bars();
}

const DecisionRule& Ensemble::rule() const {
  return desk_->rule();
}

int64_t Ensemble::bars_seen() const {
  return desk_->bars_seen(symbol_);
}

double Ensemble::position() const {
  return desk_->position(symbol_);
}

}  // namespace foxhunt::serving
