// Training across the instruments of a panel: common cut dates (nothing leaks across
// instruments), batches whose rows carry their own instrument's normaliser, id and target scale,
// trading episodes drawn across instruments, panel bundles (per-instrument calibrations, version
// 2) that serve only their symbols, and `train MODEL --data panel.csv` end to end.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "foxhunt/core/error.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/backtest.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/panel_backtest.h"
#include "foxhunt/serving/serving.h"
#include "foxhunt/train/batches.h"
#include "foxhunt/train/market_sources.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using foxhunt::testing::TempDir;

// A synthetic symbol: `bars` bars from `start` (60 s apart), its own seed and price level.
data::BarSeries synthetic(uint64_t seed, int64_t bars, int64_t start, double price) {
  data::SyntheticOptions o;
  o.seed = seed;
  o.bars = bars;
  o.start_timestamp = start;
  o.initial_price = price;
  return data::generate_synthetic(o);
}

constexpr int64_t kStart = 1704067200;

// Three symbols: "AAA" and "BBB" over the same 900 bars, "CCC" starting 200 bars later with a
// 10x price level (its features and normaliser differ).
data::Panel small_panel() {
  data::Panel p;
  p.source = "small_panel";
  p.symbols.push_back({"AAA", synthetic(1, 900, kStart, 100.0)});
  p.symbols.push_back({"BBB", synthetic(2, 900, kStart, 50.0)});
  p.symbols.push_back({"CCC", synthetic(3, 700, kStart + 200 * 60, 1000.0)});
  std::set<int64_t> t;
  for (auto& s : p.symbols) {
    s.series.source = "small_panel[" + s.symbol + "]";
    for (const auto& b : s.series.bars) t.insert(b.timestamp);
  }
  p.timestamps.assign(t.begin(), t.end());
  return p;
}

// The panel as a long-format CSV (timestamp,symbol,open,high,low,close,volume).
std::string panel_csv(const data::Panel& p) {
  std::ostringstream out;
  out.precision(17);
  out << "timestamp,symbol,open,high,low,close,volume\n";
  for (const auto& s : p.symbols)
    for (const auto& b : s.series.bars)
      out << b.timestamp << ',' << s.symbol << ',' << b.open << ',' << b.high << ',' << b.low << ','
          << b.close << ',' << b.volume << '\n';
  return out.str();
}

// Position of the static-id input in a batch.
size_t static_index(const models::IoSpec& spec) {
  for (size_t i = 0; i < spec.inputs.size(); ++i)
    if (spec.inputs[i].role == models::InputRole::kStaticId) return i;
  ADD_FAILURE() << "no static id input";
  return 0;
}

std::vector<std::shared_ptr<const data::MarketDataset>> datasets(const data::Panel& p) {
  data::DatasetOptions o;
  o.cuts = data::panel_split_cuts(p, o.warmup, o.split);
  std::vector<std::shared_ptr<const data::MarketDataset>> out;
  for (size_t i = 0; i < p.symbols.size(); ++i) {
    o.instrument_id = static_cast<int64_t>(i);
    o.target_scale = 10.0 * static_cast<double>(i + 1);
    out.push_back(std::make_shared<const data::MarketDataset>(p.symbols[i].series, o));
  }
  return out;
}

