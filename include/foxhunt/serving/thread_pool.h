#pragma once
/// \file thread_pool.h
/// The serving runtime's worker threads (ThreadPool): a bar's models run as tasks on them, and a
/// model that splits its own work (models::ChunkRunner) gets the workers whose tasks are done.

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "foxhunt/core/no_copy.h"
#include "foxhunt/models/parallel.h"

namespace foxhunt::serving {

/// Runs batches of independent tasks on a fixed set of worker threads, and lends a running task
/// the workers that have run out of tasks (models::ChunkRunner).
class ThreadPool : public models::ChunkRunner {
 public:
  /// Starts `threads` workers (>= 0; 0 runs every task on the caller).
  explicit ThreadPool(int threads);
  ~ThreadPool() override;
  FOXHUNT_NO_COPY(ThreadPool);
  /// Runs every task, in order of their index, on the workers and on the calling thread, which
  /// takes the first task itself (no wake-up between a bar and its costliest model) and then
  /// whatever is left; returns when all are done and rethrows the first task's exception.
  /// A thread out of tasks while others still run spins for their chunks (`parallel_for`), and
  /// sleeps after `spin_us` without one; an idle worker also spins `spin_us` for the next run
  /// before it sleeps (a sleeping worker's wake-up took ~60 us on a 2-core VM).
  void run(const std::vector<std::function<void()>>& tasks);
  /// Runs `fn(i)` for every chunk i in [0, chunks) on the caller and on the pool's threads that
  /// are idle inside the same `run` (the caller alone outside one, or while another task's
  /// chunks are out); models::ChunkRunner's contract. A hand-off costs a few atomic operations
  /// when a worker is spinning.
  void parallel_for(int64_t chunks, models::ChunkFn fn) override;

  /// Microseconds an idle worker spins for chunks or for the next run before it sleeps (default
  /// 500: bars closer than that find the worker awake); returns the old value.
  int64_t set_spin_us(int64_t us);
  /// Worker threads (not counting the caller).
  int threads() const;

  /// The workers that serve `models` tasks beside the caller on this machine: one per core
  /// left (the caller has one), at most one per task but the caller's. 0 on one core.
  static int workers_for(size_t models);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace foxhunt::serving
