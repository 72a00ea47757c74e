// Serving: streamed forecasts against the full-window forward, the target volatility, the
// boundary (a rejected bar changes nothing), `foxhunt predict --json`, stream_bars' bad-bar
// handling, export/import through safetensors, and train all then predict end to end.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
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

using foxhunt::models::load_safetensors;

TEST_F(ServingTest, StreamedForecastsEqualTheFullWindowForward) {
  // The Mamba-2 and TFT streams inside the runtime against the models' own full-window forward
  // on the same normalised rows and calendar.
  const data::MarketDataset ds(bars(700));
  auto bundles = fresh_bundles(ds);
  std::vector<Bundle> forecasters = {bundles[2], bundles[3]};
  Ensemble e(forecasters);
  e.set_parallel(false);
  const auto series = bars(400, 19);
  data::StreamingFeatures f;
  std::vector<std::vector<float>> rows;
  int checked = 0;
  for (size_t i = 0; i < series.bars.size(); ++i) {
    const auto d = e.on_bar(series.bars[i]);
    f.update(series.bars[i]);
    if (!f.ready()) continue;
    std::vector<float> row;
    f.normalized_row(ds.normalizer(), row);
    rows.push_back(row);
    if (i % 17 != 0 || !d.signals[1].ready) continue;
    c10::InferenceMode guard;
    // Mamba-2: its 32 columns over the last 32 rows.
    const auto& cols = data::feature_set("compact32").columns;
    auto x = torch::empty({1, 32, 32});
    for (int64_t t = 0; t < 32; ++t)
      for (int64_t j = 0; j < 32; ++j)
        x[0][t][j] = rows[rows.size() - 32 + t][static_cast<size_t>(cols[j])];
    auto m = bundles[2].model->forward({{x}, {}})[0][0][0];
    for (int64_t q = 0; q < 3; ++q)
      EXPECT_NEAR(d.signals[0].raw[q], m[q].item<float>(), 1e-5) << "mamba2 bar " << i;
    // TFT: 225 columns over the last 60 rows; the calendar of the next 5 expected bars.
    auto past = torch::empty({1, 60, 225});
    for (int64_t t = 0; t < 60; ++t)
      for (int64_t j = 0; j < 225; ++j) past[0][t][j] = rows[rows.size() - 60 + t][j];
    auto future = torch::empty({1, 5, 4});
    const int64_t step = series.bars[i].timestamp - series.bars[i - 1].timestamp;
    for (int64_t k = 0; k < 5; ++k) {
      const auto cal = data::calendar_features(series.bars[i].timestamp + (k + 1) * step);
      for (int64_t c = 0; c < 4; ++c) future[0][k][c] = cal[c];
    }
    auto t =
        bundles[3].model->forward({{past, future, torch::zeros({1}, torch::kLong)}, {}})[0][0][0];
    for (int64_t q = 0; q < 3; ++q)
      EXPECT_NEAR(d.signals[1].raw[q], t[q].item<float>(), 1e-5) << "tft bar " << i;
    ++checked;
  }
  EXPECT_EQ(checked, 5);  // bars 323, 340, 357, 374, 391: after every warm-up
}

