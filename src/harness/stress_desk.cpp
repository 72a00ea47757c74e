// The stress scenarios' step servers (one instrument through an Ensemble, many through a Desk)
// and the concurrent scenario on a desk.
#include <deque>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/units.h"
#include "foxhunt/serving/universe.h"
#include "stress_common.h"

namespace foxhunt::harness::stress_detail {

namespace {

using PanelFeed = serving::SyntheticUniverse;

class EnsembleServer : public StepServer {
 public:
  EnsembleServer(std::vector<serving::Bundle> bundles, uint64_t seed, int64_t steps)
      : e_(std::move(bundles)), feed_(seed, steps + 1024) {
    e_.set_memory_scopes(true);
    warm(e_, feed_, warmup_bars(e_));
  }
  double step() override {
    data::Bar bar;
    if (!prepared_.empty()) {
      bar = prepared_.front();
      prepared_.pop_front();
    } else {
      bar = feed_.next();
    }
    return e_.on_bar(bar).latency_us;
  }
  void prepare(int64_t steps) override {
    for (int64_t i = 0; i < steps; ++i) prepared_.push_back(feed_.next());
  }
  int64_t instruments() const override { return 1; }

 private:
  serving::Ensemble e_;
  BarFeed feed_;
  std::deque<data::Bar> prepared_;
};

class DeskServer : public StepServer {
 public:
  DeskServer(std::vector<serving::Bundle> bundles, uint64_t seed, int64_t instruments)
      : feed_(seed, instruments), n_(instruments) {
    serving::DeskOptions o;
    o.memory_scopes = true;
    desk_ = std::make_unique<serving::Desk>(std::move(bundles), serving::DecisionRule{}, o);
    // Until every model is ready, plus a few bars so first-call allocations are done.
    for (int64_t i = 0; i < desk_->warmup_bars() + 8; ++i) step();
  }
  double step() override {
    std::vector<serving::SymbolBar> bars;
    if (!prepared_.empty()) {
      bars = std::move(prepared_.front());
      prepared_.pop_front();
    } else {
      bars = feed_.next();
    }
    const int64_t t = bars.front().bar.timestamp;
    return desk_->on_timestamp(t, bars).front().decision.latency_us;
  }
  void prepare(int64_t steps) override {
    for (int64_t i = 0; i < steps; ++i) prepared_.push_back(feed_.next());
  }
  int64_t instruments() const override { return n_; }

 private:
  PanelFeed feed_;
  int64_t n_;
  std::unique_ptr<serving::Desk> desk_;
  std::deque<std::vector<serving::SymbolBar>> prepared_;
};

bool same_outputs(const std::vector<serving::InstrumentDecision>& a,
                  const std::vector<serving::InstrumentDecision>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto &x = a[i].decision, &y = b[i].decision;
    if (a[i].symbol != b[i].symbol || x.decision != y.decision ||
        x.signals.size() != y.signals.size())
      return false;
    for (size_t k = 0; k < x.signals.size(); ++k)
      if (x.signals[k].raw != y.signals[k].raw || x.signals[k].signal != y.signals[k].signal)
        return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<StepServer> make_step_server(Context& c, uint64_t seed, int64_t steps) {
  if (c.o.instruments > 1)
    return std::make_unique<DeskServer>(load_bundles(c.src, c.device), seed, c.o.instruments);
  return std::make_unique<EnsembleServer>(load_bundles(c.src, c.device), seed, steps);
}

void run_desk_concurrent(Context& c, ScenarioResult& r) {
  const auto names = c.src.names;
  const int64_t n = c.o.instruments;
  auto bundles = load_bundles(c.src, c.device);
  nlohmann::json resident = model_bytes_json(names);
  // Two desks over the same (shared, read-only) models: one runs the models concurrently, one
  // serially; their outputs must be bit-identical.
  serving::DeskOptions po, so;
  po.memory_scopes = so.memory_scopes = true;
  so.parallel = false;
  serving::Desk par(bundles, {}, po), ser(bundles, {}, so);
  PanelFeed feed(c.o.seed, n);
  for (int64_t i = 0; i < par.warmup_bars() + 8; ++i) {
    const auto bars = feed.next();
    par.on_timestamp(feed.timestamp(), bars);
    ser.on_timestamp(feed.timestamp(), bars);
  }
  const auto t =
      run_paired(c, r, names, static_cast<int64_t>(names.size()) * n, "timestamp", [&](int64_t) {
        const auto bars = feed.next();
        const auto a = par.on_timestamp(feed.timestamp(), bars);
        const auto b = ser.on_timestamp(feed.timestamp(), bars);
        return PairedStep{a.front().decision.latency_us, b.front().decision.latency_us,
                          same_outputs(a, b)};
      });
  const int64_t mismatches = t.mismatches;
  const double par_us = t.par_us, ser_us = t.ser_us;
  // One instrument through the single-series Ensemble (its O(window) streams), same models, same
  // number of bars: the bar rate the desk's batching is measured against.
  double one_us = 0;
  {
    EnsembleServer one(bundles, c.o.seed, c.o.iterations);
    for (int64_t i = 0; i < c.o.iterations; ++i) one_us += one.step();
  }
  const double steps = static_cast<double>(c.o.iterations);
  const double rate = par_us > 0 ? steps * static_cast<double>(n) / (par_us * 1e-6) : 0.0;
  const double serial_rate = ser_us > 0 ? steps * static_cast<double>(n) / (ser_us * 1e-6) : 0.0;
  const double one_rate = one_us > 0 ? steps / (one_us * 1e-6) : 0.0;
  const auto [lat, v] = finish_concurrent(c, r, names, resident, t);
  r.details["instruments"] = n;
  r.details["instrument_bars_per_s"] = rate;
  r.details["serial_instrument_bars_per_s"] = serial_rate;
  r.details["single_instrument_bars_per_s"] = one_rate;
  r.details["batching_gain"] = one_rate > 0 ? rate / one_rate : 0.0;
  r.details["throughput_per_s"] = rate * static_cast<double>(names.size());
  r.details["serial_throughput_per_s"] = serial_rate * static_cast<double>(names.size());
  r.details["mismatched_timestamps"] = mismatches;  // latency_us: per timestamp (the batch)
  r.details["instrument_state_bytes"] = par.state_bytes();
  r.details["state_bytes_per_instrument"] = par.state_bytes() / static_cast<uint64_t>(n);
  r.summary = fmt::format(
      "{} timestamps x {} instruments x {} models: {:.0f} instrument-bars/s (serial "
      "{:.0f}/s; one instrument alone {:.0f} bars/s, gain {:.2f}x), timestamp p50 {:.0f} us p99 "
      "{:.0f} us, outputs {} serial; state {} per instrument; {}",
      c.o.iterations, n, names.size(), rate, serial_rate, one_rate,
      one_rate > 0 ? rate / one_rate : 0.0, lat.p50, lat.p99, mismatches == 0 ? "==" : "!=",
      human_bytes(static_cast<double>(par.state_bytes() / static_cast<uint64_t>(n))), v.verdict);
  if (mismatches) r.summary += " (first mismatch at " + t.first_mismatch + ")";
}

}  // namespace foxhunt::harness::stress_detail
