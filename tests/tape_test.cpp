// The tape (data/tape.h), the bar builder (data/bar_builder.h) and tape bars (data/tape_bars.h):
// hand-made prints with values computed by hand, and the real E-mini S&P 500 tape of the data
// cache (skipped, naming the file, where scripts/setup.sh could not fetch it). Torch-free.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "data_cache.h"
#include "error_test_util.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/data/tape_bars.h"

namespace foxhunt::data::tape_test {
namespace {

constexpr int64_t kSec = 1'000'000'000;
/// 2013-09-01T17:00:00Z, a whole minute.
constexpr int64_t kT0 = 1378054800 * kSec;

using foxhunt::testing::expect_input_error;

Tape tape_of(const std::string& text, TapeReadOptions o = {}) {
  return parse_tape_csv(text, "t.csv", o);
}

/// Expects tape_of(text, o) to throw an InputError whose message contains every one of `parts`.
void expect_tape_error(const std::string& text, const std::vector<std::string>& parts,
                       TapeReadOptions o = {}) {
  expect_input_error([&] { tape_of(text, o); }, "", parts);
}

/// Five prints: p1 +0.5 s 100 x1, p2 +10 s 101 x2, p3 +59.999 s 100 x3, p4 +60 s 100 x4,
/// p5 +200 s 102 x1 (no side column: the tick rule decides).
Tape five_prints() {
  Tape t;
  const std::vector<int64_t> at = {kT0 + kSec / 2, kT0 + 10 * kSec, kT0 + 59'999'000'000,
                                   kT0 + 60 * kSec, kT0 + 200 * kSec};
  t.time_ns = at;
  t.price = {100, 101, 100, 100, 102};
  t.size = {1, 2, 3, 4, 1};
  t.source = "hand";
  return t;
}

const double kLn101 = std::log(1.01);

}  // namespace

TEST(TapeReaderTest, ReadsIsoTimestampsToNanoseconds) {
  const Tape t = tape_of(
      "DateTime,Price,Volume\n"
      "2013-09-01 17:00:00.083,1640.25,8\r\n"
      "2013-09-01T17:00:00.083456789Z,1640.5,1\n"
      "\n"
      "2013-09-02 00:00:01,1640.5,2\n");
  ASSERT_EQ(t.size_prints(), 3);
  EXPECT_EQ(t.time_ns[0], kT0 + 83'000'000);
  EXPECT_EQ(t.time_ns[1], kT0 + 83'456'789);
  EXPECT_EQ(t.time_ns[2], kT0 + 7 * 3600 * kSec + kSec);
  EXPECT_EQ(t.price[0], 1640.25);
  EXPECT_EQ(t.size[0], 8);
  EXPECT_TRUE(t.side.empty());
  EXPECT_TRUE(t.symbols.empty());
  EXPECT_EQ(format_time_ns(t.time_ns[0]), "2013-09-01T17:00:00.083Z");
  EXPECT_EQ(format_time_ns(t.time_ns[1]), "2013-09-01T17:00:00.083456789Z");
}

TEST(TapeReaderTest, EpochUnitsFromMagnitudeOrStated) {
  // Seconds with a fraction, milliseconds, microseconds, nanoseconds: the same instant.
  for (const char* v :
       {"1378054800.083", "1378054800083", "1378054800083000", "1378054800083000000"}) {
    const Tape t = tape_of(std::string("ts,last,qty\n") + v + ",10,1\n");
    EXPECT_EQ(t.time_ns[0], kT0 + 83'000'000) << v;
  }
  TapeReadOptions ms;
  ms.epoch_unit = TapeEpochUnit::kMilliseconds;
  EXPECT_EQ(tape_of("time,price,size\n5,10,1\n", ms).time_ns[0], 5'000'000);
  EXPECT_EQ(tape_of("time,price,size\n5,10,1\n").time_ns[0], 5 * kSec);  // auto: seconds
  expect_tape_error("time,price,size\n1378054800,10,1\n1378054800083,10,1\n",
                    {"t.csv:3:", "one epoch unit per file"});
}

TEST(TapeReaderTest, SideSpellings) {
  const Tape t = tape_of(
      "timestamp,price,size,Side\n"
      "1,10,1,buy\n1,10,1,SELL\n1,10,1,B\n1,10,1,s\n1,10,1,1\n1,10,1,-1\n1,10,1,+1\n1,10,1,0\n"
      "1,10,1,\n");
  EXPECT_EQ(t.side, (std::vector<int8_t>{1, -1, 1, -1, 1, -1, 1, 0, 0}));
  expect_tape_error("timestamp,price,size,side\n1,10,1,up\n",
                    {"t.csv:2: side 'up': expected buy/sell, B/S, 1/-1"});
}

TEST(TapeReaderTest, IdenticalConsecutiveLinesAreSeparatePrints) {
  const Tape t = tape_of(
      "DateTime,Price,Volume\n"
      "2013-09-01 17:00:00.083,1640.25,1\n"
      "2013-09-01 17:00:00.083,1640.25,1\n"
      "2013-09-01 17:00:00.083,1640.25,1\n");
  EXPECT_EQ(t.size_prints(), 3);
  EXPECT_EQ(summarize_tape(t).identical_consecutive, 2);
}

TEST(TapeReaderTest, OutOfOrderPrintRefusedWithFileLine) {
  expect_tape_error(
      "DateTime,Price,Volume\n"
      "2013-09-01 17:00:01,1640.25,1\n"
      "2013-09-01 17:00:01,1640.25,1\n"  // equal: kept in order
      "2013-09-01 17:00:00.999,1640.25,1\n",
      {"t.csv:4: print at 2013-09-01T17:00:00.999Z is earlier than the previous print at "
       "2013-09-01T17:00:01Z (line 3)"});
}

TEST(TapeReaderTest, DropPolicyCountsEachReason) {
  const std::string text =
      "timestamp,price,size,bid,ask,trade_id\n"
      "10,100,1,99,101,1\n"
      "9,100,1,99,101,2\n"    // out of order
      "11,0,1,99,101,3\n"     // non-positive price
      "11,100,-2,99,101,4\n"  // non-positive size
      "11,100,1,102,101,5\n"  // crossed quote
      "12,100,1,99,101,1\n"   // repeated trade id
      "12,100,1,,,6\n"        // unknown quotes: kept
      "13,100,1,99,101,7\n";
  expect_tape_error(text, {"t.csv:3: print at"});
  TapeReadOptions drop;
  drop.on_bad = TapeBadPrintPolicy::kDrop;
  const Tape t = tape_of(text, drop);
  EXPECT_EQ(t.trade_id, (std::vector<int64_t>{1, 6, 7}));
  EXPECT_EQ(t.dropped[TapeDropReason::kOutOfOrder], 1);
  EXPECT_EQ(t.dropped[TapeDropReason::kNonPositivePrice], 1);
  EXPECT_EQ(t.dropped[TapeDropReason::kNonPositiveSize], 1);
  EXPECT_EQ(t.dropped[TapeDropReason::kCrossedQuote], 1);
  EXPECT_EQ(t.dropped[TapeDropReason::kRepeatedTradeId], 1);
  EXPECT_EQ(t.dropped.total(), 5);
  EXPECT_EQ(t.dropped.first_line, 3);
  EXPECT_TRUE(std::isnan(t.bid[1]));
  // Each reason refused on its own line under the default policy.
  expect_tape_error("time,price,size\n1,-1,1\n", {"t.csv:2: price -1"});
  expect_tape_error("time,price,size,bid,ask\n1,1,1,2,1\n", {"crossed quote: bid 2 > ask 1"});
  expect_tape_error("time,price,size,seq\n1,1,1,7\n2,1,1,7\n",
                    {"t.csv:3: trade id 7 repeats the one of line 2"});
  // A malformed line is refused whatever the policy.
  expect_tape_error("time,price,size\n1,abc,1\n",
                    {"t.csv:2: price 'abc': expected a finite number"}, drop);
  expect_tape_error("time,price,size\n1,2\n", {"t.csv:2: 2 fields, expected 3"}, drop);
}

TEST(TapeReaderTest, SymbolsOrderedByNameEachInTimeOrder) {
  const Tape t = tape_of(
      "timestamp,symbol,price,size\n"
      "5,ZB,120,1\n"
      "3,ES,1640,2\n"  // earlier than ZB's print: another symbol, allowed
      "6,ZB,121,1\n");
  EXPECT_EQ(t.symbols, (std::vector<std::string>{"ES", "ZB"}));
  EXPECT_EQ(t.symbol, (std::vector<int32_t>{1, 0, 1}));
  expect_tape_error("timestamp,symbol,price,size\n5,ZB,120,1\n3,ES,1,1\n4,ZB,120,1\n",
                    {"t.csv:4: print at", "of symbol 'ZB'"});
}

TEST(TapeReaderTest, HeaderDetectionAndErrors) {
  EXPECT_TRUE(is_tape_csv("DateTime,Price,Volume"));
  EXPECT_TRUE(is_tape_csv("\"date_time\", trade_price ,QTY,side"));
  EXPECT_FALSE(is_tape_csv("timestamp,open,high,low,close,volume"));
  EXPECT_FALSE(is_tape_csv("date,close"));
  EXPECT_FALSE(is_tape_csv("1,2,3"));
  EXPECT_TRUE(has_tape_header("\n\nDateTime,Price,Volume\n1,2,3\n"));
  expect_tape_error("time,price\n1,2\n", {"no size column"});
  expect_tape_error("time,price,size,venue\n", {"unknown column 'venue'"});
  expect_tape_error("time,price,size,bid\n", {"both quote columns"});
  expect_tape_error("time,price,size\n2013-09-01 17:00,1,1\n", {"expected a time of day HH:MM:SS"});
}

TEST(TapeReaderTest, LineReaderMatchesTheFileReader) {
  const std::string text = "timestamp,price,size,side\n1,10,1,B\n1,10.5,2,\n2,10,1,S\n";
  const Tape whole = tape_of(text);
  TapeCsvReader r("t.csv");
  std::vector<Print> prints;
  size_t i = 0;
  while (i < text.size()) {
    const size_t nl = text.find('\n', i);
    if (auto p = r.read_line(std::string_view(text).substr(i, nl - i))) prints.push_back(*p);
    i = nl + 1;
  }
  ASSERT_EQ(static_cast<int64_t>(prints.size()), whole.size_prints());
  for (size_t k = 0; k < prints.size(); ++k) {
    EXPECT_EQ(prints[k].time_ns, whole.time_ns[k]);
    EXPECT_EQ(prints[k].price, whole.price[k]);
    EXPECT_EQ(prints[k].size, whole.size[k]);
    EXPECT_EQ(prints[k].side, whole.side[k]);
  }
}

TEST(BarSpecTest, ParsesAndRoundTrips) {
  EXPECT_EQ(parse_bar_spec("time:60s").period_ns, 60 * kSec);
  EXPECT_EQ(parse_bar_spec(" TIME:1500ms ").period_ns, 1500'000'000);
  EXPECT_EQ(parse_bar_spec("time:2h").period_ns, 7200 * kSec);
  EXPECT_EQ(parse_bar_spec("tick:500").kind, BarKind::kTick);
  EXPECT_EQ(parse_bar_spec("volume:1000").threshold, 1000);
  EXPECT_EQ(parse_bar_spec("dollar:5e6").threshold, 5e6);
  EXPECT_EQ(to_string(parse_bar_spec("time:60s")), "time:1m");
  EXPECT_EQ(to_string(parse_bar_spec("time:90s")), "time:90s");
  EXPECT_EQ(to_string(parse_bar_spec("dollar:5e6")), "dollar:5000000");
  for (const char* s :
       {"time:60s", "time:1500ms", "time:3h", "tick:500", "volume:2.5", "dollar:5e6"}) {
    const BarSpec spec = parse_bar_spec(s);
    EXPECT_EQ(parse_bar_spec(to_string(spec)), spec) << s;
  }
}

TEST(BarSpecTest, ErrorsNameTheExpectedForms) {
  for (const char* s : {"time:500ms", "time:60", "time:60d", "tick:0", "tick:2.5", "volume:-1",
                        "dollar:abc", "range:5", "60s", "time:"}) {
    expect_input_error([&] { parse_bar_spec(s); }, "",
                       {std::string("bar spec '") + s + "'", "expected time:<N><unit>"});
  }
}

TEST(BarBuilderTest, TimeBarsAlignedToTheEpoch) {
  const Tape t = five_prints();
  BarBuilder b(parse_bar_spec("time:60s"));
  std::vector<TapeBar> out;
  for (int64_t i = 0; i < t.size_prints(); ++i) {
    const auto bar = b.push(t.at(i));
    EXPECT_EQ(bar.has_value(), i == 3 || i == 4) << i;  // p4 closes bar 0, p5 bar 1
    if (bar) out.push_back(*bar);
  }
  out.push_back(*b.flush());
  EXPECT_FALSE(b.flush().has_value());
  ASSERT_EQ(out.size(), 3u);  // [120 s, 180 s) has no print: no bar
  const TapeBar& a = out[0];
  EXPECT_EQ(a.interval_start_ns, kT0);
  EXPECT_EQ(a.start_ns, kT0 + kSec / 2);
  EXPECT_EQ(a.end_ns, kT0 + 59'999'000'000);
  EXPECT_EQ(a.open, 100);
  EXPECT_EQ(a.high, 101);
  EXPECT_EQ(a.low, 100);
  EXPECT_EQ(a.close, 100);
  EXPECT_EQ(a.volume, 6);
  EXPECT_DOUBLE_EQ(a.vwap, 602.0 / 6.0);
  EXPECT_EQ(a.prints, 3);
  EXPECT_EQ(a.buy_volume, 2);   // p2 up-tick; p1 (first print) neither
  EXPECT_EQ(a.sell_volume, 3);  // p3 down-tick
  EXPECT_DOUBLE_EQ(a.duration_seconds, 59.499);
  EXPECT_DOUBLE_EQ(a.realized_variance, 2 * kLn101 * kLn101);
  EXPECT_EQ(out[1].interval_start_ns, kT0 + 60 * kSec);
  EXPECT_EQ(out[1].sell_volume, 4);  // unchanged price: the last sign (down) carries over
  EXPECT_EQ(out[1].realized_variance, 0);
  EXPECT_EQ(out[2].interval_start_ns, kT0 + 180 * kSec);
  EXPECT_EQ(out[2].buy_volume, 1);
  EXPECT_EQ(build_bars(t, parse_bar_spec("time:60s")), out);
}

TEST(BarBuilderTest, TickVolumeDollarBarsCloseOnTheCrossingPrint) {
  const Tape t = five_prints();
  const auto tick = build_bars(t, parse_bar_spec("tick:2"));
  ASSERT_EQ(tick.size(), 3u);  // p1 p2 | p3 p4 | p5 (flushed)
  EXPECT_EQ(tick[0].close, 101);
  EXPECT_EQ(tick[0].buy_volume, 2);
  EXPECT_DOUBLE_EQ(tick[0].realized_variance, kLn101 * kLn101);
  EXPECT_EQ(tick[1].open, 100);
  EXPECT_EQ(tick[1].volume, 7);
  EXPECT_EQ(tick[1].sell_volume, 7);
  EXPECT_EQ(tick[1].realized_variance, 0);  // p2 -> p3 is between bars
  EXPECT_EQ(tick[1].interval_start_ns, tick[1].start_ns);
  EXPECT_EQ(tick[2].prints, 1);

  const auto vol = build_bars(t, parse_bar_spec("volume:5"));
  ASSERT_EQ(vol.size(), 2u);  // 1+2+3 = 6 >= 5 (p3 whole in bar 0) | 4+1 = 5
  EXPECT_EQ(vol[0].volume, 6);
  EXPECT_EQ(vol[0].prints, 3);
  EXPECT_EQ(vol[1].volume, 5);
  EXPECT_EQ(vol[1].close, 102);

  const auto dollar = build_bars(t, parse_bar_spec("dollar:400"));
  ASSERT_EQ(dollar.size(), 3u);  // 100+202+300 = 602 | 400 (exactly) | 102 (flushed)
  EXPECT_EQ(dollar[0].notional, 602);
  EXPECT_EQ(dollar[1].notional, 400);
  EXPECT_EQ(dollar[1].prints, 1);
  EXPECT_EQ(dollar[2].notional, 102);
}

TEST(BarBuilderTest, GivenSideBeatsTheTickRule) {
  Tape t = five_prints();
  t.side = {1, -1, 0, 0, -1};  // p2 an up-tick sold into; p3 unknown: down-tick
  const auto bars = build_bars(t, parse_bar_spec("tick:5"));
  ASSERT_EQ(bars.size(), 1u);
  EXPECT_EQ(bars[0].buy_volume, 1);
  EXPECT_EQ(bars[0].sell_volume, 2 + 3 + 4 + 1);
}

TEST(BarBuilderTest, CloseUntilAndOutOfOrderPrints) {
  const Tape t = five_prints();
  BarBuilder b(parse_bar_spec("time:60s"));
  b.push(t.at(0));
  EXPECT_FALSE(b.close_until(kT0 + 59 * kSec).has_value());
  const auto closed = b.close_until(kT0 + 60 * kSec);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->prints, 1);
  EXPECT_FALSE(b.has_open_bar());
  b.push(t.at(2));
  expect_input_error([&] { b.push(t.at(1)); }, "", {"is earlier than the previous print"});
  EXPECT_EQ(b.flush()->prints, 1);  // the refused print left the bar as it was
}

TEST(TapeBarsTest, EachBarCarriesItsFlowAndItsOhlcv) {
  // Five prints in time:1m bars: [p1 p2 p3] [p4] [p5] (hand values: five_prints()).
  const Tape t = five_prints();
  const TapeBars tb = build_tape_bars(t, parse_bar_spec("time:1m"));
  ASSERT_EQ(tb.flow.size(), 3u);
  ASSERT_EQ(tb.bars.flow.size(), 3u);
  const BarFlow& f = tb.flow[0];
  EXPECT_EQ(f.interval_start_ns, kT0);
  EXPECT_EQ(f.start_ns, kT0 + kSec / 2);
  EXPECT_EQ(f.end_ns, kT0 + 59'999'000'000);
  EXPECT_EQ(f.prints, 3);
  EXPECT_DOUBLE_EQ(f.notional, 602.0);
  EXPECT_DOUBLE_EQ(f.vwap, 602.0 / 6.0);
  EXPECT_EQ(f.buy_volume, 2);   // p2 up-tick; p1 (first print) neither
  EXPECT_EQ(f.sell_volume, 3);  // p3 down-tick
  EXPECT_DOUBLE_EQ(f.duration_seconds, 59.499);
  EXPECT_DOUBLE_EQ(f.realized_variance, 2 * kLn101 * kLn101);
  // The flow is the TapeBar's BarFlow part, the Bar its OHLCV.
  const auto built = build_bars(t, parse_bar_spec("time:1m"));
  for (size_t i = 0; i < built.size(); ++i) {
    EXPECT_EQ(tb.flow[i], bar_flow(built[i])) << i;
    EXPECT_EQ(tb.bars.flow[i], tb.flow[i]) << i;
    EXPECT_EQ(tb.bars.bars[i].close, built[i].close) << i;
    EXPECT_EQ(tb.bars.bars[i].volume, built[i].volume) << i;
  }
  EXPECT_EQ(tb.flow[1].prints, 1);
  EXPECT_EQ(tb.flow[2].start_ns, kT0 + 200 * kSec);
}

TEST(TapeBarsTest, PanelNeedsTimeBars) {
  const Tape t = tape_of("timestamp,symbol,price,size\n1,A,10,1\n2,B,20,1\n61,A,11,1\n");
  const TapePanelBars p = build_tape_panel(t, parse_bar_spec("time:1m"));
  ASSERT_EQ(p.panel.size(), 2);
  EXPECT_EQ(p.panel.symbols[0].series.size(), 2);
  EXPECT_EQ(p.panel.timestamps, (std::vector<int64_t>{0, 60}));
  expect_input_error([&] { build_tape_panel(t, parse_bar_spec("tick:10")); }, "",
                     {"a desk needs time bars"});
  expect_input_error([&] { build_tape_bars(t, parse_bar_spec("time:1m")); }, "",
                     {"expected one instrument"});
}

// ---- the real E-mini S&P 500 tape --------------------------------------------------------------

namespace {

const Tape& emini() {
  static const Tape tape = load_tape_csv(foxhunt::testing::emini_tape_csv());
  return tape;
}

}  // namespace

#define FOXHUNT_REQUIRE_EMINI()                                                           \
  do {                                                                                    \
    if (!std::filesystem::exists(foxhunt::testing::emini_tape_csv()))                     \
      GTEST_SKIP() << foxhunt::testing::emini_tape_csv() << " absent (scripts/setup.sh)"; \
  } while (0)

TEST(TapeEminiTest, Summary) {
  FOXHUNT_REQUIRE_EMINI();
  const TapeSummary s = summarize_tape(emini());
  EXPECT_EQ(s.prints, 500000);
  EXPECT_EQ(format_time_ns(s.first_ns), "2013-09-01T17:00:00.083Z");
  EXPECT_EQ(format_time_ns(s.last_ns), "2013-09-03T13:51:44.578Z");
  EXPECT_EQ(s.price_increment, 0.25);
  EXPECT_NEAR(s.same_millisecond_share, 0.8309, 1e-4);
  EXPECT_EQ(s.identical_consecutive, 150874);
  ASSERT_EQ(s.sessions.size(), 2u);  // Labor Day: 10:30 to 17:00 without a print
  EXPECT_EQ(s.sessions[0].prints + s.sessions[1].prints, 500000);
  EXPECT_EQ(s.median_prints_per_second, 2);
  EXPECT_EQ(s.max_prints_per_second, 1582);
  EXPECT_EQ(s.volume, 1844058);
}

TEST(TapeEminiTest, BatchEqualsStreamingForEveryBarKind) {
  FOXHUNT_REQUIRE_EMINI();
  const std::vector<BarSpec> specs = {parse_bar_spec("time:60s"), parse_bar_spec("tick:500"),
                                      parse_bar_spec("volume:1000"), parse_bar_spec("dollar:5e6")};
  // Streaming: the file line by line through the line reader, each print into live builders.
  const std::string text = read_file(foxhunt::testing::emini_tape_csv());
  TapeCsvReader reader(foxhunt::testing::emini_tape_csv());
  std::vector<TapeBarBuilder> live;
  for (const auto& s : specs) live.emplace_back(s);
  std::vector<std::vector<TapeBar>> streamed(specs.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t nl = text.find('\n', i);
    if (nl == std::string::npos) nl = text.size();
    if (auto p = reader.read_line(std::string_view(text).substr(i, nl - i)))
      for (size_t k = 0; k < specs.size(); ++k)
        if (auto bar = live[k].push(*p)) streamed[k].push_back(*bar);
    i = nl + 1;
  }
  for (size_t k = 0; k < specs.size(); ++k) {
    live[k].flush(streamed[k]);
    const auto batch = build_bars(emini(), specs[k]);
    EXPECT_EQ(batch.size(), streamed[k].size()) << to_string(specs[k]);
    EXPECT_TRUE(batch == streamed[k]) << to_string(specs[k]);
    int64_t prints = 0;
    double volume = 0;
    for (const auto& b : batch) prints += b.prints, volume += b.volume;
    EXPECT_EQ(prints, 500000) << to_string(specs[k]);
    EXPECT_EQ(volume, 1844058) << to_string(specs[k]);
  }
}

TEST(TapeEminiTest, BarsCsvReadsBackAsBars) {
  FOXHUNT_REQUIRE_EMINI();
  for (const char* spec : {"time:60s", "volume:1000"}) {
    const TapeBars tb = build_tape_bars(emini(), parse_bar_spec(spec));
    const BarSeries back = parse_bars_csv(tape_bars_to_csv(tb), "bars.csv");
    ASSERT_EQ(back.size(), tb.bars.size()) << spec;
    for (int64_t k = 0; k < back.size(); ++k) {
      const auto& a = back.bars[static_cast<size_t>(k)];
      const auto& b = tb.bars.bars[static_cast<size_t>(k)];
      ASSERT_EQ(a.timestamp, b.timestamp) << spec << " bar " << k;
      ASSERT_EQ(a.close, b.close) << spec << " bar " << k;
      ASSERT_EQ(a.volume, b.volume) << spec << " bar " << k;
    }
    if (std::string(spec) == "time:60s") {
      EXPECT_EQ(tb.shifted_timestamps, 0);
      EXPECT_EQ(tb.bars.bars.front().timestamp, 1378054800);
    } else {
      EXPECT_GT(tb.shifted_timestamps, 0);  // 8,115 contracts traded in 08:30:00 alone
    }
  }
}

}  // namespace foxhunt::data::tape_test
