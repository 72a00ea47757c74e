#include "foxhunt/memory/profiler.h"

#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "foxhunt/core/cuda_plugin.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/units.h"
#include "foxhunt/memory/cuda_memory.h"

namespace foxhunt::memory {

namespace {

std::optional<std::uint64_t> device_bytes_now() {
  try {
    // Only where a CUDA device was asked for: sampling must not load the CUDA plugin.
    if (cuda_plugin_loaded() && cuda_memory_available()) return cuda_live_bytes(0);
  } catch (const std::exception&) {
    // A device that vanished or a stub build: no device series.
  }
  return std::nullopt;
}

std::int64_t sdiff(std::uint64_t after, std::uint64_t before) {
  return static_cast<std::int64_t>(after) - static_cast<std::int64_t>(before);
}

SeriesSummary summarize(const std::vector<std::uint64_t>& v) {
  SeriesSummary s;
  if (v.empty()) return s;
  long double sum = 0;
  for (auto x : v) {
    s.peak = std::max(s.peak, x);
    sum += static_cast<long double>(x);
  }
  s.average = static_cast<double>(sum / static_cast<long double>(v.size()));
  s.first = v.front();
  s.last = v.back();
  return s;
}

std::string hb(std::uint64_t b) {
  return human_bytes(static_cast<double>(b));
}
std::string hs(std::int64_t b) {
  std::string s = human_bytes(static_cast<double>(b));
  if (b > 0) s.insert(s.begin(), '+');
  return s;
}

nlohmann::json summary_json(const SeriesSummary& s) {
  return {{"peak", s.peak}, {"average", s.average}, {"first", s.first}, {"last", s.last}};
}

}  // namespace

std::uint64_t process_rss_bytes() {
  std::ifstream in("/proc/self/statm");
  std::uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  const long page = ::sysconf(_SC_PAGESIZE);
  return resident * static_cast<std::uint64_t>(page > 0 ? page : 4096);
}

MemorySnapshot take_snapshot() {
  MemorySnapshot s;
  s.time = std::chrono::steady_clock::now();
  s.ledger = ledger_stats();
  s.external_bytes = external_bytes();
  s.rss_bytes = process_rss_bytes();
  s.scopes = scope_snapshot();
  s.external = external_snapshot();
  s.device_allocated_bytes = device_bytes_now();
  return s;
}

SnapshotDelta diff(const MemorySnapshot& before, const MemorySnapshot& after) {
  SnapshotDelta d;
  d.seconds = std::chrono::duration<double>(after.time - before.time).count();
  d.live_bytes = sdiff(after.ledger.live_bytes, before.ledger.live_bytes);
  d.peak_bytes = after.ledger.peak_bytes;
  d.alloc_count = after.ledger.alloc_count - before.ledger.alloc_count;
  d.free_count = after.ledger.free_count - before.ledger.free_count;
  d.external_bytes = sdiff(after.external_bytes, before.external_bytes);
  d.rss_bytes = sdiff(after.rss_bytes, before.rss_bytes);
  std::map<std::string, const ScopeStats*> old;
  for (const auto& s : before.scopes) old[s.name] = &s;
  for (const auto& s : after.scopes) {
    const auto it = old.find(s.name);
    const ScopeStats zero;
    const ScopeStats& b = it == old.end() ? zero : *it->second;
    ScopeDelta sd;
    sd.name = s.name;
    sd.live_bytes = sdiff(s.live_bytes, b.live_bytes);
    sd.peak_bytes = s.peak_bytes;
    sd.alloc_count = s.alloc_count - b.alloc_count;
    sd.free_count = s.free_count - b.free_count;
    if (sd.live_bytes != 0 || sd.alloc_count != 0 || sd.free_count != 0)
      d.scopes.push_back(std::move(sd));
  }
  return d;
}

Profiler::Profiler(ProfilerOptions options) : options_(options) {
  FOXHUNT_CHECK(options_.period_ms >= 1, "profiler", "period_ms: expected >= 1, got ",
                options_.period_ms);
  FOXHUNT_CHECK(options_.max_samples >= 2, "profiler", "max_samples: expected >= 2, got ",
                options_.max_samples);
}

Profiler::~Profiler() {
  stop();
}

void Profiler::start() {
  stop();
  if (options_.reset_peak) reset_peak();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    samples_.clear();
    baseline_ = take_snapshot();
    t0_ = baseline_->time;
    stop_requested_ = false;
    running_ = true;
  }
  sample_once();
  thread_ = std::thread([this] { loop(); });
}

void Profiler::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!running_) return;
    stop_requested_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  sample_once();
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
}

bool Profiler::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_;
}

void Profiler::sample_once() {
  MemorySample s;
  s.live_bytes = live_bytes();
  s.rss_bytes = process_rss_bytes();
  if (options_.sample_device) s.device_bytes = device_bytes_now();
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  s.t = std::chrono::duration<double>(now - t0_).count();
  if (samples_.size() < options_.max_samples) samples_.push_back(s);
}

void Profiler::loop() {
  const auto period = std::chrono::milliseconds(options_.period_ms);
  auto next = std::chrono::steady_clock::now() + period;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (cv_.wait_until(lock, next, [this] { return stop_requested_; })) return;
    }
    sample_once();
    next += period;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now + period;  // fell behind (a loaded machine): do not burst
  }
}

const MemorySnapshot& Profiler::baseline() const {
  std::lock_guard<std::mutex> lock(mutex_);
  FOXHUNT_CHECK(baseline_.has_value(), "profiler", "no baseline: call start() first");
  return *baseline_;
}

