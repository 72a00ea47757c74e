// The forecasters of a train job (mamba2, tft, and any catalog forecaster): market data, compact
// sizes for short series, the trainer's typed options, the quantile head's start, training, the
// held-out evaluation (test loss, next-bar skill against the naive baselines) and the bundle.
#include <algorithm>
#include <cmath>

#include "foxhunt/core/error.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/features.h"
#include "foxhunt/data/forecast_eval.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/train/batches.h"
#include "foxhunt/train/forecast_trainer.h"
#include "foxhunt/train/market_sources.h"
#include "train_job_parts.h"

namespace foxhunt::jobs::detail {

using market_data::load_market;
using market_data::Market;
using market_data::write_bundle;

namespace {

// Pinball loss on the test split of the constant forecast whose quantiles are the empirical
// quantiles of the training targets: the bar a forecaster has to beat.
// A panel pools every instrument's (unit-variance scaled) targets.
double unconditional_baseline(const std::vector<const data::MarketDataset*>& panel,
                              const data::WindowSpec& spec, const std::vector<double>& quantiles) {
  // The targets carry their scaling (fill_target).
  std::vector<float> target(static_cast<size_t>(spec.horizon));
  std::vector<double> train;
  for (const auto* ds : panel)
    for (int64_t a : ds->anchors(data::Split::kTrain, spec)) {
      ds->fill_target(a, spec, target.data());
      train.insert(train.end(), target.begin(), target.end());
    }
  std::sort(train.begin(), train.end());
  std::vector<double> level;
  for (double q : quantiles) {
    const double pos = q * static_cast<double>(train.size() - 1);
    const auto lo = static_cast<size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, train.size() - 1);
    level.push_back(train[lo] + (pos - static_cast<double>(lo)) * (train[hi] - train[lo]));
  }
  double sum = 0.0;
  int64_t n = 0;
  for (const auto* ds : panel)
    for (int64_t a : ds->anchors(data::Split::kTest, spec)) {
      ds->fill_target(a, spec, target.data());
      for (int64_t k = 1; k <= spec.horizon; ++k) {
        const double y = target[static_cast<size_t>(k - 1)];
        for (size_t i = 0; i < quantiles.size(); ++i) {
          const double e = y - level[i];
          sum += std::max(quantiles[i] * e, (quantiles[i] - 1.0) * e);
          ++n;
        }
      }
    }
  return n > 0 ? sum / static_cast<double>(n) : NAN;
}

// Below this many training bars the forecasters default to compact sizes. Measured on the 3,000
// synthetic bars `foxhunt validate` used to train on, before volatility-scaled targets and the
// constant-forecast head (next-bar skill against the best naive baseline on the test split):
// TFT hidden 32 -36%, hidden 16 with dropout 0.3 -9%, hidden 8 with dropout 0.2 and lr 3e-4 -2%
// [-5%, +1%]; Mamba-2 d_model 64 x 2 layers -16%, d_model 16 x 1 layer -5%.
constexpr int64_t kShortSeriesBars = 5000;

// The measured choices live in each model's catalog entry (models/catalog.cpp).
nlohmann::json compact_model_options(const std::string& model) {
  return models::catalog_entry(model).compact_model_options;
}

nlohmann::json compact_trainer_options(const std::string& model) {
  return models::catalog_entry(model).compact_trainer_options;
}

// The forecaster's quantile head starts at the constant forecast: bias = the quantile levels of
// the (scaled) training targets per horizon step, weights = 0. Training then starts from the
// volatility-scaled empirical quantiles and the validation check before the first epoch
// (ForecastTrainerOptions::validate_initial) keeps them unless an epoch does better.
// A panel: the levels of every instrument's targets pooled.
void init_quantile_head(models::Model& model, const std::vector<const data::MarketDataset*>& panel,
                        const data::WindowSpec& spec) {
  torch::nn::Linear head = model.quantile_head();
  if (head.is_empty()) return;
  const auto taus = model.spec().quantiles;
  // A head has an output per (step, level), or one per level that it applies to every step.
  const auto q = static_cast<int64_t>(taus.size());
  const int64_t groups = head->bias.numel() / std::max<int64_t>(q, 1);
  FOXHUNT_INTERNAL_ASSERT(
      q > 0 && (groups == 1 || groups == spec.horizon) && groups * q == head->bias.numel(),
      "quantile head: ", head->bias.numel(), " outputs for ", q, " levels and horizon ",
      spec.horizon);
  std::vector<std::vector<double>> per_group(static_cast<size_t>(groups));
  std::vector<float> target(static_cast<size_t>(spec.horizon));
  for (const auto* ds : panel)
    for (int64_t a : ds->anchors(data::Split::kTrain, spec)) {
      ds->fill_target(a, spec, target.data());
      for (int64_t k = 0; k < spec.horizon; ++k)
        per_group[static_cast<size_t>(groups == 1 ? 0 : k)].push_back(
            target[static_cast<size_t>(k)]);
    }
  std::vector<float> levels;
  for (auto& v : per_group) {
    std::sort(v.begin(), v.end());
    for (double t : taus) levels.push_back(static_cast<float>(data::empirical_quantile(v, t)));
  }
  torch::NoGradGuard no_grad;
  // Zero weights, not small random ones: measured on the 3,000 validate bars, 0.1x the default
  // initialisation ended 0.2-0.9 points lower in next-bar skill (Mamba-2, lr 1e-4 to 3e-3).
  head->weight.zero_();
  head->bias.copy_(torch::tensor(levels).to(head->bias.device()).view_as(head->bias));
}

// The honest test: the next-bar quantiles of every test window, converted back to log returns,
// against the naive baselines (data/forecast_eval.h) built from the returns before the test
// split. One evaluation per instrument (one for a single series), in the panel's order; null
// for an instrument without test windows.
struct NextBar {
  std::optional<data::ForecastEvaluation> eval;
  int64_t points = 0;  // test bars scored
};

std::vector<NextBar> next_bar_evaluations(models::Model& model, train::MarketBatchSource& source,
                                          const Market& market, const std::vector<double>& taus,
                                          uint64_t seed) {
  const size_t n = market.datasets.size();
  std::vector<data::QuantileMatrix> q(n);
  std::vector<std::vector<double>> y(n);
  std::vector<int64_t> first_anchor(n, -1);
  std::vector<NextBar> out(n);
  if (taus.empty()) return out;
  model.module().eval();
  {
    torch::NoGradGuard no_grad;
    for (int64_t b = 0; b < source.test_batches(); ++b) {
      const auto& refs = source.test_refs(b);
      const auto result = model.forward(source.test_batch(b)).at(0).to(torch::kCPU, torch::kDouble);
      const auto first = result.select(1, 0).contiguous();  // [batch, Q]: the next bar
      const double* v = first.data_ptr<double>();
      for (int64_t i = 0; i < first.size(0); ++i) {
        const auto& ref = refs.at(static_cast<size_t>(i));
        const auto k = static_cast<size_t>(ref.instrument);
        const auto& ds = *market.datasets[k];
        if (first_anchor[k] < 0) first_anchor[k] = ref.anchor;
        const double back = ds.target_divisor(ref.anchor) / ds.options().target_scale;
        std::vector<double> row(taus.size());
        for (size_t j = 0; j < taus.size(); ++j) row[j] = v[i * first.size(1) + j] * back;
        q[k].push_back(std::move(row));
        y[k].push_back(ds.log_return(ref.anchor + 1));
      }
    }
  }
  for (size_t k = 0; k < n; ++k) {
    if (y[k].empty()) continue;
    const auto& ds = *market.datasets[k];
    std::vector<double> past;
    for (int64_t bar = std::max<int64_t>(1, ds.splits().train.begin); bar <= first_anchor[k]; ++bar)
      past.push_back(ds.log_return(bar));
    out[k].eval = data::evaluate_forecast(past, y[k], q[k], taus, seed);
    out[k].points = static_cast<int64_t>(y[k].size());
  }
  return out;
}

// Pools a panel's per-instrument evaluations (points-weighted, like the panel backtest).
ForecastTestEvaluation::Pooled pool_next_bar(const std::vector<NextBar>& evals) {
  ForecastTestEvaluation::Pooled p;
  double model = 0.0, baseline = 0.0;
  for (const auto& nb : evals) {
    if (!nb.eval) continue;
    const auto& e = *nb.eval;
    const auto points = static_cast<double>(nb.points);
    double best = e.model.mean_pinball;
    for (const auto& [name, scores] : e.baselines)
      if (name == e.best_baseline) best = scores.mean_pinball;
    model += points * e.model.mean_pinball;
    baseline += points * best;
    p.points += nb.points;
    p.instruments += 1;
    p.beating_instruments += e.beats_best_baseline ? 1 : 0;
  }
  if (p.points > 0) {
    p.model_pinball = model / static_cast<double>(p.points);
    p.baseline_pinball = baseline / static_cast<double>(p.points);
    p.skill = p.baseline_pinball > 0 ? 1.0 - p.model_pinball / p.baseline_pinball : NAN;
  }
  return p;
}

}  // namespace

