#include "train_market.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/forecast_eval.h"
#include "foxhunt/serving/bundle.h"

namespace foxhunt::jobs::market_data {

namespace {

constexpr const char* kTrainMarketComponent = "train";

// The bars CSV of a run: --data, else (on resume) the file the checkpoint was trained on, else
// "" for the embedded synthetic series.
std::string data_path(const TrainJob& job, const ResumedCheckpoint* resumed) {
  if (!job.data.empty() || !resumed) return job.data;
  return resumed->data_path;
}

// Candidate target volatilities, one chosen per series on the training and validation splits
// (load_market).
const std::vector<std::string>& target_vol_candidates() {
  static const std::vector<std::string> c = {"",
                                             "absret_mean_20",
                                             "absret_mean_60",
                                             "absret_mean_250",
                                             "absret_ewm_5",
                                             "absret_ewm_10",
                                             "absret_ewm_20",
                                             "absret_ewm_40",
                                             "rv_20",
                                             "rv_60",
                                             "rv_240"};
  return c;
}

// Mean next-bar pinball loss, in log-return units, of the constant forecast in scaled units: the
// quantile levels of r_{a+1} / d(a) over the training anchors, times d(a) at each training and
// validation anchor. This is the forecast a network with a zero-initialised head starts from.
// Scored on both splits (three fitted numbers hardly overfit): the validation split alone is a
// few hundred bars, and on the synthetic series it chose rv_20, which a jump in the test split
// then cost 9% (absret_mean_60: 1%).
double constant_forecast_loss(const data::TargetVol& vol, const data::Matrix& raw,
                              const std::vector<double>& r, const data::SplitRanges& ranges,
                              const std::vector<double>& taus) {
  std::vector<double> z;
  for (int64_t a = ranges.train.begin; a + 1 < ranges.train.end; ++a)
    z.push_back(r[static_cast<size_t>(a + 1)] / data::target_divisor_at(vol, raw, a));
  std::sort(z.begin(), z.end());
  std::vector<double> c;
  for (double t : taus) c.push_back(data::empirical_quantile(z, t));
  double sum = 0.0;
  int64_t n = 0;
  for (int64_t a = ranges.train.begin; a + 1 < ranges.validation.end; ++a) {
    const double d = data::target_divisor_at(vol, raw, a);
    for (size_t k = 0; k < taus.size(); ++k, ++n)
      sum += data::pinball(r[static_cast<size_t>(a + 1)], c[k] * d, taus[k]);
  }
  return n > 0 ? sum / static_cast<double>(n) : NAN;
}

// The unit-variance scale of the training-split targets divided by `vol`.
double target_scale_of(const data::TargetVol& vol, const data::Matrix& raw,
                       const std::vector<double>& r, const data::SplitRanges& ranges,
                       const std::string& source) {
  double sum = 0.0, sq = 0.0;
  int64_t n = 0;
  for (int64_t i = std::max<int64_t>(ranges.train.begin, 1); i < ranges.train.end; ++i, ++n) {
    const double v = r[static_cast<size_t>(i)] / data::target_divisor_at(vol, raw, i - 1);
    sum += v;
    sq += v * v;
  }
  const double var = n > 1 ? (sq - sum * sum / n) / (n - 1) : 0.0;
  FOXHUNT_CHECK(var > 0, kTrainMarketComponent, "'", source,
                "': training returns have zero variance; nothing to forecast");
  return 1.0 / std::sqrt(var);
}

}  // namespace

data::MarketData load_job_bars(const TrainJob& job, const ResumedCheckpoint* resumed) {
  if (job.ticks)
    return data::load_tape_market_data(job.ticks->path, job.ticks->spec, job.ticks->read);
  return data::load_market_data(data_path(job, resumed));
}

data::PeriodsPerYear job_calendar(const TrainJob& job, const data::MarketData& bars) {
  if (job.periods_per_year)
    return data::given_periods_per_year(*job.periods_per_year, "periods_per_year");
  if (!bars.is_panel()) return data::infer_calendar(bars.series);
  std::vector<int64_t> ms;
  for (int64_t t : bars.panel->timestamps) ms.push_back(t * 1000);
  return data::infer_calendar(ms);
}

Market load_market(const TrainJob& job, const ResumedCheckpoint* resumed,
                   const data::MarketData* preloaded, bool scale_targets) {
  std::optional<data::MarketData> loaded;
  if (!preloaded) loaded = load_job_bars(job, resumed);
  const data::MarketData& bars = preloaded ? *preloaded : *loaded;
  Market m;
  m.bar_spec = bars.bar_spec;
  m.calendar = job_calendar(job, bars);
  m.info.bar_spec = bars.bar_spec ? data::to_string(*bars.bar_spec) : std::string();
  m.info.periods_per_year = m.calendar.value;
  m.info.periods_per_year_basis = m.calendar.describe();
  std::vector<data::BarSeries> series;
  data::DatasetOptions options;
  if (bars.is_panel()) {
    m.panel = *bars.panel;
    const auto cuts = data::panel_split_cuts(*m.panel, options.warmup, options.split);
    options.cuts = cuts;
    m.info.cuts = cuts;
    for (const auto& ps : m.panel->symbols) {
      m.symbols.push_back(ps.symbol);
      series.push_back(ps.series);
    }
  } else {
    series.push_back(bars.series);
  }
  const size_t n = series.size();
  std::vector<data::SplitRanges> ranges;
  for (const auto& s : series)
    ranges.push_back(options.cuts ? data::split_at_cuts(s, options.warmup, *options.cuts)
                                  : data::chronological_split(s, options.warmup, options.split));
  std::vector<double> scales(n, 1.0);
  std::optional<std::map<std::string, double>> selection;
  if (scale_targets) {
    std::vector<data::Matrix> raw;
    std::vector<std::vector<double>> r;
    for (const auto& s : series) {
      raw.push_back(data::compute_observed_features(s));
      r.push_back(data::log_returns(s));
    }
    if (resumed) {
      // A resumed run keeps the scaling its weights were trained for.
      options.target_vol_feature = resumed->target_vol_feature;
    } else {
      // The volatility the targets are divided by: the candidate whose constant forecast (where
      // the zero-weight head starts) scores best on the training and validation splits, its
      // loss averaged over the instruments weighted by their bars there.
      const std::vector<double> taus = {0.1, 0.5, 0.9};
      double best = INFINITY;
      selection.emplace();
      for (const auto& name : target_vol_candidates()) {
        const auto vol = data::parse_target_vol(name, "target volatility");
        double sum = 0.0, weight = 0.0;
        for (size_t i = 0; i < n; ++i) {
          const double w = static_cast<double>(ranges[i].validation.end - ranges[i].train.begin);
          sum += w * constant_forecast_loss(vol, raw[i], r[i], ranges[i], taus);
          weight += w;
        }
        const double loss = sum / weight;
        (*selection)[name.empty() ? "none" : name] = loss;
        if (loss < best) {
          best = loss;
          options.target_vol_feature = name;
        }
      }
    }
    const auto vol = data::parse_target_vol(options.target_vol_feature, "target volatility");
    for (size_t i = 0; i < n; ++i)
      scales[i] = target_scale_of(vol, raw[i], r[i], ranges[i], series[i].source);
  }
  m.info.source = m.panel ? m.panel->source : series.front().source;
  m.info.bars = series.front().size();
  m.info.train = {ranges[0].train.begin, ranges[0].train.end};
  m.info.validation = {ranges[0].validation.begin, ranges[0].validation.end};
  m.info.test = {ranges[0].test.begin, ranges[0].test.end};
  m.info.target_scale = scales[0];
  m.info.target_vol_feature = options.target_vol_feature;
  m.info.target_vol_selection_loss = std::move(selection);
  for (size_t i = 0; i < n; ++i) {
    data::DatasetOptions o = options;
    o.target_scale = scales[i];
    o.instrument_id = static_cast<int64_t>(i);
    if (m.panel)
      m.info.instruments.push_back(
          {.symbol = m.symbols[i],
           .instrument_id = o.instrument_id,
           .bars = series[i].size(),
           .train = {ranges[i].train.begin, ranges[i].train.end},
           .validation = {ranges[i].validation.begin, ranges[i].validation.end},
           .test = {ranges[i].test.begin, ranges[i].test.end},
           .target_scale = scales[i]});
    m.datasets.push_back(std::make_shared<const data::MarketDataset>(std::move(series[i]), o));
  }
  return m;
}

std::string write_bundle(models::Model& model, const Market& market, const nlohmann::json& training,
                         const std::string& dir, const data::TradingEnvOptions& trading_env) {
  const auto& ds = market.first();
  serving::Bundle b;
  // Non-owning: the trainer keeps the model; the bundle only reads it while saving.
  b.model = std::shared_ptr<models::Model>(std::shared_ptr<void>(), &model);
  b.normalizer = ds.normalizer();
  b.target_scale = ds.options().target_scale;
  b.target_vol_feature = ds.options().target_vol_feature;
  b.instrument_id = ds.options().instrument_id;
  b.warmup = ds.options().warmup;
  b.flow_features = ds.has_flow();
  b.trading_env = trading_env;
  b.data =
      market.is_panel() ? serving::fingerprint(*market.panel) : serving::fingerprint(ds.series());
  b.training = training;
  if (market.bar_spec) b.bars = serving::BarOrigin{*market.bar_spec, "tape"};
  // The calendar where it corrects serving's default (resolve_rule: bars / years over 30 days or
  // more, else 252): a stated figure, or the sessions of a short intraday span. Other series keep
  // the default, as every bundle before did.
  const auto& cal = market.calendar;
  if (cal.basis == data::CalendarBasis::kGiven || cal.basis == data::CalendarBasis::kSessions) {
    b.periods_per_year = cal.value;
    b.periods_per_year_basis = cal.describe();
  }
  if (market.is_panel())
    for (size_t i = 0; i < market.datasets.size(); ++i) {
      const auto& d = *market.datasets[i];
      b.instruments.push_back({.symbol = market.symbols[i],
                               .instrument_id = d.options().instrument_id,
                               .normalizer = d.normalizer(),
                               .target_scale = d.options().target_scale,
                               .data = serving::fingerprint(d.series())});
    }
  const auto path = serving::BundleDirectory::bundle_in(dir);
  serving::save_bundle(b, path);
  return path;
}

}  // namespace foxhunt::jobs::market_data