SnapshotDelta Profiler::delta() const {
  return diff(baseline(), take_snapshot());
}

std::vector<MemorySample> Profiler::samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return samples_;
}

SeriesSummary Profiler::live_summary() const {
  std::vector<std::uint64_t> v;
  for (const auto& s : samples()) v.push_back(s.live_bytes);
  return summarize(v);
}

SeriesSummary Profiler::rss_summary() const {
  std::vector<std::uint64_t> v;
  for (const auto& s : samples()) v.push_back(s.rss_bytes);
  return summarize(v);
}

std::optional<SeriesSummary> Profiler::device_summary() const {
  std::vector<std::uint64_t> v;
  for (const auto& s : samples())
    if (s.device_bytes) v.push_back(*s.device_bytes);
  if (v.empty()) return std::nullopt;
  return summarize(v);
}

std::string Profiler::report() const {
  const auto& base = baseline();
  const auto now = take_snapshot();
  const auto d = diff(base, now);
  const auto all = samples();
  const auto live = live_summary();
  const auto rss = rss_summary();
  const auto dev = device_summary();
  std::ostringstream os;
  os << fmt::format("memory profile: {:.3f} s, {} samples every {} ms\n", d.seconds, all.size(),
                    options_.period_ms);
  os << fmt::format("  {:<28} {:>14} {:>14} {:>14}\n", "", "baseline", "current", "delta");
  auto row = [&](const char* name, std::uint64_t b, std::uint64_t c) {
    os << fmt::format("  {:<28} {:>14} {:>14} {:>14}\n", name, hb(b), hb(c), hs(sdiff(c, b)));
  };
  row("ledger live", base.ledger.live_bytes, now.ledger.live_bytes);
  row(kExternalLabel, base.external_bytes, now.external_bytes);
  row("process RSS", base.rss_bytes, now.rss_bytes);
  if (base.device_allocated_bytes && now.device_allocated_bytes)
    row("CUDA allocated (device 0)", *base.device_allocated_bytes, *now.device_allocated_bytes);
  os << fmt::format("  ledger peak {} (exact), allocations {}, frees {}\n",
                    hb(now.ledger.peak_bytes), d.alloc_count, d.free_count);
  auto series = [&](const char* name, const SeriesSummary& s) {
    os << fmt::format("  sampled {:<20} peak {:>12}  average {:>12}\n", name, hb(s.peak),
                      human_bytes(s.average));
  };
  series("ledger live", live);
  series("process RSS", rss);
  if (dev) series("CUDA allocated", *dev);
  if (!now.scopes.empty()) {
    os << fmt::format("  {:<28} {:>14} {:>14} {:>14}\n", "scope", "live", "peak", "delta");
    std::map<std::string, std::uint64_t> before;
    for (const auto& s : base.scopes) before[s.name] = s.live_bytes;
    for (const auto& s : now.scopes) {
      const auto it = before.find(s.name);
      const std::uint64_t b = it == before.end() ? 0 : it->second;
      os << fmt::format("  {:<28} {:>14} {:>14} {:>14}\n", s.name, hb(s.live_bytes),
                        hb(s.peak_bytes), hs(sdiff(s.live_bytes, b)));
    }
  }
  for (const auto& e : now.external) {
    os << fmt::format("  {:<28} {:>14}  {}\n", e.tag, hb(e.bytes), kExternalLabel);
  }
  return os.str();
}

nlohmann::json Profiler::to_json(bool include_samples) const {
  const auto& base = baseline();
  const auto now = take_snapshot();
  const auto d = diff(base, now);
  auto snap = [](const MemorySnapshot& s) {
    nlohmann::json j;
    FOXHUNT_JSON_FIELDS(j, s.ledger, live_bytes, peak_bytes, alloc_count, free_count);
    FOXHUNT_JSON_FIELDS(j, s, external_bytes, rss_bytes);
    j["device_allocated_bytes"] = json_or_null(s.device_allocated_bytes);
    return j;
  };
  nlohmann::json scopes = nlohmann::json::array();
  for (const auto& s : now.scopes) {
    nlohmann::json& row = scopes.emplace_back();
    FOXHUNT_JSON_FIELDS(row, s, name, live_bytes, peak_bytes, alloc_count, free_count);
  }
  nlohmann::json external = nlohmann::json::array();
  for (const auto& e : now.external)
    external.push_back({{"tag", e.tag}, {"bytes", e.bytes}, {"label", kExternalLabel}});
  nlohmann::json j = {{"seconds", d.seconds},
                      {"period_ms", options_.period_ms},
                      {"baseline", snap(base)},
                      {"current", snap(now)},
                      {"delta",
                       {{"live_bytes", d.live_bytes},
                        {"alloc_count", d.alloc_count},
                        {"free_count", d.free_count},
                        {"external_bytes", d.external_bytes},
                        {"rss_bytes", d.rss_bytes}}},
                      {"live", summary_json(live_summary())},
                      {"rss", summary_json(rss_summary())},
                      {"scopes", scopes},
                      {"external", external}};
  const auto dev = device_summary();
  j["device"] = dev ? summary_json(*dev) : nlohmann::json();
  if (include_samples) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& s : samples()) {
      nlohmann::json& row = arr.emplace_back();
      FOXHUNT_JSON_FIELDS(row, s, t, live_bytes, rss_bytes);
      row["device_bytes"] = json_or_null(s.device_bytes);
    }
    j["samples"] = arr;
  }
  return j;
}

}  // namespace foxhunt::memory
