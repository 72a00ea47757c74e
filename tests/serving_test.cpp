// Serving: bundles (round trip, foreign and old files), the decision rule, greedy and sampled
// actions, explanations, the concurrent ensemble against a serial run and the thread pool. The
// streams and the CLI: serving_stream_test.cpp.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "foxhunt/core/container.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/safetensors.h"
#include "foxhunt/serving/bar_stream.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"
#include "serving_test_fixture.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt::serving {
namespace {

TEST_F(ServingTest, ABundleIsNamedByItsFileOrItsModelDirectory) {
  TempDir tmp;
  const auto dir = saved_fresh_bundles(tmp, 900);
  const Bundle by_file = load_bundle(dir + "/tft/" + kBundleFile, torch::kCPU, "tft");
  const Bundle by_dir = load_bundle(dir + "/tft", torch::kCPU, "tft");
  EXPECT_EQ(by_dir.model->options_json(), by_file.model->options_json());
  EXPECT_TRUE(torch::equal(by_dir.model->module().parameters()[0],
                           by_file.model->module().parameters()[0]));
  // The ensemble directory itself, or a directory without a bundle: what was expected.
  foxhunt::testing::expect_input_error(
      [&] { load_bundle(dir); }, "bundle",
      {"expected a bundle file or a model directory", "ensemble directory", dir + "/tft"});
  std::filesystem::create_directories(tmp.path() / "empty");
  foxhunt::testing::expect_input_error([&] { load_bundle((tmp.path() / "empty").string()); },
                                       "bundle", {"this directory has none"});
  // The CLI accepts the directory where a bundle file is expected.
  const auto r = run_cli("export " + dir + "/dqn --out " + tmp.file("dqn.safetensors"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST_F(ServingTest, BundleRoundTripIsExactAndNeedsNoTrainingCsv) {
  TempDir tmp;
  const std::string csv = tmp.file("train.csv");
  data::write_bars_csv(csv, bars(900));
  const data::MarketDataset ds(data::load_bars_csv(csv));
  auto bundles = fresh_bundles(ds);
  save_all(bundles, tmp.path() / "b");
  std::filesystem::remove(csv);  // serving never reads the training CSV

  for (const auto& orig : bundles) {
    SCOPED_TRACE(orig.name());
    const auto path = (tmp.path() / "b" / orig.name() / kBundleFile).string();
    const Bundle b = load_bundle(path, torch::kCPU, orig.name());
    EXPECT_EQ(b.model->options_json(), orig.model->options_json());
    EXPECT_EQ(nlohmann::json(b.model->spec()), nlohmann::json(orig.model->spec()));
    const auto p0 = orig.model->module().named_parameters();
    const auto p1 = b.model->module().named_parameters();
    ASSERT_EQ(p0.size(), p1.size());
    for (const auto& item : p0)
      EXPECT_TRUE(torch::equal(item.value(), p1[item.key()])) << item.key();
    EXPECT_EQ(b.normalizer.mean, orig.normalizer.mean);
    EXPECT_EQ(b.normalizer.stddev, orig.normalizer.stddev);
    EXPECT_EQ(b.target_scale, 250.0);
    EXPECT_EQ(b.data.rows, 900);
    EXPECT_EQ(b.data.source, csv);
    EXPECT_EQ(b.data.hash, fingerprint(ds.series()).hash);
    EXPECT_EQ(b.data.first_timestamp, ds.series().bars.front().timestamp);
    EXPECT_EQ(b.training["note"], "untrained");
  }
  // The ensemble loads and serves from the bundles alone.
  auto e = Ensemble::load((tmp.path() / "b").string());
  const auto series = bars(400, 9);
  BarDecision last;
  for (const auto& bar : series.bars) last = e.on_bar(bar);
  EXPECT_EQ(last.signals.size(), 4u);
  for (const auto& s : last.signals) EXPECT_TRUE(s.ready) << s.model;
  EXPECT_GE(last.decision, -1.0);
  EXPECT_LE(last.decision, 1.0);
}

TEST_F(ServingTest, FingerprintChangesWithTheData) {
  auto a = bars(300), b = bars(300);
  EXPECT_EQ(fingerprint(a).hash, fingerprint(b).hash);
  b.bars[150].close *= 1.0000001;
  EXPECT_NE(fingerprint(a).hash, fingerprint(b).hash);
  EXPECT_EQ(fingerprint(a).hash.size(), 16u);
}

TEST_F(ServingTest, ForeignOldAndCorruptFilesAreClearErrors) {
  TempDir tmp;
  const data::MarketDataset ds(bars(600));
  auto bundles = fresh_bundles(ds);
  const auto good = tmp.file("good.fhb");
  save_bundle(bundles[0], good);

  auto expect_error = [](const std::string& path, const std::string& needle) {
    try {
      load_bundle(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  // A model checkpoint is not a bundle.
  const auto ckpt = tmp.file("model.ckpt");
  models::save_model(*bundles[0].model, ckpt);
  expect_error(ckpt, "expected a model bundle");
  // Another bundle version.
  Container c = read_container(good);
  c.header["bundle_version"] = 99;
  const auto old = tmp.file("old.fhb");
  write_container(old, c);
  expect_error(old, "bundle version 99");
  // A different feature bank.
  c = read_container(good);
  c.header["features"]["bank"][3] = "renamed";
  const auto other = tmp.file("other.fhb");
  write_container(other, c);
  expect_error(other, "different feature bank");
  // Wrong model asked for, a random file, a flipped byte (CRC), a missing file.
  EXPECT_NO_THROW(load_bundle(good));
  EXPECT_THROW(load_bundle(good, torch::kCPU, "tft"), InputError);
  const auto junk = tmp.file("junk.fhb");
  std::ofstream(junk) << "timestamp,close\n1,2\n";
  EXPECT_THROW(load_bundle(junk), InputError);
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[bytes.size() / 2] ^= 0x20;
  const auto flipped = tmp.file("flipped.fhb");
  std::ofstream(flipped, std::ios::binary) << bytes;
  EXPECT_THROW(load_bundle(flipped), InputError);
  EXPECT_THROW(load_bundle(tmp.file("missing.fhb")), InputError);
  // The ensemble names every missing bundle.
  try {
    Ensemble::load(tmp.file("nowhere"));
    ADD_FAILURE();
  } catch (const InputError& e) {
    const std::string w = e.what();
    for (const char* m : {"dqn", "ppo", "mamba2", "tft"}) EXPECT_NE(w.find(m), std::string::npos);
  }
}

TEST(DecisionRuleTest, HandMadeSignals) {
  EXPECT_DOUBLE_EQ(policy_signal({0.2f, 0.3f, 0.5f}), double(0.5f) - double(0.2f));
  EXPECT_DOUBLE_EQ(policy_signal({0.0f, 0.0f, 1.0f}), 1.0);
  EXPECT_THROW(policy_signal({0.5f, 0.5f}), InputError);
  // Median 0.01 in an interval of width 0.04, gain 2: 0.5.
  EXPECT_DOUBLE_EQ(forecast_signal(-0.01, 0.01, 0.03, 2.0), 0.5);
  EXPECT_DOUBLE_EQ(forecast_signal(-0.01, 0.05, 0.03, 2.0), 1.0);  // clipped
  EXPECT_DOUBLE_EQ(forecast_signal(-0.01, -0.05, 0.03, 2.0), -1.0);
  EXPECT_DOUBLE_EQ(forecast_signal(0.02, 0.02, 0.02, 2.0), 0.0);  // degenerate interval

  DecisionRule r;
  auto sig = [](const char* m, double s, bool ready = true) {
    ModelSignal x;
    x.model = m;
    x.signal = s;
    x.ready = ready;
    return x;
  };
  // Equal weights: the mean of the ready models.
  EXPECT_DOUBLE_EQ(
      combine_signals(r, {sig("dqn", 0.4), sig("ppo", 0.2), sig("mamba2", -0.3), sig("tft", 0.5)}),
      0.2);
  // Not-ready models do not vote; none ready is flat.
  EXPECT_DOUBLE_EQ(combine_signals(r, {sig("dqn", 0.4), sig("tft", -1.0, false)}), 0.4);
  EXPECT_DOUBLE_EQ(combine_signals(r, {sig("dqn", 0.4, false)}), 0.0);
  // Dead band and weights.
  EXPECT_DOUBLE_EQ(combine_signals(r, {sig("dqn", 0.04), sig("ppo", 0.0)}), 0.0);
  r.weights["dqn"] = 3.0;
  r.weights["ppo"] = 1.0;
  EXPECT_DOUBLE_EQ(combine_signals(r, {sig("dqn", 0.8), sig("ppo", -0.4)}), (2.4 - 0.4) / 4.0);
  r.max_position = 0.25;
  EXPECT_DOUBLE_EQ(combine_signals(r, {sig("dqn", 0.8), sig("ppo", 0.8)}), 0.25);

  // JSON: defaults kept, unknown keys and bad values rejected.
  DecisionRule j = nlohmann::json{{"weights", {{"tft", 2.0}}}, {"dead_band", 0.1}};
  EXPECT_EQ(j.weights["tft"], 2.0);
  EXPECT_EQ(j.weights["dqn"], 1.0);
  EXPECT_EQ(j.dead_band, 0.1);
  EXPECT_EQ(nlohmann::json(j)["dead_band"], 0.1);
  auto parse = [](const char* text) { return nlohmann::json::parse(text).get<DecisionRule>(); };
  EXPECT_THROW(parse(R"({"bogus": 1})"), InputError);
  EXPECT_THROW(parse(R"({"weights": {"xgb": 1}})"), InputError);
  EXPECT_THROW(parse(R"({"weights": {"dqn": -1}})"), InputError);
  EXPECT_THROW(parse(R"({"max_position": 2})"), InputError);
  EXPECT_EQ(parse(R"({"forecast_gain": 3})").forecast_gain, 3.0);
}

TEST(DecisionRuleTest, DistributionRuleReadsTheWholeForecast) {
  const std::vector<double> taus = {0.1, 0.5, 0.9};
  // CDF interpolated between quantiles, extrapolated beyond: P(r > x).
  const std::vector<double> q = {-0.02, 0.0, 0.02};
  EXPECT_NEAR(forecast_probability_above(taus, q, 0.0), 0.5, 1e-12);
  EXPECT_NEAR(forecast_probability_above(taus, q, 0.01), 0.3, 1e-12);
  EXPECT_NEAR(forecast_probability_above(taus, q, -0.01), 0.7, 1e-12);
  EXPECT_NEAR(forecast_probability_above(taus, q, 0.03), 0.0, 1e-12);  // 0.9 + 0.2 -> clamped
  EXPECT_NEAR(forecast_probability_above(taus, q, 0.021), 0.08, 1e-12);
  // Crossing quantiles are sorted (the rearranged forecast).
  EXPECT_NEAR(forecast_probability_above(taus, {0.02, 0.0, -0.02}, 0.01), 0.3, 1e-12);
  EXPECT_THROW(forecast_probability_above(taus, {0.0, 0.1}, 0.0), InputError);
  EXPECT_THROW(forecast_probability_above(taus, {0.0, NAN, 0.1}, 0.0), InputError);

  DecisionRule r;
  r.periods_per_year = 252;
  r.cost_bps = 0;
  // A symmetric forecast around 0 has no edge: flat, whatever its spread.
  EXPECT_EQ(forecast_signal(taus, q, r), 0.0);
  // The median at zero says nothing, but a right-skewed distribution still leans up: P(r > 0)
  // = 0.5 both ways, so shift the median a little: q50 = 0.002 -> P(r > 0) = 0.5 + 0.4 * 0.002 /
  // 0.022, P(r < 0) = 0.4 * 0.02 / 0.022 - 0.1 ... computed below from the interpolation.
  const std::vector<double> up = {-0.02, 0.002, 0.02};
  const double p_up = forecast_probability_above(taus, up, 0.0);
  const double edge = p_up - (1.0 - p_up);
  EXPECT_GT(edge, 0.0);
  // Size: sigma from the P10-P90 spread (0.04 / 2.563) annualised with 252 bars: ~24.8%; a 10%
  // target -> 0.403 of full size; the edge (~0.073) is below full_edge 0.1.
  const double sigma = 0.04 / (2 * 1.2815515655446004) * std::sqrt(252.0);
  const double expected = std::min(1.0, edge / 0.1) * (0.10 / sigma);
  EXPECT_NEAR(forecast_signal(taus, up, r), expected, 1e-9);
  EXPECT_GT(forecast_signal(taus, up, r), 0.2);  // a position, where the median rule gave little
  // Mirror image: short by the same amount.
  EXPECT_NEAR(forecast_signal(taus, {-0.02, -0.002, 0.02}, r), -expected, 1e-9);
  // A 10x calmer forecast with the same lean takes a bigger position: its size 10 * 0.403 is
  // capped at 1, the edge's strength stays.
  const std::vector<double> calm = {-0.002, 0.0002, 0.002};
  EXPECT_NEAR(forecast_signal(taus, calm, r), std::min(1.0, edge / 0.1), 1e-9);
  EXPECT_GT(forecast_signal(taus, calm, r), 2 * expected);
  // The cost is a hurdle: with c = 20 bp the upside beyond it is smaller than the downside.
  r.cost_bps = 20;
  EXPECT_LT(forecast_signal(taus, up, r), expected);
  // Degenerate distribution: 0; an unresolved periods_per_year is a bug, said so.
  r.cost_bps = 0;
  EXPECT_EQ(forecast_signal(taus, {0.01, 0.01, 0.01}, r), 0.0);
  r.periods_per_year = 0;
  EXPECT_THROW(forecast_signal(taus, up, r), InputError);

  // periods_per_year resolved from the bundles' training data (daily bars over ~2 years).
  const data::MarketDataset ds(data::generate_synthetic({.bars = 600, .seed = 3}));
  auto bundles = fresh_bundles(ds);
  for (auto& b : bundles) {
    b.data.rows = 505;
    b.data.first_timestamp = 1'500'000'000;
    b.data.last_timestamp = 1'500'000'000 + static_cast<int64_t>(2 * 365.25 * 86400);
  }
  EXPECT_NEAR(resolve_rule(DecisionRule{}, bundles).periods_per_year, 252.0, 1e-9);
  DecisionRule fixed;
  fixed.periods_per_year = 52;
  EXPECT_EQ(resolve_rule(fixed, bundles).periods_per_year, 52.0);
  for (auto& b : bundles) b.data.last_timestamp = b.data.first_timestamp + 86400;  // too short
  EXPECT_EQ(resolve_rule(DecisionRule{}, bundles).periods_per_year, 252.0);

  // JSON: the new keys round-trip, bad ones are named.
  auto parse = [](const char* text) { return nlohmann::json::parse(text).get<DecisionRule>(); };
  const auto m = parse(R"({"forecast_rule": "median", "target_volatility": 0.2, "full_edge": 0.5,
                           "fit": {"objective": "x"}})");
  EXPECT_EQ(m.forecast_rule, ForecastRule::kMedian);
  EXPECT_EQ(m.target_volatility, 0.2);
  EXPECT_EQ(m.full_edge, 0.5);
  EXPECT_EQ(nlohmann::json(m)["forecast_rule"], "median");
  EXPECT_EQ(nlohmann::json(m)["fit"]["objective"], "x");
  EXPECT_EQ(nlohmann::json(m).get<DecisionRule>().target_volatility, 0.2);
  for (const char* bad :
       {R"({"forecast_rule": "mean"})", R"({"target_volatility": 0})", R"({"full_edge": 1.5})",
        R"({"cost_bps": -1})", R"({"periods_per_year": -3})", R"({"fit": 3})"})
    EXPECT_THROW(parse(bad), InputError) << bad;
  try {
    parse(R"({"dead_band": "wide"})");
    ADD_FAILURE() << "a string dead band was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dead_band: expected a number, got string"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(ServingTest, DqnTakesItsGreedyActionUnlessATemperatureIsGiven) {
  const data::MarketDataset ds(bars(700));
  auto pick = [&] {
    for (auto& b : fresh_bundles(ds))
      if (b.name() == "dqn") return std::vector<Bundle>{std::move(b)};
    return std::vector<Bundle>{};
  };
  DecisionRule soft;
  soft.policy_temperature = 1.0;
  Ensemble greedy(pick()), tempered(pick(), soft);
  EXPECT_EQ(greedy.rule().policy_temperature, 0.0);  // the default: the greedy action
  int64_t ready = 0, positioned = 0;
  for (const auto& bar : bars(400, 8).bars) {
    const auto g = greedy.on_bar(bar).signals.at(0);
    const auto t = tempered.on_bar(bar).signals.at(0);
    if (!g.ready) continue;
    ++ready;
    ASSERT_EQ(g.raw.size(), 3u);  // the q-values
    const auto best = std::max_element(g.raw.begin(), g.raw.end()) - g.raw.begin();
    EXPECT_EQ(g.signal, static_cast<double>(best) - 1.0);  // sell / hold / buy -> -1 / 0 / +1
    positioned += g.signal != 0.0;
    // With a temperature: p(buy) - p(sell) of softmax(q / T), a softer signal.
    double z = 0;
    for (float q : t.raw) z += std::exp(static_cast<double>(q));
    EXPECT_NEAR(t.signal, (std::exp(double(t.raw[2])) - std::exp(double(t.raw[0]))) / z, 1e-6);
    EXPECT_LT(std::abs(t.signal), 1.0);
  }
  EXPECT_GT(ready, 50);
  EXPECT_GT(positioned, 0);
  EXPECT_THROW(nlohmann::json::parse(R"({"policy_temperature": -1})").get<DecisionRule>(),
               InputError);
}

TEST_F(ServingTest, ExplainAddsTheTftsSelectionWeightsAndAttentionAndChangesNothingElse) {
  const data::MarketDataset ds(bars(700));
  Ensemble plain(fresh_bundles(ds)), explained(fresh_bundles(ds));
  explained.set_explain(true);
  int64_t explained_bars = 0;
  for (const auto& bar : bars(420, 4).bars) {
    const auto a = plain.on_bar(bar);
    const auto b = explained.on_bar(bar);
    ASSERT_EQ(a.decision, b.decision);
    for (size_t i = 0; i < a.signals.size(); ++i) {
      EXPECT_EQ(a.signals[i].signal, b.signals[i].signal);
      EXPECT_FALSE(a.signals[i].explanation.has_value());
      const auto& s = b.signals[i];
      if (s.model != "tft" || !s.ready) {
        EXPECT_FALSE(s.explanation.has_value()) << s.model;
        continue;
      }
      ASSERT_TRUE(s.explanation.has_value());
      ++explained_bars;
      const auto& e = *s.explanation;
      ASSERT_EQ(e.past_weights.size(), explained_past_names().size());
      ASSERT_EQ(e.future_weights.size(), explained_future_names().size());
      ASSERT_EQ(e.attention.size(), 60u);  // the window
      double past = 0, future = 0, attention = 0;
      for (double w : e.past_weights) past += w;
      for (double w : e.future_weights) future += w;
      for (double w : e.attention) {
        EXPECT_GE(w, 0.0);
        attention += w;
      }
      EXPECT_NEAR(past, 1.0, 1e-5);
      EXPECT_NEAR(future, 1.0, 1e-5);
      EXPECT_LE(attention, 1.0 + 1e-5);  // the rest falls on the horizon step itself
      EXPECT_GT(attention, 0.0);
      const auto j = to_json(b)["models"]["tft"]["explain"];
      ASSERT_EQ(j["past"].size(), 10u);
      // Largest first, named after the bank columns.
      EXPECT_GE(j["past"][0][1].get<double>(), j["past"][9][1].get<double>());
      const auto& names = explained_past_names();
      EXPECT_NE(std::find(names.begin(), names.end(), j["past"][0][0].get<std::string>()),
                names.end());
    }
  }
  EXPECT_EQ(explained_bars, 420 - (256 + 60 - 1));
}

TEST_F(ServingTest, EnsembleDirectoryRuleIsUsedUnlessOverridden) {
  TempDir dir;
  EXPECT_EQ(ensemble_rule(dir.path().string()).dead_band,
            DecisionRule{}.dead_band);  // no file: defaults
  DecisionRule fitted;
  fitted.weights["tft"] = 3.0;
  fitted.fit = {{"objective", "sharpe"}};
  save_decision_rule(fitted, BundleDirectory(dir.path().string()).rule_path());
  EXPECT_EQ(ensemble_rule(dir.path().string()).weights.at("tft"), 3.0);
  EXPECT_EQ(ensemble_rule(dir.path().string()).fit["objective"], "sharpe");
  const auto other = dir.file("other.json");
  write_file_atomic(other, R"({"dead_band": 0.2})");
  EXPECT_EQ(ensemble_rule(dir.path().string(), other).dead_band, 0.2);
  EXPECT_EQ(ensemble_rule(dir.path().string(), other).weights.at("tft"), 1.0);
  try {
    ensemble_rule(dir.path().string(), dir.path().string());
    ADD_FAILURE() << "a directory was read as a rule";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("got a directory"), std::string::npos) << e.what();
  }
}

TEST_F(ServingTest, ConcurrentEnsembleEqualsSerialBitForBit) {
  const data::MarketDataset ds(bars(700));
  Ensemble parallel(fresh_bundles(ds));
  Ensemble serial(fresh_bundles(ds));
  serial.set_parallel(false);
  const auto series = bars(380, 11);
  int64_t ready = 0;
  std::map<std::string, std::vector<double>> times;  // per model, over the bars all are ready
  for (const auto& bar : series.bars) {
    const auto a = parallel.on_bar(bar);
    const auto b = serial.on_bar(bar);
    if (std::all_of(a.signals.begin(), a.signals.end(), [](auto& s) { return s.ready; })) {
      // What the scheduler guarantees: the next bar hands out first the model that took longest
      // on this one (ties: the earlier model).
      const auto longest = std::max_element(
          a.signals.begin(), a.signals.end(),
          [](const auto& x, const auto& y) { return x.latency_us < y.latency_us; });
      const auto order = parallel.dispatch_order();
      EXPECT_EQ(order.front(), longest->model) << bar.timestamp;
      for (const auto& s : a.signals) times[s.model].push_back(s.latency_us);
    }
    ASSERT_EQ(a.decision, b.decision) << bar.timestamp;
    ASSERT_EQ(a.signals.size(), b.signals.size());
    for (size_t i = 0; i < a.signals.size(); ++i) {
      ASSERT_EQ(a.signals[i].ready, b.signals[i].ready);
      ASSERT_EQ(a.signals[i].signal, b.signals[i].signal) << a.signals[i].model;
      ASSERT_EQ(a.signals[i].raw, b.signals[i].raw) << a.signals[i].model;
    }
    ready += a.signals.back().ready;
  }
  // TFT (window 60) is ready from bar 256 + 60 on.
  EXPECT_EQ(ready, 380 - (256 + 60 - 1));
  // The costliest model is the TFT. One bar's wall times are noise on a loaded machine (the
  // scheduler reacts to them, as checked above), so this reads the median over the 65 ready
  // bars.
  ASSERT_EQ(times.size(), 4u);
  std::string costliest;
  double worst = -1;
  for (auto& [model, t] : times) {
    std::nth_element(t.begin(), t.begin() + static_cast<long>(t.size() / 2), t.end());
    if (t[t.size() / 2] > worst) {
      worst = t[t.size() / 2];
      costliest = model;
    }
  }
  EXPECT_EQ(costliest, "tft");
  // Before any bar the bundles' own order stands, where the TFT is last.
  EXPECT_EQ(Ensemble(fresh_bundles(ds)).dispatch_order().back(), "tft");
}

TEST(ThreadPoolTest, TheCallerTakesTheFirstTaskAndWorkersTheRest) {
  // One worker beside the caller: task 0 (the Ensemble's costliest) runs on the calling thread,
  // at once; every task runs exactly once, and concurrently when it can.
  ThreadPool pool(1);
  const auto caller = std::this_thread::get_id();
  for (int round = 0; round < 20; ++round) {
    std::vector<std::thread::id> ran_on(4);
    std::vector<int> runs(4, 0);
    std::atomic<bool> second_started{false};
    bool overlapped = false;
    std::vector<std::function<void()>> tasks;
    for (size_t i = 0; i < 4; ++i)
      tasks.emplace_back([&, i] {
        ran_on[i] = std::this_thread::get_id();
        ++runs[i];
        if (i == 0) {
          // Task 1 starts while task 0 runs (bounded wait: a pool that ran them one after the
          // other fails here instead of hanging).
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
          while (!second_started && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
          overlapped = second_started;
        }
        if (i == 1) second_started = true;
      });
    pool.run(tasks);
    EXPECT_TRUE(overlapped) << round;
    EXPECT_EQ(runs, std::vector<int>(4, 1));
    EXPECT_EQ(ran_on[0], caller) << round;
    EXPECT_NE(ran_on[1], caller) << round;  // the caller was busy with task 0
  }
  // A task's exception reaches the caller; the pool stays usable.
  std::vector<std::function<void()>> failing = {[] {}, [] { throw InputError("t", "boom"); }};
  EXPECT_THROW(pool.run(failing), InputError);
  std::atomic<int> n{0};  // the two tasks may run at once
  pool.run({[&] { ++n; }, [&] { ++n; }});
  EXPECT_EQ(n.load(), 2);
  // No worker: the caller runs everything, in order.
  ThreadPool alone(0);
  std::vector<int> order;
  alone.run({[&] { order.push_back(0); }, [&] { order.push_back(1); }});
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_THROW(ThreadPool(-1), InputError);
  // One worker per core beyond the caller's, at most one per task beyond the caller's.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(ThreadPool::workers_for(4), std::min(4, cores) - 1);
  EXPECT_EQ(ThreadPool::workers_for(1), 0);
}

}  // namespace
}  // namespace foxhunt::serving