TEST(PanelSplit, CommonCutDatesLeaveNoTrainingDateAfterAnyValidationDate) {
  const auto p = small_panel();
  const data::SplitOptions fractions;
  const auto cuts = data::panel_split_cuts(p, data::kFeatureWarmup, fractions);
  ASSERT_LT(cuts.validation_begin, cuts.test_begin);
  int64_t last_train = INT64_MIN, first_validation = INT64_MAX, last_validation = INT64_MIN,
          first_test = INT64_MAX;
  for (const auto& s : p.symbols) {
    const auto r = data::split_at_cuts(s.series, data::kFeatureWarmup, cuts);
    const auto& b = s.series.bars;
    EXPECT_EQ(r.train.begin, data::kFeatureWarmup);
    EXPECT_EQ(r.test.end, s.series.size());
    ASSERT_GT(r.train.size(), 0) << s.symbol;
    ASSERT_GT(r.validation.size(), 0) << s.symbol;
    ASSERT_GT(r.test.size(), 0) << s.symbol;
    last_train = std::max(last_train, b[static_cast<size_t>(r.train.end - 1)].timestamp);
    first_validation =
        std::min(first_validation, b[static_cast<size_t>(r.validation.begin)].timestamp);
    last_validation =
        std::max(last_validation, b[static_cast<size_t>(r.validation.end - 1)].timestamp);
    first_test = std::min(first_test, b[static_cast<size_t>(r.test.begin)].timestamp);
  }
  // Across instruments: every training date precedes every validation date, and so on.
  EXPECT_LT(last_train, cuts.validation_begin);
  EXPECT_GE(first_validation, cuts.validation_begin);
  EXPECT_LT(last_validation, cuts.test_begin);
  EXPECT_GE(first_test, cuts.test_begin);
  // About 70% of the usable dates train: CCC's later start does not move the cut to its 70%.
  std::set<int64_t> usable;
  for (const auto& s : p.symbols)
    for (size_t i = data::kFeatureWarmup; i < s.series.bars.size(); ++i)
      usable.insert(s.series.bars[i].timestamp);
  const auto before = std::count_if(usable.begin(), usable.end(),
                                    [&](int64_t t) { return t < cuts.validation_begin; });
  EXPECT_NEAR(static_cast<double>(before) / static_cast<double>(usable.size()), 0.7, 0.01);
}

TEST(PanelSplit, ASymbolTheCutDatesLeaveWithoutASplitIsNamed) {
  auto p = small_panel();
  // DDD ends before the validation cut: it has nothing to validate or test on.
  p.symbols.push_back({"DDD", synthetic(4, 400, kStart, 10.0)});
  p.symbols.back().series.source = "small_panel[DDD]";
  const auto cuts = data::panel_split_cuts(p, data::kFeatureWarmup);
  try {
    data::split_at_cuts(p.symbols.back().series, data::kFeatureWarmup, cuts);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("small_panel[DDD]"), std::string::npos) << m;
    EXPECT_NE(m.find("validation split empty"), std::string::npos) << m;
  }
}

TEST(PanelBatches, EachRowUsesItsOwnInstrumentsNormaliserIdAndScale) {
  const auto p = small_panel();
  const auto panel = datasets(p);
  auto model = models::make_model("tft", {{"hidden", 8}, {"heads", 2}});
  const auto spec = model->spec();
  const auto w = train::window_of(spec);
  // Rows alternate between instruments.
  std::vector<data::WindowRef> refs;
  for (int64_t i = 0; i < 3; ++i)
    refs.push_back({i, panel[static_cast<size_t>(i)]->anchors(data::Split::kTrain, w).at(5)});
  refs.push_back({0, panel[0]->anchors(data::Split::kValidation, w).at(0)});
  std::vector<const data::MarketDataset*> raw;
  for (const auto& d : panel) raw.push_back(d.get());
  const auto batch = train::market_batch(raw, spec, refs);
  for (size_t r = 0; r < refs.size(); ++r) {
    const auto& ds = *panel[static_cast<size_t>(refs[r].instrument)];
    const auto alone = train::market_batch(ds, spec, {refs[r].anchor});
    ASSERT_EQ(batch.inputs.size(), alone.inputs.size());
    for (size_t k = 0; k < batch.inputs.size(); ++k)
      EXPECT_TRUE(torch::equal(batch.inputs[k][static_cast<int64_t>(r)], alone.inputs[k][0]))
          << "row " << r << " input " << k;
    EXPECT_TRUE(torch::equal(batch.target[static_cast<int64_t>(r)], alone.target[0])) << r;
  }
  // The static id is the instrument's, and the instruments' normalised rows differ.
  const auto ids = batch.inputs.at(static_index(spec));
  EXPECT_EQ(ids[0].item<int64_t>(), 0);
  EXPECT_EQ(ids[1].item<int64_t>(), 1);
  EXPECT_EQ(ids[2].item<int64_t>(), 2);
  EXPECT_EQ(ids[3].item<int64_t>(), 0);

  // The source's epochs cover every instrument's training windows exactly once.
  train::MarketBatchSource source(panel, *model, 64, 7);
  int64_t rows = 0;
  std::set<int64_t> seen_ids;
  for (int64_t b = 0; b < source.train_batches(); ++b) {
    const auto bt = source.train_batch(0, b);
    rows += bt.target.size(0);
    const auto id = bt.inputs.at(static_index(spec));
    for (int64_t i = 0; i < id.size(0); ++i) seen_ids.insert(id[i].item<int64_t>());
  }
  int64_t windows = 0;
  for (const auto& d : panel)
    windows += static_cast<int64_t>(d->anchors(data::Split::kTrain, w).size());
  EXPECT_EQ(rows, windows);
  EXPECT_EQ(source.windows(data::Split::kTrain), windows);
  EXPECT_EQ(seen_ids, (std::set<int64_t>{0, 1, 2}));
  // Test batches name their windows (one instrument per batch, time order).
  for (int64_t b = 0; b < source.test_batches(); ++b) {
    const auto& r = source.test_refs(b);
    for (size_t k = 1; k < r.size(); ++k) {
      EXPECT_EQ(r[k].instrument, r[0].instrument);
      EXPECT_GT(r[k].anchor, r[k - 1].anchor);
    }
  }
}

