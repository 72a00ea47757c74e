#include "foxhunt/harness/stress.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/sanitizers.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/core/units.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/memory/cuda_memory.h"
#include "foxhunt/memory/device_probe.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/memory/profiler.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"
#include "stress_common.h"

namespace foxhunt::harness {

namespace {

// What the scenarios share (stress_common.h).
using stress_detail::add_device_memory;
using stress_detail::BarFeed;
using stress_detail::BundleSource;
using stress_detail::Clock;
using stress_detail::Context;
using stress_detail::finish_concurrent;
using stress_detail::g_cuda_device;
using stress_detail::instrument_state_bytes;
using stress_detail::kStressComponent;
using stress_detail::live_now;
using stress_detail::load_bundles;
using stress_detail::make_default_bundles;
using stress_detail::make_step_server;
using stress_detail::model_bytes_json;
using stress_detail::PairedStep;
using stress_detail::run_desk_concurrent;
using stress_detail::run_paired;
using stress_detail::sample_memory;
using stress_detail::seconds_since;
using stress_detail::served_models;
using stress_detail::set_leak;
using stress_detail::ThroughputWindows;
using stress_detail::warm;
using stress_detail::warmup_bars;
namespace fs = std::filesystem;

// ---- scenarios ----------------------------------------------------------------------------

void run_concurrent(Context& c, ScenarioResult& r) {
  if (c.o.instruments > 1) return run_desk_concurrent(c, r);
  const auto names = c.src.names;
  auto bundles = load_bundles(c.src, c.device);
  nlohmann::json resident = model_bytes_json(names);
  // Two ensembles over the same (shared, read-only) models: one concurrent, one serial.
  serving::Ensemble par(bundles), ser(bundles);
  par.set_parallel(true);
  par.set_memory_scopes(true);
  ser.set_parallel(false);
  ser.set_memory_scopes(true);
  BarFeed feed(c.o.seed, c.o.iterations + 1024);
  const int64_t w = warmup_bars(par);
  for (int64_t i = 0; i < w; ++i) {
    const auto bar = feed.next();
    par.on_bar(bar);
    ser.on_bar(bar);
  }
  const auto t = run_paired(c, r, names, static_cast<int64_t>(names.size()), "bar", [&](int64_t) {
    const auto bar = feed.next();
    const auto a = par.on_bar(bar);
    const auto b = ser.on_bar(bar);
    bool same = a.decision == b.decision && a.signals.size() == b.signals.size();
    for (size_t k = 0; same && k < a.signals.size(); ++k)
      same = a.signals[k].raw == b.signals[k].raw && a.signals[k].signal == b.signals[k].signal;
    return PairedStep{a.latency_us, b.latency_us, same};
  });
  const int64_t mismatches = t.mismatches;
  const double inferences = static_cast<double>(c.o.iterations * names.size());
  const double throughput = t.par_us > 0 ? inferences / (t.par_us * 1e-6) : 0.0;
  const double serial_throughput = t.ser_us > 0 ? inferences / (t.ser_us * 1e-6) : 0.0;
  const auto [lat, v] = finish_concurrent(c, r, names, resident, t);
  r.details["throughput_per_s"] = throughput;
  r.details["serial_throughput_per_s"] = serial_throughput;
  r.details["mismatched_bars"] = mismatches;
  r.summary = fmt::format(
      "{} bars x {} models: {:.0f} inferences/s (serial {:.0f}/s), bar p50 {:.0f} us p99 "
      "{:.0f} us, outputs {} serial; {}",
      c.o.iterations, names.size(), throughput, serial_throughput, lat.p50, lat.p99,
      mismatches == 0 ? "==" : "!=", v.verdict);
  if (mismatches) r.summary += " (first mismatch at " + t.first_mismatch + ")";
}

void run_soak(Context& c, ScenarioResult& r) {
  const auto names = c.src.names;
  auto server = make_step_server(c, c.o.seed + 1, c.o.soak);
  nlohmann::json resident = model_bytes_json(names);
  const int64_t n = server->instruments();
  const auto baseline = static_cast<int64_t>(live_now());
  memory::reset_peak();
  sample_memory(r, 0, names);
  std::vector<torch::Tensor> planted;  // the test-only leak
  const int64_t every = std::max<int64_t>(1, c.o.sample_every);
  ThroughputWindows tw{std::max<int64_t>(1, c.o.soak / 200),
                       static_cast<int64_t>(names.size()) * n};
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < c.o.soak; ++i) {
    r.latencies_us.push_back(server->step());
    if (c.o.plant_leak_every > 0 && i % c.o.plant_leak_every == 0)
      planted.push_back(torch::empty({1024}, torch::kFloat32));
    tw.tick(r);
    if ((i + 1) % every == 0) sample_memory(r, static_cast<double>(i + 1), names);
    if (c.o.soak >= 100000 && (i + 1) % (c.o.soak / 10) == 0)
      c.log << "  soak: " << (i + 1) << " / " << c.o.soak << " bars\n" << std::flush;
  }
  const double wall = seconds_since(t0);
  const auto final_bytes = static_cast<int64_t>(live_now());
  const auto v = leak_verdict(r.memory_x, r.live_bytes, baseline, final_bytes,
                              c.o.leak_threshold_bytes_per_1k);
  set_leak(r, v);
  const auto lat = summarize_latencies(r.latencies_us);
  const double steps_per_s = wall > 0 ? static_cast<double>(c.o.soak) / wall : 0.0;
  const double throughput = steps_per_s * static_cast<double>(n * std::ssize(names));
  r.details["bars"] = c.o.soak;
  r.details["instruments"] = n;
  r.details["instrument_bars_per_s"] = steps_per_s * static_cast<double>(n);
  r.details["instrument_state_bytes"] = instrument_state_bytes();
  r.details["models"] = names;
  r.details["throughput_per_s"] = throughput;
  r.details["latency_us"] = to_json(lat);
  r.details["resident_bytes"] = resident;
  r.details["baseline_live_bytes"] = baseline;
  r.details["final_live_bytes"] = final_bytes;
  r.details["peak_live_bytes"] = memory::peak_bytes();
  r.details["serving_bytes"] = model_bytes_json(names);
  r.details["rss_first_bytes"] = r.rss_bytes.front();
  r.details["rss_last_bytes"] = r.rss_bytes.back();
  r.details["planted_leak_every"] = c.o.plant_leak_every;
  add_device_memory(c, r);
  r.ok = !v.leak_detected;
  r.summary =
      fmt::format("{} {}: {:.0f} inferences/s, p50 {:.0f} us p99 {:.0f} us{}; {}", c.o.soak,
                  n > 1 ? "timestamps" : "bars", throughput, lat.p50, lat.p99,
                  n > 1 ? fmt::format(" per timestamp of {} instruments", n) : "", v.verdict);
  planted.clear();
}

void run_switch(Context& c, ScenarioResult& r) {
  const auto names = c.src.names;
  r.memory_x_label = "cycle";
  BarFeed feed(c.o.seed + 2, 4096);
  // Cycle 0 warms what a process sets up once and keeps: on CUDA the libraries' host images
  // (cuDNN, cuBLAS: hundreds of MiB of RSS, an H200 run showed +577 MiB) and a cuBLAS workspace
  // per serving thread's handle (32 MiB each on Hopper, kept by LibTorch for reuse). The verdicts
  // compare every later cycle with the state after it; on the CPU nothing changes (the ledger is
  // at the same bytes before and after cycle 0).
  const auto before_warmup = static_cast<int64_t>(live_now());
  int64_t baseline = before_warmup;
  sample_memory(r, 0, names);
  int64_t off_baseline = 0;
  int64_t worst_residual = 0;
  std::vector<double> load_ms;
  std::vector<double> cycle_ms;
  for (int64_t cycle = 0; cycle < c.o.switch_cycles; ++cycle) {
    const auto t0 = Clock::now();
    {
      serving::Ensemble e(load_bundles(c.src, c.device));
      load_ms.push_back(seconds_since(t0) * 1e3);
      e.set_memory_scopes(true);
      warm(e, feed, warmup_bars(e) - 8 + c.o.switch_bars);
    }
    cycle_ms.push_back(seconds_since(t0) * 1e3);
    r.latencies_us.push_back(cycle_ms.back() * 1e3);
    const auto now = static_cast<int64_t>(live_now());
    if (cycle == 0) {
      baseline = now;
    } else if (now != baseline) {
      ++off_baseline;
      if (std::abs(now - baseline) > std::abs(worst_residual)) worst_residual = now - baseline;
    }
    sample_memory(r, static_cast<double>(cycle + 1), names);
  }
  // Bounded RSS: after the first cycle warms the libraries, further cycles must not keep growing.
  const double rss_growth = r.rss_bytes.back() - r.rss_bytes[1];
  const std::vector<double> cycles(r.memory_x.begin() + 1, r.memory_x.end());
  const std::vector<double> rss(r.rss_bytes.begin() + 1, r.rss_bytes.end());
  double rss_slope = 0;
  if (cycles.size() >= 3) rss_slope = least_squares(cycles, rss).slope;
  // Under ASan its quarantine holds freed blocks resident: the bound grows by that slack only
  // (the ledger's exact live bytes above stay exact).
  const double rss_bound = 64.0 * kMiB + static_cast<double>(kSanitizerResidentSlackBytes);
  const bool rss_ok = rss_growth <= rss_bound;
  r.details["cycles"] = c.o.switch_cycles;
  r.details["models"] = names;
  r.details["cycles_off_baseline"] = off_baseline;
  r.details["worst_residual_bytes"] = worst_residual;
  r.details["baseline_live_bytes"] = baseline;
  r.details["warmup_live_bytes"] = baseline - before_warmup;
  r.details["warmup_rss_bytes"] = r.rss_bytes[1] - r.rss_bytes.front();
  r.details["rss_growth_bytes"] = rss_growth;
  r.details["rss_growth_bound_bytes"] = rss_bound;
  r.details["rss_slope_bytes_per_cycle"] = rss_slope;
  r.details["load_ms"] = to_json(summarize_latencies(load_ms));
  r.details["cycle_ms"] = to_json(summarize_latencies(cycle_ms));
  r.details["leak_detected"] = off_baseline > 0 || !rss_ok;
  r.details["slope_bytes_per_1k"] = nullptr;
  r.details["throughput_per_s"] = nullptr;
  add_device_memory(c, r);
  r.ok = off_baseline == 0 && rss_ok;
  r.summary = fmt::format(
      "{} load/serve/unload cycles: ledger {} baseline after every cycle, RSS {:+.1f} MiB "
      "(bound {:.0f} MiB), load p50 {:.1f} ms",
      c.o.switch_cycles, off_baseline == 0 ? "at" : "OFF", rss_growth / kMiB, rss_bound / kMiB,
      summarize_latencies(load_ms).p50);
  if (off_baseline)
    r.summary += " (" + std::to_string(off_baseline) + " cycles off, worst " +
                 std::to_string(worst_residual) + " B)";
}

void run_train(Context& c, ScenarioResult& r) {
  const ScopedDirectory work("", "foxhunt-stress-train");
  const fs::path root = work.path();
  data::SyntheticOptions synth;
  synth.bars = c.o.train_bars;
  synth.seed = c.o.seed;
  const std::string csv = (root / "bars.csv").string();
  data::write_bars_csv(csv, data::generate_synthetic(synth));
  r.memory_x_label = "run";
  const std::vector<std::string> all = jobs::trainable_models();
  sample_memory(r, 0, all);
  nlohmann::json runs = nlohmann::json::array();
  bool all_ok = true;
  std::string summary;
  for (size_t k = 0; k < all.size(); ++k) {
    const auto& model = all[k];
    const auto before = static_cast<int64_t>(live_now());
    memory::reset_peak();
    jobs::TrainJob job;
    job.model = model;
    job.data = csv;
    job.seed = c.o.seed;
    job.device = c.o.device;
    job.out_dir = serving::BundleDirectory(root.string()).model_dir(model);
    job.progress = train::ProgressMode::kOff;
    if (models::is_policy(model)) {
      job.env = "trading";
      job.steps = c.o.train_steps;
      job.eval_episodes = 0;
    } else {
      job.epochs = c.o.train_epochs;
    }
    const auto t0 = Clock::now();
    jobs::TrainSummary s;
    {
      memory::MemoryScope scope("train/" + model);
      s = jobs::run_train_job(job);
    }
    const double secs = seconds_since(t0);
    const auto after = static_cast<int64_t>(live_now());
    const bool ok = s.completed && after == before;
    all_ok = all_ok && ok;
    r.latencies_us.push_back(secs * 1e6);
    runs.push_back({{"model", model},
                    {"ok", ok},
                    {"completed", s.completed},
                    {"seconds", secs},
                    {"before_live_bytes", before},
                    {"after_live_bytes", after},
                    {"residual_bytes", after - before},
                    {"peak_live_bytes", memory::peak_bytes()}});
    sample_memory(r, static_cast<double>(k + 1), all);
    summary += (summary.empty() ? "" : ", ") + model + " " +
               (after == before ? "at baseline" : std::to_string(after - before) + " B left") +
               " (peak " + human_bytes(double(memory::peak_bytes())) + ")";
    c.log << "  train " << model << ": " << secs << " s, residual " << (after - before) << " B\n"
          << std::flush;
  }
  r.details["runs"] = runs;
  r.details["leak_detected"] = !all_ok;
  r.details["slope_bytes_per_1k"] = nullptr;
  r.details["throughput_per_s"] = nullptr;
  add_device_memory(c, r);
  r.ok = all_ok;
  r.summary = "trained back to back: " + summary;
}

void run_server(Context& c, ScenarioResult& r) {
  const auto names = c.src.names;
  const auto schedule = poisson_arrivals(c.o.rate, c.o.duration_s, c.o.seed + 3);
  auto server = make_step_server(c, c.o.seed + 4, static_cast<int64_t>(schedule.size()));
  const int64_t n = server->instruments();
  // Bars are prepared before the clock starts: the server measures serving, not the generator.
  server->prepare(static_cast<int64_t>(schedule.size()));
  const auto baseline = static_cast<int64_t>(live_now());
  sample_memory(r, 0, names);
  const auto t0 = Clock::now();
  ThroughputWindows tw{std::max<int64_t>(1, static_cast<int64_t>(schedule.size()) / 100),
                       static_cast<int64_t>(names.size()) * n};
  tw.t0 = tw.last = t0;
  const int64_t every = std::max<int64_t>(1, static_cast<int64_t>(schedule.size()) / 200);
  for (size_t i = 0; i < schedule.size(); ++i) {
    const auto due = t0 + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(schedule[i]));
    // Sleep most of the wait, spin the last stretch: sleeping alone overshoots by ~60 us.
    const auto spin_from = due - std::chrono::microseconds(200);
    if (Clock::now() < spin_from) std::this_thread::sleep_until(spin_from);
    while (Clock::now() < due) {
    }
    server->step();
    r.latencies_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - due).count());
    tw.tick(r);
    if ((i + 1) % every == 0) sample_memory(r, static_cast<double>(i + 1), names);
  }
  const double wall = seconds_since(t0);
  const auto lat = summarize_latencies(r.latencies_us);
  const auto final_bytes = static_cast<int64_t>(live_now());
  const auto v = leak_verdict(r.memory_x, r.live_bytes, baseline, final_bytes,
                              c.o.leak_threshold_bytes_per_1k);
  set_leak(r, v);
  const auto completed = static_cast<int64_t>(schedule.size());
  const bool latency_ok = lat.p99 <= c.o.p99_ms * 1e3;
  const bool enough = completed >= c.o.min_queries;
  const bool valid = latency_ok && enough;
  const double achieved = wall > 0 ? static_cast<double>(completed) / wall : 0.0;
  r.details["requested_rate_per_s"] = c.o.rate;
  r.details["achieved_rate_per_s"] = achieved;
  r.details["duration_s"] = c.o.duration_s;
  r.details["wall_s"] = wall;
  r.details["queries"] = completed;
  r.details["min_queries"] = c.o.min_queries;
  r.details["p99_bound_ms"] = c.o.p99_ms;
  r.details["latency_us"] = to_json(lat);
  r.details["valid"] = valid;
  r.details["invalid_because"] = valid ? ""
                                       : std::string(latency_ok ? "" : "p99 over the bound") +
                                             (latency_ok || enough ? "" : "; ") +
                                             (enough ? "" : "too few queries");
  r.details["throughput_per_s"] = achieved * static_cast<double>(n * std::ssize(names));
  r.details["instruments"] = n;
  r.details["instrument_bars_per_s"] = achieved * static_cast<double>(n);
  r.details["models"] = names;
  add_device_memory(c, r);
  // The scenario itself passes when it ran without a leak; validity is a separate verdict.
  r.ok = !v.leak_detected;
  r.summary = fmt::format(
      "Poisson {:.0f}/s for {:.1f} s: {} queries at {:.0f}/s, latency from arrival p50 {:.0f} "
      "us p99 {:.0f} us p99.9 {:.0f} us: {} (p99 <= {:.2f} ms, >= {} queries); {}",
      c.o.rate, c.o.duration_s, completed, achieved, lat.p50, lat.p99, lat.p999,
      valid ? "VALID" : "INVALID", c.o.p99_ms, c.o.min_queries, v.verdict);
}

