// Panel CSV (long format, many symbols): the reader, its errors, the one-symbol reading of a
// single-series file, the real panel from scripts/setup.sh, and `foxhunt data inspect` on a panel.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/panel.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

using foxhunt::testing::panel_csv;
using foxhunt::testing::run_cli;
using foxhunt::testing::sp500_csv;
using foxhunt::testing::TempDir;

constexpr int64_t kDay = 86400;
constexpr int64_t kJan1 = 1704067200;  // 2024-01-01T00:00:00Z

constexpr const char* kHeader = "date,symbol,open,high,low,close,volume\n";

/// Parses `text` as "p.csv" expecting an InputError that names "p.csv:LINE: " then, when
/// `symbol` is given, "symbol 'SYMBOL': ", and contains `reason`.
void expect_error(const std::string& text, int line, const std::string& symbol,
                  const std::string& reason, const PanelReadOptions& options = {}) {
  try {
    parse_panel_csv(text, "p.csv", options);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const InputError& e) {
    const std::string what = e.what();
    std::string place = "p.csv:" + std::to_string(line) + ": ";
    if (!symbol.empty()) place += "symbol '" + symbol + "': ";
    EXPECT_NE(what.find(place), std::string::npos) << "expected '" << place << "': " << what;
    EXPECT_NE(what.find(reason), std::string::npos) << "expected '" << reason << "': " << what;
  }
}

void expect_same_bars(const BarSeries& a, const BarSeries& b) {
  ASSERT_EQ(a.bars.size(), b.bars.size());
  EXPECT_EQ(a.close_only, b.close_only);
  for (size_t i = 0; i < a.bars.size(); ++i) {
    const Bar &x = a.bars[i], &y = b.bars[i];
    ASSERT_TRUE(x.timestamp == y.timestamp && x.open == y.open && x.high == y.high &&
                x.low == y.low && x.close == y.close && x.volume == y.volume)
        << "bar " << i;
  }
}

std::vector<std::string> names(const Panel& p) {
  std::vector<std::string> out;
  for (const auto& s : p.symbols) out.push_back(s.symbol);
  return out;
}

// ---- reading ---------------------------------------------------------------------------------

TEST(PanelTest, InterleavedRowsSplitPerSymbolSortedBySymbol) {
  const auto p = parse_panel_csv(std::string(kHeader) +
                                     "2024-01-01,SPY,10,11,9,10.5,100\n"
                                     "2024-01-01,AAPL,20,21,19,20.5,7\n"
                                     "2024-01-02,SPY,10.5,12,10,11.5,200\n"
                                     "2024-01-02,AAPL,20.5,22,20,21,8\n"
                                     "2024-01-03,AAPL,21,21,18,19,9\n",
                                 "p.csv");
  EXPECT_FALSE(p.single_series);
  EXPECT_EQ(p.source, "p.csv");
  ASSERT_EQ(names(p), (std::vector<std::string>{"AAPL", "SPY"}));  // sorted, not file order
  EXPECT_EQ(p.rows(), 5);
  EXPECT_EQ(p.timestamps, (std::vector<int64_t>{kJan1, kJan1 + kDay, kJan1 + 2 * kDay}));
  const BarSeries* spy = p.find("SPY");
  ASSERT_NE(spy, nullptr);
  EXPECT_EQ(spy->source, "p.csv[SPY]");
  EXPECT_FALSE(spy->close_only);
  ASSERT_EQ(spy->size(), 2);
  const Bar& b = spy->bars[1];
  EXPECT_EQ(b.timestamp, kJan1 + kDay);
  EXPECT_EQ(b.open, 10.5);
  EXPECT_EQ(b.high, 12);
  EXPECT_EQ(b.low, 10);
  EXPECT_EQ(b.close, 11.5);
  EXPECT_EQ(b.volume, 200);
  const BarSeries* aapl = p.find("AAPL");
  ASSERT_NE(aapl, nullptr);
  ASSERT_EQ(aapl->size(), 3);
  EXPECT_EQ(aapl->closes(), (std::vector<double>{20.5, 21, 19}));
  EXPECT_EQ(p.find("MSFT"), nullptr);
  EXPECT_EQ(p.find("spy"), nullptr);  // symbols are case-sensitive
}

