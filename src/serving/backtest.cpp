#include "foxhunt/serving/backtest.h"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "backtest_stream.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/data/calendar.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/data/market_data.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bar_stream.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/rule_fit.h"

namespace foxhunt::serving {
namespace {

constexpr const char* kBacktestComponent = "backtest";

void accumulate(std::vector<double>& sum, const std::vector<double>& v) {
  if (sum.size() < v.size()) sum.resize(v.size(), 0.0);
  for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
}

}  // namespace

double hurdle_bps(const BacktestJob& job) {
  return job.cost_bps + 0.5 * job.costs.spread_bps + job.costs.fee_bps;
}

std::string rule_cost_warning(const DecisionRule& rule, const BacktestJob& job) {
  if (rule.fit.empty()) return {};  // hand-set: no costs to disagree with
  const auto differs = [](double a, double b) {
    return std::abs(a - b) > 1e-9 * std::max(1.0, std::abs(b));
  };
  std::string diff;
  const auto add = [&](const std::string& name, double fitted, double charged) {
    if (differs(fitted, charged))
      diff += fmt::format("{}{}: fitted {:g}, charged {:g}", diff.empty() ? "" : "; ", name, fitted,
                          charged);
  };
  const auto costs = rule.fit.find("costs");
  if (rule.fit.contains("cost_bps") && costs != rule.fit.end() && costs->is_object()) {
    // The fit recorded its cost model: every term against the backtest's.
    add("cost_bps", rule.fit.value("cost_bps", 0.0), job.cost_bps);
    const auto charged_costs = data::to_json(job.costs);  // outlives the loop
    for (const auto& [name, charged] : charged_costs.items())
      if (charged.is_number()) add(name, costs->value(name, charged.get<double>()), charged);
  } else {
    // An older rule file: its linear cost per unit traded only.
    add("linear cost per unit traded, bps", rule.cost_bps, hurdle_bps(job));
  }
  if (diff.empty()) return {};
  return "the decision rule was fitted at other costs than this backtest charges (" + diff +
         "): its bands and weights were chosen for those costs (refit at these costs, or "
         "backtest at the ones it was fitted at)";
}

void add_explanation(BacktestRun& run, const std::string& model, const models::Explanation& e) {
  auto& s = run.explanation_sums[model];
  accumulate(s.past_weights, e.past_weights);
  accumulate(s.future_weights, e.future_weights);
  accumulate(s.attention, e.attention);
  ++run.explained_bars[model];
}

models::Explanation BacktestRun::explanation_mean(const std::string& model) const {
  models::Explanation m;
  auto it = explanation_sums.find(model);
  if (it == explanation_sums.end()) return m;
  const double n = static_cast<double>(explained_bars.at(model));
  m = it->second;
  for (auto* v : {&m.past_weights, &m.future_weights, &m.attention})
    for (double& x : *v) x /= n;
  return m;
}

namespace detail {
namespace {

// Symbols served by one set of desks (detail::stream_symbols).
struct Lane {
  std::vector<DecisionRule> rules;  // the ensemble's, then each model alone's, resolved
  std::unordered_set<std::string> symbols;
  int64_t from = 0;
  int64_t to = 0;
};

// One bar of symbol `run` and its decisions by every desk (the ensemble's first).
void record(BacktestRun& run, const data::Bar& bar, double prev_close, bool first, int64_t from,
            const std::vector<std::vector<InstrumentDecision>>& d, size_t i) {
  const auto& ens = d[0][i].decision;
  bool all_ready = true;
  for (const auto& s : ens.signals) all_ready = all_ready && s.ready;
  const bool held_out = bar.timestamp > run.training_end && bar.timestamp >= from;
  if (!(held_out && all_ready)) {
    run.warmup_timestamps.push_back(bar.timestamp);
    if (bar.timestamp <= run.training_end) ++run.skipped_training_bars;
    if (!first) run.past_returns.push_back(std::log(bar.close / prev_close));
    ++run.warmup_bars;
    return;
  }
  run.timestamps.push_back(bar.timestamp);
  run.closes.push_back(bar.close);
  run.volumes.push_back(bar.volume);
  for (size_t k = 0; k < d.size(); ++k)
    run.positions[run.order[k]].push_back(d[k][i].decision.decision);
  for (size_t k = 1; k < d.size(); ++k)
    run.max_abs_signal[run.order[k]] =
        std::max(run.max_abs_signal[run.order[k]], std::abs(d[k][i].decision.signals.at(0).signal));
  for (const auto& s : ens.signals) {
    if (s.explanation) add_explanation(run, s.model, *s.explanation);
    if (s.forecast.empty()) continue;
    run.forecasts[s.model].quantiles.push_back(s.forecast);
  }
}

}  // namespace

std::vector<SymbolStream> stream_symbols(const std::vector<Bundle>& bundles,
                                         const data::Panel& panel, const BacktestJob& job) {
  FOXHUNT_CHECK(!bundles.empty(), kBacktestComponent, "expected at least one bundle");
  for (const auto& b : bundles)
    FOXHUNT_CHECK(b.model != nullptr, kBacktestComponent, "a bundle has no model");
  // One ensemble of the four and one ensemble per model alone: the RL state carries the
  // position each strategy holds, so "a model alone" is its own run, not a reweighting.
  std::vector<std::string> names = {"ensemble"};
  for (const auto& b : bundles) names.push_back(b.name());
  DecisionRule rule = job.rule;
  rule.cost_bps = hurdle_bps(job);  // the forecasters' hurdle is the cost the backtest charges
  std::vector<SymbolStream> out(panel.symbols.size());
  std::map<std::vector<double>, Lane> lanes;  // by the rules' periods_per_year
  std::unordered_map<std::string, size_t> index;
  for (size_t k = 0; k < panel.symbols.size(); ++k) {
    const auto& ps = panel.symbols[k];
    auto& run = out[k].run;
    out[k].symbol = ps.symbol;
    index[ps.symbol] = k;
    try {
      FOXHUNT_CHECK(job.cost_bps >= 0 && std::isfinite(job.cost_bps), kBacktestComponent,
                    "cost_bps: expected a cost >= 0 basis points, got ", job.cost_bps);
      data::check_cost_model(job.cost_bps, job.costs);
      // A panel bundle serves each symbol with that instrument's calibration and training range
      // (and refuses a symbol it was not trained on).
      const auto selected = select_instrument(bundles, ps.symbol);
      run.data = job.data;
      run.bars_in_file = static_cast<int64_t>(ps.series.bars.size());
      for (const auto& b : selected)
        run.training_end = std::max(run.training_end, b.data.last_timestamp);
      const int64_t from =
          job.from.empty() ? std::numeric_limits<int64_t>::min() : data::parse_timestamp(job.from);
      const int64_t to =
          job.to.empty() ? std::numeric_limits<int64_t>::max() : data::parse_timestamp(job.to);
      FOXHUNT_CHECK(job.from.empty() || from > run.training_end, kBacktestComponent, "from ",
                    job.from, ": inside the training data, which ends at ", run.training_end,
                    " (Unix s; the bundles' data fingerprint); a backtest scores held-out bars "
                    "only");
      FOXHUNT_CHECK(from <= to, kBacktestComponent, "from ", job.from, " is after to ", job.to);
      std::vector<DecisionRule> rules = {resolve_rule(rule, selected)};
      for (const auto& b : selected) {
        DecisionRule alone = rule;
        for (auto& [m, w] : alone.weights) w = m == b.name() ? 1.0 : 0.0;
        rules.push_back(resolve_rule(alone, {b}));
      }
      std::vector<double> key;
      for (const auto& r : rules) key.push_back(r.periods_per_year);
      auto& lane = lanes[key];
      lane.rules = rules;
      lane.symbols.insert(ps.symbol);
      lane.from = from;
      lane.to = to;
      run.rule = rules[0];
      run.order = names;
    } catch (const InputError&) {
      out[k].error = std::current_exception();
    }
  }

  for (const auto& entry : lanes) {
    const Lane& lane = entry.second;
    DeskOptions o;
    o.parallel = false;
    o.streams = true;  // each instrument through its models' own streams, as the Ensemble
    o.max_batch = 1;   // and alone in its forward: the single-series numbers, bit for bit
    o.name_symbol_in_errors = panel.symbols.size() > 1;
    std::vector<Desk> desks;
    desks.reserve(1 + bundles.size());
    o.explain = job.explain;
    desks.emplace_back(bundles, lane.rules[0], o);
    o.explain = false;
    for (size_t m = 0; m < bundles.size(); ++m)
      desks.emplace_back(std::vector<Bundle>{bundles[m]}, lane.rules[m + 1], o);
    PanelBarSource source(panel, [&](const std::string& s) { return lane.symbols.count(s) > 0; });
    std::vector<SymbolBar> bars;
    std::vector<std::vector<InstrumentDecision>> d(desks.size());
    std::vector<double> prev_close(panel.symbols.size(), 0.0);
    std::vector<bool> fed(panel.symbols.size(), false);
    while (source.next(bars)) {
      const int64_t t = bars.front().bar.timestamp;
      if (t > lane.to) break;
      for (size_t k = 0; k < desks.size(); ++k) d[k] = desks[k].on_timestamp(t, bars);
      for (size_t i = 0; i < bars.size(); ++i) {
        const size_t k = index.at(bars[i].symbol);
        record(out[k].run, bars[i].bar, prev_close[k], !fed[k], lane.from, d, i);
        prev_close[k] = bars[i].bar.close;
        fed[k] = true;
      }
    }
  }
  return out;
}

void finish_stream(BacktestRun& run, const std::vector<Bundle>& bundles, const BacktestJob& job,
                   std::ostream& log) {
  FOXHUNT_CHECK(run.closes.size() >= 3, kBacktestComponent, "'", job.data,
                "': expected bars after the ", "training data (which ends at Unix ",
                run.training_end, ") and after the warm-up", " of ", run.warmup_bars, " bars; got ",
                run.closes.size(), " scored bars of ", run.bars_in_file, " (",
                run.skipped_training_bars, " inside the training range)");
  if (run.skipped_training_bars > 0)
    log << "backtest: warning: " << run.skipped_training_bars
        << " bars at or before the end of the training data only warmed the state up\n";
  for (auto& [name, f] : run.forecasts)
    for (const auto& b : bundles)
      if (b.name() == name) {
        const auto& q = b.model->spec().quantiles;
        f.taus.assign(q.begin(), q.end());
      }
}

}  // namespace detail

BacktestRun stream_backtest(const std::vector<Bundle>& bundles, const data::BarSeries& series,
                            const BacktestJob& job, std::ostream& log) {
  for (const auto& b : bundles) {
    FOXHUNT_CHECK(b.model != nullptr, kBacktestComponent, "a bundle has no model");
    check_instrument_selected(b, "serving one instrument");
  }
  // A panel of one instrument, named as the Ensemble names it.
  data::Panel one;
  one.source = job.data;
  data::PanelSymbol ps;
  ps.symbol = bundles.empty() || bundles.front().symbol.empty() ? "series" : bundles.front().symbol;
  ps.series = series;
  one.symbols.push_back(std::move(ps));
  for (const auto& b : series.bars) one.timestamps.push_back(b.timestamp);
  auto streamed = detail::stream_symbols(bundles, one, job);
  if (streamed.front().error) std::rethrow_exception(streamed.front().error);
  auto run = std::move(streamed.front().run);
  detail::finish_stream(run, bundles, job, log);
  return run;
}

void score_backtest(BacktestRun& run, const BacktestJob& job) {
  FOXHUNT_CHECK(run.closes.size() >= 3 && run.timestamps.size() == run.closes.size(),
                kBacktestComponent, "expected at least 3 scored bars with their timestamps, got ",
                run.closes.size());
  FOXHUNT_CHECK(!run.scored, kBacktestComponent, "a backtest run is scored once");
  run.scored = true;
  run.first_timestamp = run.timestamps.front();
  run.last_timestamp = run.timestamps.back();
  const auto to_ms = [](const std::vector<int64_t>& seconds) {
    std::vector<int64_t> ms;
    for (auto t : seconds) ms.push_back(t * 1000);
    return ms;
  };
  auto calendar = job.periods_per_year > 0
                      ? data::given_periods_per_year(job.periods_per_year, "periods_per_year")
                      : data::infer_calendar(to_ms(run.timestamps));
  // Scored bars too few to show a session (a held-out afternoon of a 2-day tape) fall back to
  // the spacing, which annualises as if the market never closed: the sessions of every bar fed
  // (the warm-up's too) are the market's calendar then.
  if (calendar.basis == data::CalendarBasis::kSpacing && !run.warmup_timestamps.empty()) {
    auto fed = run.warmup_timestamps;
    fed.insert(fed.end(), run.timestamps.begin(), run.timestamps.end());
    std::sort(fed.begin(), fed.end());  // a no-op unless a bar went unscored after the warm-up
    const auto whole = data::infer_calendar(to_ms(fed));
    if (whole.basis != data::CalendarBasis::kSpacing) calendar = whole;
  }
  run.periods_per_year = calendar.value;
  run.periods_per_year_basis = calendar.describe();
  const size_t n = run.closes.size();
  auto& positions = run.positions;
  positions["buy_and_hold"] = data::buy_and_hold_positions(n);
  positions["vol_target"] = data::volatility_target_positions(
      run.past_returns, run.closes, run.rule.target_volatility, run.periods_per_year);
  positions["flat"] = data::flat_positions(n);
  positions["random"] = data::random_positions(n, job.seed);
  for (const char* s : {"buy_and_hold", "vol_target", "flat", "random"}) run.order.push_back(s);
  data::BacktestOptions bo;
  bo.cost_bps = job.cost_bps;
  bo.periods_per_year = run.periods_per_year;
  bo.bootstrap.seed = job.seed;
  bo.costs = job.costs;
  data::MarketCostInputs market;
  if (run.volumes.size() == n) market.volumes = run.volumes;
  market.past_returns = run.past_returns;
  for (const auto& name : run.order) {
    FOXHUNT_CHECK(positions.at(name).size() == n, kBacktestComponent, "strategy '", name, "' has ",
                  positions.at(name).size(), " positions for ", n, " scored bars");
    run.results[name] = data::run_backtest(run.closes, positions.at(name), bo, market);
  }
  const auto& bh = run.results.at("buy_and_hold");
  for (const auto& name : run.order)
    if (name != "buy_and_hold")
      data::compare_to_reference(run.results[name], bh, run.closes, positions.at(name),
                                 positions.at("buy_and_hold"), bo.bootstrap);
  run.short_window = bh.short_window;
  // The fitted rule's Sharpe deflated for the search that chose it (rule.json's fit figures).
  if (auto e = run.results.find("ensemble"); e != run.results.end())
    e->second.dsr = fitted_rule_dsr(run.rule, e->second.returns);
  // A model that never holds a position is reported as such: no figure of it may pass for skill.
  for (const auto& [name, max_signal] : run.max_abs_signal) {
    if (run.results.at(name).exposure > 0) continue;
    run.idle[name] = fmt::format(
        "never left the dead band: its largest |signal| over {} scored bars was {:.4g}, "
        "the dead band is {:.4g}",
        n, max_signal, run.rule.dead_band);
  }

  // Forecasts at bar t are for r_{t+1}: the last scored bar has no outcome yet.
  for (auto& [name, f] : run.forecasts) {
    FOXHUNT_CHECK(f.quantiles.size() == n, kBacktestComponent, "forecaster '", name, "' has ",
                  f.quantiles.size(), " forecasts for ", n, " scored bars");
    f.quantiles.pop_back();
    f.realized.clear();
    for (size_t k = 0; k + 1 < n; ++k)
      f.realized.push_back(std::log(run.closes[k + 1] / run.closes[k]));
    FOXHUNT_CHECK(run.past_returns.size() >= 2, kBacktestComponent,
                  "expected at least 2 bars before the first scored bar for the baselines");
    f.evaluation =
        data::evaluate_forecast(run.past_returns, f.realized, f.quantiles, f.taus, job.seed);
  }
}

BacktestRun run_backtest_on(const std::vector<Bundle>& bundles, const data::BarSeries& series,
                            const BacktestJob& job, std::ostream& log) {
  auto run = stream_backtest(bundles, series, job, log);
  score_backtest(run, job);
  return run;
}

std::vector<std::string> forecaster_gate_failures(const BacktestRun& run) {
  std::vector<std::string> out;
  for (const auto& [name, f] : run.forecasts) {
    if (f.evaluation.beats_best_baseline) continue;
    out.push_back(fmt::format("{}: skill {:+.2f}% vs {}", name, 100 * f.evaluation.skill_vs_best,
                              f.evaluation.best_baseline));
  }
  return out;
}

BacktestRun run_backtest_job(const BacktestJob& job, std::ostream& log) {
  FOXHUNT_CHECK(!job.bundles.empty(), kBacktestComponent, "bundles: expected a directory");
  FOXHUNT_CHECK(job.data.empty() != job.ticks.empty(), kBacktestComponent,
                "expected one input: data (a bars CSV) or ticks (a tape), got ",
                job.data.empty() ? "neither" : "both");
  const auto device = models::to_torch(job.device);
  auto bundles = load_ensemble_bundles(job.bundles, device);
  if (!job.symbol.empty()) bundles = select_instrument(std::move(bundles), job.symbol);
  for (const auto& b : bundles)
    FOXHUNT_CHECK(!b.panel() || !b.symbol.empty(), kBacktestComponent, "'", job.data,
                  "' is one series and the bundles were trained on a panel of ",
                  b.instruments.size(), " instruments (", b.symbols_text(),
                  "): name the instrument it is (symbol), or backtest a panel CSV");
  if (!job.ticks.empty()) {
    const auto spec = tape_bar_spec(bundles, job.bundles, job.bar_spec);
    const auto bars = data::load_tape_market_data(job.ticks, spec, job.tape_read);
    FOXHUNT_CHECK(!bars.is_panel(), kBacktestComponent, "'", job.ticks,
                  "' has a symbol column: backtest its panel of bars (run_panel_backtest)");
    auto run = run_backtest_on(bundles, bars.series, job, log);
    run.data = bars.series.source;
    return run;
  }
  const auto series = data::load_bars_csv(job.data);
  auto run = run_backtest_on(bundles, series, job, log);
  run.data = job.data;
  return run;
}

nlohmann::json BacktestRun::to_json() const {
  nlohmann::json j = {{"scored_bars", closes.size()}};
  FOXHUNT_JSON_FIELDS(j, *this, data, bars_in_file, training_end, skipped_training_bars,
                      warmup_bars, first_timestamp, last_timestamp, periods_per_year,
                      periods_per_year_basis, short_window, rule, idle);
  if (short_window)
    j["note"] = "fewer than a year of bars scored (" + std::to_string(closes.size() - 1) +
                " bar returns, " + std::to_string(static_cast<int64_t>(periods_per_year)) +
                " per year): annualised figures extrapolate; see mean_return_per_bar and "
                "sharpe_per_bar";
  j["strategies"] = nlohmann::json::object();
  for (const auto& name : order) {
    auto s = data::to_json(results.at(name));
    if (max_abs_signal.count(name)) s["max_abs_signal"] = max_abs_signal.at(name);
    j["strategies"][name] = s;
  }
  if (!explanation_sums.empty()) {
    j["explain"] = nlohmann::json::object();
    for (const auto& [m, n] : explained_bars) {
      auto e = explanation_json(explanation_mean(m), 15);
      e["bars"] = n;
      j["explain"][m] = e;
    }
  }
  j["forecasters"] = nlohmann::json::object();
  for (const auto& [name, f] : forecasts) {
    auto e = data::to_json(f.evaluation);
    e["taus"] = f.taus;
    e["points"] = f.realized.size();
    j["forecasters"][name] = e;
  }
  const auto& ens = results.at("ensemble");
  const auto& bh = results.at("buy_and_hold");
  j["ensemble_minus_buy_and_hold"] = {{"total_return", ens.total_return - bh.total_return},
                                      {"sharpe", ens.sharpe - bh.sharpe}};
  return j;
}

std::string BacktestRun::table() const {
  std::ostringstream os;
  os << fmt::format(
      "backtest: {} scored bars ({} warm-up, {} inside the training range "
      "skipped), {:.0f} bars/year\nperiods/year: {}\n",
      closes.size(), warmup_bars, skipped_training_bars, periods_per_year,
      periods_per_year_basis.empty() ? fmt::format("{:.0f}", periods_per_year)
                                     : periods_per_year_basis);
  if (short_window) {
    os << fmt::format(
        "note: fewer than a year of bars scored ({} of {:.0f} per year): annualised "
        "figures extrapolate; per-bar figures beside them\n",
        closes.size() - 1, periods_per_year);
  }
  if (!order.empty() && results.count(order.front())) {
    const auto& r = results.at(order.front());
    const auto& c = r.cost_model;
    if (c.spread_bps > 0 || c.fee_bps > 0 || c.fee_per_contract > 0 || c.notional > 0)
      os << fmt::format(
          "costs: {:g} bp flat, spread {:g} bp (half paid), fee {:g} bp + {:g} per contract "
          "(multiplier {:g}), impact {:g} sigma sqrt(participation) at notional {:g} (ADV, "
          "sigma over {} bars)\n",
          r.cost_bps, c.spread_bps, c.fee_bps, c.fee_per_contract, c.contract_multiplier,
          c.impact_k, c.notional, c.window);
  }
  os << fmt::format(
      "{:<13} {:>9} {:>9} {:>8} {:>17} {:>8} {:>5} {:>7} {:>8} {:>7} {:>8} {:>8} {:>9} {:>7} "
      "{:>9}\n",
      "strategy", "return", "ann.ret", "vol", "sharpe [95% CI]", "sh/bar", "psr", "max dd",
      "dd bars", "turn/y", "exposure", "P>B&H", "b/e bps", "cost %", "capacity");
  for (const auto& name : order) {
    const auto& r = results.at(name);
    const std::string ci =
        fmt::format("{:>5.2f} [{:>5.2f},{:>5.2f}]", r.sharpe, r.sharpe_lo, r.sharpe_hi);
    const std::string beats =
        r.prob_beats_reference ? fmt::format("{:.2f}", *r.prob_beats_reference) : "-";
    const std::string be = r.break_even_cost_bps ? fmt::format("{:.1f}", *r.break_even_cost_bps)
                           : r.beats_reference_at_any_cost ? "any"
                                                           : "-";
    const std::string capacity = r.capacity ? fmt::format("{:.3g}", *r.capacity) : "-";
    os << fmt::format(
        "{:<13} {:>+8.2f}% {:>+8.2f}% {:>7.2f}% {:>17} {:>8.4f} {:>5.2f} {:>6.2f}% {:>8} {:>7.1f} "
        "{:>7.1f}% {:>8} {:>9} {:>7.3f} {:>9}\n",
        name, 100 * r.total_return, 100 * r.annualized_return, 100 * r.volatility, ci,
        r.sharpe_per_bar, r.psr, 100 * r.max_drawdown, r.max_drawdown_duration_bars,
        r.turnover_per_year, 100 * r.exposure, beats, be, 100 * r.total_cost, capacity);
  }
  for (const auto& [name, why] : idle) os << name << ": idle, " << why << "\n";
  for (const auto& [name, f] : forecasts) {
    const auto& e = f.evaluation;
    os << fmt::format(
        "{:<8} pinball {:.3g} vs best naive {}: skill {:+.1f}% [{:+.1f}%, {:+.1f}%], P10-P90 "
        "coverage {:.1f}%\n",
        name, e.model.mean_pinball, e.best_baseline, 100 * e.skill_vs_best,
        100 * e.skill_vs_best_lo, 100 * e.skill_vs_best_hi, 100 * e.coverage_p10_p90.value_or(NAN));
  }
  return os.str();
}

}  // namespace foxhunt::serving
