#pragma once
// The market data of a training job (internal to the jobs area): the bars it loads, the target
// scaling it chooses, and the serving bundle written from them.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "foxhunt/core/container.h"
#include "foxhunt/data/calendar.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/market_data.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/jobs/train_summary.h"
#include "foxhunt/models/model.h"

namespace foxhunt::jobs::market_data {

// The market data of a job: one dataset per instrument (one for a single series), each with
// its own normaliser (fitted on its training split), instrument id and target scale.
struct Market {
  std::vector<std::shared_ptr<const data::MarketDataset>> datasets;
  std::vector<std::string> symbols;  // a panel's symbols (empty for a single series)
  std::optional<data::Panel> panel;  // a panel run's bars (for the bundle's fingerprint)
  MarketDataInfo info;
  std::optional<data::BarSpec> bar_spec;  // bars built from a tape: their spec (the bundle's)
  data::PeriodsPerYear calendar;          // the training bars' periods per year (the bundle's)
  bool is_panel() const { return panel.has_value(); }
  const data::MarketDataset& first() const { return *datasets.front(); }
  std::vector<const data::MarketDataset*> raw() const {
    std::vector<const data::MarketDataset*> out;
    for (const auto& d : datasets) out.push_back(d.get());
    return out;
  }
};

// The bars of a job, read once: its tape (ticks, built into bars), else its bars CSV (or, on
// resume, the file the checkpoint trained on), else the synthetic series.
data::MarketData load_job_bars(const TrainJob& job, const ResumedCheckpoint* resumed);

// The calendar of a job's bars: the periods per year it states, else inferred from the bars
// (data/calendar.h; a panel: from the union of its timestamps).
data::PeriodsPerYear job_calendar(const TrainJob& job, const data::MarketData& bars);

// The market data of a job: `preloaded` when given, else the bars of --data (or, on resume, of
// the file the checkpoint trained on). A panel gets one dataset per symbol, split at common cut
// dates. Forecasting targets (`scale_targets`) are divided by a target volatility chosen on the
// training and validation splits (pooled over a panel's instruments; a resumed run keeps its
// checkpoint's) and scaled per instrument so that its training returns have unit variance
// (pinball losses of ~1e-4 train poorly).
Market load_market(const TrainJob& job, const ResumedCheckpoint* resumed,
                   const data::MarketData* preloaded, bool scale_targets);

// fit_ensemble_rule (train_job.h) on bars already loaded: `train all` fits its rule on the series
// its models trained on without reading the CSV again.
nlohmann::json fit_ensemble_rule(const std::string& dir, const data::MarketData& bars,
                                 const serving::RuleFitOptions& options);

// The serving bundle of a model trained on market data: weights, options, spec, the dataset's
// normaliser and fingerprint, and the training record (`training`: the summary's JSON so far).
// Written beside the checkpoint. `trading_env`: the environment a policy trained on (recorded
// for serving; the defaults for a forecaster).
std::string write_bundle(models::Model& model, const Market& market, const nlohmann::json& training,
                         const std::string& dir, const data::TradingEnvOptions& trading_env = {});

}  // namespace foxhunt::jobs::market_data