TEST(PanelTradingEnv, TrainingDrawsEveryInstrumentAndEvaluationInterleavesThem) {
  const auto panel = datasets(small_panel());
  data::TradingEnvOptions o;
  o.episode_length = 64;
  train::PanelTradingEnv env(panel, data::Split::kTrain, o);
  std::vector<int64_t> draws(3, 0);
  std::vector<int64_t> first_run;
  env.reset(11);
  for (int e = 0; e < 300; ++e) {
    if (e > 0) env.reset();
    ++draws[static_cast<size_t>(env.instrument())];
    first_run.push_back(env.instrument());
  }
  for (int64_t d : draws) EXPECT_GT(d, 60) << "each instrument about a third of 300 episodes";
  // Same seed, same draws.
  env.reset(11);
  for (int e = 0; e < 300; ++e) {
    if (e > 0) env.reset();
    ASSERT_EQ(env.instrument(), first_run[static_cast<size_t>(e)]) << e;
  }
  // Observations are the instrument's own (its RL market row at the episode's bar).
  auto obs = env.reset(3);
  EXPECT_EQ(static_cast<int64_t>(obs.size()), env.observation_size());

  data::TradingEnvOptions seq = o;
  seq.random_start = false;
  train::PanelTradingEnv eval(panel, data::Split::kValidation, seq);
  int64_t expected = 0;
  for (const auto& d : panel)
    expected += data::TradingEnv(*d, data::Split::kValidation, seq).sequential_episodes();
  EXPECT_EQ(eval.sequential_episodes(), expected);
  eval.reset(0);
  for (int e = 0; e < 6; ++e) {
    if (e > 0) eval.reset();
    EXPECT_EQ(eval.instrument(), e % 3) << e;
  }
}

// Bundles over the small panel: one seeded model of each kind, every instrument's calibration.
std::vector<serving::Bundle> panel_bundles(const data::Panel& p) {
  const auto panel = datasets(p);
  std::vector<serving::Bundle> out;
  for (const auto& name : models::model_names()) {
    torch::manual_seed(5);
    serving::Bundle b;
    b.model = models::make_model(name, name == "tft" ? nlohmann::json{{"hidden", 8}, {"heads", 2}}
                                                     : nlohmann::json::object());
    b.normalizer = panel[0]->normalizer();
    b.target_scale = panel[0]->options().target_scale;
    for (size_t i = 0; i < panel.size(); ++i)
      b.instruments.push_back({.symbol = p.symbols[i].symbol,
                               .instrument_id = static_cast<int64_t>(i),
                               .normalizer = panel[i]->normalizer(),
                               .target_scale = panel[i]->options().target_scale,
                               .data = serving::fingerprint(p.symbols[i].series)});
    out.push_back(std::move(b));
  }
  return out;
}