using ScenarioFn = void (*)(Context&, ScenarioResult&);

ScenarioFn scenario_fn(const std::string& name) {
  if (name == "concurrent") return &run_concurrent;
  if (name == "train") return &run_train;
  if (name == "switch") return &run_switch;
  if (name == "soak") return &run_soak;
  if (name == "server") return &run_server;
  if (name == "tape") return &stress_detail::run_tape;
  throw InputError(kStressComponent, "unknown scenario '" + name + "'");
}

}  // namespace

const std::vector<std::string>& stress_scenarios() {
  static const std::vector<std::string> names = {"concurrent", "train", "switch", "soak", "server"};
  return names;
}

std::vector<std::string> parse_scenarios(const std::string& spec) {
  if (spec == "all") return stress_scenarios();
  std::vector<std::string> out;
  std::stringstream ss(spec);
  for (std::string s; std::getline(ss, s, ',');) {
    const auto& known = stress_scenarios();
    // tape needs a tape (StressOptions::ticks), so `all` leaves it out.
    FOXHUNT_CHECK(s == "tape" || std::find(known.begin(), known.end(), s) != known.end(),
                  kStressComponent,
                  "scenario: expected all or a comma-separated list of concurrent, train, "
                  "switch, soak, server, tape; got '",
                  s, "'");
    out.push_back(s);
  }
  FOXHUNT_CHECK(!out.empty(), kStressComponent, "scenario: expected at least one scenario, got '",
                spec, "'");
  return out;
}

