// The C ABI (include/foxhunt/foxhunt.h), called as a C program calls it: the version and ABI
// check; each status class (bad input, failed, out of memory) with its message; options read up to
// the caller's size; a bad bar refused with nothing changed; a series desk equal to the C++
// Ensemble and a panel desk equal to the C++ Desk, bit for bit; plan and budget as JSON; the last
// error per thread. scripts/test-capi.sh checks the installed shared library from C and Rust.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../src/capi/guard.h"
#include "foxhunt/core/error.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/data/tape_bars.h"
#include "foxhunt/foxhunt.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/serving.h"
#include "serving_test_fixture.h"

namespace foxhunt::testing {
namespace {

// Bundles as `train all` writes them (untrained, seeded) with a rule without a dead band, so that
// decisions move: made once for every test here.
const std::string& capi_bundles() {
  static const TempDir tmp;
  static const std::string dir = [] {
    const std::string d = saved_fresh_bundles(tmp, 700);
    serving::DecisionRule rule;
    rule.dead_band = 0.0;
    serving::save_decision_rule(rule, d + "/rule.json");
    return d;
  }();
  return dir;
}

foxhunt_bar capi_bar(const data::Bar& b, const char* symbol = nullptr) {
  return {b.timestamp, b.open, b.high, b.low, b.close, b.volume, symbol};
}

std::string capi_message() {
  return foxhunt_last_error();
}

// A desk opened over capi_bundles(), closed at the end of the scope.
struct CapiDesk {
  foxhunt_desk* d = nullptr;
  explicit CapiDesk(int32_t mode) {
    foxhunt_desk_options o;
    foxhunt_desk_options_init(&o);
    o.mode = mode;
    const auto st = foxhunt_desk_open(capi_bundles().c_str(), &o, &d);
    EXPECT_EQ(st, FOXHUNT_OK) << capi_message();
  }
  ~CapiDesk() { foxhunt_desk_close(d); }
  CapiDesk(const CapiDesk&) = delete;
  CapiDesk& operator=(const CapiDesk&) = delete;
};

uint64_t capi_bits(double v) {
  return std::bit_cast<uint64_t>(v);
}

// The C API's decision and signals of `symbol` against the C++ runtime's `want`, bit for bit.
// Returns how many models were ready.
int expect_capi_equal(const foxhunt_desk* desk, const char* symbol,
                      const serving::BarDecision& want) {
  foxhunt_decision got{};
  EXPECT_EQ(foxhunt_desk_decision(desk, symbol, &got), FOXHUNT_OK) << capi_message();
  EXPECT_EQ(got.timestamp, want.timestamp);
  EXPECT_EQ(capi_bits(got.decision), capi_bits(want.decision))
      << got.decision << " vs " << want.decision;
  EXPECT_EQ(capi_bits(got.position), capi_bits(want.position))
      << got.position << " vs " << want.position;
  std::vector<double> sig(want.signals.size(), 0.0);
  size_t n = 0;
  EXPECT_EQ(foxhunt_desk_signals(desk, symbol, sig.data(), sig.size(), &n), FOXHUNT_OK)
      << capi_message();
  EXPECT_EQ(n, want.signals.size());
  int ready = 0;
  for (size_t i = 0; i < want.signals.size() && i < n; ++i) {
    if (want.signals[i].ready) {
      ++ready;
      EXPECT_EQ(capi_bits(sig[i]), capi_bits(want.signals[i].signal)) << want.signals[i].model;
    } else {
      EXPECT_TRUE(std::isnan(sig[i])) << want.signals[i].model << " " << sig[i];
    }
  }
  EXPECT_EQ(got.models_ready, ready);
  EXPECT_EQ(got.ready, ready == static_cast<int>(want.signals.size()) ? 1 : 0);
  return ready;
}

class CapiTest : public SeededTest {};

TEST_F(CapiTest, VersionAndAbiCheck) {
  EXPECT_STREQ(foxhunt_version(), FOXHUNT_VERSION);
  EXPECT_EQ(foxhunt_abi_version(), FOXHUNT_ABI_VERSION);
  EXPECT_EQ(FOXHUNT_CHECK_ABI(), FOXHUNT_OK) << capi_message();
  EXPECT_EQ(capi_message(), "");
  EXPECT_EQ(foxhunt_check_abi(FOXHUNT_ABI_VERSION + 1), FOXHUNT_ERR_INPUT);
  const std::string m = capi_message();
  EXPECT_NE(m.find("ABI version " + std::to_string(FOXHUNT_ABI_VERSION + 1)), std::string::npos)
      << m;
  EXPECT_NE(m.find("ABI version " + std::to_string(FOXHUNT_ABI_VERSION)), std::string::npos) << m;
  EXPECT_STREQ(foxhunt_status_name(FOXHUNT_ERR_INPUT), "input");
  EXPECT_STREQ(foxhunt_status_name(FOXHUNT_ERR_OOM), "out of memory");
  EXPECT_STREQ(foxhunt_status_name(FOXHUNT_ERR_FAILED), "failed");
  EXPECT_STREQ(foxhunt_status_name(42), "unknown");
}

TEST_F(CapiTest, MissingBundleDirectoryIsAnInputErrorNamingIt) {
  TempDir tmp;
  const std::string dir = (tmp.path() / "nowhere").string();
  foxhunt_desk* desk = reinterpret_cast<foxhunt_desk*>(&tmp);  // must come back NULL
  EXPECT_EQ(foxhunt_desk_open(dir.c_str(), nullptr, &desk), FOXHUNT_ERR_INPUT);
  EXPECT_EQ(desk, nullptr);
  EXPECT_NE(capi_message().find(dir), std::string::npos) << capi_message();
  // A success clears the message.
  EXPECT_EQ(FOXHUNT_CHECK_ABI(), FOXHUNT_OK);
  EXPECT_EQ(capi_message(), "");
}

TEST_F(CapiTest, NullArgumentsAreInputErrorsNamingTheArgument) {
  foxhunt_desk* desk = nullptr;
  EXPECT_EQ(foxhunt_desk_open(nullptr, nullptr, &desk), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("bundle_dir"), std::string::npos) << capi_message();
  EXPECT_EQ(foxhunt_desk_open(capi_bundles().c_str(), nullptr, nullptr), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("out: expected"), std::string::npos) << capi_message();
  const foxhunt_bar bar{1, 1, 1, 1, 1, 0, nullptr};
  EXPECT_EQ(foxhunt_desk_push_bar(nullptr, &bar), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("foxhunt_desk_push_bar: desk"), std::string::npos)
      << capi_message();
  foxhunt_decision d{};
  EXPECT_EQ(foxhunt_desk_decision(nullptr, nullptr, &d), FOXHUNT_ERR_INPUT);
  size_t n = 0;
  EXPECT_EQ(foxhunt_desk_model_count(nullptr, &n), FOXHUNT_ERR_INPUT);
  char* out = nullptr;
  EXPECT_EQ(foxhunt_plan_json(nullptr, &out), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("request_json"), std::string::npos) << capi_message();
  EXPECT_EQ(out, nullptr);
  foxhunt_desk_close(nullptr);  // no-ops
  foxhunt_free_string(nullptr);
  foxhunt_desk_options_init(nullptr);
}

TEST_F(CapiTest, OptionsAreCheckedAndReadUpToTheCallersSize) {
  const std::string dir = capi_bundles();
  foxhunt_desk* desk = nullptr;
  foxhunt_desk_options o;
  std::memset(&o, 0, sizeof o);  // size never set
  EXPECT_EQ(foxhunt_desk_open(dir.c_str(), &o, &desk), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("foxhunt_desk_options_init"), std::string::npos) << capi_message();
  foxhunt_desk_options_init(&o);
  o.device = "gpu";
  EXPECT_EQ(foxhunt_desk_open(dir.c_str(), &o, &desk), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("'gpu'"), std::string::npos) << capi_message();
  foxhunt_desk_options_init(&o);
  o.mode = 7;
  EXPECT_EQ(foxhunt_desk_open(dir.c_str(), &o, &desk), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("mode"), std::string::npos) << capi_message();
  foxhunt_desk_options_init(&o);
  o.threads = -1;
  EXPECT_EQ(foxhunt_desk_open(dir.c_str(), &o, &desk), FOXHUNT_ERR_INPUT);
  EXPECT_EQ(desk, nullptr);
  // A caller built with an older, shorter struct (no mode and after): those fields keep their
  // defaults whatever lies beyond its size, so this desk is a series desk, not a panel.
  foxhunt_desk_options_init(&o);
  o.mode = FOXHUNT_DESK_PANEL;
  o.size = offsetof(foxhunt_desk_options, mode);
  ASSERT_EQ(foxhunt_desk_open(dir.c_str(), &o, &desk), FOXHUNT_OK) << capi_message();
  const auto series = bars(2, 9);
  const foxhunt_bar two[2] = {capi_bar(series.bars[0], "A"), capi_bar(series.bars[0], "B")};
  EXPECT_EQ(foxhunt_desk_push_bars(desk, two, 2), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("one bar per timestamp"), std::string::npos) << capi_message();
  EXPECT_EQ(foxhunt_desk_push_bars(desk, two, 0), FOXHUNT_ERR_INPUT);
  EXPECT_EQ(foxhunt_desk_push_bar(desk, &two[0]), FOXHUNT_OK) << capi_message();
  foxhunt_desk_close(desk);
}

TEST_F(CapiTest, BadBarIsAnInputErrorAndChangesNothing) {
  CapiDesk desk(FOXHUNT_DESK_SERIES);
  ASSERT_NE(desk.d, nullptr);
  const auto series = bars(12, 21);
  foxhunt_decision d{};
  EXPECT_EQ(foxhunt_desk_decision(desk.d, nullptr, &d), FOXHUNT_ERR_INPUT);  // no bar yet
  for (size_t i = 0; i < 10; ++i) {
    const auto b = capi_bar(series.bars[i]);
    ASSERT_EQ(foxhunt_desk_push_bar(desk.d, &b), FOXHUNT_OK) << capi_message();
  }
  foxhunt_bar nan_close = capi_bar(series.bars[10]);
  nan_close.close = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(foxhunt_desk_push_bar(desk.d, &nan_close), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("close"), std::string::npos) << capi_message();
  const auto back_in_time = capi_bar(series.bars[5]);
  EXPECT_EQ(foxhunt_desk_push_bar(desk.d, &back_in_time), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("timestamp"), std::string::npos) << capi_message();
  ASSERT_EQ(foxhunt_desk_decision(desk.d, nullptr, &d), FOXHUNT_OK);
  EXPECT_EQ(d.timestamp, series.bars[9].timestamp);  // still the last good bar's
  const auto next = capi_bar(series.bars[10]);
  EXPECT_EQ(foxhunt_desk_push_bar(desk.d, &next), FOXHUNT_OK) << capi_message();
}

TEST_F(CapiTest, SeriesDeskEqualsTheEnsembleBitForBit) {
  auto ensemble = serving::Ensemble::load(capi_bundles());
  CapiDesk desk(FOXHUNT_DESK_SERIES);
  ASSERT_NE(desk.d, nullptr);
  size_t models = 0;
  ASSERT_EQ(foxhunt_desk_model_count(desk.d, &models), FOXHUNT_OK);
  const auto names = ensemble.model_names();
  ASSERT_EQ(models, names.size());
  for (size_t i = 0; i < models; ++i) {
    const char* name = nullptr;
    ASSERT_EQ(foxhunt_desk_model_name(desk.d, i, &name), FOXHUNT_OK);
    EXPECT_EQ(std::string(name), names[i]);
  }
  const char* name = nullptr;
  EXPECT_EQ(foxhunt_desk_model_name(desk.d, models, &name), FOXHUNT_ERR_INPUT);
  const auto series = bars(ensemble.warmup_bars() + 30, 17);
  int all_ready = 0, moved = 0;
  for (const auto& bar : series.bars) {
    const auto want = ensemble.on_bar(bar);
    const auto b = capi_bar(bar);
    ASSERT_EQ(foxhunt_desk_push_bar(desk.d, &b), FOXHUNT_OK) << capi_message();
    all_ready += expect_capi_equal(desk.d, nullptr, want) == static_cast<int>(models) ? 1 : 0;
    moved += want.decision != 0.0 ? 1 : 0;
  }
  EXPECT_GE(all_ready, 20);  // the comparison covered every model's output
  EXPECT_GE(moved, 20);
}

TEST_F(CapiTest, PrintsBuildTheRecordedBarsAndDecideAsTheEnsembleOnTheTapesBars) {
  // capi_bundles() with the bar spec recorded (as `train all --ticks --bar time:1m` writes it).
  const TempDir tmp;
  const std::string dir = (tmp.path() / "tape").string();
  auto bundles = serving::load_ensemble_bundles(capi_bundles(), torch::kCPU);
  const auto spec = data::parse_bar_spec("time:1m");
  for (auto& b : bundles) b.bars = serving::BarOrigin{spec, "tape"};
  save_all(bundles, dir);
  std::filesystem::copy_file(capi_bundles() + "/rule.json", dir + "/rule.json");
  auto ensemble = serving::Ensemble::load(dir);
  // A seeded tape: 5 prints a minute (some in the same millisecond), a random walk of prices.
  std::mt19937_64 rng(11);
  std::normal_distribution<double> step(0.0, 0.5);
  std::vector<foxhunt_print> prints;
  std::string csv = "timestamp,price,size\n";
  double price = 1640.0;
  const int64_t start_ns = int64_t{1378054800} * 1'000'000'000;
  const int64_t minutes = ensemble.warmup_bars() + 40;
  for (int64_t m = 0; m < minutes; ++m) {
    for (int k = 0; k < 5; ++k) {
      price = std::max(1.0, price + 0.25 * std::round(step(rng)));
      const int64_t t = start_ns + m * 60'000'000'000 + (k == 4 ? 3 : k) * 11'000'000'000;
      const double size = 1.0 + static_cast<double>(rng() % 4);
      prints.push_back({t, price, size, 0});
      csv += std::to_string(t) + "," + std::to_string(price) + "," + std::to_string(size) + "\n";
    }
  }
  const auto tape_bars = data::build_tape_bars(data::parse_tape_csv(csv, "tape.csv"), spec);
  ASSERT_EQ(tape_bars.bars.size(), minutes);
  foxhunt_desk_options o;
  foxhunt_desk_options_init(&o);
  foxhunt_desk* desk = nullptr;
  ASSERT_EQ(foxhunt_desk_open(dir.c_str(), &o, &desk), FOXHUNT_OK) << capi_message();
  size_t models = 0;
  ASSERT_EQ(foxhunt_desk_model_count(desk, &models), FOXHUNT_OK);
  int64_t closed_bars = 0;
  int all_ready = 0;
  for (const auto& p : prints) {
    int32_t closed = -1;
    ASSERT_EQ(foxhunt_desk_push_print(desk, &p, &closed), FOXHUNT_OK) << capi_message();
    ASSERT_TRUE(closed == 0 || closed == 1);
    if (closed == 0) continue;
    // A print of minute m closes the bar of minute m - 1: the batch builder's bar of that index.
    const auto i = static_cast<size_t>(closed_bars++);
    const auto want = ensemble.on_bar(tape_bars.bars.bars[i], &tape_bars.flow[i]);
    all_ready += expect_capi_equal(desk, nullptr, want) == static_cast<int>(models) ? 1 : 0;
  }
  EXPECT_EQ(closed_bars, minutes - 1);  // the last minute's bar is still open
  EXPECT_GE(all_ready, 20);
  // A print out of order changes nothing; bundles of plain bars and a panel desk refuse prints.
  foxhunt_print late = prints.front();
  EXPECT_EQ(foxhunt_desk_push_print(desk, &late, nullptr), FOXHUNT_ERR_INPUT);
  foxhunt_desk_close(desk);
  CapiDesk plain(FOXHUNT_DESK_SERIES);
  EXPECT_EQ(foxhunt_desk_push_print(plain.d, &prints[0], nullptr), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("record the bar spec"), std::string::npos) << capi_message();
  CapiDesk panel(FOXHUNT_DESK_PANEL);
  EXPECT_EQ(foxhunt_desk_push_print(panel.d, &prints[0], nullptr), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("panel desk"), std::string::npos) << capi_message();
}

TEST_F(CapiTest, PanelDeskEqualsTheDeskBitForBit) {
  auto cpp = serving::Desk::load(capi_bundles());
  CapiDesk desk(FOXHUNT_DESK_PANEL);
  ASSERT_NE(desk.d, nullptr);
  const int64_t n = cpp.warmup_bars() + 40;
  const auto a = bars(n, 31), b = bars(n, 32);
  ASSERT_EQ(a.bars[0].timestamp, b.bars[0].timestamp);
  int all_ready = 0;
  for (int64_t i = 0; i < n; ++i) {
    // "BBB" misses every fifth of the first 50 timestamps: batches of one and two instruments,
    // and still 30 bars with every model ready.
    std::vector<serving::SymbolBar> batch = {{"AAA", a.bars[i]}};
    std::vector<foxhunt_bar> c_batch = {capi_bar(a.bars[i], "AAA")};
    if (i >= 50 || i % 5 != 4) {
      batch.push_back({"BBB", b.bars[i]});
      c_batch.push_back(capi_bar(b.bars[i], "BBB"));
    }
    const auto want = cpp.on_timestamp(a.bars[i].timestamp, batch);
    ASSERT_EQ(foxhunt_desk_push_bars(desk.d, c_batch.data(), c_batch.size()), FOXHUNT_OK)
        << capi_message();
    for (const auto& w : want)
      all_ready += expect_capi_equal(desk.d, w.symbol.c_str(), w.decision) ==
                           static_cast<int>(w.decision.signals.size())
                       ? 1
                       : 0;
  }
  EXPECT_GE(all_ready, 50);  // both instruments past every warm-up
  // An invalid bar names its symbol and changes nothing, for either instrument.
  foxhunt_decision before{}, after{};
  ASSERT_EQ(foxhunt_desk_decision(desk.d, "AAA", &before), FOXHUNT_OK);
  const auto later = bars(n + 1, 31).bars[n];
  foxhunt_bar bad[2] = {capi_bar(later, "AAA"), capi_bar(later, "BBB")};
  bad[1].close = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(foxhunt_desk_push_bars(desk.d, bad, 2), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("BBB"), std::string::npos) << capi_message();
  ASSERT_EQ(foxhunt_desk_decision(desk.d, "AAA", &after), FOXHUNT_OK);
  EXPECT_EQ(after.timestamp, before.timestamp);
  // Reads name what is wrong: a symbol never seen, a NULL symbol, too small an array.
  foxhunt_decision d{};
  EXPECT_EQ(foxhunt_desk_decision(desk.d, "ZZZ", &d), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("'ZZZ'"), std::string::npos) << capi_message();
  EXPECT_EQ(foxhunt_desk_decision(desk.d, nullptr, &d), FOXHUNT_ERR_INPUT);
  size_t count = 0;
  double one = 0.0;
  EXPECT_EQ(foxhunt_desk_signals(desk.d, "AAA", &one, 1, &count), FOXHUNT_ERR_INPUT);
  EXPECT_EQ(count, cpp.model_names().size());  // the size the caller needs
  bad[1].symbol = nullptr;
  EXPECT_EQ(foxhunt_desk_push_bars(desk.d, bad, 2), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("bars[1].symbol"), std::string::npos) << capi_message();
}

TEST_F(CapiTest, EveryExceptionBecomesItsStatusClass) {
  using capi::guarded;
  EXPECT_EQ(guarded([] { FOXHUNT_CHECK(false, "x", "bad input"); }), FOXHUNT_ERR_INPUT);
  EXPECT_EQ(capi_message(), "[x] bad input");
  EXPECT_EQ(guarded([] { FOXHUNT_ENSURE(false, "x", "did not hold"); }), FOXHUNT_ERR_FAILED);
  EXPECT_EQ(capi_message(), "[x] did not hold");
  EXPECT_EQ(guarded([] { FOXHUNT_FAIL("io", "disk gone"); }), FOXHUNT_ERR_FAILED);
  EXPECT_EQ(guarded([] { throw std::runtime_error("plain"); }), FOXHUNT_ERR_FAILED);
  EXPECT_EQ(capi_message(), "plain");
  EXPECT_EQ(guarded([] { throw 42; }), FOXHUNT_ERR_FAILED);
  EXPECT_NE(capi_message().find("unknown type"), std::string::npos) << capi_message();
  EXPECT_EQ(guarded([] { throw OutOfMemoryError("m", "full", 10, 5, 12); }), FOXHUNT_ERR_OOM);
  EXPECT_EQ(guarded([] { throw std::bad_alloc(); }), FOXHUNT_ERR_OOM);
  // A ledger refusal as LibTorch throws it (wrapped in c10::Error) is still out of memory.
  const auto st = guarded([] {
    memory::LimitGuard cap(memory::live_bytes() + 4096);
    auto t = torch::empty({1 << 20});
  });
  EXPECT_EQ(st, FOXHUNT_ERR_OOM) << capi_message();
  EXPECT_EQ(guarded([] {}), FOXHUNT_OK);
  EXPECT_EQ(capi_message(), "");
}

TEST_F(CapiTest, LastErrorIsPerThread) {
  EXPECT_EQ(foxhunt_check_abi(-1), FOXHUNT_ERR_INPUT);
  const std::string mine = capi_message();
  ASSERT_FALSE(mine.empty());
  std::string other = "unset";
  std::thread t([&] {
    other = foxhunt_last_error();
    EXPECT_EQ(foxhunt_check_abi(-2), FOXHUNT_ERR_INPUT);
  });
  t.join();
  EXPECT_EQ(other, "");
  EXPECT_EQ(capi_message(), mine);  // the other thread's failure did not overwrite it
}

TEST_F(CapiTest, PlanJsonGivesThePlanOrTheStatusOfItsFailure) {
  const std::string model = models::model_names().front();
  char* out = nullptr;
  EXPECT_EQ(foxhunt_plan_json("{not json", &out), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("not valid JSON"), std::string::npos) << capi_message();
  EXPECT_EQ(foxhunt_plan_json("[]", &out), FOXHUNT_ERR_INPUT);
  EXPECT_EQ(foxhunt_plan_json("{}", &out), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("\"model\""), std::string::npos) << capi_message();
  const std::string unknown = R"({"model": ")" + model + R"(", "bugdet_mib": 10})";
  EXPECT_EQ(foxhunt_plan_json(unknown.c_str(), &out), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("bugdet_mib"), std::string::npos) << capi_message();
  const std::string typed = R"({"model": ")" + model + R"(", "budget_mib": "big"})";
  EXPECT_EQ(foxhunt_plan_json(typed.c_str(), &out), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("budget_mib"), std::string::npos) << capi_message();
  // Too small a budget for the smallest batch: the out-of-memory class, naming the largest tag.
  const std::string tiny = R"({"model": ")" + model + R"(", "budget_mib": 0.01})";
  EXPECT_EQ(foxhunt_plan_json(tiny.c_str(), &out), FOXHUNT_ERR_OOM);
  EXPECT_NE(capi_message().find(model + "/"), std::string::npos) << capi_message();
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(memory::get_limit(), 0u);  // the cap is lifted after the failure
  const std::string ok = R"({"model": ")" + model + R"(", "budget_mib": 1024})";
  ASSERT_EQ(foxhunt_plan_json(ok.c_str(), &out), FOXHUNT_OK) << capi_message();
  ASSERT_NE(out, nullptr);
  const auto j = nlohmann::json::parse(out);
  foxhunt_free_string(out);
  EXPECT_TRUE(j["ok"].get<bool>());
  EXPECT_EQ(j["model"].get<std::string>(), model);
  EXPECT_EQ(j["budget_bytes"].get<uint64_t>(), 1024ull << 20);
  EXPECT_GE(j["chosen_batch"].get<int64_t>(), 1);
}

TEST_F(CapiTest, BudgetJsonGivesTheReport) {
  char* out = nullptr;
  EXPECT_EQ(foxhunt_budget_json(R"({"device_profile": "no-such-card"})", &out), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("no-such-card"), std::string::npos) << capi_message();
  EXPECT_EQ(foxhunt_budget_json(R"({"bundles": "/x"})", &out), FOXHUNT_ERR_INPUT);
  EXPECT_NE(capi_message().find("instruments"), std::string::npos) << capi_message();
  ASSERT_EQ(foxhunt_budget_json(R"({"views": false, "budget_mib": 4096})", &out), FOXHUNT_OK)
      << capi_message();
  ASSERT_NE(out, nullptr);
  const auto j = nlohmann::json::parse(out);
  foxhunt_free_string(out);
  EXPECT_EQ(j["models"].size(), models::model_names().size());
  EXPECT_EQ(j["budget_bytes"].get<uint64_t>(), 4096ull << 20);
  EXPECT_TRUE(j.contains("ok"));
}

}  // namespace
}  // namespace foxhunt::testing