TEST_F(ServingTest, ForecastsUndoTheBundlesTargetVolatility) {
  // Served next-bar quantiles = raw model output / target_scale * the divisor training used at
  // that bar, for each kind of target volatility (none, a bank column, the absret windows).
  const data::MarketDataset ds(bars(700));
  const auto series = bars(420, 23);
  const auto raw = data::compute_observed_features(series);
  for (const std::string vol_name : {"", "rv_20", "absret_mean_60", "absret_ewm_10"}) {
    SCOPED_TRACE(vol_name);
    auto b = std::move(fresh_bundles(ds)[2]);  // mamba2
    b.target_vol_feature = vol_name;
    const auto vol = data::parse_target_vol(vol_name, "test");
    std::vector<Bundle> one;
    one.push_back(std::move(b));
    Ensemble e(one);
    e.set_parallel(false);
    int checked = 0;
    for (size_t i = 0; i < series.bars.size(); ++i) {
      const auto d = e.on_bar(series.bars[i]);
      if (!d.signals[0].ready) continue;
      const double divisor = data::target_divisor_at(vol, raw, static_cast<int64_t>(i));
      ASSERT_EQ(d.signals[0].forecast.size(), 3u);
      for (size_t q = 0; q < 3; ++q) {
        const double want = d.signals[0].raw[q] / 250.0 * divisor;
        EXPECT_NEAR(d.signals[0].forecast[q], want, 1e-5 * std::fabs(want) + 1e-12)
            << "bar " << i << " quantile " << q;
      }
      ++checked;
    }
    EXPECT_GT(checked, 100);
  }
}

TEST_F(ServingTest, RejectedBarLeavesTheStateUnchanged) {
  const data::MarketDataset ds(bars(700));
  Ensemble clean(fresh_bundles(ds));
  Ensemble probed(fresh_bundles(ds));
  const auto series = bars(360, 13);
  for (size_t i = 0; i < series.bars.size(); ++i) {
    const auto& bar = series.bars[i];
    if (i == 300 || i == 330) {
      // NaN, a repeated time, a time going back, a non-positive price: each rejected.
      data::Bar nan = bar, same = series.bars[i - 1], back = bar, neg = bar;
      nan.close = std::nan("");
      back.timestamp = series.bars[i - 2].timestamp;
      neg.low = -1.0;
      for (const auto& bad : {nan, same, back, neg}) {
        EXPECT_THROW(probed.on_bar(bad), InputError);
        std::string why;
        EXPECT_FALSE(probed.try_on_bar(bad, nullptr, &why));
        EXPECT_FALSE(why.empty());
      }
    }
    const auto a = clean.on_bar(bar);
    const auto b = probed.on_bar(bar);
    ASSERT_EQ(a.decision, b.decision) << i;
    for (size_t k = 0; k < a.signals.size(); ++k) ASSERT_EQ(a.signals[k].raw, b.signals[k].raw);
  }
  EXPECT_EQ(clean.bars_seen(), probed.bars_seen());
}

TEST_F(ServingTest, PredictJsonLinesParse) {
  TempDir tmp;
  const std::string dir = saved_fresh_bundles(tmp, 700);
  const auto series = bars(340, 17);
  const std::string csv = live_csv(tmp, series);
  const int64_t from = series.bars[320].timestamp;
  auto r = run_cli("predict --bundles " + dir + " --data " + csv + " --json --from " +
                   std::to_string(from));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  int64_t n = 0, prev = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);  // every line is one JSON object
    ASSERT_TRUE(j.contains("timestamp") && j.contains("signals") && j.contains("decision") &&
                j.contains("latency_us"))
        << line;
    EXPECT_GE(j["timestamp"].get<int64_t>(), from);
    EXPECT_GT(j["timestamp"].get<int64_t>(), prev);
    prev = j["timestamp"].get<int64_t>();
    for (const char* m : {"dqn", "ppo", "mamba2", "tft"}) EXPECT_TRUE(j["signals"].contains(m));
    EXPECT_FALSE(j["signals"]["tft"].is_null());  // past every warm-up
    EXPECT_LE(std::abs(j["decision"].get<double>()), 1.0);
    ++n;
  }
  EXPECT_EQ(n, 340 - 320);
  // A bad bar stops with exit 2 naming the line, or is skipped with a warning.
  {
    std::ofstream out(csv, std::ios::app);
    out << series.bars.back().timestamp << ",1,1,1,1,1\n";  // time does not advance
  }
  auto bad = run_cli("predict --bundles " + dir + " --data " + csv + " --json");
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find(":342"), std::string::npos) << bad.err;
  auto skip = run_cli("predict --bundles " + dir + " --data " + csv +
                      " --json --skip-bad-bars --from " + std::to_string(from));
  EXPECT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_NE(skip.err.find("skipped"), std::string::npos) << skip.err;
}