bool StressReport::ok() const {
  if (scenarios.empty()) return false;
  for (const auto& s : scenarios)
    if (!s.ok) return false;
  return true;
}

nlohmann::json StressReport::to_json() const {
  nlohmann::json j;
  j["ok"] = ok();
  j["environment"] = environment;
  j["scenarios"] = nlohmann::json::object();
  for (const auto& s : scenarios) {
    nlohmann::json e = s.details;
    e["ok"] = s.ok;
    e["summary"] = s.summary;
    e["seconds"] = s.seconds;
    if (!s.error.empty()) {
      e["error"] = s.error;
      e["error_type"] = s.error_type;
    }
    for (const char* key : {"throughput_per_s", "leak_detected", "slope_bytes_per_1k"})
      if (!e.contains(key)) e[key] = nullptr;
    if (!e.contains("outputs_match_serial")) e["outputs_match_serial"] = nullptr;
    j["scenarios"][s.name] = e;
  }
  return j;
}

std::string StressReport::table() const {
  std::ostringstream os;
  os << fmt::format("{:<11} {:<5} {:>8}  {}\n", "scenario", "ok", "seconds", "summary");
  for (const auto& s : scenarios) {
    os << fmt::format("{:<11} {:<5} {:>8.1f}  {}\n", s.name, s.ok ? "PASS" : "FAIL", s.seconds,
                      s.error.empty() ? s.summary : s.error_type + ": " + s.error);
  }
  return os.str();
}

