// The C ABI's desk (include/foxhunt/foxhunt.h): a handle over the C++ serving runtime, the
// calls `foxhunt predict` makes. A series desk is serving::Ensemble, as predict serves a bars CSV
// without a symbol column; a panel desk is serving::Desk, as predict serves a panel; so that a
// caller's decisions are predict's, bit for bit.
#include <torch/torch.h>

#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "foxhunt/core/device.h"
#include "foxhunt/core/error.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/tape_bars.h"
#include "foxhunt/foxhunt.h"
#include "foxhunt/memory/runtime_init.h"
#include "foxhunt/models/torch_device.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/serving.h"
#include "guard.h"

/// The handle behind `foxhunt_desk*`: one of the two runtimes, and each instrument's latest
/// decision, which the read calls answer from.
struct foxhunt_desk {
  std::optional<foxhunt::serving::Ensemble> series;  ///< FOXHUNT_DESK_SERIES
  std::optional<foxhunt::serving::Desk> panel;       ///< FOXHUNT_DESK_PANEL
  std::vector<std::string> models;                   ///< the served models, in signal order
  /// Series: the latest decision.
  std::optional<foxhunt::serving::BarDecision> last;
  /// Panel: each symbol's latest decision.
  std::unordered_map<std::string, foxhunt::serving::BarDecision> by_symbol;
  /// Series: the bar spec the bundles record (none: trained on plain bars), the bar builder
  /// foxhunt_desk_push_print feeds, and the previous bar's timestamp (data::tape_bar_to_bar).
  std::optional<foxhunt::data::BarSpec> bar_spec;
  std::optional<foxhunt::data::BarBuilder> builder;
  std::optional<int64_t> previous_bar;
};

namespace foxhunt::capi {
namespace {

// The caller's options over the defaults: only the fields that lie wholly within the caller's
// `size` are read (a caller built with an older, shorter struct keeps the newer fields' defaults).
foxhunt_desk_options read_desk_options(const foxhunt_desk_options* given) {
  foxhunt_desk_options o;
  foxhunt_desk_options_init(&o);
  if (given == nullptr) return o;
  FOXHUNT_CHECK(given->size >= offsetof(foxhunt_desk_options, device) + sizeof(o.device),
                kCapiComponent, "foxhunt_desk_open: options->size: expected ",
                sizeof(foxhunt_desk_options), " (sizeof(foxhunt_desk_options)), got ", given->size,
                ": fill the options with foxhunt_desk_options_init first");
  const size_t n = given->size;
#define FOXHUNT_CAPI_TAKE(field) \
  if (offsetof(foxhunt_desk_options, field) + sizeof(o.field) <= n) o.field = given->field
  FOXHUNT_CAPI_TAKE(device);
  FOXHUNT_CAPI_TAKE(rule_file);
  FOXHUNT_CAPI_TAKE(symbol);
  FOXHUNT_CAPI_TAKE(mode);
  FOXHUNT_CAPI_TAKE(threads);
  FOXHUNT_CAPI_TAKE(serial);
#undef FOXHUNT_CAPI_TAKE
  FOXHUNT_CHECK(o.mode == FOXHUNT_DESK_SERIES || o.mode == FOXHUNT_DESK_PANEL, kCapiComponent,
                "foxhunt_desk_open: options->mode: expected FOXHUNT_DESK_SERIES (0) or "
                "FOXHUNT_DESK_PANEL (1), got ",
                o.mode);
  FOXHUNT_CHECK(o.threads >= 0, kCapiComponent,
                "foxhunt_desk_open: options->threads: expected >= 0 (0 keeps the current "
                "setting), got ",
                o.threads);
  return o;
}

data::Bar to_bar(const foxhunt_bar& b) {
  return {b.timestamp, b.open, b.high, b.low, b.close, b.volume};
}

// The latest decision of `symbol` (ignored on a series desk); InputError when there is none.
const serving::BarDecision& decision_of(const foxhunt_desk& d, const char* symbol,
                                        const char* function) {
  if (d.series) {
    FOXHUNT_CHECK(d.last.has_value(), kCapiComponent, function,
                  ": expected a decision, got none: no bar was accepted yet");
    return *d.last;
  }
  check_not_null(symbol, function, "symbol", "the instrument's symbol (a panel desk)");
  const auto it = d.by_symbol.find(symbol);
  FOXHUNT_CHECK(it != d.by_symbol.end(), kCapiComponent, function, ": symbol '", symbol,
                "': expected an instrument with an accepted bar, got none (the desk has ",
                d.by_symbol.size(), " instruments)");
  return it->second;
}

void push(foxhunt_desk* d, const foxhunt_bar* bars, size_t n, const char* function) {
  check_not_null(d, function, "desk", "a handle from foxhunt_desk_open");
  check_not_null(bars, function, "bars", "a bar");
  FOXHUNT_CHECK(n >= 1, kCapiComponent, function, ": n: expected at least one bar, got 0");
  if (d->series) {
    FOXHUNT_CHECK(n == 1, kCapiComponent, function,
                  ": a series desk (FOXHUNT_DESK_SERIES) takes one bar per timestamp, got ", n,
                  "; open a panel desk (FOXHUNT_DESK_PANEL) for many instruments");
    d->last = d->series->on_bar(to_bar(bars[0]));
    return;
  }
  std::vector<serving::SymbolBar> batch;
  batch.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    FOXHUNT_CHECK(bars[i].symbol != nullptr, kCapiComponent, function, ": bars[", i,
                  "].symbol: expected the instrument's symbol (a panel desk), got NULL");
    batch.push_back({bars[i].symbol, to_bar(bars[i])});
  }
  // The desk checks every bar (one timestamp, one bar per symbol, valid values) before any
  // state changes.
  for (auto& r : d->panel->on_timestamp(bars[0].timestamp, batch))
    d->by_symbol.insert_or_assign(std::move(r.symbol), std::move(r.decision));
}

}  // namespace
}  // namespace foxhunt::capi

