#pragma once
// Private to harness/: what the stress scenarios share (stress.cpp, stress_desk.cpp): the bar
// feeds, where the bundles come from, memory sampling and the leak and device figures.

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "foxhunt/core/file_io.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/harness/stress.h"
#include "foxhunt/memory/cuda_memory.h"
#include "foxhunt/memory/device_probe.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/memory/profiler.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/desk_capacity.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::harness::stress_detail {

inline constexpr const char* kStressComponent = "stress";
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// An endless bar stream: a seeded synthetic series replayed lap after lap, each lap shifted in
// time and rescaled in price so that time keeps increasing and the price path stays continuous.
class BarFeed {
 public:
  BarFeed(uint64_t seed, int64_t bars) {
    data::SyntheticOptions o;
    o.seed = seed;
    o.bars = std::clamp<int64_t>(bars, 1024, 20000);
    base_ = data::generate_synthetic(o).bars;
    step_ = base_.size() > 1 ? base_[1].timestamp - base_[0].timestamp : 60;
  }
  data::Bar next() {
    if (i_ == base_.size()) {
      factor_ *= base_.back().close / base_.front().open;
      offset_ += base_.back().timestamp - base_.front().timestamp + step_;
      i_ = 0;
    }
    data::Bar b = base_[i_++];
    b.timestamp += offset_;
    b.open *= factor_;
    b.high *= factor_;
    b.low *= factor_;
    b.close *= factor_;
    return b;
  }

 private:
  std::vector<data::Bar> base_;
  size_t i_ = 0;
  double factor_ = 1.0;
  int64_t offset_ = 0;
  int64_t step_ = 60;
};

// Where the bundles come from: a directory, or fresh default models built once (their bundles
// are also saved to a temporary directory so that `switch` loads real files).
struct BundleSource {
  std::vector<std::string> names;
  std::string dir;
  std::unique_ptr<ScopedDirectory> temp;  ///< the fresh models' bundles, removed at the end
  std::string path(const std::string& name) const {
    return serving::BundleDirectory(dir).bundle_path(name);
  }
};

inline std::vector<std::string> served_models(const StressOptions& o) {
  const auto all = models::model_names();
  if (o.models.empty()) return all;
  for (const auto& m : o.models)
    FOXHUNT_CHECK(models::in_catalog(m), kStressComponent, "models: expected some of ",
                  models::joined_model_names(), ", got '", m, "'");
  return o.models;
}

inline void make_default_bundles(const StressOptions& o, BundleSource& src) {
  src.temp = std::make_unique<ScopedDirectory>("", "foxhunt-stress-bundles");
  src.dir = src.temp->path();
  for (auto& b : serving::default_bundles(o.seed)) {
    if (std::find(src.names.begin(), src.names.end(), b.name()) == src.names.end()) continue;
    b.training = {{"note", "untrained default model (no bundles given)"}};
    fs::create_directories(serving::BundleDirectory(src.dir).model_dir(b.name()));
    serving::save_bundle(b, src.path(b.name()));
  }
}

// Loads every served bundle, each under the ledger scope named after its model.
inline std::vector<serving::Bundle> load_bundles(const BundleSource& src,
                                                 const torch::Device& device) {
  std::vector<serving::Bundle> out;
  for (const auto& name : src.names) {
    memory::MemoryScope scope(name);
    out.push_back(serving::load_bundle(src.path(name), device, name));
  }
  return out;
}

// Bars until every model is ready, plus a few so first-call allocations are done.
inline int64_t warmup_bars(const serving::Ensemble& e) {
  return e.warmup_bars() - 1 + 8;  // warmup_bars() counts the first ready bar
}

inline void warm(serving::Ensemble& e, BarFeed& feed, int64_t bars) {
  for (int64_t i = 0; i < bars; ++i) e.on_bar(feed.next());
}

// The device whose bytes the leak checks read: -1 = the CPU ledger, else a CUDA device (the
// caching allocator's allocated bytes; it has no per-model scopes, so the per-model lines then
// show only the models' host-side bytes).
inline int g_cuda_device = -1;