// --from after the data's last bar would print nothing: exit 2 with one line naming the time and
// the last bar, and nothing on stdout; from a file before any bar is fed, from stdin once it has
// ended.
TEST_F(ServingTest, PredictFromAfterTheLastBarIsRefusedNamingBoth) {
  TempDir tmp;
  const std::string dir = saved_fresh_bundles(tmp, 700);
  const auto series = bars(30, 17);
  const std::string csv = live_csv(tmp, series);
  const int64_t last = series.bars.back().timestamp;
  const std::string late = " --from " + std::to_string(last + 86400);
  const auto expect_refused = [&](const foxhunt::testing::CliResult& r, const std::string& source,
                                  const std::string& what) {
    EXPECT_EQ(r.exit_code, 2) << what << ": " << r.err;
    EXPECT_EQ(r.out, "") << what;
    EXPECT_NE(
        r.err.find("--from " + data::format_timestamp(last + 86400) + " is after the last bar of " +
                   source + " (" + data::format_timestamp(last) + ")"),
        std::string::npos)
        << what << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << what << ": " << r.err;
  };
  for (const std::string mode : {"", " --json"}) {
    expect_refused(run_cli("predict --bundles " + dir + " --data " + csv + mode + late), csv,
                   "file" + mode);
    expect_refused(run_cli("predict --bundles " + dir + " --data - " + mode + late + " < " + csv),
                   "stdin", "stdin" + mode);
  }
  // From a file, before any bar is fed: a malformed line in the middle is never reached.
  const std::string text = read_file(csv);
  size_t cut = 0;
  for (int line = 0; line < 10; ++line) cut = text.find('\n', cut) + 1;
  const std::string broken = tmp.file("broken.csv");
  {
    std::ofstream out(broken);
    out << text.substr(0, cut) << "oops\n" << text.substr(cut);
  }
  expect_refused(run_cli("predict --bundles " + dir + " --data " + broken + late), broken,
                 "broken file");
  // At the last bar itself: its decision.
  const auto at = run_cli("predict --bundles " + dir + " --data " + csv + " --json --from " +
                          std::to_string(last));
  EXPECT_EQ(at.exit_code, 0) << at.err;
  EXPECT_EQ(std::count(at.out.begin(), at.out.end(), '\n'), 1) << at.out;
}

TEST_F(ServingTest, StreamBarsSkipsOrStopsAtABadBarAndReportsFromATime) {
  TempDir tmp;
  const auto series = bars(60, 5);
  const std::string csv = live_csv(tmp, series);
  const std::string dir = saved_fresh_bundles(tmp, 700);
  std::string text = read_file(csv);
  // Line 62: a malformed row; line 63: a bar whose time does not advance.
  text += "oops\n" + std::to_string(series.bars.back().timestamp) + ",1,1,1,1,1\n";
  const auto run = [&](BarStreamOptions o, std::vector<std::string>* skips) {
    auto e = Ensemble::load(dir);
    std::istringstream in(text);
    std::vector<int64_t> times;
    const auto stats = stream_bars(
        e, in, o,
        [&](const data::Bar& b, const BarDecision& d) {
          EXPECT_EQ(b.timestamp, d.timestamp);
          times.push_back(d.timestamp);
        },
        [&](const std::string& m) {
          if (skips) skips->push_back(m);
        });
    EXPECT_EQ(static_cast<int64_t>(times.size()), stats.reported);
    if (!times.empty()) {
      EXPECT_GE(times.front(), o.from);
    }
    return stats;
  };
  BarStreamOptions o;
  o.source = "live.csv";
  try {
    run(o, nullptr);
    ADD_FAILURE() << "a bad bar must stop the stream";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("live.csv:62"), std::string::npos) << e.what();
  }
  o.skip_bad = true;
  o.from = series.bars[50].timestamp;
  std::vector<std::string> skips;
  const auto stats = run(o, &skips);
  EXPECT_EQ(stats.bars, 60);
  EXPECT_EQ(stats.reported, 10);  // bars 50..59
  EXPECT_EQ(stats.skipped, 2);
  ASSERT_EQ(skips.size(), 2u);
  EXPECT_NE(skips[0].find("live.csv:62: skipped"), std::string::npos) << skips[0];
  EXPECT_NE(skips[1].find("live.csv:63: skipped"), std::string::npos) << skips[1];
  EXPECT_EQ(stats.latency_us.count, 60u);
  // No bar at all is an input error.
  auto e = Ensemble::load(dir);
  std::istringstream empty("timestamp,open,high,low,close,volume\n");
  EXPECT_THROW(stream_bars(e, empty, o, nullptr), InputError);
}

