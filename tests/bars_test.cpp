#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "bars_test_util.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bars.h"
#include "test_util.h"

namespace foxhunt::data {
namespace {

using foxhunt::testing::BarsTest;
using foxhunt::testing::TempDir;

// ---- parsing -------------------------------------------------------------------------------

TEST_F(BarsTest, ParsesHeaderAndSixColumns) {
  const auto s = parse_bars_csv(std::string(kHeader) +
                                    "60,10,11,9,10.5,100\n"
                                    "120,10.5,12,10,11.5,250.5\n",
                                "a.csv");
  ASSERT_EQ(s.size(), 2);
  EXPECT_FALSE(s.close_only);
  EXPECT_EQ(s.source, "a.csv");
  expect_bar(s.bars[1], 120, 10.5, 12, 10, 11.5, 250.5);
}

TEST_F(BarsTest, ParsesWithoutHeaderAndIgnoresBlankLinesAndCrlf) {
  const auto s = parse_bars_csv("60,10,11,9,10.5,100\r\n\n120, 10.5 ,12,10,11.5,0\r\n\n", "a");
  ASSERT_EQ(s.size(), 2);
  EXPECT_DOUBLE_EQ(s.bars[1].open, 10.5);
  EXPECT_DOUBLE_EQ(s.bars[1].volume, 0);
}

TEST_F(BarsTest, HeaderColumnsInAnyOrderAndCase) {
  const auto s = parse_bars_csv("Close,VOLUME,low,high,open,timestamp\n10.5,100,9,11,10,60\n", "a");
  ASSERT_EQ(s.size(), 1);
  expect_bar(s.bars[0], 60, 10, 11, 9, 10.5, 100);
}

TEST_F(BarsTest, CloseOnlyTwoColumnsDerivesOhlAndZeroVolume) {
  const auto s = parse_bars_csv("100,5\n200,6\n", "a");
  ASSERT_EQ(s.size(), 2);
  EXPECT_TRUE(s.close_only);
  EXPECT_EQ(s.bars[1].timestamp, 200);
  EXPECT_DOUBLE_EQ(s.bars[1].open, 6);
  EXPECT_DOUBLE_EQ(s.bars[1].high, 6);
  EXPECT_DOUBLE_EQ(s.bars[1].low, 6);
  EXPECT_DOUBLE_EQ(s.bars[1].volume, 0);
}

TEST_F(BarsTest, CloseOnlySingleColumnGetsSyntheticTimestamps) {
  for (const char* text : {"5\n6\n7\n", "close\n5\n6\n7\n"}) {
    const auto s = parse_bars_csv(text, "a");
    ASSERT_EQ(s.size(), 3) << text;
    EXPECT_TRUE(s.close_only);
    EXPECT_EQ(s.bars[2].timestamp, 2 * kDefaultBarSeconds);
    EXPECT_DOUBLE_EQ(s.bars[2].close, 7);
  }
}

TEST_F(BarsTest, HeaderWithoutVolumeIsNotCloseOnly) {
  const auto s = parse_bars_csv("timestamp,open,high,low,close\n1,10,11,9,10\n", "a");
  EXPECT_FALSE(s.close_only);
  EXPECT_DOUBLE_EQ(s.bars[0].volume, 0);
}

// ---- one test per validation class, each checking the reported line -------------------------

TEST_F(BarsTest, NonNumericFieldReportsLine) {
  expect_error(std::string(kHeader) + "1,10,11,9,10,1\n2,10,abc,9,10,1\n", 3,
               "'abc' is not a number");
  expect_error("1,10,11,9,10,1\n2,10,11,9,10,1x\n", 2, "is not a number");
  expect_error("1,10,11,9,10,1\n2,10,11,9,,1\n", 2, "column 'close'");
}

TEST_F(BarsTest, NonIntegerTimestampReportsLine) {
  expect_error("1,10,11,9,10,1\n2.5,10,11,9,10,1\n", 2, "not an integer");
}

TEST_F(BarsTest, NanAndInfReportLine) {
  expect_error(std::string(kHeader) + "1,10,11,9,10,1\n2,10,11,9,10,1\n3,nan,11,9,10,1\n", 4,
               "non-finite");
  expect_error("1,10,inf,9,10,1\n", 1, "non-finite");
  expect_error("5\n-Infinity\n", 2, "non-finite");
}

TEST_F(BarsTest, ZeroOrNegativePriceReportsLine) {
  expect_error("1,10,11,9,10,1\n2,10,11,0,10,1\n", 2, "column 'low': price must be > 0");
  expect_error("1,5\n2,-5\n", 2, "price must be > 0");
}

TEST_F(BarsTest, NegativeVolumeReportsLine) {
  expect_error("1,10,11,9,10,1\n2,10,11,9,10,-1\n", 2, "volume");
}

TEST_F(BarsTest, HighBelowLowReportsLine) {
  // append, not operator+: GCC 12 sees a false -Warray-bounds in the inlined concatenation.
  std::string csv(kHeader);
  csv.append("1,10,11,9,10,1\n2,10,9,11,10,1\n");
  expect_error(csv, 3, "high 9 < low 11");
}

TEST_F(BarsTest, OpenOrCloseOutsideRangeReportsLine) {
  expect_error("1,10,11,9,10,1\n2,12,11,9,10,1\n", 2, "open 12 outside [low 9, high 11]");
  expect_error("1,10,11,9,10,1\n2,10,11,9,8,1\n3,10,11,9,10,1\n", 2, "close 8 outside");
}

TEST_F(BarsTest, DuplicateTimestampReportsLine) {
  expect_error("1,5\n2,5\n2,6\n", 3, "duplicate timestamp 2 (also on line 2)");
}

TEST_F(BarsTest, DecreasingTimestampReportsLine) {
  expect_error("\n10,5\n20,5\n15,6\n", 4, "not after the previous one 20");
}

TEST_F(BarsTest, WrongColumnCountReportsLine) {
  expect_error("1,10,11,9,10,1\n2,10,11,9,10\n", 2, "expected 6 fields, got 5");
  expect_error("1,10,11,9,10\n", 1, "wrong column count");
  expect_error(std::string(kHeader) + "1,10,11,9,10,1,7\n", 2, "expected 6 fields, got 7");
}

TEST_F(BarsTest, MissingOrBadHeaderColumnsReportLine) {
  expect_error("timestamp,open,high,low,volume\n1,10,11,9,1\n", 1, "missing column 'close'");
  expect_error("timestamp,open,close\n1,10,10\n", 1, "open, high and low must all be present");
  expect_error("timestamp,close,price\n1,10,10\n", 1, "unknown column 'price'");
  expect_error("timestamp,close,close\n1,10,10\n", 1, "duplicate column 'close'");
}

TEST_F(BarsTest, EmptyFileAndHeaderOnlyAreErrors) {
  expect_error("", 1, "empty file");
  expect_error("\n  \n", 1, "empty file");
  expect_error(kHeader, 2, "no bars after the header");
}

TEST_F(BarsTest, FailedParseLeavesNothingHalfLoaded) {
  BarSeries s = parse_bars_csv("1,5\n2,6\n", "good");
  EXPECT_THROW(s = parse_bars_csv("1,5\n2,6\n3,7\n4,bad\n", "bad"), InputError);
  EXPECT_EQ(s.size(), 2);
  EXPECT_EQ(s.source, "good");
}

TEST_F(BarsTest, MissingFileIsInputError) {
  EXPECT_THROW(load_bars_csv("/nonexistent/dir/bars.csv"), InputError);
}

// ---- CSV as users have it: ISO dates, milliseconds, Yahoo headers ------------------------------

TEST(TimestampFormatTest, IsTheInverseOfParse) {
  EXPECT_EQ(format_timestamp(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_timestamp(1709285400), "2024-03-01T09:30:00Z");
  EXPECT_EQ(format_timestamp(951782400), "2000-02-29T00:00:00Z");  // a leap day of a 400-year
  EXPECT_EQ(format_timestamp(-1), "1969-12-31T23:59:59Z");
  EXPECT_EQ(format_timestamp(-86400), "1969-12-31T00:00:00Z");
  for (int64_t t : {int64_t{0}, int64_t{-1}, int64_t{-86401}, int64_t{1262563200},
                    int64_t{4102444799}, int64_t{-2208988800}, int64_t{1709285400} + 86399})
    EXPECT_EQ(parse_timestamp(format_timestamp(t)), t) << t;
}

/// Expects parse_timestamp(text) to throw an InputError naming `text`, `reason` and the formats.
void expect_bad_timestamp(const std::string& text, const std::string& reason) {
  try {
    parse_timestamp(text);
    ADD_FAILURE() << "no error for '" << text << "'";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("'" + text + "' is not a timestamp"), std::string::npos) << what;
    EXPECT_NE(what.find(reason), std::string::npos) << "expected '" << reason << "': " << what;
    EXPECT_NE(what.find("(accepted: Unix seconds, Unix milliseconds, ISO 8601 date"),
              std::string::npos)
        << what;
  }
}

TEST_F(BarsTest, ParseTimestampKnownValues) {
  // Values from python3 datetime (e.g. datetime.fromisoformat(...).timestamp()).
  EXPECT_EQ(parse_timestamp("2010-01-04"), 1262563200);
  EXPECT_EQ(parse_timestamp("1970-01-01"), 0);
  EXPECT_EQ(parse_timestamp("1969-12-31T23:59:59"), -1);
  EXPECT_EQ(parse_timestamp("2000-02-29"), 951782400);
  EXPECT_EQ(parse_timestamp("2024-03-01"), 1709251200);
  EXPECT_EQ(parse_timestamp("9999-12-31T23:59:59Z"), 253402300799);
  EXPECT_EQ(parse_timestamp("2024-03-01T09:30:00+02:00"), 1709278200);
  EXPECT_EQ(parse_timestamp("2024-03-01T09:30:00-05:00"), 1709303400);
  EXPECT_EQ(parse_timestamp("2024-03-01T09:30:00+05:30"), 1709265600);
}

TEST_F(BarsTest, ParseTimestampVariantsAgree) {
  const int64_t t = 1709285400;  // 2024-03-01T09:30:00Z
  for (const char* text : {"2024-03-01T09:30:00Z",
                           "2024-03-01 09:30:00",
                           "2024-03-01T09:30:00",
                           "2024-03-01t09:30z",
                           "2024-03-01T09:30",
                           "2024-03-01 09:30:00.000",
                           "2024-03-01T09:30:00.999999Z",
                           "2024-03-01T09:30:00,5",
                           "2024-03-01T11:30:00+02:00",
                           "2024-03-01T11:30:00+0200",
                           "2024-03-01T11:30+02",
                           "2024-03-01T04:30:00-05:00",
                           "2024-03-01T04:30:00-0500",
                           "2024-03-01T04:30:00.25-05",
                           "2024-03-01T09:30:00+00:00",
                           "2024-03-01T09:30:00-00:00",
                           "  2024-03-01T09:30:00Z ",
                           "1709285400",
                           "+1709285400",
                           "1709285400000",
                           "1709285400999"}) {
    EXPECT_EQ(parse_timestamp(text), t) << text;
  }
  // The day boundary moves with the offset.
  EXPECT_EQ(parse_timestamp("2024-03-01T01:00:00+02:00"), parse_timestamp("2024-02-29T23:00"));
  EXPECT_EQ(parse_timestamp("2024-02-29T23:00:00-14:00"), parse_timestamp("2024-03-01T13:00Z"));
  // Milliseconds floor to the second, also before 1970.
  EXPECT_EQ(parse_timestamp("-100000000001"), -100000001);
  EXPECT_EQ(parse_timestamp("99999999999"), 99999999999);  // just below 1e11: seconds
  EXPECT_EQ(parse_timestamp("100000000000"), 100000000);   // 1e11: milliseconds
}

TEST_F(BarsTest, ParseTimestampRejectsInvalidDatesAndFormats) {
  expect_bad_timestamp("2023-02-29", "day 29 not in 01-28 for 2023-02");
  expect_bad_timestamp("2100-02-29", "day 29 not in 01-28");
  expect_bad_timestamp("2024-04-31", "day 31 not in 01-30");
  expect_bad_timestamp("2024-01-00", "day 00");
  expect_bad_timestamp("2024-13-01", "month 13 not in 01-12");
  expect_bad_timestamp("2024-00-10", "month 00 not in 01-12");
  expect_bad_timestamp("2024-03-01 24:00", "hour 24 not in 00-23");
  expect_bad_timestamp("2024-03-01T09:60", "minute 60 not in 00-59");
  expect_bad_timestamp("2024-03-01T23:59:60Z", "second 60 not in 00-59");
  expect_bad_timestamp("2024-03-01T09:30+15:00", "offset +15:00 beyond 14:00");
  expect_bad_timestamp("2024-03-01T09:30-14:30", "offset -14:30 beyond 14:00");
  expect_bad_timestamp("2024-03-01T09:30+05:60", "offset minutes 60");
  expect_bad_timestamp("2.5", "not an integer");
  expect_bad_timestamp("99999999999999999999", "out of range");
  expect_bad_timestamp("", "empty");
  for (const char* text :
       {"03/01/2024", "2024-3-1", "2024-03-01T", "2024-03-01T9:30", "2024-03-01T09:30:00.",
        "2024-03-01T09:30:00+2", "2024-03-01T09:30:00+02:", "2024-03-01Z", "2024-03-01T09:30 Z",
        "2024-03-01T09:30:00Zjunk", "2024-03-01  09:30", "1e9", "12abc", "Mar 1 2024"}) {
    expect_bad_timestamp(text, "");
  }
}

TEST_F(BarsTest, IsoDateFileGivesSameBarsAsUnixSeconds) {
  const auto unix_s =
      parse_bars_csv("1262563200,1628.75\n1262649600,1630.5\n1262736000,1629\n", "a");
  const auto iso = parse_bars_csv("2010-01-04,1628.75\n2010-01-05,1630.5\n2010-01-06,1629\n", "b");
  EXPECT_TRUE(same_bars(unix_s, iso));
  EXPECT_EQ(iso.bars[0].timestamp, 1262563200);
  EXPECT_TRUE(iso.close_only);
  const auto header = parse_bars_csv(
      "Date,Close\n2010-01-04,1628.75\n2010-01-05,1630.5\n"
      "2010-01-06,1629\n",
      "c");
  EXPECT_TRUE(same_bars(unix_s, header));
}

TEST_F(BarsTest, IsoDatetimeFileVariantsGiveSameBarsAsUnixSeconds) {
  // 2024-03-01 09:30, 09:31, 09:32 UTC: intraday bars one minute apart.
  const std::string unix_s = std::string(kHeader) +
                             "1709285400,10,11,9,10.5,100\n"
                             "1709285460,10.5,12,10,11.5,250.5\n"
                             "1709285520,11.5,12,11,11,7\n";
  const auto expected = parse_bars_csv(unix_s, "a");
  const std::vector<std::array<const char*, 3>> variants = {
      {"2024-03-01 09:30:00", "2024-03-01 09:31:00", "2024-03-01 09:32:00"},
      {"2024-03-01T09:30:00", "2024-03-01T09:31:00", "2024-03-01T09:32:00"},
      {"2024-03-01T09:30:00Z", "2024-03-01T09:31:00Z", "2024-03-01T09:32:00Z"},
      {"2024-03-01T09:30", "2024-03-01T09:31", "2024-03-01T09:32"},
      {"2024-03-01T11:30:00+02:00", "2024-03-01T11:31:00+0200", "2024-03-01T11:32:00+02"},
      {"2024-03-01T04:30:00-05:00", "2024-03-01T04:31:00-0500", "2024-03-01T04:32:00-05"},
      {"2024-03-01T09:30:00.000Z", "2024-03-01T09:31:00.250Z", "2024-03-01T09:32:00.999Z"},
      {"2024-03-01T09:30:00Z", "2024-03-01T11:31:00+02:00", "2024-03-01T04:32:00-05:00"},
  };
  for (const auto& ts : variants) {
    const std::string text = std::string("datetime,open,high,low,close,volume\n") + ts[0] +
                             ",10,11,9,10.5,100\n" + ts[1] + ",10.5,12,10,11.5,250.5\n" + ts[2] +
                             ",11.5,12,11,11,7\n";
    EXPECT_TRUE(same_bars(expected, parse_bars_csv(text, "b"))) << text;
  }
}

TEST_F(BarsTest, MillisecondFileGivesSameBarsAsSeconds) {
  const auto seconds = parse_bars_csv("timestamp,close\n1709285400,10\n1709285460,11\n", "a");
  const auto millis = parse_bars_csv("timestamp,close\n1709285400000,10\n1709285460000,11\n", "b");
  EXPECT_TRUE(same_bars(seconds, millis));
  const auto no_header = parse_bars_csv("1709285400000,10\n1709285460000,11\n", "c");
  EXPECT_TRUE(same_bars(seconds, no_header));
}

TEST_F(BarsTest, YahooHeaderWithBomAndCrlfGivesSameBarsAsUnixSeconds) {
  const auto expected =
      parse_bars_csv(std::string(kHeader) +
                         "1262563200,1116.56,1133.87,1116.56,1132.99,3991400000\n"
                         "1262649600,1132.66,1136.63,1129.66,1136.52,2491020000\n",
                     "a");
  const std::string yahoo =
      "\xEF\xBB\xBF"
      "Date,Open,High,Low,Close,Adj Close,Volume\r\n"
      "2010-01-04,1116.56,1133.87,1116.56,1132.99,1000.01,3991400000\r\n"
      "2010-01-05,1132.66,1136.63,1129.66,1136.52,1000.02,2491020000\r\n";
  const auto got = parse_bars_csv(yahoo, "yahoo.csv");
  EXPECT_TRUE(same_bars(expected, got));
  EXPECT_DOUBLE_EQ(got.bars[0].close, 1132.99);  // Close, not Adj Close
  // Quoted fields, other spellings of the ignored columns and of the timestamp column.
  for (const char* header :
       {"\"Date\",\"Open\",\"High\",\"Low\",\"Close\",\"Adj_Close\",\"Volume\"",
        "DATETIME,open,HIGH,Low,close,AdjClose,volume",
        "Time,Open,High,Low,Close,adjusted close,Volume"}) {
    const std::string text = std::string(header) +
                             "\n\"2010-01-04\",1116.56,1133.87,1116.56,1132.99,\"1,000.01\","
                             "3991400000\n2010-01-05,1132.66,1136.63,1129.66,1136.52,1000.02,"
                             "2491020000\n";
    EXPECT_TRUE(same_bars(expected, parse_bars_csv(text, "q"))) << text;
  }
  // yfinance history: Dividends and Stock Splits are ignored too.
  const auto yf = parse_bars_csv(
      "Date,Open,High,Low,Close,Volume,Dividends,Stock Splits\n"
      "2010-01-04,1116.56,1133.87,1116.56,1132.99,3991400000,0,0\n"
      "2010-01-05,1132.66,1136.63,1129.66,1136.52,2491020000,0.5,0\n",
      "yf");
  EXPECT_TRUE(same_bars(expected, yf));
}

TEST_F(BarsTest, HeaderSpellingsStayStrict) {
  expect_error("Date,Adj Close\n2010-01-04,10\n", 1,
               "missing column 'close' in header ('Adj Close' is ignored");
  expect_error("Date,Time,Close\n2010-01-04,09:30,10\n", 1,
               "duplicate column 'Time' in header (field 1 'Date' is also the timestamp)");
  expect_error("Date,Close,Symbol\n2010-01-04,10,SPX\n", 1, "unknown column 'Symbol'");
  expect_error("timestamp,close\n\"1,5\n", 2, "unterminated quote");
  expect_error("timestamp,close\n\"1\"x,5\n", 2, "unexpected text after the closing quote");
}

TEST_F(BarsTest, InvalidDatesReportLineAndFormats) {
  expect_error("Date,Close\n2023-02-27,10\n2023-02-28,10\n2023-02-29,10\n", 4,
               "column 'timestamp': '2023-02-29' is not a timestamp: day 29 not in 01-28");
  expect_error("2024-12-01,10\n2024-13-01,10\n", 2, "month 13 not in 01-12");
  expect_error("2024-03-01 23:00,10\n2024-03-01 24:00,10\n", 2, "hour 24 not in 00-23");
  expect_error("timestamp,close\n2024-03-01,10\n03/02/2024,10\n", 3,
               "column 'timestamp': '03/02/2024' is not a timestamp (accepted: Unix seconds, Unix "
               "milliseconds, ISO 8601 date YYYY-MM-DD, datetime "
               "YYYY-MM-DD[ T]HH:MM[:SS[.fff]][Z|(+|-)HH[:MM]])");
  // The path of a loaded file is the source in the message.
  TempDir dir;
  const std::string path = dir.file("f.csv");
  write_file_atomic(path, "Date,Close\n2024-03-01,10\n2024-03-01T10:00+2,10\n");
  try {
    load_bars_csv(path);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":3: column 'timestamp': '2024-03-01T10:00+2'"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(BarsTest, MixedTimestampFormatsReportLine) {
  expect_error("timestamp,close\n1709285400,10\n1709285460,11\n1709285520000,12\n", 4,
               "'1709285520000' is Unix milliseconds but line 2 is Unix seconds");
  expect_error("1709285400000,10\n1709285460,11\n", 2,
               "'1709285460' is Unix seconds but line 1 is Unix milliseconds");
  expect_error("2024-03-01,10\n1709337600,11\n", 2, "is Unix seconds but line 1 is ISO 8601");
  // Date-only and datetime ISO 8601 may mix (both are ISO 8601); order is still checked.
  EXPECT_EQ(parse_bars_csv("2024-03-01,10\n2024-03-01T12:00,11\n", "a").bars[1].timestamp,
            1709251200 + 12 * 3600);
  expect_error("2024-03-01T12:00Z,10\n2024-03-01T13:00+02:00,11\n", 2, "not after the previous");
}

// ---- writing -------------------------------------------------------------------------------

TEST_F(BarsTest, LineReaderGivesTheSameBarsAsTheFileParser) {
  SyntheticOptions o;
  o.bars = 500;
  o.seed = 4;
  const auto series = generate_synthetic(o);
  const std::string text = "\xEF\xBB\xBF" + bars_to_csv(series);
  BarCsvReader reader("feed");
  std::vector<Bar> got;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    auto bar = reader.read_line(std::string_view(text).substr(pos, nl - pos));
    if (bar) got.push_back(*bar);
    pos = nl + 1;
  }
  const auto want = parse_bars_csv(text, "feed").bars;
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].timestamp, want[i].timestamp);
    EXPECT_EQ(got[i].close, want[i].close);
    EXPECT_EQ(got[i].volume, want[i].volume);
  }
  EXPECT_EQ(reader.line_number(), 501);
  // A bad line is an error naming it; the reader continues with the next line.
  EXPECT_THROW(reader.read_line("9999999999,1,1,0.5,x,1"), InputError);
  try {
    reader.read_line("2000000000,1,1,2,1,1");  // low > high
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("feed:503"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(reader.read_line("2000000001,1,1.5,0.5,1,1").has_value());
  EXPECT_FALSE(reader.read_line("   ").has_value());
}

}  // namespace
}  // namespace foxhunt::data