StressReport run_stress(const StressOptions& o, const std::vector<std::string>& scenarios,
                        std::ostream& log) {
  FOXHUNT_CHECK(!scenarios.empty(), kStressComponent, "expected at least one scenario");
  for (const auto& s : scenarios) scenario_fn(s);  // unknown names fail before any work
  FOXHUNT_CHECK(o.instruments >= 1, kStressComponent, "instruments: expected >= 1, got ",
                o.instruments);
  FOXHUNT_CHECK(o.rate > 0 && std::isfinite(o.rate), kStressComponent,
                "rate: expected arrivals per second > 0, got ", o.rate);
  FOXHUNT_CHECK(o.duration_s > 0, kStressComponent, "duration_s: expected seconds > 0, got ",
                o.duration_s);
  FOXHUNT_CHECK(
      o.iterations > 0 && o.soak > 0 && o.switch_cycles > 1 && o.sample_every > 0, kStressComponent,
      "expected positive iterations, soak and sample interval and switch_cycles >= 2 (the "
      "first warms the device libraries), got ",
      o.iterations, ", ", o.soak, ", ", o.switch_cycles, ", ", o.sample_every);
  const torch::Device device = models::to_torch(o.device);
  FOXHUNT_CHECK(!device.is_cuda() || memory::cuda_memory_available(), kStressComponent, "device ",
                o.device, ": no CUDA device is available (", memory::cuda_stats_backend(), ")");
  memory::install_ledger();

  // The cap, resolved before anything is loaded so that loading counts against it too.
  const uint64_t cap = o.budget ? o.budget->bytes : 0;
  const std::string cap_source = o.budget ? o.budget->source : "none";
  FOXHUNT_CHECK(!o.budget || cap > 0, kStressComponent, "budget (", cap_source,
                "): expected > 0 bytes, got 0");

  BundleSource src;
  src.names = served_models(o);
  if (o.bundles.empty()) {
    make_default_bundles(o, src);  // before the cap: building them is not what is stressed
  } else {
    src.dir = o.bundles;
    for (const auto& n : src.names)
      FOXHUNT_CHECK(fs::exists(src.path(n)), kStressComponent, "bundles ", o.bundles, ": '",
                    src.path(n), "' does not exist (a train all run into ", o.bundles,
                    " writes it)");
  }

  StressReport report;
  report.environment = {
      {"device", device.str()},
      {"bundles", o.bundles.empty() ? "fresh default models" : o.bundles},
      {"models", src.names},
      {"enforced_cap_bytes", cap},
      {"cap_source", cap_source},
      {"cap_mechanism", cap == 0           ? "none"
                        : device.is_cuda() ? "CUDA caching-allocator memory fraction"
                                           : "CPU ledger hard cap"},
      {"instruments", o.instruments},
      {"intra_op_threads", at::get_num_threads()},
      {"hardware_threads", std::thread::hardware_concurrency()},
      {"seed", o.seed}};

  std::optional<memory::LimitGuard> cpu_cap;
  std::optional<memory::CudaLimitGuard> cuda_cap;
  if (cap > 0) {
    if (device.is_cuda())
      cuda_cap.emplace(cap, device.index() < 0 ? 0 : device.index());
    else
      cpu_cap.emplace(cap);
  }
  Context ctx{o, device, src, log, cap};
  g_cuda_device = device.is_cuda() ? (device.index() < 0 ? 0 : device.index()) : -1;
  report.environment["leak_bytes_source"] =
      device.is_cuda() ? "CUDA caching allocator (allocated bytes)" : "CPU ledger (live bytes)";
  for (const auto& name : scenarios) {
    ScenarioResult r;
    r.name = name;
    log << "== " << name << "\n" << std::flush;
    const auto t0 = Clock::now();
    memory::ProfilerOptions po;
    po.period_ms = 10;
    po.reset_peak = false;  // scenarios reset the peak where they measure one
    memory::Profiler profiler(po);
    profiler.start();
    try {
      try {
        scenario_fn(name)(ctx, r);
      } catch (const OutOfMemoryError&) {
        throw;
      } catch (...) {
        memory::rethrow_if_oom(std::current_exception());
        throw;
      }
    } catch (const OutOfMemoryError& e) {
      r.ok = false;
      r.error = e.what();
      r.error_type = "out_of_memory";
      r.details["requested_bytes"] = e.requested();
      r.details["live_bytes"] = e.live();
      r.details["limit_bytes"] = e.limit();
    } catch (const InputError& e) {
      r.ok = false;
      r.error = e.what();
      r.error_type = "input";
    } catch (const CheckFailure& e) {
      r.ok = false;
      r.error = e.what();
      r.error_type = "check";
    } catch (const std::exception& e) {
      r.ok = false;
      r.error = e.what();
      r.error_type = "error";
    }
    profiler.stop();
    for (const auto& p : profiler.samples()) {
      r.profile_t.push_back(p.t);
      r.profile_live.push_back(static_cast<double>(p.live_bytes));
      r.profile_rss.push_back(static_cast<double>(p.rss_bytes));
      if (p.device_bytes) r.profile_device.push_back(static_cast<double>(*p.device_bytes));
    }
    r.details["profiler"] = profiler.to_json(/*include_samples=*/false);
    r.seconds = seconds_since(t0);
    log << (r.ok ? "   PASS " : "   FAIL ")
        << (r.error.empty() ? r.summary : r.error_type + ": " + r.error) << " ("
        << fmt::format("{:.1f}", r.seconds) << " s)\n"
        << std::flush;
    report.scenarios.push_back(std::move(r));
  }
  return report;
}

}  // namespace foxhunt::harness
