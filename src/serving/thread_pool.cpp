#include "foxhunt/serving/thread_pool.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "foxhunt/core/error.h"
#include "foxhunt/memory/ledger.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#endif

namespace foxhunt::serving {

namespace {

constexpr const char* kThreadPoolComponent = "serving";

// One spin-loop iteration's hint to the core (x86 PAUSE), so a spinning worker leaves the
// sibling hyper-thread its cycles.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(_M_X64)
  _mm_pause();
#endif
}

// One iteration of a spin loop: PAUSE, and every 64th time a yield, so that on a machine with
// more runnable threads than cores a spinner gives its core to them (the thread it waits for
// among them) instead of burning its time slice.
inline void spin_once(uint32_t& spins) {
  cpu_relax();
  if (++spins % 64 == 0) std::this_thread::yield();
}

// One parallel_for's chunks, on the publishing thread's stack while it is out. Chunks are claimed
// one at a time from `next`, so each runs exactly once whoever takes it.
struct ChunkJob {
  ChunkJob(models::ChunkFn f, int64_t n, std::string s) : fn(f), chunks(n), scope(std::move(s)) {}
  // Claims and runs chunks until none is left.
  void work() {
    for (;;) {
      const int64_t i = next.fetch_add(1, std::memory_order_relaxed);
      if (i >= chunks) return;
      try {
        fn(i);
      } catch (...) {
        if (!failed.exchange(true, std::memory_order_acq_rel)) error = std::current_exception();
      }
      // Release: the chunk's writes (and `error`) before the publisher's acquire of `done`.
      done.fetch_add(1, std::memory_order_release);
    }
  }
  models::ChunkFn fn;
  const int64_t chunks;
  const std::string scope;  // the publisher's ledger scope, which helpers enter for its chunks
  std::atomic<int64_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;  // the first chunk's exception (written by the thread that set failed)
};

}  // namespace

struct ThreadPool::State {
  std::mutex mu;
  std::condition_variable work_cv, done_cv;
  const std::vector<std::function<void()>>* tasks = nullptr;
  size_t next = 0;
  bool stop = false;
  std::exception_ptr error;
  std::vector<std::thread> workers;
  int intra_op_threads = 1;

  // Chunks lent to idle threads (parallel_for). `job` is the one published job (null: none);
  // `job_seq` counts publications, so a helper enters each job once; `helpers` counts threads
  // inside the job, which the publisher waits out before its stack frame (the job) goes away.
  std::atomic<ChunkJob*> job{nullptr};
  std::atomic<uint64_t> job_seq{0};
  std::atomic<int> helpers{0};
  std::atomic<int> sleepers{0};  // helpers asleep on work_cv (a publisher wakes them)
  // Tasks of the current run not yet finished: written under the lock, read without it by the
  // threads spinning for chunks.
  std::atomic<size_t> running{0};
  std::atomic<uint64_t> epoch{0};  // bumped as each run ends
  std::atomic<int64_t> spin_ns{500000};
  std::atomic<uint64_t> runs{0};  // bumped as a run publishes its tasks (idle workers spin on it)

  // Runs the chunks of the published job unless it is the one of sequence `last_seq` (entered
  // before); returns whether it entered one. Lock not held.
  bool join_job(uint64_t& last_seq) {
    if (job.load(std::memory_order_acquire) == nullptr) return false;
    const uint64_t seq = job_seq.load(std::memory_order_acquire);
    if (seq == last_seq) return false;
    last_seq = seq;
    helpers.fetch_add(1, std::memory_order_seq_cst);
    if (ChunkJob* j = job.load(std::memory_order_seq_cst)) {
      std::optional<memory::MemoryScope> in_scope;  // the chunks' bytes are the task's
      if (!j->scope.empty()) in_scope.emplace(j->scope);
      j->work();
    }
    helpers.fetch_sub(1, std::memory_order_release);
    return true;
  }

  // Out of tasks while the run of epoch `e0` still has some running: runs the chunks they
  // publish until the run ends; sleeps on work_cv after spin_ns without a job. Unlocked on entry
  // and exit.
  void help(uint64_t e0) {
    using Clock = std::chrono::steady_clock;
    const auto live = [&] {
      return epoch.load(std::memory_order_acquire) == e0 &&
             running.load(std::memory_order_acquire) > 0;
    };
    auto idle_since = Clock::now();
    // 0: a job published before this call (while this thread ran a task) is entered too.
    uint64_t last_seq = 0;
    for (uint32_t spins = 0; live();) {
      if (join_job(last_seq)) {
        idle_since = Clock::now();
        continue;
      }
      spin_once(spins);
      if (spins % 64 != 0 || Clock::now() - idle_since < std::chrono::nanoseconds(spin_ns.load())) {
        continue;
      }
      std::unique_lock<std::mutex> lock(mu);
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      work_cv.wait(lock, [&] {
        return stop || !live() ||
               (job.load(std::memory_order_seq_cst) != nullptr &&
                job_seq.load(std::memory_order_seq_cst) != last_seq);
      });
      sleepers.fetch_sub(1, std::memory_order_relaxed);
      if (stop) return;
      idle_since = Clock::now();
    }
  }

  // Records a finished task (under the lock); the last one wakes the waiters.
  void finish_task(const std::exception_ptr& e) {
    if (e && !error) error = e;
    if (running.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      done_cv.notify_all();
      work_cv.notify_all();  // helpers asleep in help()
    }
  }

