// foxhunt backtest: the ensemble and each model alone over held-out bars, against buy-and-hold
// (library: serving/backtest.h, harness/reports.h).
#include <functional>
#include <iostream>

#include "command.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/harness/reports.h"
#include "foxhunt/jobs/walk_forward.h"
#include "foxhunt/models/model.h"
#include "foxhunt/report/html_report.h"
#include "foxhunt/serving/backtest.h"
#include "foxhunt/serving/panel_backtest.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::cli {
namespace {

// The flags bind the library's BacktestJob directly: each default is declared once, there.
struct BacktestArgs {
  /// The command's line in `foxhunt --help`.
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

// Writes the report when --report asks (`fill` adds its sections), then prints the JSON or the
// table; the one ending of every backtest form.
void finish(const BacktestArgs& a, nlohmann::json j, const std::string& table,
            const std::string& title, const std::function<void(HtmlReport&)>& fill) {
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
int backtest_panel(const BacktestArgs& a, const serving::BacktestJob& job) {
  const auto panel = data::load_panel_csv(job.data);
  const auto bundles = serving::load_ensemble_bundles(job.bundles, models::to_torch(job.device));
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

Registrar registered_backtest = subcommand<BacktestArgs>(
    "backtest", 55, [](CLI::App* sub, std::shared_ptr<BacktestArgs> a) -> Runner {
      sub->add_option("--bundles", a->job.bundles,
                      "Directory with dqn/, ppo/, mamba2/, tft/ bundles (foxhunt train all --out); "
                      "required unless --walk-forward");
      sub->add_option("--data", a->job.data,
                      "Bars CSV, or a panel CSV with a symbol column (each symbol, then an "
                      "equal-risk portfolio); bars up to the end of the training data only warm "
                      "up")
          ->required();
      add_defaulted(sub, "--cost-bps", &a->job.cost_bps,
                    "Cost per unit of position change, basis points of notional (flat; the cost "
                    "model's terms below add to it)");
      auto& costs = a->job.costs;
      add_defaulted(sub, "--spread-bps", &costs.spread_bps,
                    "Quoted spread (ask - bid) / mid in basis points; half of it is paid per unit "
                    "traded (a bar CSV has no quotes)");
      add_defaulted(sub, "--fee-bps", &costs.fee_bps, "Fee per notional traded, basis points");
      add_defaulted(sub, "--fee-per-contract", &costs.fee_per_contract,
                    "Fee per contract traded, in the price's currency (see --contract-multiplier)");
      add_defaulted(sub, "--contract-multiplier", &costs.contract_multiplier,
                    "Units of the instrument per contract (1 for shares, 50 for an E-mini)");
      add_defaulted(sub, "--notional", &costs.notional,
                    "Account notional (price currency) that a position of 1 is; > 0 charges the "
                    "square-root market impact k * sigma * sqrt(traded / ADV) from the bars' "
                    "volume (capacity is reported either way)");
      add_defaulted(sub, "--impact-k", &costs.impact_k,
                    "k of the square-root market impact (0 turns it off)");
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
      return [a, wf]() {
        // A --report path that cannot hold the files fails now, before the run.
        if (!a->report.empty()) check_output_dir(a->report, "--report");
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
        FOXHUNT_CHECK(!a->job.bundles.empty(), "backtest",
                      "--bundles: expected the directory of train all (or use --walk-forward)");
        serving::BacktestJob job = a->job;
        job.rule = serving::ensemble_rule(job.bundles, a->rule);
        job.explain = a->explain || !a->report.empty();
        if (panel) {
          FOXHUNT_CHECK(job.symbol.empty(), "backtest",
                        "--symbol applies to one series; a panel serves each symbol as itself");
          return backtest_panel(*a, job);
        }
        const auto run = serving::run_backtest_job(job, std::cerr);
        const auto failures = serving::forecaster_gate_failures(run);
        auto j = run.to_json();
        j["verdict"] = verdict_json(*a, failures);
        finish(*a, j, run.table(), "foxhunt backtest",
               [&](HtmlReport& page) { harness::add_backtest_sections(page, run); });
        return verdict_exit(*a, failures);
      };
    });

}  // namespace
}  // namespace foxhunt::cli
