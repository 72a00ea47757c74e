#include "foxhunt/serving/desk.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "foxhunt/core/error.h"
#include "foxhunt/core/hash.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/data/vol_target.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/streaming.h"
#include "model_inputs.h"

namespace foxhunt::serving {

namespace {

constexpr const char* kDeskComponent = "desk";

// One instrument's state on the desk.
struct Instrument {
  // `probe`: the bundles' own calibration (to measure an instrument's bytes); else the symbol's
  // (checked before: a panel bundle refuses a symbol it was not trained on).
  // `streams`: each model's own per-instrument stream where it has one (DeskOptions::streams).
  Instrument(std::string s, const std::vector<detail::ModelPlan>& plans, uint64_t bytes,
             bool streams, bool probe = false)
      : reservation(kInstrumentStateTag, bytes),
        symbol(std::move(s)),
        features(!plans.empty() && plans.front().flow) {
    histories.reserve(plans.size());
    for (const auto& p : plans) {
      histories.emplace_back(p, probe ? p.bundle->calibration() : p.bundle->calibration(symbol));
      this->streams.push_back(streams ? p.bundle->model->make_stream(p.spec.window) : nullptr);
    }
  }
  // Declared first (and so released last): over the cap, nothing else is built.
  memory::ExternalReservation reservation;
  std::string symbol;
  data::StreamingFeatures features;
  std::vector<detail::ModelHistory> histories;                // per model, in the desk's order
  std::vector<std::unique_ptr<models::ModelStream>> streams;  // per model; null: batched forward
  double position = 0.0;
  double entry_close = 0.0;
  data::VolatilityTargetStream vol_target;  // the baseline a rule can hold (inline, no heap)

  // Bytes without the symbol's heap buffer.
  size_t fixed_bytes() const {
    size_t n = sizeof(Instrument) + features.state_bytes() - sizeof(data::StreamingFeatures) +
               histories.capacity() * sizeof(detail::ModelHistory);
    for (const auto& h : histories) n += h.bytes() - sizeof(detail::ModelHistory);
    return n;
  }
};

// The explanation of one instrument's forecast (models::ServingModel::explain) from the raw
// window its history holds.
std::optional<models::Explanation> explain_row(const detail::ModelPlan& plan,
                                               const detail::ModelHistory& h,
                                               const data::StreamingFeatures& features,
                                               const std::vector<int64_t>& next) {
  detail::InstrumentRow row;
  row.history = &h;
  row.features = &features;
  row.next_timestamps = &next;
  row.static_id = h.cal.instrument_id;
  auto batch = detail::build_batch(plan, {row});
  const auto device = models::module_device(plan.bundle->model->module());
  for (auto& t : batch.inputs) t = t.to(device);
  return plan.bundle->model->explain(batch);
}

// One bar through an instrument's stream (models::ModelStream): every post-warm-up bar is
// pushed; the signal is reported once the stream's window is full (before that the forecast
// would cover fewer bars than training did). Returns true when `out` is ready.
bool stream_step(const detail::ModelPlan& plan, models::ModelStream& stream,
                 detail::ModelHistory& h, const data::StreamingFeatures& features,
                 const std::vector<int64_t>& next, const DecisionRule& rule, ModelSignal& out) {
  const auto& ring = h.past.at(0);
  const auto device = models::module_device(plan.bundle->model->module());
  models::StreamBar in;
  in.past = torch::from_blob(const_cast<float*>(ring.latest()),
                             {static_cast<int64_t>(plan.sets.at(0)->width)}, torch::kFloat32)
                .to(device, /*non_blocking=*/false, /*copy=*/true);
  for (const auto& spec : plan.spec.inputs) {
    if (spec.role != models::InputRole::kKnownFuture) continue;
    auto future = torch::empty({spec.steps, spec.features}, torch::kFloat32);
    detail::fill_known_future(plan, spec, next, future.data_ptr<float>());
    in.future = future.to(device);
  }
  in.static_id = h.cal.instrument_id;
  const torch::Tensor forecast = stream.push(in);
  if (++h.streamed < plan.spec.window) return false;
  const auto f = forecast.to(torch::kCPU, torch::kFloat32).contiguous();
  detail::fill_signal(plan, f.data_ptr<float>(), h, features, rule, out);
  return true;
}

uint64_t symbol_heap_bytes(const std::string& s) {
  // Short symbols live inside the string object (small-string buffer of 15 chars).
  return s.size() > 15 ? s.size() + 1 : 0;
}

}  // namespace

nlohmann::json to_json(const InstrumentDecision& d) {
  nlohmann::json j = to_json(d.decision);
  j["symbol"] = d.symbol;
  return j;
}

int64_t symbol_shard(const std::string& symbol, int64_t shards) {
  FOXHUNT_CHECK(shards >= 1, kDeskComponent, "shards: expected >= 1, got ", shards);
  return static_cast<int64_t>(fnv1a_64(symbol) % static_cast<uint64_t>(shards));
}

struct Desk::Impl {
  std::vector<std::unique_ptr<Bundle>> bundles;  // stable addresses: the plans point into them
  std::vector<detail::ModelPlan> plans;
  DecisionRule rule;
  DeskOptions options;
  std::unique_ptr<ThreadPool> pool;
  // Each model's time on the previous timestamp: the costliest is dispatched first (on the
  // calling thread; ThreadPool::run), the others share the workers meanwhile.
  std::vector<double> cost_us;
  std::vector<std::unique_ptr<Instrument>> instruments;
  std::unordered_map<std::string, size_t> index;
  std::vector<std::vector<float>> scratch;  // per model: a normalised bank row
  int64_t horizon = 0;                      // longest forecast horizon
  uint64_t instrument_bytes = 0;            // one instrument's state, symbol buffer aside
  uint64_t state_bytes = 0;
  bool flow = false;  // the bundles' flow_features: every bar comes with its flow

