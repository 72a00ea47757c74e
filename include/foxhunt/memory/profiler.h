#pragma once
/// \file profiler.h
/// Memory profiler: exact snapshots of the ledger (baseline, current, delta, per scope) and a
/// background sampler producing a time series of ledger live bytes, process RSS and device
/// memory, with peak/average, a human report (B/KiB/MiB/GiB) and JSON. Torch-free.
///
/// Example:
///   memory::ProfilerOptions opts;
///   opts.period_ms = 5;
///   memory::Profiler prof(opts);
///   prof.start();                       // baseline snapshot + sampler thread
///   run_training_steps();
///   prof.stop();                        // final sample, joins the thread
///   std::cout << prof.report();         // delta, peaks, averages, per-scope table

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "foxhunt/core/no_copy.h"
#include "foxhunt/memory/ledger.h"

namespace foxhunt::memory {

/// Resident set size of this process from /proc/self/statm (0 where unavailable).
std::uint64_t process_rss_bytes();

/// Everything the ledger knows at one instant.
struct MemorySnapshot {
  std::chrono::steady_clock::time_point time;
  LedgerStats ledger;                                   ///< process-wide counters
  std::uint64_t external_bytes = 0;                     ///< declared bytes outside the allocator
  std::uint64_t rss_bytes = 0;                          ///< process RSS
  std::vector<ScopeStats> scopes;                       ///< every scope, sorted by name
  std::vector<ExternalEntry> external;                  ///< declared external bytes per tag
  std::optional<std::uint64_t> device_allocated_bytes;  ///< CUDA device 0, when present
};

/// Takes a snapshot now (cheap: atomics and one short lock).
MemorySnapshot take_snapshot();

/// Change of one scope between two snapshots.
struct ScopeDelta {
  std::string name;
  std::int64_t live_bytes = 0;    ///< after - before
  std::uint64_t peak_bytes = 0;   ///< the scope's peak in the later snapshot
  std::uint64_t alloc_count = 0;  ///< allocations in between
  std::uint64_t free_count = 0;   ///< frees in between
};

/// Change between two snapshots (after - before).
struct SnapshotDelta {
  double seconds = 0;             ///< time between the snapshots
  std::int64_t live_bytes = 0;    ///< ledger live bytes after - before
  std::uint64_t peak_bytes = 0;   ///< ledger peak in the later snapshot
  std::uint64_t alloc_count = 0;  ///< allocations in between
  std::uint64_t free_count = 0;   ///< frees in between
  std::int64_t external_bytes = 0;
  std::int64_t rss_bytes = 0;
  std::vector<ScopeDelta> scopes;  ///< scopes whose counters changed, sorted by name
};

/// after - before.
SnapshotDelta diff(const MemorySnapshot& before, const MemorySnapshot& after);

/// One point of the sampled time series.
struct MemorySample {
  double t = 0;                               ///< seconds since start()
  std::uint64_t live_bytes = 0;               ///< ledger live bytes
  std::uint64_t rss_bytes = 0;                ///< process RSS
  std::optional<std::uint64_t> device_bytes;  ///< CUDA device 0 allocated bytes, when present
};

/// Peak and average of one series.
struct SeriesSummary {
  std::uint64_t peak = 0;
  double average = 0;
  std::uint64_t first = 0;
  std::uint64_t last = 0;
};

/// Options of the profiler (a plain tool config).
struct ProfilerOptions {
  /// Sampling period in milliseconds (>= 1).
  std::int64_t period_ms = 10;
  /// Sample CUDA device 0's allocated bytes when a GPU is present.
  bool sample_device = true;
  /// Stop appending samples beyond this many (the summary still covers what was kept).
  std::size_t max_samples = 1u << 20;
  /// Reset the ledger's peak at start() so the reported peak is this run's.
  bool reset_peak = true;
};

/// Snapshots plus a background sampler thread. start() takes the baseline and starts sampling;
/// stop() takes a last sample and joins. Thread-safe accessors; restartable (start() clears).
class Profiler {
 public:
  explicit Profiler(ProfilerOptions options = {});
  /// Stops the sampler if running.
  ~Profiler();
  FOXHUNT_NO_COPY(Profiler);

  /// Baseline snapshot, first sample, then one sample per period on a background thread.
  void start();
  /// Last sample and join. No-op when not running.
  void stop();
  /// Whether the sampler is running.
  bool running() const;

  /// The snapshot taken by start() (InputError before the first start()).
  const MemorySnapshot& baseline() const;
  /// A fresh snapshot.
  MemorySnapshot current() const { return take_snapshot(); }
  /// current() - baseline().
  SnapshotDelta delta() const;

  /// A copy of the samples so far.
  std::vector<MemorySample> samples() const;
  /// Summary of the ledger live-bytes series.
  SeriesSummary live_summary() const;
  /// Summary of the RSS series.
  SeriesSummary rss_summary() const;
  /// Summary of the device series (empty when no sample had a device value).
  std::optional<SeriesSummary> device_summary() const;

  /// Human report: duration, samples, baseline/current/delta, peaks and averages, per-scope
  /// table, external bytes (labelled kExternalLabel).
  std::string report() const;
  /// The same as JSON (bytes as integers; the time series under "samples").
  nlohmann::json to_json(bool include_samples = true) const;

 private:
  void sample_once();
  void loop();

  ProfilerOptions options_;
  std::optional<MemorySnapshot> baseline_;
  std::chrono::steady_clock::time_point t0_;
  std::vector<MemorySample> samples_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_requested_ = false;
  bool running_ = false;
  std::thread thread_;
};

}  // namespace foxhunt::memory