// Bars from memory, as a feed (a tape's bars) hands them: one instrument, one bar per record;
// record `bad` is an InputError.
class MemoryFeed : public BarSource {
 public:
  MemoryFeed(const data::BarSeries& s, std::string symbol, size_t bad = SIZE_MAX)
      : s_(s), symbol_(std::move(symbol)), bad_(bad) {}
  bool next(std::vector<SymbolBar>& out) override {
    out.clear();
    if (i_ >= s_.bars.size()) return false;
    const size_t k = i_++;
    if (k == bad_) throw InputError("feed", "record " + std::to_string(k) + " is bad");
    out.push_back({symbol_, s_.bars[k]});
    return true;
  }
  std::string name() const override { return "feed"; }
  std::string where() const override { return "feed#" + std::to_string(i_ - 1); }
  int64_t instruments() const override { return 1; }

 private:
  const data::BarSeries& s_;
  std::string symbol_;
  size_t bad_;
  size_t i_ = 0;
};

TEST_F(ServingTest, AnyBarSourceStreamsThroughTheOneRuntimeAsTheCsvStreamDoes) {
  TempDir tmp;
  const std::string csv = live_csv(tmp, bars(60, 5));
  const std::string dir = saved_fresh_bundles(tmp, 700);
  const auto series = data::load_bars_csv(csv);
  ASSERT_EQ(series.bars.size(), 60u);
  StreamOptions o;
  o.from = series.bars[50].timestamp;
  // The CSV stream (stream_bars) and a feed of the same bars (stream_source): the same decisions.
  std::vector<BarDecision> from_csv, from_feed;
  auto a = Ensemble::load(dir);
  std::ifstream in(csv);
  BarStreamOptions bo;
  bo.from = o.from;
  const auto csv_stats = stream_bars(
      a, in, bo, [&](const data::Bar&, const BarDecision& d) { from_csv.push_back(d); });
  auto b = Ensemble::load(dir);
  MemoryFeed feed(series, b.symbol());
  const auto feed_stats = stream_source(b.desk(), feed, o, [&](const auto& bars, const auto& ds) {
    ASSERT_EQ(bars.size(), 1u);
    from_feed.push_back(ds.front().decision);
  });
  EXPECT_EQ(csv_stats.bars, 60);
  EXPECT_EQ(feed_stats.bars, 60);
  EXPECT_EQ(feed_stats.timestamps, 60);
  EXPECT_EQ(feed_stats.reported, 10);  // bars 50..59
  EXPECT_EQ(b.bars_seen(), 60);
  ASSERT_EQ(from_feed.size(), from_csv.size());
  for (size_t i = 0; i < from_csv.size(); ++i) {
    EXPECT_EQ(from_feed[i].timestamp, from_csv[i].timestamp);
    EXPECT_EQ(from_feed[i].decision, from_csv[i].decision) << i;
    ASSERT_EQ(from_feed[i].signals.size(), from_csv[i].signals.size());
    for (size_t m = 0; m < from_csv[i].signals.size(); ++m)
      EXPECT_EQ(from_feed[i].signals[m].signal, from_csv[i].signals[m].signal) << i;
  }
  // A bad record is skipped at its place, or stops the stream naming it.
  auto c = Ensemble::load(dir);
  MemoryFeed bad(series, c.symbol(), 10);
  std::vector<std::string> skips;
  o.skip_bad = true;
  const auto skipped =
      stream_source(c.desk(), bad, o, nullptr, [&](const std::string& m) { skips.push_back(m); });
  EXPECT_EQ(skipped.skipped, 1);
  EXPECT_EQ(skipped.bars, 59);
  EXPECT_EQ(c.bars_seen(), 59);
  ASSERT_EQ(skips.size(), 1u);
  EXPECT_EQ(skips[0], "feed#10: skipped: [feed] record 10 is bad");
  auto e = Ensemble::load(dir);
  MemoryFeed stop(series, e.symbol(), 10);
  o.skip_bad = false;
  try {
    stream_source(e.desk(), stop, o, nullptr);
    ADD_FAILURE() << "a bad record must stop the stream";
  } catch (const InputError& err) {
    EXPECT_EQ(std::string(err.what()), "[predict] feed#10: [feed] record 10 is bad");
  }
  EXPECT_EQ(e.bars_seen(), 10);
}

