#pragma once
/// \file bars.h
/// Market bars: the in-memory series, a strict CSV reader/writer and the seeded synthetic
/// generator that is the product's embedded default data. Torch-free.
///
/// CSV format (comma separated, one bar per line, blank lines ignored, `\n` or `\r\n` line ends,
/// a leading UTF-8 byte-order mark skipped):
/// - Fields may be enclosed in double quotes (`"2024-03-01"`); the quotes are removed and a comma
///   inside them is part of the field. Blanks around fields are ignored.
/// - With a header (first line whose fields all start with a letter and name at least one known
///   column): columns in any order, names case-insensitive with blanks, `_`, `.` and `-` ignored:
///   `timestamp` (also `date`, `datetime`, `time`), `open`, `high`, `low`, `close`, `volume`.
///   `close` is required; `open`, `high`, `low` come all together or not at all; `timestamp` and
///   `volume` are optional. Two names for one column (`Date,Time`) are a duplicate-column error.
/// - Known columns the reader does not use are ignored: `adj close` (`Adj Close`, `Adj_Close`,
///   `AdjClose`, `Adjusted Close`), `dividends`, `stock splits` (Yahoo / yfinance exports). The
///   unadjusted `close` is always the price; a file with `Adj Close` but no `Close` is an error.
///   The flow columns of bars built from a tape (tape_bars.h: `vwap`, `prints`, `buy_volume`,
///   `sell_volume`, `duration`, `realized_variance`, `start_ns`, `end_ns`) are ignored too.
///   Any other column name is an error (a typo must not silently drop data).
/// - Without a header the column count decides: 6 = timestamp,open,high,low,close,volume;
///   2 = timestamp,close; 1 = close.
/// - Close-only input (no open/high/low) is accepted and marked `close_only`: open = high = low =
///   close. A missing volume column reads as volume 0. A missing timestamp column gives synthetic
///   timestamps `i * kDefaultBarSeconds` (i = 0, 1, ...).
/// - Timestamps (see parse_timestamp) are read into Unix seconds and must strictly increase, so
///   daily and intraday bars both work. One file uses one timestamp format: Unix seconds, Unix
///   milliseconds or ISO 8601; mixing them is an error naming the line.
/// - Prices are finite and > 0, low <= open, close <= high; volume is finite and >= 0.
/// Every violation throws foxhunt::InputError "[bars] FILE:LINE: reason"; nothing is returned
/// half-loaded.
/// Many instruments in one file (a symbol column) are a panel: data/panel.h reads them; this
/// single-series reader rejects a symbol column as an unknown column.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace foxhunt::data {

/// Spacing of synthetic timestamps for CSV files without a timestamp column.
inline constexpr int64_t kDefaultBarSeconds = 60;

/// One OHLCV bar. `timestamp` is Unix time in seconds (the bar's start).
struct Bar {
  int64_t timestamp = 0;  ///< Unix seconds
  double open = 0.0;      ///< first trade price
  double high = 0.0;      ///< highest price
  double low = 0.0;       ///< lowest price
  double close = 0.0;     ///< last trade price
  double volume = 0.0;    ///< traded quantity (>= 0)
};

/// What a bar built from a tape knows beyond OHLCV (tape_bars.h builds it from the prints;
/// flow_features.h turns it into the flow feature columns).
struct BarFlow {
  int64_t interval_start_ns = 0;   ///< time bars: the interval's start; others: first print
  int64_t start_ns = 0;            ///< first print
  int64_t end_ns = 0;              ///< last print
  double vwap = 0.0;               ///< volume-weighted average price
  double notional = 0.0;           ///< sum of price * size
  int64_t prints = 0;              ///< number of prints
  double buy_volume = 0.0;         ///< buyer-initiated size (side, else the tick rule)
  double sell_volume = 0.0;        ///< seller-initiated size
  double duration_seconds = 0.0;   ///< last print - first print
  double realized_variance = 0.0;  ///< sum of squared log returns between the bar's prints

  bool operator==(const BarFlow&) const = default;
};

/// A chronological series of bars from one instrument.
struct BarSeries {
  std::vector<Bar> bars;    ///< strictly increasing timestamps
  bool close_only = false;  ///< true when open/high/low were derived from close
  std::string source;       ///< file path, "synthetic(seed=...)" or a caller's label
  /// Bars built from a tape: element i is the flow of bars[i] (data/flow_features.h adds its
  /// columns to the model inputs). Empty for bars read from a bar CSV or generated.
  std::vector<BarFlow> flow = {};