TEST(PanelTest, RowOrderAcrossSymbolsDoesNotChangeThePanel) {
  // The same bars grouped by symbol instead of interleaved by date.
  const std::string by_date = std::string(kHeader) +
                              "2024-01-01,B,1,1,1,1,1\n2024-01-01,A,2,2,2,2,2\n"
                              "2024-01-02,A,3,3,3,3,3\n2024-01-02,B,4,4,4,4,4\n";
  const std::string by_symbol = std::string(kHeader) +
                                "2024-01-01,A,2,2,2,2,2\n2024-01-02,A,3,3,3,3,3\n"
                                "2024-01-01,B,1,1,1,1,1\n2024-01-02,B,4,4,4,4,4\n";
  const auto x = parse_panel_csv(by_date, "x.csv");
  const auto y = parse_panel_csv(by_symbol, "x.csv");
  ASSERT_EQ(names(x), names(y));
  EXPECT_EQ(x.timestamps, y.timestamps);
  for (size_t i = 0; i < x.symbols.size(); ++i)
    expect_same_bars(x.symbols[i].series, y.symbols[i].series);
}

TEST(PanelTest, MissingBarsCountAgainstTheUnionInsideEachSymbolsSpan) {
  // A trades every day 1-5; B misses days 2 and 3; C starts on day 2 and ends on day 4.
  std::string text = "timestamp,ticker,close\n";
  for (int d = 0; d < 5; ++d) {
    const std::string t = std::to_string(kJan1 + d * kDay);
    text += t + ",A,10\n";
    if (d != 1 && d != 2) text += t + ",B,20\n";
    if (d >= 1 && d <= 3) text += t + ",C,30\n";
  }
  const auto p = parse_panel_csv(text, "m.csv");
  ASSERT_EQ(p.timestamps.size(), 5u);
  const auto s = summarize_panel(p);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].symbol, "A");
  EXPECT_EQ(s[0].bars, 5);
  EXPECT_EQ(s[0].missing_bars, 0);
  EXPECT_EQ(s[1].symbol, "B");
  EXPECT_EQ(s[1].bars, 3);
  EXPECT_EQ(s[1].missing_bars, 2);
  EXPECT_EQ(s[1].first_timestamp, kJan1);
  EXPECT_EQ(s[1].last_timestamp, kJan1 + 4 * kDay);
  EXPECT_EQ(s[2].symbol, "C");
  EXPECT_EQ(s[2].bars, 3);
  EXPECT_EQ(s[2].missing_bars, 0);  // days 1 and 5 are outside C's span
  EXPECT_TRUE(s[2].close_only);
}

TEST(PanelTest, HeaderSpellingsQuotesBomAndCrlf) {
  for (const char* col : {"symbol", "Symbol", "TICKER", "Instrument", "instrument_"}) {
    const std::string text = std::string("\xEF\xBB\xBF") + "Date,Close,\"" + col +
                             "\",Adj Close\r\n\r\n\"2024-01-01\",5,\"X, Inc.\",4\r\n";
    const auto p = parse_panel_csv(text, "h.csv");
    ASSERT_EQ(p.size(), 1) << col;
    EXPECT_EQ(p.symbols[0].symbol, "X, Inc.");
    EXPECT_EQ(p.symbols[0].series.bars[0].close, 5);
    EXPECT_TRUE(has_symbol_column(text)) << col;
  }
  EXPECT_FALSE(has_symbol_column("date,close\n2024-01-01,5\n"));
  EXPECT_FALSE(has_symbol_column("1,5\n"));
  EXPECT_FALSE(has_symbol_column("\n\n"));
  EXPECT_FALSE(has_symbol_column("\"date,symbol,close\n"));  // unterminated quote: not a header
}

TEST(PanelTest, CloseOnlyRowsLeaveOpenHighLowAndVolumeEmpty) {
  const auto p = parse_panel_csv(std::string(kHeader) +
                                     "2024-01-01,SPX,10,11,9,10.5,100\n"
                                     "2024-01-01,WTI,,,,70.5,\n"
                                     "2024-01-02,WTI,, ,,71,\n"
                                     "2024-01-02,SPX,10.5,11,10,11,\n",  // no volume: 0
                                 "c.csv");
  const BarSeries* wti = p.find("WTI");
  ASSERT_NE(wti, nullptr);
  EXPECT_TRUE(wti->close_only);
  ASSERT_EQ(wti->size(), 2);
  for (const Bar& b : wti->bars) {
    EXPECT_EQ(b.open, b.close);
    EXPECT_EQ(b.high, b.close);
    EXPECT_EQ(b.low, b.close);
    EXPECT_EQ(b.volume, 0);
  }
  EXPECT_NO_THROW(validate_bars(*wti));
  const BarSeries* spx = p.find("SPX");
  ASSERT_NE(spx, nullptr);
  EXPECT_FALSE(spx->close_only);
  EXPECT_EQ(spx->bars[1].volume, 0);
  EXPECT_EQ(spx->bars[1].low, 10);
}

