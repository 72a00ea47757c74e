#include "foxhunt/serving/panel_backtest.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "backtest_stream.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"

namespace foxhunt::serving {

namespace {

constexpr const char* kPanelBacktestComponent = "backtest";

// Sample standard deviation (n - 1) of the log returns before a symbol's first scored bar.
double pre_scoring_sigma(const std::vector<double>& r) {
  if (r.size() < 2) return 0.0;
  double mean = 0;
  for (double x : r) mean += x;
  mean /= static_cast<double>(r.size());
  double ss = 0;
  for (double x : r) ss += (x - mean) * (x - mean);
  return std::sqrt(ss / static_cast<double>(r.size() - 1));
}

}  // namespace

std::vector<std::string> forecaster_gate_failures(const PanelBacktestRun& run) {
  std::vector<std::string> out;
  for (const auto& [name, pf] : run.pooled) {
    if (pf.skill >= 0) continue;
    out.push_back(fmt::format("{}: pooled skill {:+.2f}% vs each symbol's best naive baseline",
                              name, 100 * pf.skill));
  }
  return out;
}

PanelBacktestRun run_panel_backtest(const std::vector<Bundle>& bundles, const data::Panel& panel,
                                    const BacktestJob& job, std::ostream& log) {
  PanelBacktestRun out;
  out.data = job.data;
  // Every symbol streamed at once through the same desks; then each one's run finished and scored
  // as a single series' is, in the panel's order.
  for (auto& s : detail::stream_symbols(bundles, panel, job)) {
    try {
      if (s.error) std::rethrow_exception(s.error);
      auto& run = s.run;
      detail::finish_stream(run, bundles, job, log);
      score_backtest(run, job);
      run.data = job.data + "[" + s.symbol + "]";
      // The returns before the first scored bar: known when scoring starts (no look-ahead).
      out.sigma[s.symbol] = pre_scoring_sigma(run.past_returns);
      FOXHUNT_CHECK(out.sigma[s.symbol] > 0, kPanelBacktestComponent, "symbol '", s.symbol,
                    "': no return variation before its first scored bar");
      out.symbols.push_back(s.symbol);
      out.runs.emplace(s.symbol, std::move(run));
    } catch (const InputError& e) {
      out.skipped[s.symbol] = e.message();
      out.sigma.erase(s.symbol);
      log << "backtest: symbol '" << s.symbol << "' left out: " << e.message() << "\n";
    }
  }
  FOXHUNT_CHECK(!out.symbols.empty(), kPanelBacktestComponent, "'", job.data, "': none of the ",
                panel.size(), " symbols has enough bars after the training data to backtest");
  double inv = 0;
  for (const auto& s : out.symbols) inv += 1.0 / out.sigma[s];
  for (const auto& s : out.symbols) out.weights[s] = 1.0 / out.sigma[s] / inv;

  // The union timeline of the bar returns (a return at index k ends at timestamps[k + 1]).
  std::set<int64_t> times;
  std::vector<double> rates;
  for (const auto& s : out.symbols) {
    const auto& run = out.runs.at(s);
    times.insert(run.timestamps.begin() + 1, run.timestamps.end());
    rates.push_back(run.periods_per_year);
  }
  std::sort(rates.begin(), rates.end());
  const double ppy = rates[rates.size() / 2];
  out.timestamps.assign(times.begin(), times.end());
  out.order = out.runs.at(out.symbols[0]).order;
  for (const auto& name : out.order) {
    data::BacktestResult p;
    p.periods_per_year = ppy;
    p.cost_bps = job.cost_bps;
    p.returns.assign(out.timestamps.size(), 0.0);
    std::vector<bool> held(out.timestamps.size(), false);
    for (const auto& s : out.symbols) {
      const auto& run = out.runs.at(s);
      const auto& r = run.results.at(name);
      const double w = out.weights[s];
      const auto& pos = run.positions.at(name);
      for (size_t k = 0; k < r.returns.size(); ++k) {
        const auto at =
            std::lower_bound(out.timestamps.begin(), out.timestamps.end(), run.timestamps[k + 1]) -
            out.timestamps.begin();
        p.returns[static_cast<size_t>(at)] += w * r.returns[k];
        if (pos[k] != 0.0) held[static_cast<size_t>(at)] = true;
      }
      p.turnover += w * r.turnover;
      p.total_cost += w * r.total_cost;
      p.cost_flat += w * r.cost_flat;
      p.cost_spread += w * r.cost_spread;
      p.cost_fees += w * r.cost_fees;
      p.cost_impact += w * r.cost_impact;
      p.gross_return += w * r.gross_return;
      p.cost_model = r.cost_model;
    }
    data::BootstrapOptions bootstrap;
    bootstrap.seed = job.seed;
    data::fill_return_metrics(p, held, bootstrap);
    out.portfolio[name] = std::move(p);
  }
  // Paired bootstrap against the buy-and-hold portfolio (the break-even cost needs one price
  // series, so it is per symbol only).
  data::BootstrapOptions bootstrap;
  bootstrap.seed = job.seed;
  for (const auto& name : out.order)
    if (name != "buy_and_hold")
      out.portfolio[name].prob_beats_reference = data::prob_sharpe_beats(
          out.portfolio[name].returns, out.portfolio.at("buy_and_hold").returns, bootstrap);

  // Forecasters pooled over the symbols.
  for (const auto& s : out.symbols) {
    for (const auto& [model, f] : out.runs.at(s).forecasts) {
      auto& pf = out.pooled[model];
      const auto n = static_cast<double>(f.realized.size());
      const auto& e = f.evaluation;
      double best = e.model.mean_pinball;
      for (const auto& [bname, scores] : e.baselines)
        if (bname == e.best_baseline) best = scores.mean_pinball;
      pf.symbols += 1;
      pf.points += static_cast<int64_t>(f.realized.size());
      pf.model_pinball += n * e.model.mean_pinball;
      pf.baseline_pinball += n * best;
      pf.coverage_p10_p90 += n * e.coverage_p10_p90.value_or(NAN);
    }
  }
  for (auto& [model, pf] : out.pooled) {
    const auto n = static_cast<double>(pf.points);
    pf.model_pinball /= n;
    pf.baseline_pinball /= n;
    pf.coverage_p10_p90 /= n;
    pf.skill = pf.baseline_pinball > 0 ? 1.0 - pf.model_pinball / pf.baseline_pinball : 0.0;
  }
  return out;
}

nlohmann::json PanelBacktestRun::to_json() const {
  nlohmann::json j = {{"portfolio_bars", timestamps.size() + 1}};
  FOXHUNT_JSON_FIELDS(j, *this, data, symbols, skipped, weights, sigma);
  j["portfolio_rule"] =
      "equal risk: w = (1/sigma) / sum(1/sigma), sigma = stdev of log returns "
      "before the first scored bar";
  j["portfolio"] = nlohmann::json::object();
  for (const auto& name : order) j["portfolio"][name] = data::to_json(portfolio.at(name));
  j["pooled"] = nlohmann::json::object();
  for (const auto& [m, p] : pooled)
    FOXHUNT_JSON_FIELDS(j["pooled"][m], p, symbols, points, model_pinball, baseline_pinball, skill,
                        coverage_p10_p90);
  j["per_symbol"] = nlohmann::json::object();
  for (const auto& s : symbols) j["per_symbol"][s] = runs.at(s).to_json();
  return j;
}

std::string PanelBacktestRun::portfolio_table() const {
  std::ostringstream os;
  os << fmt::format("portfolio of {} symbols (equal risk:", symbols.size());
  for (const auto& s : symbols) os << fmt::format(" {} {:.1f}%", s, 100 * weights.at(s));
  os << "), " << timestamps.size() + 1 << " bars\n";
  os << fmt::format("{:<13} {:>9} {:>9} {:>8} {:>8} {:>5} {:>8} {:>9} {:>8} {:>7}\n", "strategy",
                    "return", "ann.ret", "vol", "sharpe", "psr", "max dd", "turnover", "exposure",
                    "cost %");
  for (const auto& name : order) {
    const auto& r = portfolio.at(name);
    os << fmt::format(
        "{:<13} {:>+8.2f}% {:>+8.2f}% {:>7.2f}% {:>8.2f} {:>5.2f} {:>7.2f}% {:>9.1f} {:>7.1f}% "
        "{:>7.3f}\n",
        name, 100 * r.total_return, 100 * r.annualized_return, 100 * r.volatility, r.sharpe, r.psr,
        100 * r.max_drawdown, r.turnover, 100 * r.exposure, 100 * r.total_cost);
  }
  for (const auto& [m, p] : pooled) {
    os << fmt::format(
        "{:<8} pooled over {} symbols ({} points): pinball {:.3g} vs best naive {:.3g}, "
        "skill {:+.1f}%, P10-P90 coverage {:.1f}%\n",
        m, p.symbols, p.points, p.model_pinball, p.baseline_pinball, 100 * p.skill,
        100 * p.coverage_p10_p90);
  }
  return os.str();
}

std::string PanelBacktestRun::table() const {
  std::ostringstream os;
  os << portfolio_table();
  for (const auto& s : symbols) {
    os << "\n== " << s << "\n" << runs.at(s).table();
  }
  for (const auto& [s, why] : skipped) os << "left out: " << s << ": " << why << "\n";
  return os.str();
}

}  // namespace foxhunt::serving