TEST(PanelBundle, RoundTripsEveryInstrumentAndServesOnlyItsSymbols) {
  const auto p = small_panel();
  TempDir dir;
  const auto bundles = panel_bundles(p);
  const auto path = (dir.path() / "tft.fhb").string();
  serving::save_bundle(bundles.back(), path);
  const auto b = serving::load_bundle(path);
  ASSERT_EQ(b.instruments.size(), 3u);
  EXPECT_TRUE(b.panel());
  for (size_t i = 0; i < 3; ++i) {
    const auto& want = bundles.back().instruments[i];
    const auto c = b.calibration(want.symbol);
    EXPECT_EQ(c.instrument_id, want.instrument_id);
    EXPECT_DOUBLE_EQ(c.target_scale, want.target_scale);
    EXPECT_EQ(c.normalizer->mean, want.normalizer.mean);
    EXPECT_EQ(b.instruments[i].data.hash, want.data.hash);
  }
  // A symbol it was not trained on: refused, naming the bundle's symbols.
  try {
    (void)b.calibration("ZZZ");
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("'ZZZ'"), std::string::npos) << m;
    EXPECT_NE(m.find("AAA, BBB, CCC"), std::string::npos) << m;
  }
  // Selecting an instrument makes it a single-instrument bundle of that symbol.
  const auto sel = serving::select_instrument(b, "CCC");
  EXPECT_EQ(sel.symbol, "CCC");
  EXPECT_EQ(sel.instrument_id, 2);
  EXPECT_DOUBLE_EQ(sel.target_scale, 30.0);
  EXPECT_EQ(sel.normalizer.mean, bundles.back().instruments[2].normalizer.mean);
  EXPECT_EQ(sel.data.last_timestamp, p.symbols[2].series.bars.back().timestamp);
  // A single-instrument runtime refuses a panel bundle none was selected for.
  EXPECT_THROW(serving::Ensemble(std::vector<serving::Bundle>{b}), InputError);
  EXPECT_NO_THROW(serving::Ensemble(std::vector<serving::Bundle>{sel}));
}

// A panel backtest streams every symbol at once, yet each symbol's run is its single-series
// backtest with the bundles selected for it, bit for bit: also when the instruments' training
// data give them different training ends and bar rates (each symbol then its own desks).
TEST(PanelBundle, PanelBacktestEqualsEachSymbolsSingleSeriesBacktest) {
  const auto p = small_panel();
  auto bundles = panel_bundles(p);
  for (auto& b : bundles)
    for (size_t i = 0; i < b.instruments.size(); ++i) {
      auto& d = b.instruments[i].data;
      d.last_timestamp = p.symbols[i].series.bars[400 + 50 * i].timestamp;
      d.first_timestamp = d.last_timestamp - 60 * 86400;  // 60 days: a bar rate from the rows
      d.rows = 1000 + 500 * static_cast<int64_t>(i);
    }
  serving::BacktestJob job;
  job.data = "small_panel";
  std::ostringstream log;
  const auto panel = serving::run_panel_backtest(bundles, p, job, log);
  ASSERT_EQ(panel.symbols.size(), 3u) << log.str();
  std::set<double> rates;
  std::set<int64_t> ends;
  for (const auto& s : p.symbols) {
    const auto alone =
        serving::run_backtest_on(serving::select_instrument(bundles, s.symbol), s.series, job, log);
    const auto& run = panel.runs.at(s.symbol);
    EXPECT_EQ(run.training_end, alone.training_end) << s.symbol;
    EXPECT_EQ(run.rule.periods_per_year, alone.rule.periods_per_year) << s.symbol;
    EXPECT_EQ(run.warmup_bars, alone.warmup_bars) << s.symbol;
    EXPECT_EQ(run.timestamps, alone.timestamps) << s.symbol;
    EXPECT_EQ(run.past_returns, alone.past_returns) << s.symbol;
    EXPECT_EQ(run.positions, alone.positions) << s.symbol;
    EXPECT_EQ(run.max_abs_signal, alone.max_abs_signal) << s.symbol;
    ASSERT_EQ(run.forecasts.size(), alone.forecasts.size());
    for (const auto& [m, f] : alone.forecasts)
      EXPECT_EQ(run.forecasts.at(m).quantiles, f.quantiles) << s.symbol << " " << m;
    EXPECT_EQ(run.results.at("ensemble").sharpe, alone.results.at("ensemble").sharpe);
    rates.insert(run.rule.periods_per_year);
    ends.insert(run.training_end);
  }
  EXPECT_EQ(rates.size(), 3u);  // three bar rates: three sets of desks
  EXPECT_EQ(ends.size(), 3u);
}

