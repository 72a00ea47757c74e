// A panel CSV read line by line (data::PanelCsvStream, serving::CsvPanelSource,
// serving::stream_panel_csv): the same timestamps, bars, errors and decisions as the panel read
// whole (data::parse_panel_csv, serving::PanelBarSource, serving::stream_panel), and a row going
// back in time refused at its line. The memory this saves is measured in stream_memory_test.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "error_test_util.h"
#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/serving/bar_stream.h"
#include "foxhunt/serving/desk.h"
#include "serving_test_fixture.h"

namespace foxhunt::serving {
namespace {

// Three symbols in time order, rows of a timestamp in no particular order; B has no bar on
// 2024-01-02, a blank line sits inside a timestamp, every line ends in \r\n, and the last
// timestamp is A's alone.
const std::string kPanel =
    "date,symbol,open,high,low,close,volume\r\n"
    "2024-01-01,C,30,31,29,30.5,300\r\n"
    "2024-01-01,A,10,11,9,10.5,100\r\n"
    "2024-01-01,B,20,21,19,20.5,200\r\n"
    "2024-01-02,A,10.5,12,10,11.5,110\r\n"
    "\r\n"
    "2024-01-02,C,30.5,32,30,31.5,310\r\n"
    "2024-01-03,B,20.5,22,20,21.5,210\r\n"
    "2024-01-03,A,11.5,13,11,12.5,120\r\n"
    "2024-01-03,C,31.5,33,31,32.5,320\r\n"
    "2024-01-04,A,12.5,14,12,13.5,130\r\n";

// Every batch a source yields.
std::vector<std::vector<SymbolBar>> drain(BarSource& source) {
  std::vector<std::vector<SymbolBar>> out;
  std::vector<SymbolBar> bars;
  while (source.next(bars)) out.push_back(bars);
  return out;
}

void expect_same_batches(const std::vector<std::vector<SymbolBar>>& streamed,
                         const std::vector<std::vector<SymbolBar>>& whole) {
  ASSERT_EQ(streamed.size(), whole.size());
  for (size_t t = 0; t < whole.size(); ++t) {
    ASSERT_EQ(streamed[t].size(), whole[t].size()) << "timestamp " << t;
    for (size_t i = 0; i < whole[t].size(); ++i) {
      const auto &x = streamed[t][i], &y = whole[t][i];
      EXPECT_EQ(x.symbol, y.symbol) << t << "/" << i;
      EXPECT_TRUE(x.bar.timestamp == y.bar.timestamp && x.bar.open == y.bar.open &&
                  x.bar.high == y.bar.high && x.bar.low == y.bar.low &&
                  x.bar.close == y.bar.close && x.bar.volume == y.bar.volume)
          << t << "/" << i;
      EXPECT_FALSE(x.flow.has_value());
    }
  }
}

// The error `f` throws (fails the test when it throws none).
template <typename F>
std::string error_of(F&& f) {
  std::string what = foxhunt::testing::input_error(std::forward<F>(f));
  if (what.empty()) ADD_FAILURE() << "no InputError";
  return what;
}

// Reads every timestamp of `text` as "p.csv" through a PanelCsvStream.
void read_all(const std::string& text) {
  std::istringstream in(text);
  data::PanelCsvStream stream(in, "p.csv");
  std::vector<data::PanelRow> rows;
  while (stream.next(rows)) {
  }
}

TEST(CsvPanelSourceTest, YieldsWhatThePanelReadWholeYields) {
  const auto panel = data::parse_panel_csv(kPanel, "p.csv");
  {
    std::istringstream in(kPanel);
    CsvPanelSource streamed(in, "p.csv");
    PanelBarSource whole(panel);
    const auto s = drain(streamed);
    expect_same_batches(s, drain(whole));
    ASSERT_EQ(s.size(), 4u);
    EXPECT_EQ(s[1].size(), 2u);           // B misses 2024-01-02
    EXPECT_EQ(s[0].front().symbol, "A");  // the panel's order, not the file's (C first)
    EXPECT_EQ(streamed.instruments(), 3);
    EXPECT_EQ(streamed.symbols(), 3);
    EXPECT_EQ(streamed.last_timestamp(), panel.timestamps.back());
    EXPECT_TRUE(streamed.ended());
  }
  // Served symbols only: a timestamp without one (the last, A's alone) is passed over, as is a
  // symbol's missing bar; the header taken from the input first (head) reads on after it.
  const auto only_b = [](const std::string& s) { return s == "B"; };
  const size_t header_end = kPanel.find('\n') + 1;
  std::istringstream rest(kPanel.substr(header_end));
  CsvPanelSource streamed(rest, "p.csv", only_b, kPanel.substr(0, header_end));
  PanelBarSource whole(panel, only_b);
  const auto s = drain(streamed);
  expect_same_batches(s, drain(whole));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ(streamed.instruments(), 1);
  EXPECT_EQ(streamed.symbols(), 3);
  EXPECT_EQ(streamed.last_timestamp(), panel.timestamps.back());
}

TEST(CsvPanelSourceTest, RefusesARowGoingBackInTimeAtItsLine) {
  const std::string text =  // grouped by symbol
      "timestamp,symbol,close\n"
      "1704067200,A,10\n"
      "1704153600,A,11\n"
      "1704067200,B,19\n"  // line 4: before line 3's timestamp
      "1704153600,B,20\n";
  std::istringstream in(text);
  CsvPanelSource source(in, "p.csv");
  std::vector<SymbolBar> bars;
  ASSERT_TRUE(source.next(bars));        // 2024-01-01 is complete once line 3 is read
  EXPECT_EQ(source.where(), "p.csv:2");  // its last row: where a bar the desk refuses is
  const std::string what = error_of([&] { source.next(bars); });
  EXPECT_NE(what.find("p.csv:4: symbol 'B': timestamp 2024-01-01"), std::string::npos) << what;
  EXPECT_NE(what.find("goes back in time"), std::string::npos) << what;
  EXPECT_NE(what.find("(line 3)"), std::string::npos) << what;
  EXPECT_EQ(source.where(), "p.csv:4");
  // The same rows are a panel when read whole (each symbol's own times increase): a file of
  // them is not in time order, and predict reads it whole.
  EXPECT_EQ(data::parse_panel_csv(text, "p.csv").rows(), 4);
  std::istringstream again(text);
  const auto scan = data::scan_panel_csv(again, "p.csv");
  EXPECT_FALSE(scan.time_ordered);
  EXPECT_FALSE(scan.last_timestamp.has_value());
}

TEST(CsvPanelSourceTest, RefusesWhatTheWholeReaderRefusesWithItsMessage) {
  const std::string header = "date,symbol,open,high,low,close,volume\n";
  for (const std::string& body : {
           std::string("2024-01-01,A,1,1,1,1,1\n2024-01-01,B,2,2,2,2,2\n2024-01-01,A,1,1,1,1,1\n"),
           std::string("2024-01-01,A,1,1,1,1,1\n2024-01-02,A,,,,1,1\n"),  // close-only later
           std::string("2024-01-01,,1,1,1,1,1\n"),                        // empty symbol
           std::string("2024-01-01,A,1,1,1,1\n"),                         // a field short
           std::string("2024-01-01,A,1,0.5,1,1,1\n"),                     // high below open
           std::string(""),                                               // no rows
       }) {
    const std::string text = header + body;
    const std::string whole = error_of([&] { data::parse_panel_csv(text, "p.csv"); });
    EXPECT_FALSE(whole.empty()) << body;
    EXPECT_EQ(error_of([&] { read_all(text); }), whole) << body;
  }
  // A header without a symbol column, as parse_panel_csv without a single-series reading.
  data::PanelReadOptions panel_only;
  panel_only.allow_single_series = false;
  const std::string series = "date,close\n2024-01-01,1\n";
  EXPECT_EQ(error_of([&] { read_all(series); }),
            error_of([&] { data::parse_panel_csv(series, "p.csv", panel_only); }));
}

TEST(CsvPanelSourceTest, ScanFindsAFileInTimeOrderAndItsLastTimestamp) {
  std::istringstream in(kPanel);
  const auto scan = data::scan_panel_csv(in, "p.csv");
  const auto panel = data::parse_panel_csv(kPanel, "p.csv");
  EXPECT_TRUE(scan.time_ordered);
  EXPECT_EQ(scan.rows, panel.rows());
  EXPECT_EQ(scan.symbols, 3);
  EXPECT_EQ(scan.last_timestamp, panel.timestamps.back());
  // A bad row before any out of order is the scan's error.
  std::istringstream bad(kPanel + "2024-01-05,A,1,1,1,x,1\n2024-01-01,B,1,1,1,1,1\n");
  EXPECT_NE(error_of([&] { data::scan_panel_csv(bad, "p.csv"); }).find("p.csv:12: symbol 'A'"),
            std::string::npos);
}

// Three symbols of `n` synthetic bars each, written in time order (rows of a timestamp in
// reverse symbol order), with C's bar at timestamp 7 left out.
std::string synthetic_panel(int64_t n) {
  std::vector<data::BarSeries> series;
  for (uint64_t seed : {11, 12, 13}) series.push_back(bars(n, seed));
  std::string text = "timestamp,symbol,open,high,low,close,volume\n";
  const char* symbols[] = {"A", "B", "C"};
  for (size_t i = 0; i < static_cast<size_t>(n); ++i)
    for (size_t k = 3; k-- > 0;) {
      if (k == 2 && i == 7) continue;
      const auto& b = series[k].bars[i];
      text += fmt::format("{},{},{},{},{},{},{}\n", b.timestamp, symbols[k], b.open, b.high, b.low,
                          b.close, b.volume);
    }
  return text;
}

// (timestamp, symbol, decision, each signal) of every reported decision.
using Served = std::vector<std::tuple<int64_t, std::string, double, std::vector<double>>>;

TimestampSink record(Served& out) {
  return [&out](int64_t t, const std::vector<InstrumentDecision>& ds) {
    for (const auto& d : ds) {
      std::vector<double> signals;
      for (const auto& s : d.decision.signals) signals.push_back(s.ready ? s.signal : -9.0);
      out.emplace_back(t, d.symbol, d.decision.decision, signals);
    }
  };
}

TEST_F(ServingTest, StreamPanelCsvGivesTheDecisionsOfThePanelReadWhole) {
  const data::MarketDataset ds(bars(600));
  const std::string text = synthetic_panel(60);
  const auto panel = data::parse_panel_csv(text, "p.csv");
  DeskOptions serial;
  serial.parallel = false;
  PanelStreamOptions o;
  o.from = panel.timestamps[40];
  Served whole, streamed;
  Desk a(fresh_bundles(ds), {}, serial);
  const auto ws = stream_panel(a, panel, o, record(whole));
  Desk b(fresh_bundles(ds), {}, serial);
  std::istringstream in(text);
  const auto ss = stream_panel_csv(b, in, "p.csv", o, record(streamed));
  EXPECT_EQ(streamed, whole);
  EXPECT_EQ(whole.size(), 20u * 3);
  EXPECT_EQ(ss.stream.instruments, ws.instruments);
  EXPECT_EQ(ss.stream.timestamps, ws.timestamps);
  EXPECT_EQ(ss.stream.bars, ws.bars);
  EXPECT_EQ(ss.stream.bars, 3 * 60 - 1);
  EXPECT_EQ(ss.stream.reported, ws.reported);
  EXPECT_EQ(ss.symbols, 3);
  EXPECT_EQ(ss.last_timestamp, panel.timestamps.back());

  // A shard that holds none of the symbols: the same refusal, once the stream has ended.
  o.shard.index = -1;
  for (int64_t count = 2; o.shard.index < 0; ++count)
    for (int64_t k = 0; k < count && o.shard.index < 0; ++k)
      if (symbol_shard("A", count) != k && symbol_shard("B", count) != k &&
          symbol_shard("C", count) != k)
        o.shard = {k, count};
  Desk c(fresh_bundles(ds), {}, serial);
  const std::string refused = error_of([&] { stream_panel(c, panel, o, nullptr); });
  EXPECT_NE(refused.find("holds none of the 3 symbols"), std::string::npos) << refused;
  std::istringstream again(text);
  EXPECT_EQ(error_of([&] { stream_panel_csv(c, again, "p.csv", o, nullptr); }), refused);
}

}  // namespace
}  // namespace foxhunt::serving