  void worker() {
    // OpenMP's thread count is per thread: a new thread would start with one team member per
    // core and four models would oversubscribe the cores. Use the caller's setting.
    at::set_num_threads(intra_op_threads);
    std::unique_lock<std::mutex> lock(mu);
    uint64_t last_seq = 0;
    for (;;) {
      if (!stop && (tasks == nullptr || next >= tasks->size())) {
        // Idle: spin for spin_ns before sleeping, so that a bar soon after this one finds the
        // worker awake (a futex wake-up took ~60 us on a 2-core VM, a third of a bar).
        const uint64_t r = runs.load(std::memory_order_relaxed);
        lock.unlock();
        const auto until =
            std::chrono::steady_clock::now() + std::chrono::nanoseconds(spin_ns.load());
        for (uint32_t spins = 0; runs.load(std::memory_order_acquire) == r;) {
          spin_once(spins);
          if (spins % 64 == 0 && std::chrono::steady_clock::now() >= until) break;
        }
        lock.lock();
      }
      work_cv.wait(lock, [&] { return stop || (tasks != nullptr && next < tasks->size()); });
      if (stop) return;
      // Chunks published by a running task come before the next task: they are on the bar's
      // critical path (the costliest model), the tasks left are not.
      // The lock is dropped to run them: the run may end, or its tasks be taken, meanwhile, so
      // the loop starts over (a task index taken after that would read a finished run's tasks).
      if (job.load(std::memory_order_acquire) != nullptr &&
          job_seq.load(std::memory_order_acquire) != last_seq) {
        lock.unlock();
        join_job(last_seq);
        lock.lock();
        continue;
      }
      const size_t i = next++;
      lock.unlock();
      std::exception_ptr e;
      try {
        (*tasks)[i]();
      } catch (...) {
        e = std::current_exception();
      }
      lock.lock();
      finish_task(e);
      if (running.load() == 0 || next < tasks->size()) continue;
      // Out of tasks while others still run: lend a hand to their chunks until the run ends.
      const uint64_t e0 = epoch.load();
      lock.unlock();
      help(e0);
      lock.lock();
    }
  }
};

ThreadPool::ThreadPool(int threads) : state_(std::make_unique<State>()) {
  FOXHUNT_CHECK(threads >= 0, kThreadPoolComponent, "thread pool: expected >= 0 threads, got ",
                threads);
  state_->intra_op_threads = at::get_num_threads();
  for (int i = 0; i < threads; ++i)
    state_->workers.emplace_back([s = state_.get()] { s->worker(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->work_cv.notify_all();
  for (auto& t : state_->workers) t.join();
}

int ThreadPool::workers_for(size_t models) {
  const auto cores = static_cast<size_t>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(std::min(models, cores) - 1);
}

int ThreadPool::threads() const {
  return static_cast<int>(state_->workers.size());
}

int64_t ThreadPool::set_spin_us(int64_t us) {
  FOXHUNT_CHECK(us >= 0, kThreadPoolComponent, "thread pool: expected spin_us >= 0, got ", us);
  return state_->spin_ns.exchange(us * 1000) / 1000;
}

void ThreadPool::run(const std::vector<std::function<void()>>& tasks) {
  if (tasks.empty()) return;
  auto& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.tasks = &tasks;
  s.next = 0;
  s.error = nullptr;
  s.running.store(tasks.size());
  s.runs.fetch_add(1, std::memory_order_release);
  if (tasks.size() > 1) s.work_cv.notify_all();
  // The caller works too: it takes task 0 (the costliest, Ensemble::task_order) at once, while
  // the workers wake up, then whatever is left, then the chunks of what still runs.
  while (s.next < tasks.size()) {
    const size_t i = s.next++;
    lock.unlock();
    std::exception_ptr e;
    try {
      tasks[i]();
    } catch (...) {
      e = std::current_exception();
    }
    lock.lock();
    s.finish_task(e);
  }
  if (s.running.load() > 0) {
    const uint64_t e0 = s.epoch.load();
    lock.unlock();
    s.help(e0);
    lock.lock();
  }
  s.done_cv.wait(lock, [&] { return s.running.load() == 0; });
  s.tasks = nullptr;
  s.epoch.fetch_add(1, std::memory_order_acq_rel);
  if (s.sleepers.load() > 0) s.work_cv.notify_all();
  if (s.error) std::rethrow_exception(s.error);
}

void ThreadPool::parallel_for(int64_t chunks, models::ChunkFn fn) {
  auto& s = *state_;
  // One job out at a time: a second (a chunk's own parallel_for, another task's) runs serially,
  // known before the job (and its scope's name) is made when the slot is visibly taken.
  if (chunks <= 1 || s.workers.empty() || s.job.load(std::memory_order_acquire) != nullptr)
    return models::run_chunks(nullptr, chunks, fn);
  ChunkJob j(fn, chunks, memory::current_scope());
  ChunkJob* none = nullptr;
  if (!s.job.compare_exchange_strong(none, &j, std::memory_order_seq_cst))
    return models::run_chunks(nullptr, chunks, fn);
  s.job_seq.fetch_add(1, std::memory_order_seq_cst);
  if (s.sleepers.load(std::memory_order_seq_cst) > 0) {
    std::lock_guard<std::mutex> lock(s.mu);
    s.work_cv.notify_all();
  }
  j.work();
  uint32_t spins = 0;
  while (j.done.load(std::memory_order_acquire) < chunks) spin_once(spins);
  s.job.store(nullptr, std::memory_order_seq_cst);
  while (s.helpers.load(std::memory_order_seq_cst) > 0) spin_once(spins);
  if (j.error) std::rethrow_exception(j.error);
}

}  // namespace foxhunt::serving