// The desk serves each symbol of a panel bundle with that instrument's calibration: equal to
// serving the symbol alone through bundles selected for it (a one-series bundle of its own).
TEST(PanelBundle, TheDeskServesEachSymbolWithItsOwnCalibration) {
  const auto p = small_panel();
  const auto bundles = panel_bundles(p);
  serving::Desk desk(bundles);
  std::map<std::string, std::unique_ptr<serving::Desk>> alone;
  for (const auto& s : p.symbols) {
    auto one = serving::select_instrument(bundles, s.symbol);
    for (auto& b : one) b.instruments.clear();  // a plain one-series bundle of that symbol
    alone[s.symbol] = std::make_unique<serving::Desk>(one);
  }
  double max_diff = 0.0;
  int64_t ready = 0;
  for (int64_t t : p.timestamps) {
    std::vector<serving::SymbolBar> bars;
    for (const auto& s : p.symbols)
      for (const auto& b : s.series.bars)
        if (b.timestamp == t) bars.push_back({s.symbol, b});
    const auto all = desk.on_timestamp(t, bars);
    for (size_t i = 0; i < bars.size(); ++i) {
      const auto one = alone[bars[i].symbol]->on_timestamp(t, {bars[i]});
      const auto& a = all[i].decision;
      const auto& o = one[0].decision;
      for (size_t m = 0; m < a.signals.size(); ++m) {
        ASSERT_EQ(a.signals[m].ready, o.signals[m].ready);
        if (!a.signals[m].ready) continue;
        ++ready;
        for (size_t k = 0; k < a.signals[m].raw.size(); ++k)
          max_diff = std::max(
              max_diff, static_cast<double>(std::abs(a.signals[m].raw[k] - o.signals[m].raw[k])));
        for (size_t k = 0; k < a.signals[m].forecast.size(); ++k)
          max_diff =
              std::max(max_diff, std::abs(a.signals[m].forecast[k] - o.signals[m].forecast[k]));
      }
    }
  }
  EXPECT_GT(ready, 1000);
  EXPECT_LT(max_diff, 1e-5);
  // An unknown symbol is refused before anything changes.
  const int64_t t = p.timestamps.back() + 60;
  data::Bar bar = p.symbols[0].series.bars.back();
  bar.timestamp = t;
  EXPECT_THROW(desk.on_timestamp(t, {{"AAA", bar}, {"ZZZ", bar}}), InputError);
  EXPECT_FALSE(desk.has_symbol("ZZZ"));
  EXPECT_EQ(desk.instruments(), 3);
}

