#pragma once
/// \file loop.h
/// The part of a training run that every trainer shares, written once: the stop checks
/// (Ctrl-C / request_stop, stop_at_step), the metrics log and progress display, the log and
/// checkpoint intervals, checkpoint writing and the result. Each algorithm keeps only its step
/// (what one iteration does), its metrics line and its state (train/state_io.h).
///
///   RunSession s(run, "dqn", "dqn", total, step_);
///   while (step_ < total && !s.should_stop(step_)) {
///     const int64_t before = step_;
///     ... one iteration, advances step_ ...
///     if (s.log_due(before, step_)) s.log(metrics_line(...), step_, "loss 0.1");
///     if (s.checkpoint_due(before, step_)) s.checkpoint([&](auto& p) { save_checkpoint(p); });
///     s.update(step_);
///   }
///   return s.finish(step_, episodes_, step_ >= total, metrics);

#include <algorithm>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "foxhunt/core/fp_env.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::train {

/// One call of a trainer's train(): owns the metrics log, the progress display and the result.
/// The calling thread flushes denormals to zero for the session (core/fp_env.h).
class RunSession {
 public:
  /// Clears any earlier stop request and opens the metrics log. `algo` goes into the result,
  /// `label` prefixes the progress display; the run is `total_steps` long and resumes at
  /// `start_step`.
  RunSession(const RunConfig& run, std::string algo, std::string label, int64_t total_steps,
             int64_t start_step);

  /// True when the run must stop before the next iteration (a stop request or stop_at_step);
  /// records whether it was interrupted.
  bool should_stop(int64_t step);
  /// Makes should_stop() at steps that are multiples of `every` ask `agree(interrupted_here)`
  /// whether any data-parallel rank was interrupted (train/data_parallel.h), so that all ranks
  /// stop at the same step; a stop request is then acted on only at those steps.
  void set_stop_agreement(std::function<bool(bool)> agree, int64_t every = 1) {
    agree_stop_ = std::move(agree);
    agree_every_ = std::max<int64_t>(1, every);
  }
  /// True when going from step `before` to `after` crossed a multiple of `interval` (0: never).
  static bool crossed(int64_t interval, int64_t before, int64_t after) {
    return interval > 0 && after / interval != before / interval;
  }
  /// True when a metrics line is due after the iteration from `before` to `after`.
  bool log_due(int64_t before, int64_t after) const {
    return crossed(run_.log_interval, before, after);
  }
  /// True when a checkpoint is due after the iteration from `before` to `after`.
  bool checkpoint_due(int64_t before, int64_t after) const {
    return crossed(run_.checkpoint_interval, before, after);
  }
  /// True when a log interval is configured at all.
  bool logging() const { return run_.log_interval > 0; }

  /// Writes a metrics line (file and on_log) and a progress line at `step` with `extra`.
  void log(const nlohmann::json& line, int64_t step, const std::string& extra);
  /// Writes a metrics line without a progress line (e.g. an end-of-epoch event).
  void emit(const nlohmann::json& line);
  /// Saves a checkpoint through `save(path)` when the run has a checkpoint path.
  void checkpoint(const std::function<void(const std::string&)>& save);
  /// Refreshes the live progress bar.
  void update(int64_t step) { progress_.update(step); }

  /// Seconds since the session started.
  double elapsed() const { return progress_.elapsed(); }
  /// Steps per second of this session.
  double rate(int64_t step) const { return progress_.rate(step); }
  /// The metrics lines written in this session.
  const MetricsLog& metrics_log() const { return log_; }
  /// True once should_stop() returned true.
  bool halted() const { return halted_; }

  /// Ends the progress display and returns the result of the run.
  TrainResult finish(int64_t steps, int64_t episodes, bool completed, nlohmann::json metrics);

 private:
  FlushDenormalsGuard flush_denormals_;
  const RunConfig& run_;
  MetricsLog log_;
  Progress progress_;
  TrainResult result_;
  bool halted_ = false;
  std::function<bool(bool)> agree_stop_;
  int64_t agree_every_ = 1;
};

}  // namespace foxhunt::train