  /// Number of bars.
  int64_t size() const { return static_cast<int64_t>(bars.size()); }
  /// True when every bar carries its flow (a series built from a tape).
  bool has_flow() const { return !flow.empty(); }
  /// Close prices in order.
  std::vector<double> closes() const;
};

/// The timestamp formats parse_timestamp accepts, as error messages list them.
inline constexpr const char* kTimestampFormats =
    "Unix seconds, Unix milliseconds, ISO 8601 date YYYY-MM-DD, "
    "datetime YYYY-MM-DD[ T]HH:MM[:SS[.fff]][Z|(+|-)HH[:MM]]";

/// Integers with |value| >= this are Unix milliseconds, smaller ones Unix seconds (1e11 s is the
/// year 5138; 1e11 ms is 1973-03-03, so millisecond data from before 1973-03-03 is misread).
inline constexpr int64_t kMillisecondThreshold = 100'000'000'000;

/// Parses one timestamp into Unix seconds (UTC). Accepted, surrounding blanks ignored:
/// - an integer: Unix seconds, or Unix milliseconds when |value| >= kMillisecondThreshold
///   (floored to the second);
/// - an ISO 8601 date `YYYY-MM-DD` (midnight UTC);
/// - an ISO 8601 datetime `YYYY-MM-DD` + `T` or a space + `HH:MM`, optional `:SS`, optional
///   fraction `.fff` (any number of digits, truncated to the second), then optionally `Z` or a
///   UTC offset `+HH:MM`, `+HHMM`, `+HH` (or `-`). A datetime without `Z` or an offset is UTC.
/// Fields are range-checked (proleptic Gregorian calendar, leap years included): month 01-12,
/// day valid for the month, hour 00-23, minute and second 00-59 (no leap second 60), offset at
/// most 14:00 with minutes 00-59. Example: `2024-03-01T09:30:00+02:00` -> 1709278200.
/// Throws InputError "[bars] 'TEXT' is not a timestamp[: reason] (accepted: ...)".
int64_t parse_timestamp(std::string_view text);

/// The inverse of parse_timestamp for tables and reports: Unix seconds `t` as
/// "YYYY-MM-DDTHH:MM:SSZ" (UTC, proleptic Gregorian; years before 0 or after 9999 print with
/// more digits or a sign). Example: 1709285400 -> "2024-03-01T09:30:00Z".
std::string format_timestamp(int64_t t);

/// Incremental CSV reader for live feeds (`foxhunt predict` on a file or stdin): one line at a
/// time, with the same header detection, layouts, timestamp formats and per-bar value checks as
/// parse_bars_csv. The order of bars (increasing timestamps) is the caller's to check: a serving
/// runtime rejects or skips such bars itself.
class BarCsvReader {
 public:
  /// `source` names the input in errors ("source:line: reason").
  explicit BarCsvReader(std::string source);
  ~BarCsvReader();
  BarCsvReader(BarCsvReader&&) noexcept;
  BarCsvReader& operator=(BarCsvReader&&) noexcept;