  // Every check of on_timestamp's bars, no state changed; returns the symbols not seen before
  // (pointers into `bars`).
  std::vector<const std::string*> check(int64_t timestamp,
                                        const std::vector<SymbolBar>& bars) const;
};

Desk Desk::load(const std::string& dir, std::optional<DecisionRule> rule,
                const torch::Device& device, const DeskOptions& options) {
  auto r = rule ? std::move(*rule) : ensemble_rule(dir);
  return Desk(load_ensemble_bundles(dir, device), r, options);
}

Desk::Desk(std::vector<Bundle> bundles, const DecisionRule& rule, const DeskOptions& options)
    : impl_(std::make_unique<Impl>()) {
  FOXHUNT_CHECK(!bundles.empty(), kDeskComponent, "a desk needs at least one bundle");
  FOXHUNT_CHECK(options.max_batch >= 0, kDeskComponent, "max_batch: expected >= 0, got ",
                options.max_batch);
  auto& d = *impl_;
  d.rule = resolve_rule(rule, bundles);
  d.options = options;
  for (auto& b : bundles) {
    FOXHUNT_CHECK(b.model != nullptr, kDeskComponent, "a bundle has no model");
    b.model->module().eval();
    d.horizon = std::max(d.horizon, b.model->spec().horizon);
    d.bundles.push_back(std::make_unique<Bundle>(std::move(b)));
  }
  d.flow = d.bundles.front()->flow_features;
  for (const auto& b : d.bundles)
    FOXHUNT_CHECK(
        b->flow_features == d.flow, kDeskComponent, "bundles: '", d.bundles.front()->name(),
        "' was trained on ",
        d.flow ? "bars built from a tape (flow features)" : "bars without flow features", ", '",
        b->name(), "' on ",
        b->flow_features ? "bars built from a tape (flow features)" : "bars without flow features",
        "; expected models trained on one input");
  d.plans.reserve(d.bundles.size());
  // A model streamed per instrument keeps raw rows; batched, its cached per-bar stage.
  for (const auto& b : d.bundles) d.plans.emplace_back(*b, /*use_cache=*/!options.streams);
  d.scratch.resize(d.plans.size());
  d.instrument_bytes = Instrument("", d.plans, 0, options.streams, /*probe=*/true).fixed_bytes();
  d.pool = std::make_unique<ThreadPool>(ThreadPool::workers_for(d.plans.size()));
  d.cost_us.assign(d.plans.size(), 0.0);
}

Desk::~Desk() = default;
Desk::Desk(Desk&&) noexcept = default;

bool Desk::flow_features() const {
  return impl_->flow;
}

int64_t Desk::instruments() const {
  return static_cast<int64_t>(impl_->instruments.size());
}

std::vector<std::string> Desk::symbols() const {
  std::vector<std::string> out;
  for (const auto& i : impl_->instruments) out.push_back(i->symbol);
  return out;
}

bool Desk::has_symbol(const std::string& symbol) const {
  return impl_->index.count(symbol) > 0;
}

double Desk::position(const std::string& symbol) const {
  auto it = impl_->index.find(symbol);
  return it == impl_->index.end() ? 0.0 : impl_->instruments[it->second]->position;
}

int64_t Desk::bars_seen(const std::string& symbol) const {
  auto it = impl_->index.find(symbol);
  return it == impl_->index.end() ? 0 : impl_->instruments[it->second]->features.bars_seen();
}

uint64_t Desk::state_bytes() const {
  return impl_->state_bytes;
}

int64_t Desk::warmup_bars() const {
  int64_t w = 0;
  for (const auto& b : impl_->bundles) w = std::max(w, b->warmup + b->model->spec().window);
  return w + 1;
}

std::vector<std::string> Desk::model_names() const {
  std::vector<std::string> out;
  for (const auto& p : impl_->plans) out.push_back(p.name);
  return out;
}

std::vector<std::string> Desk::dispatch_order() const {
  std::vector<std::string> out;
  for (size_t m : detail::longest_first(impl_->cost_us)) out.push_back(impl_->plans[m].name);
  return out;
}

const DecisionRule& Desk::rule() const {
  return impl_->rule;
}

void Desk::set_parallel(bool parallel) {
  impl_->options.parallel = parallel;
}

void Desk::set_explain(bool on) {
  impl_->options.explain = on;
}

void Desk::set_memory_scopes(bool on) {
  impl_->options.memory_scopes = on;
}

void Desk::clear() {
  impl_->instruments.clear();
  impl_->index.clear();
  impl_->state_bytes = 0;
}

void Desk::replicate(const std::string& source, const std::vector<std::string>& symbols) {
  auto& d = *impl_;
  const auto it = d.index.find(source);
  FOXHUNT_CHECK(it != d.index.end(), kDeskComponent,
                "replicate: expected a source symbol on the desk, got '", source, "'");
  FOXHUNT_CHECK(!d.options.streams, kDeskComponent,
                "replicate: expected a desk of batched forwards, got one running per-instrument "
                "streams (not copied)");
  std::unordered_set<std::string> seen;
  for (const auto& s : symbols) {
    FOXHUNT_CHECK(!s.empty() && d.index.count(s) == 0 && seen.insert(s).second, kDeskComponent,
                  "replicate: expected new, distinct, non-empty symbols, got '", s, "'");
    for (const auto& p : d.plans) (void)p.bundle->calibration(s);  // a panel bundle's symbols only
  }
  const Instrument& src = *d.instruments[it->second];
  for (const auto& s : symbols) {
    auto copy = std::make_unique<Instrument>(s, d.plans, d.instrument_bytes + symbol_heap_bytes(s),
                                             /*streams=*/false);
    copy->features = src.features;
    for (size_t m = 0; m < d.plans.size(); ++m) {
      const auto cal = copy->histories[m].cal;  // the copy's own normaliser, scale and id
      copy->histories[m] = src.histories[m];
      copy->histories[m].cal = cal;
    }
    copy->position = src.position;
    copy->entry_close = src.entry_close;
    copy->vol_target = src.vol_target;
    d.state_bytes += copy->reservation.bytes();
    d.index.emplace(s, d.instruments.size());
    d.instruments.push_back(std::move(copy));
  }
}

std::vector<const std::string*> Desk::Impl::check(int64_t timestamp,
                                                  const std::vector<SymbolBar>& bars) const {
  std::unordered_set<std::string> seen;
  std::vector<const std::string*> fresh;
  // A fresh engine checks a new symbol's first bar; built only when one arrives (its rings are
  // allocated on construction: not on every timestamp).
  std::optional<data::StreamingFeatures> blank;
  for (const auto& sb : bars) {
    FOXHUNT_CHECK(!sb.symbol.empty(), kDeskComponent, "timestamp ", timestamp,
                  ": a bar has an empty symbol");
    FOXHUNT_CHECK(seen.insert(sb.symbol).second, kDeskComponent, "timestamp ", timestamp,
                  ": symbol '", sb.symbol, "' has two bars (expected at most one per symbol)");
    FOXHUNT_CHECK(sb.bar.timestamp == timestamp, kDeskComponent, "symbol '", sb.symbol,
                  "': expected a bar at timestamp ", timestamp, ", got ", sb.bar.timestamp);
    auto it = index.find(sb.symbol);
    // Models trained on plain bars read a tape's bars as bars: their flow is not an input.
    const data::BarFlow* flow_of_bar = flow && sb.flow ? &*sb.flow : nullptr;
    try {
      FOXHUNT_CHECK(!flow || sb.flow.has_value(), kDeskComponent,
                    "the models were trained on bars built from a tape (flow features): "
                    "expected each bar with its flow (serve the tape with the bar spec "
                    "they were trained on), got a bar without one");
      if (it == index.end()) {
        // A panel bundle serves only the symbols it was trained on.
        for (const auto& p : plans) (void)p.bundle->calibration(sb.symbol);
        if (!blank) blank.emplace(flow);
        blank->check(sb.bar, flow_of_bar);
        fresh.push_back(&sb.symbol);
      } else {
        instruments[it->second]->features.check(sb.bar, flow_of_bar);
      }
    } catch (const InputError& e) {
      if (!options.name_symbol_in_errors) throw;
      throw InputError(kDeskComponent, "symbol '" + sb.symbol + "': " + e.message());
    }
  }
  return fresh;
}

void Desk::check(int64_t timestamp, const std::vector<SymbolBar>& bars) const {
  (void)impl_->check(timestamp, bars);
}

std::vector<InstrumentDecision> Desk::on_timestamp(int64_t timestamp,
                                                   const std::vector<SymbolBar>& bars) {
  const auto t0 = std::chrono::steady_clock::now();
  auto& d = *impl_;
  // 1. Check everything before any state changes.
  const auto fresh = impl_->check(timestamp, bars);
  // 2. State for new symbols (each declared to the ledger before it is built), committed only
  // once all exist.
  std::vector<std::unique_ptr<Instrument>> created;
  for (const auto* s : fresh)
    created.push_back(std::make_unique<Instrument>(
        *s, d.plans, d.instrument_bytes + symbol_heap_bytes(*s), d.options.streams));
  for (auto& inst : created) {
    d.state_bytes += inst->reservation.bytes();
    d.index.emplace(inst->symbol, d.instruments.size());
    d.instruments.push_back(std::move(inst));
  }

  // 3. Features, then the per-instrument inputs the models share.
  const size_t n = bars.size();
  std::vector<Instrument*> inst(n);
  std::vector<double> upnl(n);
  std::vector<std::vector<int64_t>> next(n);
  std::vector<InstrumentDecision> out(n);
  for (size_t i = 0; i < n; ++i) {
    Instrument& s = *d.instruments[d.index.at(bars[i].symbol)];
    inst[i] = &s;
    const int64_t prev = s.features.bars_seen() > 0 ? s.features.last_timestamp() : 0;
    // Checked above: cannot throw.
    s.features.update(bars[i].bar, d.flow && bars[i].flow ? &*bars[i].flow : nullptr);
    const double close = bars[i].bar.close;
    s.vol_target.push(close);  // a close the features accepted: finite and > 0
    upnl[i] =
        s.position != 0.0 && s.entry_close > 0 ? s.position * std::log(close / s.entry_close) : 0.0;
    next[i] = detail::next_timestamps(timestamp, prev, d.horizon);
    out[i].symbol = bars[i].symbol;
    out[i].decision.timestamp = timestamp;
    out[i].decision.position = s.position;
    out[i].decision.vol_target =
        d.rule.target_volatility > 0 && d.rule.periods_per_year > 0
            ? s.vol_target.position(d.rule.target_volatility, d.rule.periods_per_year)
            : 0.0;
    out[i].decision.signals.resize(d.plans.size());
  }

  // 4. One batch per model (chunks of max_batch), the models concurrently.
  std::vector<std::function<void()>> tasks;
  for (size_t m : detail::longest_first(d.cost_us))
    tasks.emplace_back([&, m] {
      const auto tm = std::chrono::steady_clock::now();
      std::optional<memory::MemoryScope> scope;
      if (d.options.memory_scopes) scope.emplace(d.plans[m].name);
      const auto& plan = d.plans[m];
      std::vector<size_t> ready;
      std::vector<detail::InstrumentRow> rows;
      std::vector<size_t> fed;  // instruments past the feature warm-up
      for (size_t i = 0; i < n; ++i) {
        out[i].decision.signals[m].model = plan.name;
        if (detail::push_bar(plan, inst[i]->histories[m], inst[i]->features, d.scratch[m]))
          fed.push_back(i);
      }
      c10::InferenceMode guard;
      const size_t chunk = d.options.max_batch > 0 ? static_cast<size_t>(d.options.max_batch)
                                                   : std::max<size_t>(1, n);
      if (plan.cached) {
        // The model's per-bar stage on every fed instrument's new row, in batches.
        for (size_t b = 0; b < fed.size(); b += chunk) {
          std::vector<detail::ModelHistory*> hs;
          std::vector<int64_t> ids;
          for (size_t k = b; k < std::min(fed.size(), b + chunk); ++k) {
            hs.push_back(&inst[fed[k]]->histories[m]);
            ids.push_back(hs.back()->cal.instrument_id);
          }
          detail::encode_pending(plan, hs, ids);
        }
      }
      std::vector<size_t> streamed;  // instruments whose stream reported this bar
      for (size_t i : fed) {
        auto& h = inst[i]->histories[m];
        if (auto* stream = inst[i]->streams[m].get()) {
          // Run concurrently, a stream may split its push over the workers done with theirs.
          stream->set_chunk_runner(d.options.parallel ? d.pool.get() : nullptr);
          auto& sig = out[i].decision.signals[m];
          if (!stream_step(plan, *stream, h, inst[i]->features, next[i], d.rule, sig)) continue;
          if (d.options.explain && detail::history_full(plan, h))
            sig.explanation = explain_row(plan, h, inst[i]->features, next[i]);
          streamed.push_back(i);
          continue;
        }
        if (!detail::history_full(plan, h)) continue;
        ready.push_back(i);
        detail::InstrumentRow r;
        r.history = &h;
        r.features = &inst[i]->features;
        r.position = inst[i]->position;
        r.unrealized_pnl = upnl[i];
        r.next_timestamps = &next[i];
        r.static_id = h.cal.instrument_id;
        rows.push_back(r);
      }
      for (size_t b = 0; b < rows.size(); b += chunk) {
        const size_t e = std::min(rows.size(), b + chunk);
        const std::vector<detail::InstrumentRow> part(rows.begin() + static_cast<long>(b),
                                                      rows.begin() + static_cast<long>(e));
        const auto y = detail::forward_rows(plan, detail::build_batch(plan, part));
        const int64_t stride = y.numel() / static_cast<int64_t>(part.size());
        const float* v = y.data_ptr<float>();
        for (size_t k = 0; k < part.size(); ++k) {
          const size_t i = ready[b + k];
          auto& sig = out[i].decision.signals[m];
          detail::fill_signal(plan, v + static_cast<int64_t>(k) * stride, *part[k].history,
                              inst[i]->features, d.rule, sig);
          // A cached plan's history holds the cached stage, not the raw window to explain.
          if (d.options.explain && !plan.cached)
            sig.explanation = explain_row(plan, *part[k].history, inst[i]->features, next[i]);
        }
      }
      const double us = detail::micros_since(tm);
      d.cost_us[m] = us;
      for (size_t i : ready) out[i].decision.signals[m].latency_us = us;
      for (size_t i : streamed) out[i].decision.signals[m].latency_us = us;
    });
  if (d.options.parallel && tasks.size() > 1) {
    d.pool->run(tasks);
  } else {
    for (auto& t : tasks) t();
  }

  // 5. One decision per instrument.
  const double us = detail::micros_since(t0);
  for (size_t i = 0; i < n; ++i) {
    auto& dec = out[i].decision;
    dec.target = combine_signals(d.rule, dec.signals, dec.vol_target);
    dec.decision = data::apply_no_trade_band(dec.target, inst[i]->position, d.rule.band);
    if (dec.decision != inst[i]->position) inst[i]->entry_close = bars[i].bar.close;
    inst[i]->position = dec.decision;
    dec.latency_us = us;
  }
  return out;
}

}  // namespace foxhunt::serving