TEST_F(ServingTest, ExportImportRoundTripThroughSafetensors) {
  TempDir tmp;
  const data::MarketDataset ds(bars(600));
  auto bundles = fresh_bundles(ds);
  save_all(bundles, tmp.path());
  const auto dqn = (tmp.path() / "dqn" / kBundleFile).string();
  const auto st = tmp.file("dqn.safetensors");
  auto ex = run_cli("export " + dqn + " --format safetensors --out " + st + " --json");
  ASSERT_EQ(ex.exit_code, 0) << ex.err;
  EXPECT_EQ(nlohmann::json::parse(ex.out)["tensors"], 6);
  const auto file = load_safetensors(st);
  EXPECT_EQ(file.metadata.at("model"), "dqn");
  EXPECT_EQ(nlohmann::json::parse(file.metadata.at("options")), bundles[0].model->options_json());
  // Import into a bundle of a freshly seeded DQN: its weights become the exported ones.
  torch::manual_seed(999);
  Bundle other = bundles[0];
  other.model = models::make_model("dqn");
  const auto other_path = tmp.file("other.fhb");
  save_bundle(other, other_path);
  const auto merged = tmp.file("merged.fhb");
  auto im = run_cli("import " + st + " --into " + other_path + " --out " + merged);
  ASSERT_EQ(im.exit_code, 0) << im.err;
  const auto back = load_bundle(merged);
  for (const auto& p : bundles[0].model->module().named_parameters())
    EXPECT_TRUE(torch::equal(p.value(), back.model->module().named_parameters()[p.key()]))
        << p.key();
  // Weights of another model are refused, and nothing is written.
  const auto ppo = (tmp.path() / "ppo" / kBundleFile).string();
  auto bad = run_cli("import " + st + " --into " + ppo + " --out " + tmp.file("bad.fhb"));
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_NE(bad.err.find("'dqn' weights"), std::string::npos) << bad.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("bad.fhb")));
}

