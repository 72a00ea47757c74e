#pragma once
/// \file bar_builder.h
/// Bars from prints: the one bar builder that a whole tape (batch) and a live feed (streaming)
/// both go through, so that the two give the same bars, bar for bar. Torch-free.
///
/// The four samplings of López de Prado, *Advances in Financial Machine Learning*, ch. 2:
/// - time bars (`time:60s`): bar k holds the prints in [t0, t0 + period), t0 a multiple of the
///   period since the Unix epoch (UTC), so a 1-minute bar starts on a whole minute whatever the
///   first print. A bar closes when the first print at or after t0 + period arrives (that print
///   opens the next bar), or at flush. An interval without a print gives no bar.
/// - tick bars (`tick:500`): a bar closes with its N-th print.
/// - volume bars (`volume:1000`): a bar closes with the print that brings its volume to N or more.
/// - dollar bars (`dollar:5e6`): a bar closes with the print that brings its notional (sum of
///   price * size, in the tape's price units: no contract multiplier) to N or more.
/// For tick, volume and dollar bars the print that reaches the threshold belongs, whole, to the
/// bar it closes: prints are never split, so a volume bar may hold more than N (López de Prado's
/// construction). The last bar of a tape may be short of its threshold (or its period): flush()
/// returns it, and build_bars keeps it.
///
/// Every bar carries what only the prints know (TapeBar): VWAP, print count, buy and sell
/// volume, its duration and the realised variance of the prints inside it.
/// Buy and sell volume: a print's given side (+1 / -1) decides; where the side is unknown (0, or
/// a tape without a side column), the tick rule does: + when the price rose from the previous
/// print (of the same symbol, in this bar or an earlier one), - when it fell, and the last
/// non-zero sign when it did not move. A print before the first price change has no sign and
/// counts as neither (buy + sell < volume is then possible, in the first bars of a tape).
/// The price changes that feed the tick rule are tracked for every print, side given or not.
///
/// Panels (a tape with a symbol column): one builder per symbol (TapeBarBuilder); each symbol's
/// bars are its own (its tick bars count its own prints). Only time bars share a clock across
/// symbols, so only they make a desk panel (tape_bars.h refuses the others there).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/tape.h"

namespace foxhunt::data {

/// How prints are sampled into bars.
enum class BarKind { kTime, kTick, kVolume, kDollar };

/// "time", "tick", "volume", "dollar".
const char* to_string(BarKind kind);

/// The forms parse_bar_spec accepts, as its errors list them.
inline constexpr const char* kBarSpecForms =
    "time:<N><unit> (unit ms, s, m or h; at least 1 s, e.g. time:60s), tick:<N prints> (e.g. "
    "tick:500), volume:<N> (e.g. volume:1000), dollar:<N notional> (e.g. dollar:5e6)";

/// A bar sampling, written once as text (`time:60s`, `tick:500`, `volume:1000`, `dollar:5e6`).
struct BarSpec {
  BarKind kind = BarKind::kTime;       ///< the sampling
  int64_t period_ns = 60'000'000'000;  ///< time bars: the period (>= 1 s)
  double threshold = 0.0;              ///< tick (a whole number of prints), volume and dollar bars

  bool operator==(const BarSpec&) const = default;
};

/// Parses a spec: `time:<N><unit>` with a whole N and unit `ms`, `s`, `m` or `h` (a period of at
/// least 1 s), `tick:<N>` (a whole N >= 1), `volume:<N>` and `dollar:<N>` (a finite N > 0, e.g.
/// `5e6`); the kind is case-insensitive, blanks around the text ignored. InputError "[bars] bar
/// spec 'TEXT': reason (expected ...)" naming the accepted forms.
BarSpec parse_bar_spec(std::string_view text);

/// The spec as text that parse_bar_spec reads back to an equal spec: a time period in the
/// largest unit that divides it (`time:1m` for 60 s, `time:90s`, `time:1500ms`), thresholds in
/// the shortest text of their value (`dollar:5000000`).
std::string to_string(const BarSpec& spec);

/// One bar of prints: its flow (BarFlow: times, VWAP, notional, prints, buy and sell volume,
/// duration, realized variance) and its symbol and OHLCV. Prices in the tape's units; times are
/// Unix nanoseconds. BarFlow::interval_start_ns is t0 of [t0, t0 + period) for time bars and
/// start_ns for the others; realized_variance sums the squared log returns between consecutive
/// prints inside the bar (the move from the previous bar's last print to this bar's first print
/// belongs to no bar; 0 for one print).
struct TapeBar : BarFlow {
  int32_t symbol = 0;   ///< the tape's symbol id (0 without a symbol column)
  double open = 0.0;    ///< first print's price
  double high = 0.0;    ///< highest price
  double low = 0.0;     ///< lowest price
  double close = 0.0;   ///< last print's price
  double volume = 0.0;  ///< sum of sizes

  bool operator==(const TapeBar&) const = default;
};

/// The streaming bar builder of one instrument. push() is the one step that batch and streaming
/// share.
class BarBuilder {
 public:
  /// InputError for a spec parse_bar_spec would refuse (period < 1 s, threshold <= 0).
  explicit BarBuilder(const BarSpec& spec);

  /// Adds one print; returns the bar it closed, if any (at most one): for time bars the open bar
  /// when this print falls at or after its end (the print opens the next bar), for the others
  /// the bar that this print completes (the print in it). InputError, state unchanged, for a
  /// print earlier than the previous one or with a price or size that is not finite and > 0.
  std::optional<TapeBar> push(const Print& print);
  /// Time bars: closes the open bar when `now_ns` is at or after its end (time passed without a
  /// print); nothing for the other kinds. The bar equals the one the next print would close.
  std::optional<TapeBar> close_until(int64_t now_ns);
  /// Closes the open bar, if any (the end of the tape): a partial bar.
  std::optional<TapeBar> flush();
  /// The spec.
  const BarSpec& spec() const { return spec_; }
  /// True while a bar holds prints.
  bool has_open_bar() const { return bar_.prints > 0; }

 private:
  TapeBar take();

  BarSpec spec_;
  TapeBar bar_;              // the open bar
  int64_t bar_end_ns_ = 0;   // time bars: t0 + period of the open bar
  int64_t last_ns_ = 0;      // the previous print's time
  double last_price_ = 0.0;  // the previous print's price (tick rule)
  bool has_last_ = false;    // a print was seen
  int8_t tick_sign_ = 0;     // the last non-zero price change's sign
};

/// One BarBuilder per symbol id (created as ids appear): the panel of tapes.
class TapeBarBuilder {
 public:
  explicit TapeBarBuilder(const BarSpec& spec);
  /// BarBuilder::push on the print's symbol (p.symbol >= 0); the bar's `symbol` is set.
  std::optional<TapeBar> push(const Print& print);
  /// Time bars: closes every symbol's bar that ends at or before `now_ns`, appended to `out` by
  /// symbol id.
  void close_until(int64_t now_ns, std::vector<TapeBar>& out);
  /// Closes every open bar, appended to `out` by symbol id.
  void flush(std::vector<TapeBar>& out);
  /// The spec.
  const BarSpec& spec() const { return spec_; }

 private:
  BarSpec spec_;
  std::vector<BarBuilder> builders_;
};

/// The bars of a whole tape: every print through one TapeBarBuilder in file order, then a flush
/// (so the result is, bar for bar, what a live feed of the same prints gives). Bars in the order
/// they closed; the flushed ones last, by symbol id.
std::vector<TapeBar> build_bars(const Tape& tape, const BarSpec& spec);

}  // namespace foxhunt::data
