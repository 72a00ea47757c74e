#include "foxhunt/harness/reports.h"

#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/report/chart.h"

namespace foxhunt::harness {

namespace {

// Signed percent for returns and skills, unsigned for shares (coverage, exposure, volatility).
std::string pct(double v) {
  return std::isfinite(v) ? fmt::format("{:+.2f}%", 100 * v) : "n/a";
}
std::string share(double v) {
  return std::isfinite(v) ? fmt::format("{:.2f}%", 100 * v) : "n/a";
}

void scenario_section(HtmlReport& page, const ScenarioResult& s) {
  page.heading(s.name + (s.ok ? ": PASS" : ": FAIL"), 2);
  page.paragraph(s.error.empty() ? s.summary : s.error_type + ": " + s.error);
  if (!s.memory_x.empty()) {
    std::vector<Series> series;
    series.push_back({"total ledger live", s.memory_x, s.live_bytes, "", false});
    for (const auto& [name, ys] : s.model_live_bytes)
      series.push_back({name, s.memory_x, ys, "", false});
    ChartOptions o;
    o.title = s.name + ": ledger live bytes, total and per model";
    o.x_label = s.memory_x_label;
    o.y_label = "bytes";
    o.y_unit = "B";
    o.y_from_zero = true;
    page.svg(line_chart_svg(series, o));
    ChartOptions rss = o;
    rss.title = s.name + ": process RSS";
    rss.y_from_zero = false;
    page.svg(line_chart_svg({{"RSS", s.memory_x, s.rss_bytes, "", false}}, rss));
  }
  if (s.profile_t.size() >= 2) {
    std::vector<Series> series = {{"ledger live", s.profile_t, s.profile_live, "", false},
                                  {"RSS", s.profile_t, s.profile_rss, "", false}};
    if (s.profile_device.size() == s.profile_t.size())
      series.push_back({"CUDA allocated", s.profile_t, s.profile_device, "", false});
    ChartOptions o;
    o.title = s.name + ": memory over time (profiler, every 10 ms)";
    o.x_label = "seconds";
    o.y_label = "bytes";
    o.y_unit = "B";
    o.y_from_zero = true;
    page.svg(line_chart_svg(series, o));
  }
  if (s.latencies_us.size() >= 2) {
    bool positive = true;
    for (double v : s.latencies_us) positive = positive && v > 0;
    ChartOptions o;
    o.title = s.name + ": latency histogram";
    o.x_label = positive ? "microseconds (log scale)" : "microseconds";
    o.y_label = "count";
    page.svg(histogram_svg(histogram(s.latencies_us, 40, positive), o));
  }
  if (s.throughput_t.size() >= 2) {
    ChartOptions o;
    o.title = s.name + ": throughput over time";
    o.x_label = "seconds";
    o.y_label = "inferences/s";
    o.y_from_zero = true;
    page.svg(line_chart_svg({{"throughput", s.throughput_t, s.throughput_per_s, "", false}}, o));
  }
  std::vector<std::vector<std::string>> rows;
  for (const auto& [k, v] : s.details.items())
    if (!v.is_array() || v.size() <= 8) rows.push_back({k, v.dump()});
  if (!rows.empty()) page.table({"figure", "value"}, rows);
}

}  // namespace

void add_stress_sections(HtmlReport& page, const StressReport& r) {
  page.heading(std::string("Stress: ") + (r.ok() ? "PASS" : "FAIL"), 2);
  std::vector<std::vector<std::string>> env;
  for (const auto& [k, v] : r.environment.items()) env.push_back({k, v.dump()});
  page.table({"environment", "value"}, env);
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : r.scenarios)
    rows.push_back({s.name, s.ok ? "PASS" : "FAIL", fmt::format("{:.1f}", s.seconds),
                    s.error.empty() ? s.summary : s.error_type + ": " + s.error});
  page.table({"scenario", "verdict", "seconds", "summary"}, rows);
  for (const auto& s : r.scenarios) scenario_section(page, s);
}

