#pragma once
/// \file tape.h
/// The tape: trade prints as they happened (a timestamp to the nanosecond, a price, a size,
/// optionally the aggressor side, the best bid and ask, a symbol and a trade id), held in columns,
/// and the strict reader of tape CSVs. Bars are built from a tape by data/bar_builder.h.
/// Torch-free.
///
/// Tape CSV format (comma separated, one print per line, blank lines ignored, `\n` or `\r\n`
/// line ends, a leading UTF-8 byte-order mark skipped, fields optionally in double quotes):
/// - A header is required. Names are case-insensitive with blanks, `_`, `.` and `-` ignored:
///   - timestamp (required): `timestamp`, `datetime` (`date_time`), `time`, `date`, `ts`;
///   - price (required): `price`, `last`, `trade price`, `last price`;
///   - size (required): `size`, `volume`, `qty`, `quantity`, `trade size`;
///   - side (optional, the aggressor): `side`, `aggressor`, `aggressor side`; values `buy`/`sell`,
///     `B`/`S`, `1`/`+1`/`-1` (any case), and `0` or an empty field for unknown;
///   - quotes (optional, both or neither): `bid` (`bid price`, `best bid`) and `ask`
///     (`ask price`, `best ask`, `offer`); an empty field is an unknown quote (NaN);
///   - symbol (optional, a panel of tapes): `symbol`, `ticker`, `instrument`;
///   - trade id (optional): `trade id`, `id`, `seq`, `sequence`, `seq no`: an integer.
///   Any other column is an error (a typo must not silently drop data).
/// - Timestamps: ISO 8601 `YYYY-MM-DD HH:MM:SS[.f]` (a space or `T` between date and time, 1 to
///   9 fraction digits, an optional `Z`; UTC), or Unix epoch numbers (an optional fraction) in the
///   unit TapeReadOptions::epoch_unit states; by default the unit follows from the first print's
///   magnitude (TapeEpochUnit::kAuto) and every later number must have the same magnitude. One
///   file uses one format. Years 1678 to 2261 (int64 nanoseconds).
/// - Prints with equal timestamps keep the file's order; identical consecutive lines are separate
///   prints (several fills at one price in one millisecond), never merged.
/// - Malformed lines (a wrong field count, text that is not a number or a timestamp, a non-finite
///   number, a positive price, size or quote outside [kTapeMinValue, kTapeMaxValue], an unknown
///   side) are always refused. Bad prints are refused, or with
///   TapeBadPrintPolicy::kDrop dropped and counted by reason (TapeDrops): a print earlier than the
///   one before it (of the same symbol), a non-positive price or size (or quote), a crossed quote
///   (bid > ask), a repeated trade id (of the same symbol).
/// Errors are InputError "[tape] FILE:LINE: reason (expected ...)".

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace foxhunt::data {

/// The range of a positive price, size or quote (1e-100 to 1e100): any sum of price * size over
/// a tape's prints then stays finite and nonzero.
inline constexpr double kTapeMinValue = 1e-100;
/// See kTapeMinValue.
inline constexpr double kTapeMaxValue = 1e100;

/// The aggressor of a print: who crossed the spread.
enum class Side : int8_t { kSell = -1, kUnknown = 0, kBuy = 1 };

/// One print, as the line reader returns it and the bar builder takes it.
struct Print {
  int64_t time_ns = 0;   ///< Unix time in nanoseconds (UTC)
  double price = 0.0;    ///< trade price (> 0)
  double size = 0.0;     ///< traded quantity (> 0)
  int8_t side = 0;       ///< +1 buy, -1 sell, 0 unknown (Side as a number)
  int32_t symbol = 0;    ///< symbol id (0 for a single-instrument tape)
  double bid = 0.0;      ///< best bid (NaN when unknown or when the tape has no quotes)
  double ask = 0.0;      ///< best ask (NaN when unknown or when the tape has no quotes)
  int64_t trade_id = 0;  ///< trade id (0 when the tape has none)
};

/// Why a bad print was dropped (TapeBadPrintPolicy::kDrop).
enum class TapeDropReason : int {
  kOutOfOrder = 0,    ///< earlier than the previous print of its symbol
  kNonPositivePrice,  ///< price <= 0 (or a quote <= 0)
  kNonPositiveSize,   ///< size <= 0
  kCrossedQuote,      ///< bid > ask
  kRepeatedTradeId,   ///< a trade id already seen for its symbol
  kCount
};

/// "out_of_order", "non_positive_price", "non_positive_size", "crossed_quote",
/// "repeated_trade_id".
const char* to_string(TapeDropReason reason);

/// Prints dropped by the reader, per reason.
struct TapeDrops {
  std::array<int64_t, static_cast<size_t>(TapeDropReason::kCount)> count{};  ///< by reason
  int64_t first_line = 0;  ///< 1-based line of the first dropped print (0: none)

  /// All dropped prints.
  int64_t total() const;
  /// The count of one reason.
  int64_t operator[](TapeDropReason r) const { return count[static_cast<size_t>(r)]; }
};

/// A tape in columns: element i of every present column is print i. Optional columns are empty
/// when the file has no such column.
struct Tape {
  std::vector<int64_t> time_ns;      ///< Unix nanoseconds, non-decreasing per symbol
  std::vector<double> price;         ///< > 0
  std::vector<double> size;          ///< > 0
  std::vector<int8_t> side;          ///< +1, -1, 0 (empty: no side column)
  std::vector<double> bid;           ///< NaN where unknown (empty: no quote columns)
  std::vector<double> ask;           ///< NaN where unknown (empty: no quote columns)
  std::vector<int32_t> symbol;       ///< index into `symbols` (empty: no symbol column)
  std::vector<std::string> symbols;  ///< names sorted in byte order (empty: no symbol column)
  std::vector<int64_t> trade_id;     ///< (empty: no trade id column)
  std::string source;                ///< file path or the caller's label
  TapeDrops dropped;                 ///< prints the reader dropped (kDrop policy)

  /// Number of prints.
  int64_t size_prints() const { return static_cast<int64_t>(time_ns.size()); }
  /// Number of symbols (1 without a symbol column).
  int64_t symbol_count() const;
  /// Print i as a Print (absent columns read as their Print defaults, quotes as NaN).
  Print at(int64_t i) const;
};

/// What the reader does with a bad print (see the file comment).
enum class TapeBadPrintPolicy {
  kRefuse,  ///< InputError naming FILE:LINE (the default)
  kDrop,    ///< dropped and counted in Tape::dropped
};

/// The unit of Unix epoch timestamps.
enum class TapeEpochUnit {
  kAuto,  ///< from the first print's magnitude: < 1e11 s, < 1e14 ms, < 1e17 us, else ns
  kSeconds,
  kMilliseconds,
  kMicroseconds,
  kNanoseconds,
};

/// How a tape is read.
struct TapeReadOptions {
  /// Refuse or drop bad prints.
  TapeBadPrintPolicy on_bad = TapeBadPrintPolicy::kRefuse;
  /// The unit of epoch-number timestamps (ISO timestamps need none).
  TapeEpochUnit epoch_unit = TapeEpochUnit::kAuto;
};

/// True when a CSV header line names a tape: a timestamp, a price and a size column (tape.h
/// spellings) and no bar column (`open`, `high`, `low`, `close`). Never throws.
bool is_tape_csv(std::string_view header_line);

/// True when the text's first non-blank line is a tape header (is_tape_csv). Never throws.
bool has_tape_header(std::string_view text);

/// Incremental reader for live feeds: one line at a time, with the format, checks and policy of
/// parse_tape_csv. Symbol ids are given in order of first appearance (parse_tape_csv renumbers
/// them in byte order at the end).
class TapeCsvReader {
 public:
  /// `source` names the input in errors ("source:line: reason").
  explicit TapeCsvReader(std::string source, TapeReadOptions options = {});
  ~TapeCsvReader();
  TapeCsvReader(TapeCsvReader&&) noexcept;
  TapeCsvReader& operator=(TapeCsvReader&&) noexcept;

  /// Parses the next line (without its newline; a trailing CR is dropped). Returns the print, or
  /// nothing for a blank line, the header or a dropped print. Throws InputError "[tape]
  /// source:line: reason"; the reader's state is unchanged by a refused line.
  std::optional<Print> read_line(std::string_view line);
  /// 1-based number of the last line read.
  int64_t line_number() const;
  /// True once the header was read.
  bool has_header() const;
  /// True when the header has a side / quote / symbol / trade id column.
  bool has_side() const;
  bool has_quotes() const;
  bool has_symbol() const;
  bool has_trade_id() const;
  /// Symbol names by id (order of first appearance).
  const std::vector<std::string>& symbols() const;
  /// Prints dropped so far.
  const TapeDrops& dropped() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Parses tape CSV text (see the file comment). `source` names the input in errors and is
/// stored in the result. One pass over the buffer (no copy per line or field).
Tape parse_tape_csv(std::string_view text, const std::string& source,
                    const TapeReadOptions& options = {});

/// Reads and parses a tape CSV file; errors name the path and the 1-based line.
Tape load_tape_csv(const std::string& path, const TapeReadOptions& options = {});

/// `ns` Unix nanoseconds as "YYYY-MM-DDTHH:MM:SS[.fff[fff[fff]]]Z" (UTC; the fraction in groups
/// of 3 digits, as many as needed). Example: 1378054800083000000 -> "2013-09-01T17:00:00.083Z".
std::string format_time_ns(int64_t ns);

/// Options of summarize_tape.
struct TapeSummaryOptions {
  /// A gap is more than this many seconds without a print (of any symbol); gaps separate
  /// sessions.
  double gap_seconds = 1800.0;
};

/// A span of the tape without a gap.
struct TapeSession {
  int64_t first_ns = 0;  ///< first print
  int64_t last_ns = 0;   ///< last print
  int64_t prints = 0;    ///< prints in it
};

/// One symbol's line of the summary.
struct TapeSymbolSummary {
  std::string symbol;            ///< its name ("" without a symbol column)
  int64_t prints = 0;            ///< its prints
  int64_t first_ns = 0;          ///< its first print
  int64_t last_ns = 0;           ///< its last print
  double volume = 0.0;           ///< its traded size
  double first_price = 0.0;      ///< its first price
  double last_price = 0.0;       ///< its last price
  double min_price = 0.0;        ///< its lowest price
  double max_price = 0.0;        ///< its highest price
  double price_increment = 0.0;  ///< smallest positive change between consecutive prices (0: none)
};

/// What `foxhunt data inspect` prints for a tape.
struct TapeSummary {
  int64_t prints = 0;                     ///< prints read
  int64_t first_ns = 0;                   ///< first print (of any symbol)
  int64_t last_ns = 0;                    ///< last print
  double span_seconds = 0.0;              ///< last - first
  double gap_seconds = 0.0;               ///< the gap threshold used
  std::vector<TapeSession> sessions;      ///< in time order
  double median_prints_per_second = 0.0;  ///< over the seconds with at least one print
  double p99_prints_per_second = 0.0;     ///< 99th percentile, same seconds (stats.h percentile)
  int64_t max_prints_per_second = 0;      ///< busiest second
  /// Share of consecutive prints (file order) in the same millisecond: (prints i-1, i) pairs
  /// whose floor(time / 1 ms) are equal, over prints - 1.
  double same_millisecond_share = 0.0;
  /// Prints equal to the one before them in every column (time, price, size, side, quotes,
  /// symbol): the repeated lines of a tape, kept as separate prints.
  int64_t identical_consecutive = 0;
  /// Smallest price increment over the symbols (0: no price ever changed).
  double price_increment = 0.0;
  double volume = 0.0;                     ///< total traded size
  bool has_side = false;                   ///< the tape gives the aggressor
  bool has_quotes = false;                 ///< the tape gives bid and ask
  bool has_trade_id = false;               ///< the tape has a trade id column
  std::vector<TapeSymbolSummary> symbols;  ///< per symbol, in the tape's symbol order
  TapeDrops dropped;                       ///< the reader's drops
};

/// Summarises a non-empty tape (InputError for an empty one). Out-of-order prints across symbols
/// are allowed: the span and the per-second counts use each print's own time.
TapeSummary summarize_tape(const Tape& tape, const TapeSummaryOptions& options = {});

}  // namespace foxhunt::data
