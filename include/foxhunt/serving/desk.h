#pragma once
/// \file desk.h
/// The desk: the ensemble's models serving a universe of instruments at once. One copy of each
/// model's weights; per instrument its own state (streaming features, each model's input
/// history, the position held and its entry price), created on the symbol's first bar. For each
/// timestamp, the instruments that have a new bar are forwarded as ONE batch per model
/// (cross-instrument batching), the models concurrently on the desk's thread pool.
///
/// Equal to serving each instrument alone: every instrument's inputs are built from its own
/// state only, and a batch row does not depend on the other rows, so an instrument's signals and
/// decisions equal those of a desk serving that instrument alone (desk_test.cpp checks 1e-6 on
/// the real S&P 500 / NASDAQ / WTI panel). A model with a cached per-bar stage
/// (`ServingModel::cached_width`: the TFT's past variable selection) runs it once per bar for
/// all instruments in one batch and keeps its output per instrument, then runs the rest on the
/// batch of windows (`forward_cached`), as its single-instrument stream does; other models run
/// their full-window forward on the batch. With DeskOptions::streams each instrument runs the
/// models' own O(window) streams instead (models::ModelStream), equal to the forward to 1e-5:
/// the single-series Ensemble is a desk of one in that mode (serving.h), and desk_test.cpp
/// checks the batched desk against it on one instrument.
///
/// Symbols, normalisers and the TFT's instrument id: a bundle trained on one series serves every
/// symbol with its own instrument id and normaliser, so the desk serves any symbol. A bundle
/// trained on a panel (`train --data panel.csv`) holds each instrument's normaliser, target scale
/// and id (Bundle::instruments): the desk serves each symbol with its own, and refuses a symbol
/// the bundle was not trained on (InputError naming the symbols it knows; nothing changes),
/// because there is no normaliser or id fitted for it and guessing one would serve numbers the
/// model never saw. A symbol first seen mid-stream starts warming up on its first bar.
///
/// Memory: an instrument's state is declared to the ledger under the external tag
/// "instrument_state" (memory/ledger.h) as it is created, against the enforced cap, so a
/// universe that does not fit is refused with OutOfMemoryError before its state exists;
/// `state_bytes()` is the total. Batched forwards allocate through LibTorch as usual (per model
/// scope when memory scopes are on).

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "foxhunt/data/bars.h"
#include "foxhunt/models/streaming.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::serving {

/// The ledger's external tag of the desk's per-instrument state.
inline constexpr const char* kInstrumentStateTag = "instrument_state";

/// One instrument's bar at a timestamp.
struct SymbolBar {
  std::string symbol;  ///< the instrument (non-empty)
  data::Bar bar;       ///< its bar
  /// Its flow, for a bar built from a tape (data/tape_bars.h): required by a desk whose bundles
  /// were trained on tape bars (Bundle::flow_features), refused by one whose bundles were not.
  std::optional<data::BarFlow> flow = std::nullopt;
};

/// One instrument's result at a timestamp.
struct InstrumentDecision {
  std::string symbol;    ///< the instrument
  BarDecision decision;  ///< its signals, decision and position (latency: the whole timestamp)
};
/// JSON line of `predict --json` on a panel: to_json(BarDecision) plus a "symbol" key.
nlohmann::json to_json(const InstrumentDecision& d);

/// How a desk runs.
struct DeskOptions {
  /// Run the models concurrently (true) or one by one.
  bool parallel = true;
  /// Run each model's step under the ledger scope named after the model (exact per-model bytes).
  bool memory_scopes = false;
  /// Largest batch per forward (0: every instrument of a timestamp in one batch); larger
  /// timestamps are forwarded in chunks of this many instruments.
  int64_t max_batch = 0;
  /// Each instrument runs its own O(window)-per-bar stream of every model that has one
  /// (models::ServingModel::make_stream: Mamba-2's recurrent step, the TFT's stream), instead of
  /// one batched forward per model: the lowest latency for one instrument (the Ensemble), while
  /// a batch wins for many. Equal to the batched forward to 1e-5 (models/streaming.h).
  bool streams = false;
  /// Add each model's explanation (its variable selection and attention, where it has them) to
  /// its signal: one more forward per instrument and bar.
  bool explain = false;
  /// An invalid bar's InputError names its symbol ("symbol 'X': ..."); off, the feature
  /// engine's own message is thrown as it is (a desk of one instrument: the Ensemble).
  bool name_symbol_in_errors = true;
};