void add_backtest_sections(HtmlReport& page, const serving::BacktestRun& run) {
  page.heading("Backtest", 2);
  page.paragraph(std::to_string(run.closes.size()) + " held-out bars scored after " +
                 std::to_string(run.warmup_bars) + " warm-up bars (" +
                 std::to_string(run.skipped_training_bars) +
                 " of them inside the training range, never scored); " +
                 fmt::format("{:.0f}", run.periods_per_year) +
                 " bars per year inferred from the timestamps.");
  if (run.short_window)
    page.paragraph("Fewer than a year of bars was scored (" +
                   std::to_string(run.closes.size() - 1) + " bar returns at " +
                   fmt::format("{:.0f}", run.periods_per_year) +
                   " per year): the annualised figures extrapolate; the per-bar Sharpe is beside "
                   "them.");
  std::vector<std::vector<std::string>> rows;
  for (const auto& name : run.order) {
    const auto& r = run.results.at(name);
    const std::string beats =
        r.prob_beats_reference ? fmt::format("{:.2f}", *r.prob_beats_reference) : "-";
    const std::string be = r.break_even_cost_bps ? fmt::format("{:.1f}", *r.break_even_cost_bps)
                           : r.beats_reference_at_any_cost ? "any"
                                                           : "-";
    rows.push_back(
        {name, pct(r.total_return), pct(r.annualized_return), share(r.volatility),
         fmt::format("{:.2f}", r.sharpe),
         "[" + fmt::format("{:.2f}", r.sharpe_lo) + ", " + fmt::format("{:.2f}", r.sharpe_hi) + "]",
         fmt::format("{:.4f}", r.sharpe_per_bar), pct(r.max_drawdown),
         std::to_string(r.max_drawdown_duration_bars), fmt::format("{:.1f}", r.turnover_per_year),
         share(r.exposure), beats, be});
  }
  page.table({"strategy", "total return", "annualised", "volatility", "Sharpe", "95% interval",
              "Sharpe per bar", "max drawdown", "dd bars", "turnover/year", "exposure",
              "P(beats B&H)", "break-even bps"},
             rows);
  page.paragraph(
      "Sharpe interval: 2.5-97.5% of a circular block bootstrap (blocks of 20 bars). P(beats "
      "B&H): share of paired resamples in which the strategy's Sharpe is above buy-and-hold's. "
      "Break-even: the cost per unit of position change at which its total return falls to "
      "buy-and-hold's at the same cost (0: below it even without costs; any: above it at every "
      "cost). vol_target: buy-and-hold scaled to the rule's target volatility by a 60-bar "
      "volatility.");
  for (const auto& [name, why] : run.idle)
    page.paragraph(name + " is idle over these bars: it " + why + ".");
  std::vector<double> x(run.closes.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i);
  std::vector<Series> equity, drawdown, exposure;
  for (const auto& name : run.order) {
    if (name == "flat") continue;
    const auto& r = run.results.at(name);
    const bool bh = name == "buy_and_hold";
    equity.push_back({name, x, r.equity, bh ? "#444444" : "", bh});
    drawdown.push_back({name, x, r.drawdown, bh ? "#444444" : "", bh});
    if (name != "random" && !bh) exposure.push_back({name, x, run.positions.at(name), "", false});
  }
  ChartOptions eo;
  eo.title = "Equity curves against buy-and-hold";
  eo.x_label = "scored bar";
  eo.y_label = "equity (start = 1)";
  page.svg(line_chart_svg(equity, eo));
  ChartOptions dd = eo;
  dd.title = "Drawdown";
  dd.y_label = "drawdown";
  page.svg(line_chart_svg(drawdown, dd));
  ChartOptions xo = eo;
  xo.title = "Positions (exposure): -1 short, 0 flat, +1 long";
  xo.y_label = "position";
  page.svg(line_chart_svg(exposure, xo));

  for (const auto& [model, bars] : run.explained_bars) {
    const auto mean = run.explanation_mean(model);
    const auto j = serving::explanation_json(mean, 15);
    page.heading(model + ": what the forecasts rest on (" + std::to_string(bars) + " bars)", 2);
    std::vector<std::string> names;
    std::vector<double> weights;
    for (const auto& v : j["past"]) {
      names.push_back(v[0].get<std::string>());
      weights.push_back(v[1].get<double>());
    }
    ChartOptions vo;
    vo.title = model + ": average variable-selection weight (top 15 past inputs)";
    page.svg(bar_chart_svg(names, weights, vo));
    std::vector<double> lag, att;
    for (size_t i = 0; i < mean.attention.size(); ++i) {
      lag.push_back(-static_cast<double>(mean.attention.size() - 1 - i));
      att.push_back(mean.attention[i]);
    }
    ChartOptions ao;
    ao.title = model + ": average attention of the next-bar forecast over past bars";
    ao.x_label = "bars before the forecast bar (0 = the latest)";
    ao.y_label = "attention weight";
    ao.y_from_zero = true;
    page.svg(line_chart_svg({{"attention", lag, att, "", false}}, ao));
  }

  if (run.forecasts.empty()) return;
  page.heading("Forecasts against naive baselines", 2);
  std::vector<std::vector<std::string>> frows;
  for (const auto& [name, f] : run.forecasts) {
    const auto& e = f.evaluation;
    frows.push_back({name, fmt::format("{:.4g}", e.model.mean_pinball), e.best_baseline,
                     pct(e.skill_vs_best),
                     "[" + pct(e.skill_vs_best_lo) + ", " + pct(e.skill_vs_best_hi) + "]",
                     e.coverage_p10_p90 ? share(*e.coverage_p10_p90) : "n/a",
                     e.beats_best_baseline ? "yes" : "NO"});
  }
  page.table({"forecaster", "mean pinball", "best naive baseline", "skill", "95% interval",
              "P10-P90 coverage", "no worse than naive"},
             frows);
  for (const auto& [name, f] : run.forecasts) {
    std::vector<std::vector<std::string>> brows;
    brows.push_back({name + " (model)", fmt::format("{:.4g}", f.evaluation.model.mean_pinball),
                     share(f.evaluation.model.coverage)});
    for (const auto& [b, sc] : f.evaluation.baselines)
      brows.push_back({b, fmt::format("{:.4g}", sc.mean_pinball), share(sc.coverage)});
    page.table({name + ": forecast", "mean pinball", "central coverage"}, brows);
    // Fan chart of the last 200 scored bars: the band between the outer quantiles.
    const size_t n = f.realized.size();
    const size_t from = n > 200 ? n - 200 : 0;
    const size_t k_lo = 0, k_hi = f.taus.size() - 1;
    size_t k_mid = 0;
    for (size_t k = 0; k < f.taus.size(); ++k)
      if (std::abs(f.taus[k] - 0.5) < std::abs(f.taus[k_mid] - 0.5)) k_mid = k;
    std::vector<double> fx, lo, hi, mid, real;
    for (size_t i = from; i < n; ++i) {
      fx.push_back(static_cast<double>(i));
      lo.push_back(f.quantiles[i][k_lo]);
      hi.push_back(f.quantiles[i][k_hi]);
      mid.push_back(f.quantiles[i][k_mid]);
      real.push_back(f.realized[i]);
    }
    ChartOptions fo;
    fo.title = name + ": next-bar forecast fan (P" + fmt::format("{:.0f}", 100 * f.taus[k_lo]) +
               "-P" + fmt::format("{:.0f}", 100 * f.taus[k_hi]) + ") against realised log returns";
    fo.x_label = "scored bar";
    fo.y_label = "log return";
    page.svg(band_chart_svg(
        fx, lo, hi,
        {{"median forecast", fx, mid, "#d62728", false}, {"realised", fx, real, "#222222", false}},
        fo));
    std::vector<double> nominal, observed;
    for (const auto& [tau, below] : f.evaluation.calibration) {
      nominal.push_back(tau);
      observed.push_back(below);
    }
    ChartOptions co;
    co.title = name + ": calibration (fraction of outcomes below each quantile)";
    co.x_label = "nominal quantile level";
    co.y_label = "observed fraction below";
    co.y_from_zero = true;
    page.svg(line_chart_svg(
        {{"ideal", {0.0, 1.0}, {0.0, 1.0}, "#888888", true}, {name, nominal, observed, "", false}},
        co));
    // PIT: the forecast CDF at the outcome (interpolated between the quantiles); uniform when
    // the forecast is calibrated.
    std::vector<double> pit;
    for (size_t i = 0; i < n; ++i)
      pit.push_back(1.0 -
                    serving::forecast_probability_above(f.taus, f.quantiles[i], f.realized[i]));
    ChartOptions po;
    po.title = name + ": PIT histogram (flat when calibrated)";
    po.x_label = "forecast CDF at the outcome";
    po.y_label = "bars";
    if (!pit.empty()) page.svg(histogram_svg(histogram(pit, 10), po));
  }
}

std::string write_report(const HtmlReport& page, const std::string& dir, const nlohmann::json& json,
                         const std::string& json_name) {
  namespace fs = std::filesystem;
  FOXHUNT_CHECK(!dir.empty(), "report", "report: expected a directory, got ''");
  fs::create_directories(dir);
  write_file_atomic((fs::path(dir) / json_name).string(), json.dump(2) + "\n");
  const auto html = (fs::path(dir) / "report.html").string();
  page.write(html);
  page.write_markdown((fs::path(dir) / "report.md").string());
  return html;
}

std::string write_stress_report(const StressReport& report, const std::string& dir) {
  HtmlReport page("foxhunt stress: " + std::string(report.ok() ? "PASS" : "FAIL"));
  add_stress_sections(page, report);
  return write_report(page, dir, report.to_json(), "stress.json");
}

}  // namespace foxhunt::harness