extern "C" {

FOXHUNT_API void foxhunt_desk_options_init(foxhunt_desk_options* options) {
  if (options == nullptr) return;
  *options = foxhunt_desk_options{};
  options->size = sizeof(foxhunt_desk_options);
  options->mode = FOXHUNT_DESK_SERIES;
}

FOXHUNT_API foxhunt_status foxhunt_desk_open(const char* bundle_dir,
                                             const foxhunt_desk_options* options,
                                             foxhunt_desk** out) {
  using namespace foxhunt;
  return capi::guarded([&] {
    constexpr const char* kFn = "foxhunt_desk_open";
    capi::check_not_null(out, kFn, "out", "where to write the handle");
    *out = nullptr;
    capi::check_not_null(bundle_dir, kFn, "bundle_dir",
                         "the directory `foxhunt train all --out` wrote");
    runtime_init();  // the accounting allocator and the thread default, before any tensor
    const auto o = capi::read_desk_options(options);
    const Device device = Device::parse(o.device ? o.device : "cpu", capi::kCapiComponent);
    if (o.threads > 0) at::set_num_threads(o.threads);
    // As predict: the rule (the file, else DIR/rule.json, else the defaults), then the bundles.
    const auto rule = serving::ensemble_rule(bundle_dir, o.rule_file ? o.rule_file : "");
    auto bundles = serving::load_ensemble_bundles(bundle_dir, models::to_torch(device));
    const std::string symbol = o.symbol ? o.symbol : "";
    auto d = std::make_unique<foxhunt_desk>();
    if (o.mode == FOXHUNT_DESK_SERIES) {
      if (!symbol.empty()) bundles = serving::select_instrument(std::move(bundles), symbol);
      d->bar_spec = serving::recorded_bar_spec(bundles, bundle_dir);
      d->series.emplace(std::move(bundles), rule);
      d->series->set_parallel(o.serial == 0);
      d->models = d->series->model_names();
    } else {
      FOXHUNT_CHECK(symbol.empty(), capi::kCapiComponent, kFn,
                    ": options->symbol: a panel desk serves each bar's symbol as itself; "
                    "expected NULL, got '",
                    symbol, "'");
      serving::DeskOptions dopt;
      dopt.parallel = o.serial == 0;
      d->panel.emplace(std::move(bundles), rule, dopt);
      d->models = d->panel->model_names();
    }
    *out = d.release();
  });
}

FOXHUNT_API void foxhunt_desk_close(foxhunt_desk* desk) {
  try {
    delete desk;
  } catch (...) {  // nothing may cross the boundary; a destructor that throws is a bug
  }
}

FOXHUNT_API foxhunt_status foxhunt_desk_push_bar(foxhunt_desk* desk, const foxhunt_bar* bar) {
  return foxhunt::capi::guarded(
      [&] { foxhunt::capi::push(desk, bar, 1, "foxhunt_desk_push_bar"); });
}

FOXHUNT_API foxhunt_status foxhunt_desk_push_bars(foxhunt_desk* desk, const foxhunt_bar* bars,
                                                  size_t n) {
  return foxhunt::capi::guarded(
      [&] { foxhunt::capi::push(desk, bars, n, "foxhunt_desk_push_bars"); });
}

FOXHUNT_API foxhunt_status foxhunt_desk_push_print(foxhunt_desk* desk, const foxhunt_print* print,
                                                   int32_t* closed) {
  using namespace foxhunt;
  return capi::guarded([&] {
    constexpr const char* kFn = "foxhunt_desk_push_print";
    if (closed != nullptr) *closed = 0;
    capi::check_not_null(desk, kFn, "desk", "a handle from foxhunt_desk_open");
    capi::check_not_null(print, kFn, "print", "a print");
    FOXHUNT_CHECK(desk->series.has_value(), capi::kCapiComponent, kFn,
                  ": expected a series desk (FOXHUNT_DESK_SERIES), got a panel desk; push a "
                  "panel's bars with foxhunt_desk_push_bars");
    FOXHUNT_CHECK(desk->bar_spec.has_value(), capi::kCapiComponent, kFn,
                  ": expected bundles trained on tape bars (they record the bar spec), got "
                  "bundles of plain bars; push bars with foxhunt_desk_push_bar");
    FOXHUNT_CHECK(print->side >= -1 && print->side <= 1, capi::kCapiComponent, kFn,
                  ": print->side: expected +1 (buy), -1 (sell) or 0 (unknown), got ", print->side);
    if (!desk->builder) desk->builder.emplace(*desk->bar_spec);
    data::Print p;
    p.time_ns = print->time_ns;
    p.price = print->price;
    p.size = print->size;
    p.side = static_cast<int8_t>(print->side);
    // The builder checks the print (order, price, size) before its state changes.
    const auto bar = desk->builder->push(p);
    if (!bar) return;
    const data::Bar b = data::tape_bar_to_bar(*bar, *desk->bar_spec, desk->previous_bar);
    const data::BarFlow flow = data::bar_flow(*bar);
    desk->previous_bar = b.timestamp;
    desk->last = desk->series->on_bar(b, &flow);
    if (closed != nullptr) *closed = 1;
  });
}

FOXHUNT_API foxhunt_status foxhunt_desk_decision(const foxhunt_desk* desk, const char* symbol,
                                                 foxhunt_decision* out) {
  using namespace foxhunt;
  return capi::guarded([&] {
    constexpr const char* kFn = "foxhunt_desk_decision";
    capi::check_not_null(desk, kFn, "desk", "a handle from foxhunt_desk_open");
    capi::check_not_null(out, kFn, "out", "a foxhunt_decision to fill");
    const auto& d = capi::decision_of(*desk, symbol, kFn);
    int32_t ready = 0;
    for (const auto& s : d.signals) ready += s.ready ? 1 : 0;
    foxhunt_decision r{};
    r.timestamp = d.timestamp;
    r.decision = d.decision;
    r.position = d.position;
    r.latency_us = d.latency_us;
    r.models_ready = ready;
    r.ready = ready == static_cast<int32_t>(d.signals.size()) ? 1 : 0;
    *out = r;
  });
}

FOXHUNT_API foxhunt_status foxhunt_desk_model_count(const foxhunt_desk* desk, size_t* out) {
  using namespace foxhunt;
  return capi::guarded([&] {
    capi::check_not_null(desk, "foxhunt_desk_model_count", "desk",
                         "a handle from foxhunt_desk_open");
    capi::check_not_null(out, "foxhunt_desk_model_count", "out", "a size_t to fill");
    *out = desk->models.size();
  });
}

FOXHUNT_API foxhunt_status foxhunt_desk_model_name(const foxhunt_desk* desk, size_t index,
                                                   const char** out) {
  using namespace foxhunt;
  return capi::guarded([&] {
    constexpr const char* kFn = "foxhunt_desk_model_name";
    capi::check_not_null(desk, kFn, "desk", "a handle from foxhunt_desk_open");
    capi::check_not_null(out, kFn, "out", "a const char* to fill");
    FOXHUNT_CHECK(index < desk->models.size(), capi::kCapiComponent, kFn, ": index: expected < ",
                  desk->models.size(), " (the model count), got ", index);
    *out = desk->models[index].c_str();
  });
}

FOXHUNT_API foxhunt_status foxhunt_desk_signals(const foxhunt_desk* desk, const char* symbol,
                                                double* out, size_t capacity, size_t* count) {
  using namespace foxhunt;
  return capi::guarded([&] {
    constexpr const char* kFn = "foxhunt_desk_signals";
    capi::check_not_null(desk, kFn, "desk", "a handle from foxhunt_desk_open");
    capi::check_not_null(count, kFn, "count", "a size_t to fill");
    *count = desk->models.size();
    FOXHUNT_CHECK(capacity >= desk->models.size() && (out != nullptr || desk->models.empty()),
                  capi::kCapiComponent, kFn, ": out: expected room for ", desk->models.size(),
                  " signals (one per model), got capacity ", capacity,
                  out == nullptr ? " and NULL" : "");
    const auto& d = capi::decision_of(*desk, symbol, kFn);
    FOXHUNT_INTERNAL_ASSERT(d.signals.size() == desk->models.size(), "one signal per model");
    for (size_t i = 0; i < d.signals.size(); ++i) {
      FOXHUNT_INTERNAL_ASSERT(d.signals[i].model == desk->models[i], "signals in model order");
      out[i] = d.signals[i].ready ? d.signals[i].signal : std::numeric_limits<double>::quiet_NaN();
    }
  });
}

}  // extern "C"
