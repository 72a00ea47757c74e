#include "foxhunt/serving/rule_fit.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/data/backtest.h"

namespace foxhunt::serving {
namespace {

constexpr const char* kRuleFitComponent = "rule fit";

// Every vector of `n` non-negative integers summing to `units`, in lexicographic order.
void compositions(size_t n, int units, std::vector<int>& cur,
                  const std::function<void(const std::vector<int>&)>& visit) {
  if (cur.size() + 1 == n) {
    cur.push_back(units);
    visit(cur);
    cur.pop_back();
    return;
  }
  for (int k = units; k >= 0; --k) {
    cur.push_back(k);
    compositions(n, units - k, cur, visit);
    cur.pop_back();
  }
}

struct Score {
  double sharpe = 0;
  double exposure = 0;
};

// One segment's recorded validation bars: every model's signal and the close.
struct Recorded {
  std::vector<std::vector<ModelSignal>> signals;
  std::vector<double> closes;
  std::vector<int64_t> times;
};

// The decisions of `rule` over the recorded signals, held over the next bar, after costs; the
// segments' returns pooled (each starts flat).
Score score(const DecisionRule& rule, const std::vector<Recorded>& segments, double cost_bps,
            double periods_per_year) {
  std::vector<double> returns;
  int64_t held = 0;
  for (const auto& seg : segments) {
    const auto& closes = seg.closes;
    double prev = 0.0;
    for (size_t t = 0; t + 1 < closes.size(); ++t) {
      const double p = combine_signals(rule, seg.signals[t]);
      returns.push_back(p * (closes[t + 1] / closes[t] - 1.0) -
                        cost_bps * 1e-4 * std::abs(p - prev));
      held += p != 0.0;
      prev = p;
    }
  }
  return {data::sharpe_ratio(returns, periods_per_year),
          static_cast<double>(held) / static_cast<double>(returns.size())};
}

}  // namespace

nlohmann::json to_json(const RuleFit& f, const RuleFitOptions& options) {
  nlohmann::json j = {
      {"objective",
       "annualised Sharpe after costs of the ensemble's decision on the validation bars"},
      {"method", "grid over the weight simplex, then w = (1 - shrinkage) w* + shrinkage w_equal"},
      {"note",
       "in-sample figures (the validation bars chose the weights); the RL policies saw the "
       "equal-weight ensemble's position"}};
  FOXHUNT_JSON_FIELDS(j, options, shrinkage, grid_step, cost_bps);
  FOXHUNT_JSON_FIELDS(j, f, bars, first_timestamp, last_timestamp, periods_per_year, best_weights,
                      weights, sharpe_best, sharpe_equal, sharpe_fitted, sharpe_alone,
                      exposure_alone, candidates);
  return j;
}

RuleFit fit_decision_rule(const std::vector<Bundle>& bundles, const data::BarSeries& series,
                          int64_t first, int64_t last, const DecisionRule& base,
                          const RuleFitOptions& options) {
  return fit_decision_rule(std::vector<RuleFitSegment>{{bundles, &series, first, last}}, base,
                           options);
}

RuleFit fit_decision_rule(const std::vector<RuleFitSegment>& segments, const DecisionRule& base,
                          const RuleFitOptions& options) {
  FOXHUNT_CHECK(!segments.empty(), kRuleFitComponent, "expected at least one segment to fit on");
  FOXHUNT_CHECK(options.grid_step > 0 && options.grid_step <= 1, kRuleFitComponent,
                "grid_step: expected in (0, 1], got ", options.grid_step);
  const double units_real = 1.0 / options.grid_step;
  const int units = static_cast<int>(std::lround(units_real));
  FOXHUNT_CHECK(std::abs(units_real - units) < 1e-9 && units <= 100, kRuleFitComponent,
                "grid_step: expected 1 / step to be an integer <= 100, got step ",
                options.grid_step);
  FOXHUNT_CHECK(options.shrinkage >= 0 && options.shrinkage <= 1, kRuleFitComponent,
                "shrinkage: expected in [0, 1], got ", options.shrinkage);
  FOXHUNT_CHECK(options.cost_bps >= 0 && std::isfinite(options.cost_bps), kRuleFitComponent,
                "cost_bps: expected >= 0, got ", options.cost_bps);
  DecisionRule rule = base;
  rule.cost_bps = options.cost_bps;
  for (auto& [m, w] : rule.weights) w = 1.0;  // the recording run: equal weights
  std::vector<std::string> names;
  DecisionRule resolved;
  std::vector<Recorded> recorded;
  size_t bars = 0, longest = 0;
  std::string sources;
  for (const auto& seg : segments) {
    FOXHUNT_CHECK(seg.series != nullptr && seg.first <= seg.last, kRuleFitComponent,
                  "expected a series and a validation range, got [", seg.first, ", ", seg.last,
                  "]");
    Ensemble ensemble(seg.bundles, rule);
    ensemble.set_parallel(false);
    const std::vector<std::string> these = ensemble.model_names();
    FOXHUNT_CHECK(names.empty() || names == these, kRuleFitComponent,
                  "every segment needs the same models in the same order");
    names = these;
    resolved = ensemble.rule();
    Recorded r;
    for (const auto& bar : seg.series->bars) {
      if (bar.timestamp > seg.last) break;
      auto d = ensemble.on_bar(bar);
      if (bar.timestamp < seg.first) continue;
      if (!std::all_of(d.signals.begin(), d.signals.end(), [](auto& s) { return s.ready; }))
        continue;
      for (auto& s : d.signals) {  // only what the decision reads
        s.raw.clear();
        s.forecast.clear();
      }
      r.signals.push_back(std::move(d.signals));
      r.closes.push_back(bar.close);
      r.times.push_back(bar.timestamp);
    }
    bars += r.closes.size();
    if (recorded.empty() || r.closes.size() > recorded[longest].closes.size())
      longest = recorded.size();
    sources += (sources.empty() ? "'" : ", '") + seg.series->source + "'";
    recorded.push_back(std::move(r));
  }
  FOXHUNT_CHECK(bars >= 20, kRuleFitComponent, sources,
                ": expected at least 20 validation bars with every model ready to fit the "
                "weights on, got ",
                bars, " in [", segments.front().first, ", ", segments.front().last, "]");
  RuleFit fit;
  fit.bars = static_cast<int64_t>(bars);
  fit.first_timestamp = std::numeric_limits<int64_t>::max();
  fit.last_timestamp = std::numeric_limits<int64_t>::min();
  for (const auto& r : recorded)
    if (!r.times.empty()) {
      fit.first_timestamp = std::min(fit.first_timestamp, r.times.front());
      fit.last_timestamp = std::max(fit.last_timestamp, r.times.back());
    }
  std::vector<int64_t> ms;
  for (auto t : recorded[longest].times) ms.push_back(t * 1000);
  fit.periods_per_year = data::infer_periods_per_year(ms);
  const double ppy = fit.periods_per_year;

  auto with_weights = [&](const std::vector<double>& w) {
    DecisionRule r = resolved;
    for (size_t i = 0; i < names.size(); ++i) r.weights[names[i]] = w[i];
    return r;
  };
  const size_t n = names.size();
  const std::vector<double> equal(n, 1.0 / static_cast<double>(n));
  fit.sharpe_equal = score(with_weights(equal), recorded, options.cost_bps, ppy).sharpe;
  for (size_t i = 0; i < n; ++i) {
    std::vector<double> alone(n, 0.0);
    alone[i] = 1.0;
    const auto s = score(with_weights(alone), recorded, options.cost_bps, ppy);
    fit.sharpe_alone[names[i]] = s.sharpe;
    fit.exposure_alone[names[i]] = s.exposure;
  }

  std::vector<double> best = equal;
  double best_sharpe = fit.sharpe_equal, best_distance = 0.0;
  std::vector<int> cur;
  compositions(n, units, cur, [&](const std::vector<int>& c) {
    std::vector<double> w(n);
    double distance = 0.0;
    for (size_t i = 0; i < n; ++i) {
      w[i] = static_cast<double>(c[i]) / units;
      distance += (w[i] - equal[i]) * (w[i] - equal[i]);
    }
    ++fit.candidates;
    const double s = score(with_weights(w), recorded, options.cost_bps, ppy).sharpe;
    if (s > best_sharpe + 1e-12 ||
        (std::abs(s - best_sharpe) <= 1e-12 && distance < best_distance)) {
      best = w;
      best_sharpe = s;
      best_distance = distance;
    }
  });
  fit.sharpe_best = best_sharpe;
  std::vector<double> result(n);
  for (size_t i = 0; i < n; ++i) {
    result[i] = (1.0 - options.shrinkage) * best[i] + options.shrinkage * equal[i];
    fit.best_weights[names[i]] = best[i];
    fit.weights[names[i]] = result[i] * static_cast<double>(n);  // equal weights = 1 each
  }
  fit.sharpe_fitted = score(with_weights(result), recorded, options.cost_bps, ppy).sharpe;

  fit.rule = base;
  fit.rule.cost_bps = options.cost_bps;
  for (const auto& [m, w] : fit.weights) fit.rule.weights[m] = w;
  fit.rule.fit = to_json(fit, options);
  return fit;
}

}  // namespace foxhunt::serving
