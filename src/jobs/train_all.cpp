// `foxhunt train all`: the four models on one series into one ensemble directory (train_job.cpp
// runs one model; train_summary.cpp has the summaries' JSON and text forms).
#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/log.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/rule_fit.h"
#include "foxhunt/serving/serving.h"
#include "train_job_parts.h"
#include "train_market.h"

namespace foxhunt::jobs {

namespace {

constexpr const char* kTrainAllComponent = "train";
constexpr const char* kTrainAllLog = "train all";  // the component its log lines name

}  // namespace

namespace market_data {

nlohmann::json fit_ensemble_rule(const std::string& dir, const data::MarketData& bars,
                                 const serving::RuleFitOptions& fit_options) {
  // Never a stale rule on failure.
  std::filesystem::remove(serving::BundleDirectory(dir).rule_path());
  const data::DatasetOptions options;
  // The bars the models trained on: one series, or a panel whose instruments share cut dates
  // (the same splits as training: data/dataset.h).
  std::vector<std::pair<std::string, const data::BarSeries*>> instruments;
  if (bars.is_panel())
    for (const auto& ps : bars.panel->symbols) instruments.emplace_back(ps.symbol, &ps.series);
  else
    instruments.emplace_back("", &bars.series);
  try {
    const auto bundles = serving::load_ensemble_bundles(dir, torch::kCPU);
    std::vector<serving::RuleFitSegment> segments;
    std::optional<data::SplitCuts> cuts;
    if (bars.is_panel()) cuts = data::panel_split_cuts(*bars.panel, options.warmup, options.split);
    for (const auto& [symbol, series] : instruments) {
      const auto ranges = cuts ? data::split_at_cuts(*series, options.warmup, *cuts)
                               : data::chronological_split(*series, options.warmup, options.split);
      const auto& b = series->bars;
      segments.push_back({bars.is_panel() ? serving::select_instrument(bundles, symbol) : bundles,
                          series, b.at(static_cast<size_t>(ranges.validation.begin)).timestamp,
                          b.at(static_cast<size_t>(ranges.validation.end - 1)).timestamp});
    }
    const auto fit = serving::fit_decision_rule(segments, {}, fit_options);
    serving::save_decision_rule(fit.rule, serving::BundleDirectory(dir).rule_path());
    return fit.rule.fit;
  } catch (const InputError& e) {
    return {{"error", e.message()}};
  }
}

}  // namespace market_data

nlohmann::json fit_ensemble_rule(const std::string& dir, const std::string& data_path,
                                 const serving::RuleFitOptions& options) {
  // Never a stale rule, even when the bars cannot be read.
  std::filesystem::remove(serving::BundleDirectory(dir).rule_path());
  return market_data::fit_ensemble_rule(dir, data::load_market_data(data_path), options);
}

serving::RuleFitOptions train_all_rule_fit_options(const TrainJob& job) {
  serving::RuleFitOptions o;
  o.cost_bps = job.trading_env.cost_bps;
  o.costs = job.trading_env.costs;
  return o;
}

TrainAllSummary run_train_all(const TrainJob& base) {
  FOXHUNT_CHECK(base.resume.empty(), kTrainAllComponent,
                "train all: resume applies to one model; resume each model's own run");
  FOXHUNT_CHECK(base.dist.world_size() == 1, kTrainAllComponent,
                "train all: data-parallel runs train one model; run one per model");
  FOXHUNT_CHECK(base.env.empty() || base.env == "trading", kTrainAllComponent,
                "train all: the RL models train on the trading env of data, got env ", base.env);
  FOXHUNT_CHECK(base.options.empty() && base.model_options.empty(), kTrainAllComponent,
                "train all: options and model_options differ per model; train each model alone");
  // A bad cost model fails now, not after four models trained (the env and the fit check it).
  data::check_cost_model(base.trading_env.cost_bps, base.trading_env.costs);
  TrainAllSummary all;
  all.out = base.out_dir.empty() ? "out/ensemble" : base.out_dir;
  // A rule fitted for earlier bundles must not outlive them, and the summary (written last)
  // marks a finished run: neither may describe bundles that this run is about to replace.
  std::filesystem::remove((std::filesystem::path(all.out) / "summary.json").string());
  std::filesystem::remove(serving::BundleDirectory(all.out).rule_path());
  // The series is read once: every model trains on these bars and the rule is fitted on them.
  const auto bars = market_data::load_job_bars(base, nullptr);
  {
    // Too few bars to split are refused before any model starts (the error names the file).
    const data::DatasetOptions split;
    if (bars.is_panel())
      (void)data::panel_split_cuts(*bars.panel, split.warmup, split.split);
    else
      (void)data::chronological_split(bars.series, split.warmup, split.split);
  }
  for (const auto& name : trainable_models()) {
    TrainJob job = base;
    job.model = name;
    job.out_dir = serving::BundleDirectory(all.out).model_dir(name);
    const bool rl = models::is_policy(name);
    job.env = rl ? "trading" : "";
    job.steps = rl ? base.steps : 0;    // --steps: the RL models
    job.epochs = rl ? 0 : base.epochs;  // --epochs: the forecasters
    foxhunt::log(LogLevel::kInfo, kTrainAllLog, fmt::format("{} -> {}", name, job.out_dir));
    auto summary = run_train_job(job, &bars);
    all.interrupted = summary.interrupted;
    if (summary.bundle) all.bundles.push_back(*summary.bundle);
    all.models[name] = std::move(summary);
    if (all.interrupted) break;  // Ctrl-C stops the whole run; finished bundles stay
  }
  all.complete = all.bundles.size() == trainable_models().size();
  if (all.complete) {
    foxhunt::log(LogLevel::kInfo, kTrainAllLog,
                 "decision rule: fitting the weights on the validation split");
    all.rule_fit = market_data::fit_ensemble_rule(all.out, bars, train_all_rule_fit_options(base));
    if (all.rule_fit.contains("error"))
      foxhunt::log(LogLevel::kWarning, kTrainAllLog,
                   "decision rule not fitted: " + all.rule_fit["error"].get<std::string>());
    else
      all.rule = serving::BundleDirectory(all.out).rule_path();
  }
  write_file_atomic((std::filesystem::path(all.out) / "summary.json").string(),
                    to_json(all).dump(2) + "\n");
  return all;
}

}  // namespace foxhunt::jobs