// ---- errors: FILE:LINE: symbol 'S': reason ---------------------------------------------------

TEST(PanelTest, DuplicateTimestampOfOneSymbolNamesBothLines) {
  expect_error(std::string(kHeader) +
                   "2024-01-01,A,1,1,1,1,1\n2024-01-01,B,1,1,1,1,1\n2024-01-01,A,2,2,2,2,2\n",
               4, "A", "duplicate timestamp 2024-01-01T00:00:00Z (also on line 2)");
  // Not adjacent in the symbol's rows: still a duplicate, not "back in time".
  expect_error(std::string(kHeader) +
                   "2024-01-01,A,1,1,1,1,1\n2024-01-02,A,1,1,1,1,1\n"
                   "2024-01-03,A,1,1,1,1,1\n2024-01-02,A,1,1,1,1,1\n",
               5, "A", "duplicate timestamp 2024-01-02T00:00:00Z (also on line 3)");
  // The same timestamp in two spellings is the same bar.
  expect_error("time,symbol,close\n2024-01-01,A,1\n2024-01-01T00:00:00Z,A,2\n", 3, "A",
               "duplicate timestamp");
}

TEST(PanelTest, SymbolGoingBackInTimeNamesItsPreviousBar) {
  // Appended, not `string(kHeader) + "..."`: GCC 12 warns (-Warray-bounds, a known false
  // positive) on that temporary's move once this file is compiled in a unity batch.
  std::string csv(kHeader);
  csv += "2024-01-03,A,1,1,1,1,1\n2024-01-01,B,1,1,1,1,1\n2024-01-02,A,1,1,1,1,1\n";
  expect_error(csv, 4, "A",
               "timestamp 2024-01-02T00:00:00Z goes back in time: the symbol's previous bar is at "
               "2024-01-03T00:00:00Z (line 2)");
}

TEST(PanelTest, EmptySymbolIsAnError) {
  expect_error(std::string(kHeader) + "2024-01-01,A,1,1,1,1,1\n2024-01-02,  ,1,1,1,1,1\n", 3, "",
               "empty symbol (column 'symbol')");
  expect_error("Date,Ticker,Close\n2024-01-01,\"\",1\n", 2, "", "empty symbol (column 'Ticker')");
}

TEST(PanelTest, MissingSymbolColumnWhenAPanelIsRequired) {
  PanelReadOptions strict;
  strict.allow_single_series = false;
  expect_error("\ndate,close\n2024-01-01,5\n", 2, "", "missing symbol column", strict);
  expect_error("1,5\n", 1, "", "(this line is not a header)", strict);
  expect_error("", 1, "", "empty file", strict);
}

TEST(PanelTest, HeaderErrors) {
  expect_error("symbol,close\nA,5\n", 1, "", "missing column 'timestamp'");
  expect_error("date,symbol,ticker,close\n", 1, "",
               "duplicate column 'ticker' in header (field 2 'symbol' is also the symbol)");
  expect_error("date,symbol,close,sector\n", 1, "",
               "unknown column 'sector' in header (known: symbol (or ticker, instrument), "
               "timestamp");
  expect_error("date,symbol,close\n\n", 2, "", "no bars after the header");
}

TEST(PanelTest, RowErrorsNameTheSymbol) {
  const std::string h = kHeader;
  expect_error(h + "2024-01-01,A,1,1,1,1,1\n2024-01-01,B,1,1,1,abc,1\n", 3, "B",
               "column 'close': 'abc' is not a number");
  expect_error(h + "2024-01-01,B,1,2,1,3,1\n", 2, "B", "close 3 outside [low 1, high 2]");
  expect_error(h + "2024-01-01,B,1,,1,1,1\n", 2, "B",
               "open, high and low must all be given or all be empty (a close-only row), got 2");
  expect_error(h + "2024-01-01,B,1,1,1,1,-1\n", 2, "B", "column 'volume': must be >= 0");
  expect_error(h + "2024-01-01,B,1,1,1,1\n", 2, "", "wrong column count: expected 7 fields, got 6");
  expect_error(h + "2024-01-01,A,1,1,1,1,1\n1704153600,B,1,1,1,1,1\n", 3, "B",
               "is Unix seconds but line 2 is ISO 8601");
  expect_error(h + "2024-01-01,A,,,,1,\n2024-01-02,A,1,1,1,1,1\n", 3, "A",
               "open, high and low are given but not on the symbol's first row (line 2)");
  expect_error(h + "2024-01-01,A,1,1,1,1,1\n2024-01-02,A,,,,1,\n", 3, "A",
               "open, high and low are empty but not on the symbol's first row (line 2)");
}

