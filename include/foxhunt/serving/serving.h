#pragma once
/// \file serving.h
/// The decision rule, and the ensemble of one instrument (a desk of one: serving/desk.h is the one
/// stream runtime), fed one bar at a time. Each new bar
/// updates one streaming feature engine (data/streaming_features.h) per instrument; the four
/// models then run concurrently on a small thread pool (outputs bit-identical to running them
/// one by one) and their signals are combined into one target position in [-1, 1].
///
/// Decision rule (weights and thresholds in a JSON file, `DecisionRule`):
/// - RL policies keep their actions. DQN: its greedy action (argmax q: sell / hold / buy is
///   -1 / 0 / +1, the policy it was evaluated with), or p = softmax(q / policy_temperature) when
///   policy_temperature > 0; PPO: p = softmax(logits), its stochastic policy. Signal p(buy) -
///   p(sell), the position the policy takes (in expectation for PPO).
/// - Mamba-2 and TFT, forecast_rule "distribution" (the default): the signal reads the whole
///   next-bar forecast distribution (its log-return quantiles). Direction: the edge
///   e = P(r > c) - P(r < -c), the probability that the next return beats the cost c =
///   cost_bps / 1e4 upward minus that it does downward, both read from the CDF interpolated
///   linearly between the quantiles (forecast_probability_above). Size: volatility targeting,
///   s = min(1, target_volatility / (sigma * sqrt(periods_per_year))), with the forecast's own
///   volatility sigma = (Q_hi - Q_lo) / (z(tau_hi) - z(tau_lo)) from its outermost quantiles.
///   Signal = sign(e) * min(1, |e| / full_edge) * s: a forecaster whose distribution leans one way
///   by full_edge or more takes its full volatility-targeted size; a calm forecast (small sigma)
///   takes a larger position than a wild one. forecast_rule "median" is the older rule,
///   clamp(forecast_gain * P50 / (P90 - P10), -1, 1), which reads the median only.
/// - decision = clamp(sum_i w_i s_i / sum_i w_i over the models that are ready, +-max_position);
///   |decision| < dead_band is 0 (flat). No model ready (warm-up): 0.
/// - Baselines: `vol_target_weight` w_v adds the volatility-targeted long as one more signal,
///   s_v = min(1, target_volatility / (sigma * sqrt(periods_per_year))) with sigma the sample
///   standard deviation of the instrument's last 60 log returns (data/vol_target.h: the
///   backtests' `vol_target` baseline position, before the rule's clamp and dead band; 0 before
///   2 returns are known), ready from
///   the first bar: decision = clamp((sum_i w_i s_i + w_v s_v) / (sum_i w_i + w_v)). Weights all
///   0 hold the flat baseline (decision 0). The rule fit writes either baseline when the models'
///   edge does not survive its deflation (serving/rule_fit.h).
/// - No-trade band (`band`, 0 by default): the position held moves to the decision only when
///   |decision - position| > band, else it stays (data::apply_no_trade_band; the backtests and the
///   rule fit apply the same function). BarDecision::decision is the position after the band,
///   BarDecision::target the combined decision before it. The rule fit fits it with the weights.
/// - `foxhunt train all` fits the weights on the validation split of its data (serving/
///   rule_fit.h) and writes the rule to DIR/rule.json, which `predict`, `backtest`, the Desk and
///   the Python module use unless a rule is given (ensemble_rule()).
///
/// The runtime tracks the position it holds (the previous decision) and its unrealised PnL
/// (position * log(close / entry close), where the entry is the close of the last position
/// change), which the RL state carries exactly as the trading environment built it in training.
///
/// Boundary: a bar with NaN, a non-increasing time or a non-positive price is rejected with an
/// InputError before any state changes (or skipped via try_on_bar); the state after a rejected
/// bar equals the state before it.

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/streaming_features.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/thread_pool.h"