// Bytes of the desk's per-instrument state (serving/desk.h), declared to the ledger.
inline uint64_t instrument_state_bytes() {
  for (const auto& e : memory::external_snapshot())
    if (e.tag == serving::kInstrumentStateTag) return e.bytes;
  return 0;
}

// What the leak checks read: the device's bytes plus the desk's instrument state (host memory,
// declared to the ledger; 0 without a desk).
inline uint64_t live_now() {
  return (g_cuda_device >= 0 ? memory::cuda_live_bytes(g_cuda_device) : memory::live_bytes()) +
         instrument_state_bytes();
}

inline void sample_memory(ScenarioResult& r, double x, const std::vector<std::string>& names) {
  r.memory_x.push_back(x);
  r.live_bytes.push_back(static_cast<double>(live_now()));
  r.rss_bytes.push_back(static_cast<double>(memory::process_rss_bytes()));
  for (const auto& n : names)
    r.model_live_bytes[n].push_back(static_cast<double>(memory::scope_stats(n).live_bytes));
}

inline nlohmann::json model_bytes_json(const std::vector<std::string>& names) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& n : names) {
    const auto s = memory::scope_stats(n);
    j[n] = {{"live_bytes", s.live_bytes}, {"peak_bytes", s.peak_bytes}};
  }
  return j;
}

// Throughput windows over a run: every `chunk` steps, (elapsed seconds, inferences/s in it).
struct ThroughputWindows {
  int64_t chunk;
  int64_t per_step;
  Clock::time_point t0 = Clock::now(), last = Clock::now();
  int64_t steps = 0;
  void tick(ScenarioResult& r) {
    if (++steps % chunk) return;
    const auto now = Clock::now();
    const double dt = std::chrono::duration<double>(now - last).count();
    last = now;
    r.throughput_t.push_back(std::chrono::duration<double>(now - t0).count());
    r.throughput_per_s.push_back(dt > 0 ? static_cast<double>(chunk * per_step) / dt : 0.0);
  }
};

struct Context {
  const StressOptions& o;
  torch::Device device;
  BundleSource& src;
  std::ostream& log;
  uint64_t cap_bytes = 0;
};

inline void add_device_memory(const Context& c, ScenarioResult& r) {
  if (!c.device.is_cuda()) return;
  // Device-wide used bytes (all processes, the CUDA context) from NVML, when the driver has it.
  const auto nvml = memory::probe_nvml();
  if (nvml.ok) {
    nlohmann::json gpus = nlohmann::json::array();
    for (const auto& g : nvml.gpus)
      gpus.push_back({{"index", g.index},
                      {"name", g.name},
                      {"used_bytes", g.used_bytes ? nlohmann::json(*g.used_bytes) : nullptr},
                      {"total_bytes", g.total_bytes ? nlohmann::json(*g.total_bytes) : nullptr}});
    r.details["nvml"] = gpus;
  } else {
    r.details["nvml"] = nvml.message;
  }
  const auto s = memory::cuda_memory_stats(c.device.index() < 0 ? 0 : c.device.index());
  r.details["cuda"] = {{"allocated_bytes", s.allocated_bytes}, {"allocated_peak", s.allocated_peak},
                       {"reserved_bytes", s.reserved_bytes},   {"reserved_peak", s.reserved_peak},
                       {"limit_bytes", s.limit_bytes},         {"num_ooms", s.num_ooms}};
}

inline void set_leak(ScenarioResult& r, const LeakVerdict& v) {
  r.details["leak"] = to_json(v);
  r.details["leak_detected"] = v.leak_detected;
  r.details["slope_bytes_per_1k"] = v.slope_bytes_per_1k;
}

// One measured step of a concurrent scenario: the concurrent and the serial server on the same
// input, their latencies, and whether their outputs were bit-identical.
struct PairedStep {
  double par_us = 0;
  double ser_us = 0;
  bool same = true;
};

// What a concurrent scenario's measured loop adds up.
struct PairedTally {
  int64_t baseline = 0;     // live bytes before the loop
  int64_t final_bytes = 0;  // live bytes after it
  double par_us = 0;        // summed latencies, concurrent
  double ser_us = 0;        // summed latencies, serial
  int64_t mismatches = 0;
  std::string first_mismatch;  // "<unit> <index>" of the first, "" if none
};