// The whole path a user takes: an ISO-dated CSV, `train all`, the CSV deleted, `predict`.
TEST(ServingEndToEndTest, TrainAllThenPredictFromBundlesAlone_SLOW) {
  TempDir tmp;
  auto series = bars(1400, 23);
  std::string csv_text = "Date,Open,High,Low,Close,Volume\n";
  for (size_t i = 0; i < series.bars.size(); ++i) {
    auto& b = series.bars[i];
    b.timestamp = 1704067200 + static_cast<int64_t>(i) * 3600;  // hourly bars from 2024-01-01
    const std::time_t t = b.timestamp;
    char when[32];
    std::strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    std::ostringstream row;
    row.precision(17);
    row << when << ',' << b.open << ',' << b.high << ',' << b.low << ',' << b.close << ','
        << b.volume << '\n';
    csv_text += row.str();
  }
  const std::string csv = tmp.file("hourly.csv");
  std::ofstream(csv) << csv_text;
  const auto out = (tmp.path() / "ens").string();
  auto train = run_cli("train all --data " + csv + " --steps 600 --epochs 1 --out " + out +
                       " --progress off --json");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const auto summary = nlohmann::json::parse(train.out);
  EXPECT_TRUE(summary["complete"].get<bool>());
  EXPECT_EQ(summary["bundles"].size(), 4u);
  // The decision rule was fitted on the validation split (15% of the bars after the warm-up)
  // and written next to the bundles.
  const auto rule_path = BundleDirectory(out).rule_path();
  ASSERT_TRUE(std::filesystem::exists(rule_path)) << summary.dump();
  EXPECT_EQ(summary["rule"], rule_path);
  const auto fitted = load_decision_rule(rule_path);
  const auto ranges = data::chronological_split(1400, data::DatasetOptions{}.warmup);
  EXPECT_EQ(fitted.fit["bars"], ranges.validation.size());
  EXPECT_EQ(fitted.fit["last_timestamp"], series.bars[ranges.validation.end - 1].timestamp);
  EXPECT_EQ(summary["rule_fit"]["weights"], fitted.fit["weights"]);
  for (const char* m : {"dqn", "ppo", "mamba2", "tft"}) {
    EXPECT_TRUE(std::filesystem::exists(tmp.path() / "ens" / m / kBundleFile)) << m;
    const auto b = load_bundle((tmp.path() / "ens" / m / kBundleFile).string());
    EXPECT_EQ(b.data.rows, 1400) << m;
    EXPECT_EQ(b.data.first_timestamp, 1704067200) << m;
  }
  // Serve on the last 300 bars only, after the training file is gone.
  std::string live_text = "Date,Open,High,Low,Close,Volume\n";
  {
    std::istringstream all(csv_text);
    std::string line;
    std::vector<std::string> rows;
    std::getline(all, line);
    while (std::getline(all, line)) rows.push_back(line);
    for (size_t i = rows.size() - 340; i < rows.size(); ++i) live_text += rows[i] + "\n";
  }
  std::filesystem::remove(csv);
  const std::string live = tmp.file("live.csv");
  std::ofstream(live) << live_text;
  auto pred = run_cli("predict --bundles " + out + " --data " + live + " --json");
  ASSERT_EQ(pred.exit_code, 0) << pred.err;
  std::istringstream lines(pred.out);
  std::string line;
  int64_t n = 0, decided = 0;
  while (std::getline(lines, line)) {
    const auto j = nlohmann::json::parse(line);
    ++n;
    decided += !j["signals"]["tft"].is_null();
  }
  EXPECT_EQ(n, 340);
  EXPECT_EQ(decided, 340 - (256 + 60 - 1));
  // --explain: the TFT's top variables and attention on each bar it forecasts.
  auto explained = run_cli("predict --bundles " + out + " --data " + live + " --json --explain");
  ASSERT_EQ(explained.exit_code, 0) << explained.err;
  std::istringstream elines(explained.out);
  int64_t with = 0;
  while (std::getline(elines, line)) {
    const auto j = nlohmann::json::parse(line);
    if (!j["models"]["tft"].contains("explain")) continue;
    ++with;
    EXPECT_EQ(j["models"]["tft"]["explain"]["attention"].size(), 60u);
    EXPECT_EQ(j["models"]["tft"]["explain"]["past"].size(), 10u);
  }
  EXPECT_EQ(with, decided);
}

}  // namespace
}  // namespace foxhunt::serving