  /// Parses the next line (without its newline; a trailing CR is dropped). Returns the bar, or
  /// nothing for a blank or header line. Throws InputError "[bars] source:line: reason"; the
  /// reader stays usable for the following lines.
  std::optional<Bar> read_line(std::string_view line);
  /// 1-based number of the last line read.
  int64_t line_number() const;
  /// 1-based line of the header (0: none seen).
  int64_t header_line() const;
  /// True once the column layout is known (after a header or the first bar).
  bool has_layout() const;
  /// True for close-only input (no open/high/low columns).
  bool close_only() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Parses CSV text (see the file comment for the format). `source` names the input in errors
/// ("source:line: reason") and is stored in the result.
BarSeries parse_bars_csv(std::string_view text, const std::string& source);

/// Reads and parses a CSV file; errors name the path and the 1-based line.
BarSeries load_bars_csv(const std::string& path);

/// Formats a series as CSV with a header: `timestamp,close` for close-only series, the six
/// columns otherwise. Numbers use the shortest text that reads back to the same double, so
/// load(write(x)) == x exactly.
std::string bars_to_csv(const BarSeries& series);

/// Validates and writes a series atomically (core/file_io.h).
void write_bars_csv(const std::string& path, const BarSeries& series);

/// Checks the invariants of the CSV format on an in-memory series (non-empty, increasing
/// timestamps, finite positive prices, low <= open/close <= high, volume >= 0; a flow, when
/// present, for every bar). Throws InputError "[bars] SOURCE: bar I: reason".
void validate_bars(const BarSeries& series);

/// Close-to-close log returns: element i is log(close[i] / close[i-1]); element 0 is 0.
std::vector<double> log_returns(const BarSeries& series);

/// One volatility/drift state of the synthetic market (per-bar units).
struct Regime {
  double drift = 0.0;        ///< mean log return per bar
  double volatility = 5e-4;  ///< long-run std of the diffusive log return per bar
};

/// Options of the synthetic generator: a Markov regime-switching random walk in log price with
/// GARCH(1,1)-style volatility clustering, compound-Poisson jumps and a U-shaped intraday volume
/// profile. Deterministic for a seed on every platform (own uniform/normal transforms over
/// std::mt19937_64).
struct SyntheticOptions {
  /// Number of bars to generate.
  int64_t bars = 20000;
  /// Seed of the only random stream.
  uint64_t seed = 42;
  /// Timestamp of the first bar (default 2024-01-01T00:00:00Z, a Monday).
  int64_t start_timestamp = 1704067200;
  /// Seconds between bars.
  int64_t bar_seconds = 60;
  /// Open of the first bar.
  double initial_price = 100.0;
  /// Price grid; prices are rounded to multiples of it (0 keeps full precision).
  double tick_size = 1e-4;
  /// Regimes the market switches between: calm uptrend, range, stressed downtrend by default.
  std::vector<Regime> regimes = {{2e-5, 4e-4}, {0.0, 8e-4}, {-3e-5, 1.6e-3}};
  /// Probability of staying in the current regime each bar (else a uniformly chosen other one).
  double regime_persistence = 0.998;
  /// GARCH(1,1) reaction to the previous squared shock (variance multiplier has mean 1).
  double garch_alpha = 0.08;
  /// GARCH(1,1) persistence of the variance multiplier; alpha + beta must be < 1.
  double garch_beta = 0.90;
  /// Probability of a jump per bar.
  double jump_probability = 0.002;
  /// Mean log jump size.
  double jump_mean = -0.001;
  /// Std of the log jump size.
  double jump_volatility = 0.01;
  /// Wick size: high/low extend |N(0,1)| * wick * sigma beyond the body.
  double wick = 0.5;
  /// Average volume per bar.
  double base_volume = 1000.0;
  /// Depth of the U-shaped time-of-day volume profile (0 = flat; 1.5 = 2.5x at the day's ends).
  double volume_u_amplitude = 1.5;
  /// Extra volume per unit of |standardised return| (volume follows volatility).
  double volume_return_sensitivity = 0.3;
  /// Std of the log-normal volume noise.
  double volume_noise = 0.3;
};

/// Generates a synthetic series. When `regimes_out` is given it receives the regime index of every
/// bar. Throws InputError "[bars] ..." for invalid options.
BarSeries generate_synthetic(const SyntheticOptions& options,
                             std::vector<int>* regimes_out = nullptr);

/// Summary of a series (what `foxhunt data inspect` prints).
struct BarSummary {
  int64_t rows = 0;                  ///< number of bars
  int64_t first_timestamp = 0;       ///< timestamp of the first bar
  int64_t last_timestamp = 0;        ///< timestamp of the last bar
  int64_t median_bar_seconds = 0;    ///< median spacing of timestamps (0 for one bar)
  bool close_only = false;           ///< open/high/low derived from close
  double first_close = 0.0;          ///< close of the first bar
  double last_close = 0.0;           ///< close of the last bar
  double min_close = 0.0;            ///< lowest close
  double max_close = 0.0;            ///< highest close
  double total_volume = 0.0;         ///< sum of volumes
  double total_log_return = 0.0;     ///< log(last close / first close)
  double mean_log_return = 0.0;      ///< mean of close-to-close log returns
  double std_log_return = 0.0;       ///< sample std of close-to-close log returns
  double min_log_return = 0.0;       ///< most negative log return
  double max_log_return = 0.0;       ///< largest log return
  double abs_return_autocorr = 0.0;  ///< lag-1 autocorrelation of |returns| (volatility clustering)
};

/// Computes the summary of a non-empty series.
BarSummary summarize_bars(const BarSeries& series);

/// Lag-`lag` sample autocorrelation of `x` (0 when undefined).
double autocorrelation(const std::vector<double>& x, int64_t lag);

}  // namespace foxhunt::data