TEST(PanelTest, CheckMinBarsNamesEachShortSymbolAndItsCount) {
  std::string text = "date,symbol,close\n";
  for (int d = 1; d <= 9; ++d) {
    const std::string date = "2024-01-0" + std::to_string(d);
    text += date + ",LONG,1\n";
    if (d <= 3) text += date + ",SHORT,1\n";
    if (d <= 5) text += date + ",MID,1\n";
  }
  const auto p = parse_panel_csv(text, "w.csv");
  EXPECT_NO_THROW(check_min_bars(p, 3, "a 3-bar window"));
  try {
    check_min_bars(p, 6, "a 6-bar window");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.component(), "panel");
    EXPECT_EQ(e.message(),
              "w.csv: a 6-bar window needs at least 6 bars per symbol; too few: 'MID' has 5 "
              "bars, 'SHORT' has 3 bars");
  }
}

// ---- single-series files ---------------------------------------------------------------------

TEST(PanelTest, SingleSeriesFileIsAOneSymbolPanelWithTheSameBars) {
  const std::string text =
      "Date,Open,High,Low,Close,Adj Close,Volume\n"
      "2024-01-01,10,11,9,10.5,10.4,100\n"
      "2024-01-02,10.5,12,10,11.5,11.4,200\n";
  const BarSeries single = parse_bars_csv(text, "data/spx.csv");
  const Panel p = parse_panel_csv(text, "data/spx.csv");
  EXPECT_TRUE(p.single_series);
  ASSERT_EQ(names(p), std::vector<std::string>{"spx"});  // the file's stem
  expect_same_bars(p.symbols[0].series, single);
  EXPECT_EQ(p.symbols[0].series.source, "data/spx.csv");
  EXPECT_EQ(p.timestamps, (std::vector<int64_t>{kJan1, kJan1 + kDay}));
  PanelReadOptions named;
  named.single_symbol = "SPX";
  EXPECT_EQ(names(parse_panel_csv(text, "data/spx.csv", named)), std::vector<std::string>{"SPX"});
  // Headerless and close-only single series too.
  expect_same_bars(parse_panel_csv("60,5\n120,6\n", "a.csv").symbols[0].series,
                   parse_bars_csv("60,5\n120,6\n", "a.csv"));
  // Its errors are the single-series reader's, unchanged.
  expect_error("date,close\n2024-01-01,5\n2024-01-01,6\n", 3, "", "duplicate timestamp");
}

TEST(PanelTest, SingleSeriesReaderStillRejectsASymbolColumn) {
  // The symbol column is a panel feature only: bars.h's reader keeps its exact message.
  try {
    parse_bars_csv("date,symbol,close\n2024-01-01,A,5\n", "s.csv");
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_EQ(e.message(),
              "s.csv:1: unknown column 'symbol' in header (known: timestamp (or date, datetime, "
              "time), open, high, low, close, volume; ignored: adj close, dividends, stock "
              "splits and the tape-bar columns vwap, prints, buy volume, sell volume, duration, "
              "realized variance, start ns, end ns)");
  }
}

TEST(PanelTest, RealSp500FileReadAsAPanelEqualsTheSingleSeriesReader) {
  const std::string path = sp500_csv();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (scripts/setup.sh)";
  const Panel p = load_panel_csv(path);
  ASSERT_EQ(names(p), std::vector<std::string>{"sp500_close"});
  expect_same_bars(p.symbols[0].series, load_bars_csv(path));
}

// ---- the real panel (scripts/setup.sh) -------------------------------------------------------