// The measured loop of both concurrent scenarios (one instrument, a desk): options.iterations
// calls of `step(i)` (a PairedStep), the concurrent latencies recorded, memory sampled about 200
// times, throughput windows of `per_step` inferences per step. `unit` names a step in the
// mismatch report ("bar", "timestamp").
template <class Step>
PairedTally run_paired(const Context& c, ScenarioResult& r, const std::vector<std::string>& names,
                       int64_t per_step, const char* unit, Step&& step) {
  PairedTally t;
  t.baseline = static_cast<int64_t>(live_now());
  sample_memory(r, 0, names);
  const int64_t every = std::max<int64_t>(1, c.o.iterations / 200);
  ThroughputWindows tw{every, per_step};
  for (int64_t i = 0; i < c.o.iterations; ++i) {
    const PairedStep s = step(i);
    t.par_us += s.par_us;
    t.ser_us += s.ser_us;
    r.latencies_us.push_back(s.par_us);
    if (!s.same && t.mismatches++ == 0)
      t.first_mismatch = std::string(unit) + " " + std::to_string(i);
    tw.tick(r);
    if ((i + 1) % every == 0) sample_memory(r, static_cast<double>(i + 1), names);
  }
  t.final_bytes = static_cast<int64_t>(live_now());
  return t;
}

// What both concurrent scenarios report beside their rates: the leak verdict, the serial
// comparison, latencies, resident and baseline bytes, the device figures and the verdict (r.ok).
// Returns the latency summary and the leak verdict for the summary line.
inline std::pair<LatencySummary, LeakVerdict> finish_concurrent(
    const Context& c, ScenarioResult& r, const std::vector<std::string>& names,
    const nlohmann::json& resident, const PairedTally& t) {
  const int64_t baseline = t.baseline, final_bytes = t.final_bytes, mismatches = t.mismatches;
  const double par_us = t.par_us, ser_us = t.ser_us;
  const auto v = leak_verdict(r.memory_x, r.live_bytes, baseline, final_bytes,
                              c.o.leak_threshold_bytes_per_1k);
  set_leak(r, v);
  const auto lat = summarize_latencies(r.latencies_us);
  r.details["iterations"] = c.o.iterations;
  r.details["models"] = names;
  r.details["speedup_vs_serial"] = par_us > 0 ? ser_us / par_us : 0.0;
  r.details["outputs_match_serial"] = mismatches == 0;
  r.details["latency_us"] = to_json(lat);
  r.details["resident_bytes"] = resident;
  r.details["baseline_live_bytes"] = baseline;
  r.details["final_live_bytes"] = final_bytes;
  add_device_memory(c, r);
  r.ok = mismatches == 0 && !v.leak_detected;
  return {lat, v};
}

// What soak and server serve per step (stress_desk.cpp): one bar of one instrument through an
// Ensemble, or, with options.instruments > 1, one timestamp of every instrument through a Desk.
class StepServer {
 public:
  virtual ~StepServer() = default;
  // Serves the next step (prepared bars first, then fresh ones); returns its latency in us.
  virtual double step() = 0;
  // Makes the bars of the next `steps` steps now, so that a timed loop measures serving only.
  virtual void prepare(int64_t steps) = 0;
  // Instruments per step.
  virtual int64_t instruments() const = 0;
};

// The step server of `c`'s options on the served bundles (loaded under their ledger scopes),
// warmed up until every model is ready; bars from a feed seeded with `seed`.
std::unique_ptr<StepServer> make_step_server(Context& c, uint64_t seed, int64_t steps);

// The concurrent scenario on a desk of options.instruments instruments (stress_desk.cpp).
void run_desk_concurrent(Context& c, ScenarioResult& r);

// tape (stress_tape.cpp): StressOptions::ticks replayed as fast as it goes through the streaming
// bar builder and the desk.
void run_tape(Context& c, ScenarioResult& r);

}  // namespace foxhunt::harness::stress_detail