// `train all --data panel.csv`: one model of each kind across the instruments, panel bundles
// with every symbol's calibration, the summary's per-instrument evaluation and cut dates, a rule
// fitted on every instrument's validation bars; then the CLI serves a symbol of one series only
// when told which instrument it is.
TEST(PanelTraining, TrainAllTrainsOneModelOfEachKindAcrossTheInstruments) {
  const auto p = small_panel();
  TempDir dir;
  const auto csv = (dir.path() / "panel.csv").string();
  {
    std::ofstream f(csv);
    f << panel_csv(p);
  }
  jobs::TrainJob job;
  job.data = csv;
  job.epochs = 1;
  job.steps = 600;
  job.eval_episodes = 3;
  job.out_dir = (dir.path() / "ens").string();
  job.progress = train::ProgressMode::kOff;
  const auto all = jobs::run_train_all(job);
  ASSERT_TRUE(all.complete);
  const auto& s = all.models.at("tft");
  ASSERT_TRUE(s.data.has_value());
  ASSERT_EQ(s.data->instruments.size(), 3u);
  ASSERT_TRUE(s.data->cuts.has_value());
  for (const auto& i : s.data->instruments) {
    const auto& b = p.find(i.symbol)->bars;
    EXPECT_LT(b[static_cast<size_t>(i.train[1] - 1)].timestamp, s.data->cuts->validation_begin);
    EXPECT_GE(b[static_cast<size_t>(i.test[0])].timestamp, s.data->cuts->test_begin);
    EXPECT_GT(i.target_scale, 0.0);
  }
  const auto* e = s.forecast_eval();
  ASSERT_NE(e, nullptr);
  EXPECT_FALSE(e->next_bar.has_value());
  EXPECT_EQ(e->next_bar_by_instrument.size(), 3u);
  ASSERT_TRUE(e->next_bar_pooled.has_value());
  EXPECT_EQ(e->next_bar_pooled->instruments, 3);
  EXPECT_TRUE(std::isfinite(e->next_bar_pooled->skill));
  for (const auto& name : models::model_names()) {
    const auto b = serving::load_bundle(serving::BundleDirectory(all.out).bundle_path(name));
    ASSERT_EQ(b.instruments.size(), 3u) << name;
    EXPECT_EQ(b.instruments[2].symbol, "CCC") << name;
    EXPECT_EQ(b.instruments[2].instrument_id, 2) << name;
    // Each instrument's normaliser is its own (CCC trades at 10x AAA's price level).
    EXPECT_NE(b.instruments[0].normalizer.mean, b.instruments[2].normalizer.mean) << name;
  }
  // The rule's weights were fitted on every instrument's validation bars at which every model is
  // ready: an instrument's stream, fed from its first bar, has every model ready from bar
  // warmup + window - 1 of the longest one (serving.h), so the pooled count is exact, and one
  // instrument left out of the fit would miss it by that instrument's share.
  ASSERT_FALSE(all.rule.empty()) << all.rule_fit.dump();
  int64_t ready_from = 0;
  for (const auto& name : models::model_names()) {
    const auto b = serving::load_bundle(serving::BundleDirectory(all.out).bundle_path(name));
    ready_from = std::max(ready_from, b.warmup + b.model->spec().window - 1);
  }
  int64_t pooled = 0;
  for (const auto& i : s.data->instruments) {
    const int64_t n = i.validation[1] - std::max(i.validation[0], ready_from);
    EXPECT_GT(n, 0) << i.symbol;
    pooled += std::max<int64_t>(0, n);
  }
  EXPECT_EQ(all.rule_fit.at("bars").get<int64_t>(), pooled);

  // One series of a panel-trained ensemble: refused until the instrument is named.
  const auto one = (dir.path() / "ccc.csv").string();
  {
    std::ofstream f(one);
    f << "timestamp,open,high,low,close,volume\n";
    f.precision(17);
    for (const auto& b : p.find("CCC")->bars)
      f << b.timestamp << ',' << b.open << ',' << b.high << ',' << b.low << ',' << b.close << ','
        << b.volume << '\n';
  }
  const auto bad = testing::run_cli("predict --bundles " + all.out + " --data " + one);
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("--symbol"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("AAA, BBB, CCC"), std::string::npos) << bad.err;
  const auto unknown =
      testing::run_cli("predict --bundles " + all.out + " --data " + one + " --symbol ZZZ");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.err;
  const auto good =
      testing::run_cli("predict --bundles " + all.out + " --data " + one + " --symbol CCC --json");
  ASSERT_EQ(good.exit_code, 0) << good.err;
  // Served as CCC: the same decisions as the desk gives CCC on the whole panel.
  std::vector<double> cli;
  std::istringstream lines(good.out);
  for (std::string line; std::getline(lines, line);)
    cli.push_back(nlohmann::json::parse(line).at("decision").get<double>());
  auto desk = serving::Desk::load(all.out);
  std::vector<double> served;
  for (int64_t t : p.timestamps) {
    std::vector<serving::SymbolBar> bars;
    for (const auto& sym : p.symbols)
      for (const auto& b : sym.series.bars)
        if (b.timestamp == t) bars.push_back({sym.symbol, b});
    for (const auto& d : desk.on_timestamp(t, bars))
      if (d.symbol == "CCC") served.push_back(d.decision.decision);
  }
  ASSERT_EQ(cli.size(), served.size());
  double worst = 0.0;
  for (size_t i = 0; i < cli.size(); ++i) worst = std::max(worst, std::abs(cli[i] - served[i]));
  EXPECT_LT(worst, 1e-3);  // the single-series path streams Mamba-2 and the TFT (1e-4 level)
}