namespace foxhunt::serving {

/// Each catalog model's ensemble_weight (models/catalog.h): 1 for the four.
std::map<std::string, double> default_ensemble_weights();

/// How a forecaster's quantiles become its signal (see the file comment).
enum class ForecastRule {
  kDistribution,  ///< edge beyond the cost from the whole distribution, volatility-targeted size
  kMedian,        ///< the median in units of the 80% interval (older rule)
};

/// Weights and thresholds of the ensemble's decision (see the file comment).
struct DecisionRule {
  /// Weight of each model's signal (registry name -> weight >= 0).
  std::map<std::string, double> weights = default_ensemble_weights();
  /// How forecasters' signals are made.
  ForecastRule forecast_rule = ForecastRule::kDistribution;
  /// Target annual volatility of a forecaster's position (distribution rule), > 0.
  double target_volatility = 0.10;
  /// Probability edge P(r > c) - P(r < -c) at which a forecaster takes its full size, in (0, 1].
  double full_edge = 0.10;
  /// The cost c a next-bar return must beat, basis points per unit of position (>= 0); a
  /// backtest's --cost-bps sets it.
  double cost_bps = 1.0;
  /// Bars per year for the volatility target; 0: from the bundles' training data (its bars over
  /// its calendar span, as data::infer_periods_per_year), 252 when that is unknown.
  double periods_per_year = 0.0;
  /// Median rule: signal = clamp(gain * P50 / (P90 - P10), -1, 1).
  double forecast_gain = 2.0;
  /// DQN: 0 = its greedy action; > 0: action probabilities softmax(q / temperature).
  double policy_temperature = 0.0;
  /// |decision| below this is flat (0).
  double dead_band = 0.05;
  /// Weight of the volatility-targeted long beside the models' weights (>= 0; see the file
  /// comment). 0: the models alone.
  double vol_target_weight = 0.0;
  /// The decision is clipped to [-max_position, max_position] (0 < max_position <= 1).
  double max_position = 1.0;
  /// No-trade band in [0, 1]: the position changes only when the decision moves by more than it
  /// (see the file comment); 0 trades every change (and is what a rule without it reads as).
  double band = 0.0;
  /// Where the weights came from ({} for hand-set; serving/rule_fit.h writes the fit's figures).
  /// Read and written with the rule, never used by the decision.
  nlohmann::json fit = nlohmann::json::object();
};
/// JSON form {"weights": {...}, "forecast_rule": "distribution"|"median", "target_volatility",
/// "full_edge", "cost_bps", "periods_per_year", "forecast_gain", "policy_temperature",
/// "dead_band", "max_position", "vol_target_weight", "band", "fit"}; vol_target_weight and band
/// are written only when not 0.
void to_json(nlohmann::json& j, const DecisionRule& r);
/// Reads the JSON form: missing keys keep their defaults; unknown keys, unknown models, negative
/// weights or out-of-range thresholds are InputErrors.
void from_json(const nlohmann::json& j, DecisionRule& r);
/// Reads a decision rule from a JSON file.
DecisionRule load_decision_rule(const std::string& path);
/// load_decision_rule on a file's text; `path` names it in errors (the fuzz target's entry).
DecisionRule parse_decision_rule(const std::string& text, const std::string& path);
/// Writes `rule` atomically as JSON to `path`.
void save_decision_rule(const DecisionRule& rule, const std::string& path);
/// The rule of the ensemble in `dir`: the file `override_path` when not empty, else DIR/rule.json
/// when `foxhunt train all` wrote one, else the defaults.
DecisionRule ensemble_rule(const std::string& dir, const std::string& override_path = "");
/// `rule` with periods_per_year resolved: kept when > 0, else the calendar a bundle recorded at
/// training (Bundle::periods_per_year, of the bundle trained on the most bars), else from the
/// bundles' training data (the longest: (rows - 1) / span in years of 365.25 days when it spans
/// at least 30 days), else 252.
DecisionRule resolve_rule(DecisionRule rule, const std::vector<Bundle>& bundles);
/// How resolve_rule decides periods_per_year for `rule` and `bundles`, in words: "98,280 (the
/// rule's)", the bundle's recorded calendar ("98,280 (inferred from 2 sessions of ~390 bars, x 252
/// sessions a year)", "98,280 (given)"), "252 (from the training data's span)" or "252 (default)".
std::string periods_per_year_basis(const DecisionRule& rule, const std::vector<Bundle>& bundles);

/// One model's view of one bar.
struct ModelSignal {
  std::string model;       ///< registry name
  bool ready = false;      ///< false during warm-up (signal 0, no output)
  double signal = 0.0;     ///< in [-1, 1]: > 0 long, < 0 short
  std::vector<float> raw;  ///< q-values (dqn), action probabilities (ppo) or next-bar quantiles
                           ///< in the model's (scaled) target units
  /// Forecasters: the next bar's log-return quantiles (raw converted back from the target
  /// scaling the bundle records); empty for policies.
  std::vector<double> forecast;
  double latency_us = 0.0;  ///< time of this model's step
  /// With Ensemble::set_explain(true), for a model that can explain itself (the FP32 TFT): its
  /// variable-selection weights and attention for this forecast (models::Explanation).
  std::optional<models::Explanation> explanation;
};

/// An explanation with the variables' names, largest weight first: {past: [[name, weight], ...
/// `top` of them], future: [[name, weight], ...], attention: [weights over the window bars,
/// oldest first]}.
nlohmann::json explanation_json(const models::Explanation& e, size_t top = 10);
/// Names of the past and known-future variables the TFT's selection weights refer to.
const std::vector<std::string>& explained_past_names();
const std::vector<std::string>& explained_future_names();

/// Signal of action probabilities over {sell, hold, buy}: p(buy) - p(sell).
double policy_signal(const std::vector<float>& probabilities);
/// Median rule: clamp(gain * p50 / (p90 - p10), -1, 1); 0 for a degenerate interval.
double forecast_signal(double p10, double p50, double p90, double gain);
/// P(r > x) from quantiles `q` at levels `taus` (both increasing in tau; crossing quantiles are
/// sorted first): the CDF interpolated linearly between the quantiles and extrapolated linearly
/// beyond the outermost pair, clamped to [0, 1]. InputError for sizes that differ, fewer than
/// two levels or a non-finite value.
double forecast_probability_above(const std::vector<double>& taus, const std::vector<double>& q,
                                  double x);
/// Distribution rule (see the file comment) on next-bar log-return quantiles `q` at `taus`;
/// `rule.periods_per_year` must be resolved (> 0). 0 for a degenerate distribution.
double forecast_signal(const std::vector<double>& taus, const std::vector<double>& q,
                       const DecisionRule& rule);
/// The decision of `signals` under `rule` (see the file comment); `vol_target` is the
/// instrument's volatility-targeted long position s_v, read with rule.vol_target_weight.
double combine_signals(const DecisionRule& rule, const std::vector<ModelSignal>& signals,
                       double vol_target = 0.0);
/// The position after one bar: combine_signals, then the no-trade band against the position
/// `current` held into the bar (data::apply_no_trade_band with rule.band). The serving runtime's
/// decision; the rule fit scores its candidates with it.
double decide_position(const DecisionRule& rule, const std::vector<ModelSignal>& signals,
                       double vol_target, double current);

/// The result of one bar.
struct BarDecision {
  int64_t timestamp = 0;             ///< the bar's timestamp
  std::vector<ModelSignal> signals;  ///< one per model, in ensemble order
  double decision = 0.0;             ///< the position taken, in [-1, 1] (after the band)
  double target = 0.0;               ///< combine_signals' decision, before the no-trade band
  double position = 0.0;             ///< position held into this bar (the previous decision)
  double vol_target = 0.0;           ///< the vol-targeted long's position (baseline signal)
  double latency_us = 0.0;           ///< wall time of on_bar (features, models, decision)
};
/// JSON line of `predict --json`: {timestamp, signals: {model: signal|null}, decision, position,
/// latency_us, models: {model: {ready, raw, latency_us}}}.
nlohmann::json to_json(const BarDecision& d);

/// Loads DIR/{dqn,ppo,mamba2,tft}/bundle.fhb (what `foxhunt train all --out DIR` writes) onto
/// `device`. Throws InputError naming every missing or bad bundle.
std::vector<Bundle> load_ensemble_bundles(const std::string& dir,
                                          const torch::Device& device = torch::kCPU);

class Desk;

/// The ensemble on one instrument: a desk of one (serving/desk.h), whose models run their
/// O(window)-per-bar streams where they have one (DeskOptions::streams). One runtime serves one
/// series and a universe alike.
class Ensemble {
 public:
  /// Loads DIR/<model>/bundle.fhb for every catalog model (what `foxhunt train all` writes).
  /// Throws InputError naming every missing or bad bundle.
  /// Without a rule: ensemble_rule(dir) (DIR/rule.json when there is one, else the defaults).
  static Ensemble load(const std::string& dir, std::optional<DecisionRule> rule = std::nullopt,
                       const torch::Device& device = torch::kCPU);
  /// An ensemble of already loaded bundles (any subset of the catalog, any order); the rule is
  /// resolved against them (resolve_rule). A panel bundle must have its instrument selected
  /// (select_instrument): InputError otherwise.
  explicit Ensemble(std::vector<Bundle> bundles, const DecisionRule& rule = {});
  ~Ensemble();
  Ensemble(Ensemble&&) noexcept;

