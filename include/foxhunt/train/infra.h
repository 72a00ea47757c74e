#pragma once
/// \file infra.h
/// Training infrastructure shared by the trainers: run configuration (checkpoints, metrics,
/// progress, stop), the metrics log (JSON lines), the progress display, the SIGINT stop flag, and
/// the result of a run. Torch-free.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "foxhunt/core/log.h"
#include "foxhunt/core/no_copy.h"
#include "foxhunt/core/random.h"

namespace foxhunt::train {

using foxhunt::derive_seed;  // core/random.h: one Rng and the named seed streams
using foxhunt::Rng;
using foxhunt::SeedStream;

/// How progress is shown (on stderr unless a progress sink is given: core/log.h).
enum class ProgressMode {
  kAuto,   ///< a live bar on a terminal (progress_is_terminal), plain lines otherwise
  kBar,    ///< always the live bar
  kLines,  ///< always plain lines, one per log interval
  kOff,    ///< nothing
};

/// Where a run writes and when it stops; shared by all trainers.
struct RunConfig {
  std::string checkpoint_path;      ///< trainer checkpoint file ("" = none written)
  int64_t checkpoint_interval = 0;  ///< steps between checkpoints (0 = only at the end / on stop)
  /// JSON-lines metrics file ("" = none): started anew by a run from step 0, appended to by a
  /// resumed one (MetricsLog).
  std::string metrics_path;
  int64_t log_interval = 1000;  ///< steps between metrics lines (forecast: optimizer steps)
  ProgressMode progress = ProgressMode::kAuto;  ///< progress display on stderr
  /// Where the progress display writes its text (empty: core's progress sink, core/log.h).
  ProgressSink progress_output;
  int64_t stop_at_step = -1;  ///< stop (with a checkpoint) once this step is reached (-1: never)
  /// Called with every metrics line (after it is written), e.g. to watch a run from a test.
  std::function<void(const nlohmann::json&)> on_log;
};

/// Outcome of Trainer::train.
struct TrainResult {
  std::string algo;             ///< "dqn", "ppo" or "forecast"
  int64_t steps = 0;            ///< steps done in total (including those before a resume)
  int64_t total_steps = 0;      ///< steps the run was configured for
  int64_t episodes = 0;         ///< finished episodes (RL) or epochs (forecast)
  bool completed = false;       ///< reached the configured length (or early stopping)
  bool interrupted = false;     ///< stopped by SIGINT
  double seconds = 0.0;         ///< wall time of this call
  std::string checkpoint_path;  ///< last checkpoint written ("" if none)
  nlohmann::json metrics = nlohmann::json::object();  ///< final metrics (algorithm-specific)
};
/// JSON form of a result.
nlohmann::json to_json(const TrainResult& r);

/// How a metrics log opens an existing file.
enum class MetricsStart {
  kAppend,  ///< keep its lines and append (a resumed run)
  kFresh,   ///< start it empty (a run from step 0: a rerun must not append to a killed run's log)
};

/// Appends metrics lines (one compact JSON object per line) to a file and keeps them in memory.
/// The file is a log written as the run goes, not atomically: a process killed mid-line leaves a
/// partial last line, which the next log opened on the file drops (kAppend) or replaces (kFresh).
class MetricsLog {
 public:
  /// Opens `path` ("" keeps the lines in memory only): for appending, after dropping a partial
  /// last line, or empty (`start`).
  explicit MetricsLog(const std::string& path = "", MetricsStart start = MetricsStart::kAppend);
  ~MetricsLog();
  FOXHUNT_NO_COPY(MetricsLog);
  /// Writes one line and flushes it.
  void write(const nlohmann::json& line);
  /// Lines written through this object.
  const std::vector<nlohmann::json>& lines() const { return lines_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  std::vector<nlohmann::json> lines_;
};

/// Progress display: a live bar with rate and ETA on a terminal, periodic plain lines otherwise.
/// Its text goes to `out`, or to core's progress sink (core/log.h: stderr unless one is
/// installed).
class Progress {
 public:
  /// `label` prefixes each display (e.g. "dqn"), `total` steps, starting at `start_step`; the
  /// text is written to `out` (empty: write_progress). kAuto draws the bar only when the text
  /// goes to a terminal (no `out`, and progress_is_terminal()).
  Progress(std::string label, int64_t total, int64_t start_step, ProgressMode mode,
           ProgressSink out = {});
  /// Updates the live bar (rate-limited to ~10 Hz); `extra` is appended (e.g. "loss 0.12").
  void update(int64_t step, const std::string& extra = "");
  /// Prints a plain line (lines mode) or refreshes the bar (bar mode): call once per log interval.
  void log(int64_t step, const std::string& extra = "");
  /// Ends the bar with a newline.
  void finish();
  /// Steps per second since the start (of this run, not counting resumed steps).
  double rate(int64_t step) const;
  /// Seconds since construction.
  double elapsed() const;

 private:
  void draw(int64_t step, const std::string& extra, bool newline);
  void write(std::string_view text) const;
  std::string label_;
  int64_t total_, start_;
  bool bar_ = false, lines_ = false, drawn_ = false;
  std::chrono::steady_clock::time_point t0_, last_draw_;
  ProgressSink out_;
};

/// Formats seconds as "1h02m03s", "2m03s" or "3.2s".
std::string format_duration(double seconds);

/// Mean of the last `capacity` values (episode returns, episode lengths).
class RollingMean {
 public:
  /// Keeps at most `capacity` values.
  explicit RollingMean(size_t capacity = 100) : capacity_(capacity) {}
  /// Adds a value, dropping the oldest when full.
  void add(double v);
  /// Mean of the kept values (NaN when empty).
  double mean() const;
  /// Number of kept values.
  size_t size() const { return values_.size(); }
  /// The kept values as JSON (for checkpoints).
  nlohmann::json to_json() const;
  /// Restores the values from to_json().
  void from_json(const nlohmann::json& j);

 private:
  size_t capacity_;
  std::deque<double> values_;
};

/// True once a stop was requested.
bool stop_requested();
/// Clears the stop request (trainers do so when they start).
void clear_stop();

/// Installs a SIGINT handler that calls request_stop() for its lifetime and restores the previous
/// handler on destruction. A second Ctrl-C while the flag is set terminates the process the
/// default way. Install it around a CLI run only; library code never installs handlers.
class ScopedSigintHandler {
 public:
  ScopedSigintHandler();
  ~ScopedSigintHandler();
  FOXHUNT_NO_COPY(ScopedSigintHandler);

 private:
  struct Saved;
  Saved* saved_;
};

/// A (double) value as JSON, mapping NaN/Inf to null (JSON has no NaN).
nlohmann::json json_number(double v);

}  // namespace foxhunt::train