// The real S&P 500 / NASDAQ / WTI panel (its last 1,500 dates, the last 200 held out): `train
// all` trains across the three instruments, `predict` serves them batched, `backtest` scores each
// symbol on the held-out dates and an equal-risk portfolio.
TEST(PanelTraining, TrainAllPredictAndBacktestOnTheRealPanel_SLOW) {
  auto p = data::load_panel_csv(testing::panel_csv());
  const int64_t first = p.timestamps[p.timestamps.size() - 1500];
  const int64_t held_out = p.timestamps[p.timestamps.size() - 200];
  TempDir dir;
  const auto write = [&](const std::string& path, int64_t before) {
    data::Panel q = p;
    for (auto& s : q.symbols)
      std::erase_if(s.series.bars, [&](const data::Bar& b) {
        return b.timestamp < first || b.timestamp >= before;
      });
    std::ofstream f(path);
    f << panel_csv(q);
  };
  const auto train_csv = (dir.path() / "train.csv").string();
  const auto all_csv = (dir.path() / "all.csv").string();
  write(train_csv, held_out);
  write(all_csv, INT64_MAX);
  const auto out = (dir.path() / "ens").string();
  const auto t = testing::run_cli("train all --data " + train_csv +
                                  " --steps 1500 --epochs 1 --out " + out + " --json");
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const auto summary = nlohmann::json::parse(t.out);
  EXPECT_TRUE(summary.at("complete").get<bool>());
  EXPECT_FALSE(summary.at("rule").get<std::string>().empty()) << summary.at("rule_fit").dump();
  const auto& data = summary.at("models").at("tft").at("data");
  ASSERT_EQ(data.at("instruments").size(), 3u);
  EXPECT_EQ(data.at("instruments")[1].at("symbol"), "SP500");
  EXPECT_TRUE(data.contains("cuts"));
  EXPECT_EQ(summary.at("models").at("mamba2").at("eval").at("next_bar_pooled").at("instruments"),
            3);
  for (const auto& name : models::model_names())
    EXPECT_EQ(
        serving::load_bundle(serving::BundleDirectory(out).bundle_path(name)).instruments.size(),
        3u)
        << name;

  const auto pr = testing::run_cli("predict --bundles " + out + " --data " + all_csv + " --json");
  ASSERT_EQ(pr.exit_code, 0) << pr.err;
  std::map<std::string, int64_t> lines;
  std::istringstream in(pr.out);
  for (std::string line; std::getline(in, line);)
    ++lines[nlohmann::json::parse(line).at("symbol").get<std::string>()];
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& s : p.symbols) {
    const auto n = std::count_if(s.series.bars.begin(), s.series.bars.end(),
                                 [&](const data::Bar& b) { return b.timestamp >= first; });
    EXPECT_EQ(lines[s.symbol], n) << s.symbol;
  }

  const auto bt =
      testing::run_cli("backtest --bundles " + out + " --data " + all_csv + " --json --gate none");
  ASSERT_EQ(bt.exit_code, 0) << bt.err;
  const auto b = nlohmann::json::parse(bt.out);
  EXPECT_EQ(b.at("symbols").size(), 3u) << b.at("skipped").dump();
  for (const auto& [symbol, run] : b.at("per_symbol").items()) {
    EXPECT_GE(run.at("scored_bars").get<int64_t>(), 150) << symbol;
    EXPECT_GE(run.at("first_timestamp").get<int64_t>(), held_out) << symbol;
  }
  EXPECT_TRUE(b.at("portfolio").contains("ensemble"));
  EXPECT_TRUE(b.at("pooled").contains("tft"));
}

}  // namespace
}  // namespace foxhunt