TrainSummary run_forecast(const TrainJob& job, const JobInputs& in) {
  const ResumedCheckpoint* resumed = in.resumed ? &*in.resumed : nullptr;
  FOXHUNT_CHECK(job.steps == 0, kTrainJobComponent, "steps applies to ", policy_names(), "; ",
                job.model, " trains for epochs");
  FOXHUNT_CHECK(job.env.empty(), kTrainJobComponent, "env applies to ", policy_names(), "; ",
                job.model, " trains on market data (data: a bars CSV)");
  const auto names = models::model_names();
  FOXHUNT_CHECK(std::find(names.begin(), names.end(), job.model) != names.end(), kTrainJobComponent,
                "model '", job.model, "' is not part of this build");
  FOXHUNT_CHECK(job.model_options.is_object(), kTrainJobComponent,
                "model_options: expected a JSON object, got ", job.model_options.type_name());
  if (!job.resume.empty())
    FOXHUNT_CHECK(job.model_options.empty(), kTrainJobComponent,
                  "resume continues with the checkpoint's model; drop model_options");

  FOXHUNT_CHECK(!resumed || resumed->model == job.model, kTrainJobComponent, "resume: '",
                job.resume, "' holds a '",
                resumed ? (resumed->model.empty() ? std::string("?") : resumed->model) : "",
                "' model, not '", job.model, "'");
  Market market = load_market(job, resumed, in.preloaded, true);
  // Short series get the compact sizes (unless the user chose options or resumes a run); a
  // panel counts the training bars of all its instruments.
  int64_t train_bars = 0;
  for (const auto& ds : market.datasets) train_bars += ds->splits().train.size();
  const bool compact = !resumed && job.model_options.empty() && train_bars < kShortSeriesBars;
  nlohmann::json model_options = resumed   ? resumed->model_options
                                 : compact ? compact_model_options(job.model)
                                           : job.model_options;
  // Bars built from a tape: each past-feature input reads its feature set with the flow columns
  // (data/flow_features.h), the model sized to it by its catalog entry's width options.
  if (!resumed && market.first().has_flow())
    model_options = models::sized_inputs(
        job.model, model_options,
        [](const models::InputSpec& in) { return data::feature_set(in.feature_set, true).width; },
        kTrainJobComponent);
  // A model with an instrument input (the TFT's static categorical) gets an id per instrument.
  const auto& sizing = models::catalog_entry(job.model).instrument_count_option;
  const auto instruments = static_cast<int64_t>(market.datasets.size());
  if (!sizing.empty() && !resumed) {
    if (!model_options.contains(sizing))
      model_options[sizing] = std::max<int64_t>(
          instruments,
          models::make_model(job.model, model_options)->options_json().value(sizing, int64_t{1}));
    FOXHUNT_CHECK(model_options[sizing].is_number_integer() &&
                      model_options[sizing].get<int64_t>() >= instruments,
                  kTrainJobComponent, "model_options: ", sizing, " ", model_options[sizing].dump(),
                  " is fewer than the ", instruments, " instruments of '", market.info.source,
                  "' (", job.model, " gives each instrument its own id)");
  }
  // The trainer's options: its defaults (or the checkpoint's), a short series' compact sizes,
  // --options, then the flags.
  using Options = train::ForecastTrainerOptions;
  std::vector<OptionsPatch<Options>> patches;
  if (compact)
    patches.push_back(
        OptionsPatch<Options>::parse(compact_trainer_options(job.model), "compact options"));
  patches.push_back(std::get<OptionsPatch<Options>>(in.options));
  TrainerFlags flags;
  flags.length = job.epochs;
  flags.seed = job.seed;
  const auto o = merge_trainer_options(
      Options(),
      resumed ? std::optional<Options>(std::get<Options>(resumed->trainer_options)) : std::nullopt,
      patches, flags);
  // On resume the batch size is the checkpoint's: it fixes the batches of an epoch.
  // 0 = --batch auto, planned once the model and the data are known.
  int64_t batch = resumed                  ? resumed->batch_size
                  : job.batch.is_default() ? 64
                  : job.batch.is_auto()    ? 0
                                           : job.batch.size;
  const torch::Device device = models::to_torch(job.device);

  RunCap cap(job);               // a budget given: the whole run under it
  torch::manual_seed(o.seed());  // deterministic initial weights
  auto model = models::make_model(job.model, model_options);
  model->to(device);
  std::optional<BatchPlanSummary> batch_plan;
  if (batch == 0) {
    // More than one epoch's windows in a batch is pointless: clamp to the training windows.
    size_t windows = 0;
    for (const auto& ds : market.datasets)
      windows += ds->anchors(data::Split::kTrain, train::window_of(model->spec())).size();
    batch = plan_auto_batch(job, job.model, model->options_json(), static_cast<int64_t>(windows),
                            o.seed(), batch_plan, to_json(o));
  }
  cap.enforce();
  train::MarketBatchSource source(market.datasets, *model, batch, o.seed(), device);
  if (!resumed) init_quantile_head(*model, market.raw(), source.spec());
  // --batch is per rank: an epoch is made of global batches of batch x world windows.
  source.set_shard(job.dist.rank(), job.dist.world_size());
  train::ForecastTrainer trainer(*model, source, o);
  if (in.container) trainer.load_checkpoint(*in.container, job.resume);
  nlohmann::json extra = {{"data", to_json(market.info)}, {"batch_size", batch}};
  if (job.dist.world_size() > 1) extra["world_size"] = job.dist.world_size();
  trainer.set_checkpoint_extra(extra);
  if (auto comm = connect_ranks(job, device)) trainer.set_data_parallel(comm);
  const Paths paths = output_paths(job);
  auto result = trainer.train(run_config(job, paths, 50));

  nlohmann::json options = to_json(o);
  options["batch_size"] = batch;
  options["model"] = model->options_json();
  auto summary = summary_of(job, "market", result, paths, options);
  summary.data = market.info;
  if (compact)
    summary.compact_defaults =
        CompactDefaults{.reason = std::to_string(train_bars) + " training bars < " +
                                  std::to_string(kShortSeriesBars),
                        .model = compact_model_options(job.model),
                        .trainer = compact_trainer_options(job.model)};
  summary.batch_plan = batch_plan;
  summary.memory_cap = cap.report();
  add_distributed(summary, result, job);
  if (job.dist.rank() > 0) return summary;  // rank 0 evaluates and writes the bundle
  if (!result.interrupted) {
    const auto spec = source.spec();
    const std::vector<double> quantiles = model->spec().quantiles;
    const double test_loss = train::mean_batch_loss(
        *model, source.test_batches(), [&](int64_t i) { return source.test_batch(i); });
    const double baseline =
        quantiles.empty() ? NAN : unconditional_baseline(market.raw(), spec, quantiles);
    ForecastTestEvaluation e;
    const auto next_bar = next_bar_evaluations(*model, source, market, quantiles, o.seed());
    if (market.is_panel()) {
      for (size_t i = 0; i < next_bar.size(); ++i)
        if (next_bar[i].eval) e.next_bar_by_instrument[market.symbols[i]] = *next_bar[i].eval;
      e.next_bar_pooled = pool_next_bar(next_bar);
    } else {
      e.next_bar = next_bar.front().eval;
    }
    e.windows = source.windows(data::Split::kTest);
    e.loss = test_loss;
    e.baseline_loss = baseline;
    e.skill = 1.0 - test_loss / baseline;
    e.best_val_loss = trainer.best_validation_loss();
    e.best_epoch = trainer.best_epoch();
    e.initial_val_loss = trainer.initial_validation_loss();
    summary.eval = std::move(e);
    // The bundle stores the summary as it stands before the bundle itself.
    nlohmann::json training = to_json(summary);
    training.erase("bundle");
    summary.bundle = write_bundle(*model, market, training, paths.dir);
  }
  return summary;
}

}  // namespace foxhunt::jobs::detail