TEST(PanelTest, RealPanelHasThreeSymbolsWithIncreasingDailyBars) {
  const std::string path = panel_csv();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent (scripts/setup.sh)";
  const Panel p = load_panel_csv(path);
  ASSERT_EQ(names(p), (std::vector<std::string>{"NASDAQ", "SP500", "WTI"}));
  const auto s = summarize_panel(p);
  // The arch 8.0.0 wheel's data: both indices 1999-01-04 .. 2018-12-31 (5,031 trading days),
  // WTI's FRED closes 1986-01-02 .. 2019-01-03 without its 290 holidays ('.').
  const struct {
    int64_t bars;
    const char* first;
    const char* last;
    int64_t missing;
    bool close_only;
  } want[] = {{5031, "1999-01-04", "2018-12-31", 8, false},
              {5031, "1999-01-04", "2018-12-31", 8, false},
              {8321, "1986-01-02", "2019-01-03", 19, true}};
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(s[i].symbol);
    EXPECT_EQ(s[i].bars, want[i].bars);
    EXPECT_EQ(s[i].first_timestamp, parse_timestamp(want[i].first));
    EXPECT_EQ(s[i].last_timestamp, parse_timestamp(want[i].last));
    EXPECT_EQ(s[i].missing_bars, want[i].missing);
    EXPECT_EQ(s[i].close_only, want[i].close_only);
    const auto& bars = p.symbols[i].series.bars;
    for (size_t k = 1; k < bars.size(); ++k)
      ASSERT_LT(bars[k - 1].timestamp, bars[k].timestamp) << "bar " << k;
    EXPECT_NO_THROW(validate_bars(p.symbols[i].series));
  }
  EXPECT_EQ(p.rows(), 5031 + 5031 + 8321);
  EXPECT_EQ(p.timestamps.size(), 8340u);
  EXPECT_NO_THROW(check_min_bars(p, 5031, "the full S&P window"));
  EXPECT_THROW(check_min_bars(p, 5032, "one bar more"), InputError);
  // Its S&P 500 closes are the single-series file's.
  if (std::filesystem::exists(sp500_csv())) {
    EXPECT_EQ(p.find("SP500")->closes(), load_bars_csv(sp500_csv()).closes());
  }
}

// ---- foxhunt data inspect ----------------------------------------------------------------------

TEST(PanelTest, CliInspectListsSymbolsInTextAndJson) {
  TempDir dir;
  const std::string path = dir.file("u.csv");
  write_file_atomic(path, std::string(kHeader) +
                              "2024-01-01,SPY,10,11,9,10.5,100\n"
                              "2024-01-01,WTI,,,,70,\n"
                              "2024-01-02,WTI,,,,71,\n"
                              "2024-01-03,SPY,10.5,12,10,11.5,200\n"
                              "2024-01-03,WTI,,,,72,\n");
  const auto j = run_cli("data inspect " + path + " --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto o = nlohmann::json::parse(j.out);
  EXPECT_EQ(o["file"], path);
  EXPECT_EQ(o["rows"], 5);
  EXPECT_EQ(o["symbols_count"], 2);
  EXPECT_EQ(o["timestamps"], 3);
  ASSERT_EQ(o["symbols"].size(), 2u);
  EXPECT_EQ(o["symbols"][0]["symbol"], "SPY");
  EXPECT_EQ(o["symbols"][0]["bars"], 2);
  EXPECT_EQ(o["symbols"][0]["first_timestamp"], "2024-01-01T00:00:00Z");
  EXPECT_EQ(o["symbols"][0]["last_timestamp"], "2024-01-03T00:00:00Z");
  EXPECT_EQ(o["symbols"][0]["missing_bars"], 1);
  EXPECT_EQ(o["symbols"][1]["symbol"], "WTI");
  EXPECT_EQ(o["symbols"][1]["missing_bars"], 0);

  const auto t = run_cli("data inspect " + path);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("rows            5\nsymbols         2 (3 timestamps in all)\n"
                       "symbol    bars  first                 last                  missing\n"
                       "SPY          2  2024-01-01T00:00:00Z  2024-01-03T00:00:00Z        1\n"
                       "WTI          3  2024-01-01T00:00:00Z  2024-01-03T00:00:00Z        0"
                       "  close only\n"),
            std::string::npos)
      << t.out;

  // A single-series file keeps its own output (no symbol list).
  const std::string one = dir.file("one.csv");
  write_file_atomic(one, "date,close\n2024-01-01,5\n2024-01-02,6\n");
  const auto s = nlohmann::json::parse(run_cli("data inspect " + one + " --json").out);
  EXPECT_EQ(s["rows"], 2);
  EXPECT_FALSE(s.contains("symbols"));
}

TEST(PanelTest, CliInspectBadPanelExits2NamingLineAndSymbol) {
  TempDir dir;
  const std::string path = dir.file("bad.csv");
  write_file_atomic(path, "date,symbol,close\n2024-01-02,A,1\n2024-01-01,A,1\n");
  const auto r = run_cli("data inspect " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find(path + ":3: symbol 'A': timestamp"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
}  // namespace foxhunt::data