  /// Feeds the next bar: features, the models (concurrently unless set_parallel(false)) and the
  /// decision. Throws InputError for an invalid bar (NaN, non-positive price, high < low, a
  /// timestamp not after the previous one); the state is then unchanged.
  /// `flow`: the bar's flow, required when the bundles were trained on bars built from a tape
  /// (flow_features()) and refused otherwise (InputError saying which).
  BarDecision on_bar(const data::Bar& bar, const data::BarFlow* flow = nullptr);
  /// Like on_bar, but returns false (state unchanged) for an invalid bar and says why.
  bool try_on_bar(const data::Bar& bar, BarDecision* out, std::string* why,
                  const data::BarFlow* flow = nullptr);
  /// True when the bundles were trained on bars built from a tape: each bar needs its flow.
  bool flow_features() const;
  /// Runs the models one by one (false) or concurrently (true, the default).
  void set_parallel(bool parallel);
  /// The models in the order the next bar hands them to the threads: by their time on the
  /// previous bar, longest first (the given order before the first bar).
  std::vector<std::string> dispatch_order() const;
  /// Adds each model's explanation to its signal (`predict --explain`; one more forward of the
  /// TFT with its selection weights and attention per bar). Off by default.
  void set_explain(bool on);
  /// Runs each model's step under the ledger scope named after the model (memory/ledger.h), so
  /// that per-model serving bytes are exact; off by default (a scope costs a lock per step).
  void set_memory_scopes(bool on);
  /// The served models' names, in order.
  std::vector<std::string> model_names() const;
  /// Bars before every model is ready (feature warm-up plus the longest window, plus one).
  int64_t warmup_bars() const;
  /// The decision rule.
  const DecisionRule& rule() const;
  /// Position currently held (the last decision).
  double position() const;
  /// Bars accepted so far.
  int64_t bars_seen() const;
  /// The desk of one it is (serving/bar_stream.h streams any source through it).
  Desk& desk() { return *desk_; }
  /// The one instrument's symbol on the desk: the instrument selected from a panel bundle, else
  /// "series".
  const std::string& symbol() const { return symbol_; }

 private:
  std::unique_ptr<Desk> desk_;
  std::string symbol_;
};

}  // namespace foxhunt::serving
