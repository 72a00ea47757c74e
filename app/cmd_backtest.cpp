// foxhunt backtest: the ensemble and each model alone over held-out bars, against buy-and-hold
// (library: serving/backtest.h, harness/reports.h).
#include <filesystem>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "command.h"
#include "cost_flags.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/market_data.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/harness/reports.h"
#include "foxhunt/jobs/walk_forward.h"
#include "foxhunt/models/model.h"
#include "foxhunt/report/html_report.h"
#include "foxhunt/serving/backtest.h"
#include "foxhunt/serving/panel_backtest.h"
#include "foxhunt/train/infra.h"
#include "tape_flags.h"

namespace foxhunt::cli {
namespace {

// The flags bind the library's BacktestJob directly: each default is declared once, there.
struct BacktestArgs {
  static constexpr const char* kHelp =
      "Backtest the ensemble and each model alone on bars after the training data, with costs, "
      "against buy-and-hold, flat and random; forecasts scored against naive baselines";
  serving::BacktestJob job;
  jobs::WalkForwardJob walk;  // --walk-forward N: its own flags bind here
  std::string rule;
  std::string report;
  std::string gate = "forecasters";
  bool json = false;
  bool explain = false;
  TapeFlags tape;
};

// The verdict in the JSON, and the exit code: 1 when the gate is on and failed (the report and
// output are written first: a failed verdict loses nothing).
nlohmann::json verdict_json(const BacktestArgs& a, const std::vector<std::string>& failures) {
  return {{"gate", a.gate}, {"ok", failures.empty()}, {"failures", failures}};
}

int verdict_exit(const BacktestArgs& a, const std::vector<std::string>& failures) {
  if (a.gate == "none" || failures.empty()) return 0;
  std::string why;
  for (const auto& f : failures) why += (why.empty() ? "" : "; ") + f;
  std::cerr << "foxhunt: backtest verdict FAIL: a forecaster is worse than its best naive "
               "baseline on the scored bars: "
            << why << " (--gate none reports without failing)\n";
  return 1;
}

// The warnings of a run: a rule (--rule, or the bundles' rule.json) fitted at other costs. A
// walk-forward without --rule fits each fold's rule at the job's costs.
std::vector<std::string> rule_warnings(const BacktestArgs& a) {
  if (a.rule.empty() &&
      (a.job.bundles.empty() || !std::filesystem::exists(a.job.bundles + "/rule.json")))
    return {};  // the defaults: nothing was fitted
  const auto w = serving::rule_cost_warning(serving::ensemble_rule(a.job.bundles, a.rule), a.job);
  if (w.empty()) return {};
  return {w};
}

// Writes the report when --report asks (`fill` adds its sections), then prints the JSON or the
// table; the one ending of every backtest form.
void finish(const BacktestArgs& a, nlohmann::json j, const std::string& table,
            const std::string& title, const std::function<void(HtmlReport&)>& fill) {
  const auto warnings = rule_warnings(a);
  for (const auto& w : warnings) std::cerr << "foxhunt: backtest: warning: " << w << "\n";
  j["warnings"] = warnings;
  if (!a.report.empty()) {
    HtmlReport page(title);
    fill(page);
    j["report"] = harness::write_report(page, a.report, j, "backtest.json");
  }
  if (a.json) {
    print_json(j.dump(2));
  } else {
    std::cout << table;
    if (j.contains("report")) std::cout << "report: " << j["report"].get<std::string>() << "\n";
  }
}

// --walk-forward N: retrain every N bars, score each next N bars (jobs/walk_forward.h).
int backtest_walk_forward(const BacktestArgs& a) {
  jobs::WalkForwardJob w = a.walk;
  w.data = a.job.data;
  w.cost_bps = a.job.cost_bps;
  w.costs = a.job.costs;
  w.seed = a.job.seed;
  w.device = a.job.device;
  w.rule = a.rule;
  w.explain = a.explain || !a.report.empty();
  train::ScopedSigintHandler sigint;  // Ctrl-C: the fold in training checkpoints, the run stops
  const auto run = jobs::run_walk_forward(w, std::cerr);
  const std::string table = run.table();
  const auto failures =
      run.interrupted ? std::vector<std::string>{} : serving::forecaster_gate_failures(run.run);
  auto j = run.to_json();
  j["verdict"] = verdict_json(a, failures);
  finish(a, j, table, "foxhunt backtest (walk-forward)", [&](HtmlReport& page) {
    page.heading("Refits");
    page.preformatted(run.refits_table());
    harness::add_backtest_sections(page, run.run);
  });
  return run.interrupted ? 130 : verdict_exit(a, failures);
}

// A panel: every symbol, then the portfolio (serving/panel_backtest.h).
int backtest_panel(const BacktestArgs& a, const serving::BacktestJob& job, const data::Panel& panel,
                   const std::vector<serving::Bundle>& bundles) {
  const auto run = serving::run_panel_backtest(bundles, panel, job, std::cerr);
  const std::string table = run.table();
  const auto failures = serving::forecaster_gate_failures(run);
  auto j = run.to_json();
  j["verdict"] = verdict_json(a, failures);
  finish(a, j, table, "foxhunt backtest (panel)", [&](HtmlReport& page) {
    page.heading("Portfolio");
    page.preformatted(run.portfolio_table());
    for (const auto& s : run.symbols) {
      page.heading(s, 2);
      harness::add_backtest_sections(page, run.runs.at(s));
    }
  });
  return verdict_exit(a, failures);
}

// The job of the flags: the rule (with --periods-per-year, which also annualises the figures).
serving::BacktestJob backtest_job(const BacktestArgs& a, bool ppy_given) {
  serving::BacktestJob job = a.job;
  FOXHUNT_CHECK(!job.bundles.empty(), "backtest",
                "--bundles: expected the directory of train all (or use --walk-forward)");
  job.rule = serving::ensemble_rule(job.bundles, a.rule);
  if (ppy_given) job.rule.periods_per_year = job.periods_per_year;
  job.explain = a.explain || !a.report.empty();
  return job;
}

// One series' run: the verdict, the report, the table or JSON.
int backtest_series(const BacktestArgs& a, const serving::BacktestRun& run) {
  const auto failures = serving::forecaster_gate_failures(run);
  auto j = run.to_json();
  j["verdict"] = verdict_json(a, failures);
  finish(a, j, run.table(), "foxhunt backtest",
         [&](HtmlReport& page) { harness::add_backtest_sections(page, run); });
  return verdict_exit(a, failures);
}

// --ticks: the tape's bars (the bundles' spec, or --bar when it is the same), then the backtest
// of one series or of a panel (a symbol column, time bars).
int backtest_ticks(const BacktestArgs& a, bool ppy_given) {
  serving::BacktestJob job = backtest_job(a, ppy_given);
  job.ticks = a.tape.ticks;
  job.bar_spec = a.tape.spec();
  job.tape_read = a.tape.read_options();
  auto bundles = serving::load_ensemble_bundles(job.bundles, models::to_torch(job.device));
  const auto spec = serving::tape_bar_spec(bundles, job.bundles, job.bar_spec);
  const auto bars = data::load_tape_market_data(job.ticks, spec, job.tape_read);
  if (bars.dropped.total() > 0)
    std::cerr << "foxhunt: backtest: " << bars.dropped.total() << " bad prints dropped from "
              << job.ticks << "\n";
  if (bars.is_panel()) {
    FOXHUNT_CHECK(job.symbol.empty(), "backtest",
                  "--symbol applies to a tape of one instrument; a tape with a symbol column "
                  "serves each symbol as itself");
    job.data = bars.panel->source;
    return backtest_panel(a, job, *bars.panel, bundles);
  }
  if (!job.symbol.empty()) bundles = serving::select_instrument(std::move(bundles), job.symbol);
  auto run = serving::run_backtest_on(bundles, bars.series, job, std::cerr);
  run.data = bars.series.source;
  return backtest_series(a, run);
}

Registrar registered_backtest = subcommand<BacktestArgs>(
    "backtest", 55, [](CLI::App* sub, std::shared_ptr<BacktestArgs> a) -> Runner {
      sub->add_option("--bundles", a->job.bundles,
                      "Directory with dqn/, ppo/, mamba2/, tft/ bundles (foxhunt train all --out); "
                      "required unless --walk-forward");
      sub->add_option("--data", a->job.data,
                      "Bars CSV, or a panel CSV with a symbol column (each symbol, then an "
                      "equal-risk portfolio); bars up to the end of the training data only warm "
                      "up (or --ticks)");
      a->tape.add(sub,
                  "Tape of trade prints: its bars are built with the bundles' recorded --bar, "
                  "then backtested as bars are (a symbol column: time bars, a panel)");
      add_cost_flags(sub, &a->job.cost_bps, &a->job.costs,
                     "charged on every strategy (train all takes the same flags)");
      auto* ppy = add_periods_per_year_flag(
          sub, &a->job.periods_per_year,
          "the figures and the rule's volatility targeting (default: inferred from the scored "
          "bars)");
      sub->add_option(
          "--from", a->job.from,
          "First scored bar (Unix seconds or ISO 8601); must be after the training data");
      sub->add_option("--to", a->job.to, "Last bar (Unix seconds or ISO 8601)");
      sub->add_option("--symbol", a->job.symbol,
                      "One series with bundles trained on a panel: the instrument it is (its "
                      "normaliser and id serve it)");
      sub->add_option("--rule", a->rule,
                      "Decision rule JSON (default: DIR/rule.json that train all fits, else the "
                      "built-in rule; see foxhunt predict)");
      add_device_flag(sub, &a->job.device);
      add_defaulted(sub, "--gate", &a->gate,
                    "Verdict that makes the exit code 1: 'forecasters' (each forecaster beats "
                    "its best naive baseline on the scored bars; pooled on a panel) or 'none'")
          ->check(CLI::IsMember({"forecasters", "none"}));
      add_seed_flag(sub, &a->job.seed, "Seed of the random policy and the bootstrap");
      sub->add_option("--report", a->report,
                      "Write DIR/report.html (plots), DIR/report.md and DIR/backtest.json");
      sub->add_flag("--json", a->json, "Print every metric as JSON only");
      sub->add_flag("--explain", a->explain,
                    "Average the TFT's variable-selection weights and attention over the scored "
                    "bars (JSON: explain; always with --report, which plots them)");
      auto* wf = sub->add_option("--walk-forward", a->walk.every,
                                 "Retrain all four models every N bars (train all) and score each "
                                 "next N bars out of sample, stitched; resumable")
                     ->check(positive_number());
      sub->add_option("--rolling", a->walk.rolling,
                      "Walk-forward: train on the last W bars (default: an expanding window)")
          ->check(positive_number())
          ->needs(wf);
      sub->add_option("--initial", a->walk.initial,
                      "Walk-forward: bars of the first training window (default: 60% of the data)")
          ->check(positive_number())
          ->needs(wf);
      sub->add_option("--work", a->walk.work_dir,
                      "Walk-forward: directory of the folds' ensembles (default out/walk-forward); "
                      "folds already trained there are reused")
          ->needs(wf);
      sub->add_option("--steps", a->walk.steps, "Walk-forward: RL steps per refit")
          ->check(positive_number())
          ->needs(wf);
      sub->add_option("--epochs", a->walk.epochs, "Walk-forward: forecaster epochs per refit")
          ->check(positive_number())
          ->needs(wf);
      return [a, wf, ppy]() {
        // A --report path that cannot hold the files fails now, before the run.
        if (!a->report.empty()) check_output_dir(a->report, "--report");
        a->tape.check_used("backtest");
        FOXHUNT_CHECK(a->tape.given() != !a->job.data.empty(), "backtest",
                      "expected one input: --data (bars) or --ticks (a tape), got ",
                      a->tape.given() ? "both" : "neither");
        if (a->tape.given()) {
          FOXHUNT_CHECK(wf->count() == 0, "backtest",
                        "--walk-forward reads bars: build them first (foxhunt data bars --ticks "
                        "TAPE --bar SPEC --out bars.csv) and give --data bars.csv");
          return backtest_ticks(*a, ppy->count() > 0);
        }
        // The input's kind, decided once (a stream's header: data::has_symbol_column).
        const bool panel = data::has_symbol_column(read_file(a->job.data));
        if (wf->count() > 0) {
          FOXHUNT_CHECK(a->job.bundles.empty(), "backtest",
                        "--walk-forward trains its own ensembles (under --work); drop --bundles");
          FOXHUNT_CHECK(a->job.from.empty() && a->job.to.empty(), "backtest",
                        "--walk-forward scores every fold after --initial; --from/--to do not "
                        "apply");
          FOXHUNT_CHECK(!panel, "backtest",
                        "--walk-forward: expected one series, got a panel (a symbol column) in ",
                        a->job.data);
          return backtest_walk_forward(*a);
        }
        const serving::BacktestJob job = backtest_job(*a, ppy->count() > 0);
        if (panel) {
          FOXHUNT_CHECK(job.symbol.empty(), "backtest",
                        "--symbol applies to one series; a panel serves each symbol as itself");
          return backtest_panel(
              *a, job, data::load_panel_csv(job.data),
              serving::load_ensemble_bundles(job.bundles, models::to_torch(job.device)));
        }
        return backtest_series(*a, serving::run_backtest_job(job, std::cerr));
      };
    });

}  // namespace
}  // namespace foxhunt::cli