/// Many instruments through one set of models (see the file comment).
class Desk {
 public:
  /// Loads DIR/<model>/bundle.fhb for every catalog model (as Ensemble::load).
  /// Without a rule: ensemble_rule(dir) (DIR/rule.json when there is one, else the defaults).
  static Desk load(const std::string& dir, std::optional<DecisionRule> rule = std::nullopt,
                   const torch::Device& device = torch::kCPU, const DeskOptions& options = {});
  /// A desk over already loaded bundles (any subset of the models, any order); the rule is
  /// resolved against them (resolve_rule). InputError when the bundles disagree on
  /// Bundle::flow_features (some trained on bars built from a tape, some on bar CSVs).
  explicit Desk(std::vector<Bundle> bundles, const DecisionRule& rule = {},
                const DeskOptions& options = {});
  ~Desk();
  Desk(Desk&&) noexcept;

  /// Feeds the bars of one timestamp: at most one per symbol, every bar's timestamp equal to
  /// `timestamp`. Returns one decision per bar, in the order of `bars`. Throws InputError for a
  /// duplicated or empty symbol, a bar at another timestamp, an invalid bar (NaN, a
  /// non-positive price, a timestamp not after the symbol's previous bar) or flow, or a bar
  /// without a flow on a desk of flow_features() (with one on a desk without), naming the
  /// symbol; nothing changes then (every bar is checked before any state changes).
  std::vector<InstrumentDecision> on_timestamp(int64_t timestamp,
                                               const std::vector<SymbolBar>& bars);
  /// The checks on_timestamp makes before any state changes (the same InputErrors), without
  /// feeding the bars.
  void check(int64_t timestamp, const std::vector<SymbolBar>& bars) const;

  /// True when the bundles were trained on bars built from a tape (Bundle::flow_features): every
  /// bar needs its flow (SymbolBar::flow).
  bool flow_features() const;
  /// Instruments seen so far.
  int64_t instruments() const;
  /// Their symbols, in the order of their first bar.
  std::vector<std::string> symbols() const;
  /// True when `symbol` has state on the desk.
  bool has_symbol(const std::string& symbol) const;
  /// Position held by `symbol` (0 for a symbol never seen).
  double position(const std::string& symbol) const;
  /// Bars `symbol` was fed (0 for a symbol never seen).
  int64_t bars_seen(const std::string& symbol) const;
  /// Bytes of every instrument's state (features, model histories, bookkeeping), as declared to
  /// the ledger under kInstrumentStateTag.
  uint64_t state_bytes() const;
  /// Bars an instrument needs before every model is ready (feature warm-up plus the longest
  /// window, plus one).
  int64_t warmup_bars() const;
  /// The served models' names, in order.
  std::vector<std::string> model_names() const;
  /// The served models in the order the next timestamp hands them out: the costliest on the
  /// previous timestamp first (the calling thread runs it), the bundles' order before any.
  std::vector<std::string> dispatch_order() const;
  /// The decision rule.
  const DecisionRule& rule() const;
  /// Runs the models one by one (false) or concurrently (true).
  void set_parallel(bool parallel);
  /// DeskOptions::explain.
  void set_explain(bool on);
  /// DeskOptions::memory_scopes.
  void set_memory_scopes(bool on);
  /// Removes every instrument's state (bytes withdrawn from the ledger).
  void clear();
  /// Adds each of `symbols` as an instrument whose state is a copy of `source`'s (features,
  /// every model's history, position), with its own calibration: a universe warmed up at the
  /// cost of the instruments it copies, for capacity runs (desk_capacity.h), where the bytes
  /// matter and the copies' forecasts do not. Each copy is declared to the ledger before it is
  /// built and kept as soon as it exists (an OutOfMemoryError under the cap leaves the copies
  /// made before it). InputError, nothing added, for a source not on the desk, a symbol empty,
  /// repeated or already there (or not known to a panel bundle), or a desk running
  /// per-instrument streams (DeskOptions::streams: a stream is not copied).
  void replicate(const std::string& source, const std::vector<std::string>& symbols);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Stable shard of a symbol: FNV-1a 64 of its bytes (core/hash.h) modulo `shards` (the same on
/// every machine and run). Throws InputError unless shards >= 1.
int64_t symbol_shard(const std::string& symbol, int64_t shards);

}  // namespace foxhunt::serving
