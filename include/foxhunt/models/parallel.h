#pragma once
/// \file parallel.h
/// Threads a caller lends a model's forward (ChunkRunner): serving hands its streams one that
/// runs chunks on the desk's idle workers, so the costliest model's push uses the core the small
/// models have finished with. Models split their work into chunks that write disjoint memory
/// with the same arithmetic whoever runs them, so a push is bit for bit the same on any number of
/// threads. Without a runner the chunks run in order on the caller. Models never see serving.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>

namespace foxhunt::models {

/// A non-owning reference to a callable `void(int64_t chunk)`: no allocation, unlike
/// std::function. The callable must outlive every call through the reference.
class ChunkFn {
 public:
  /// Refers to `f` (a lambda, a functor).
  template <class F, std::enable_if_t<!std::is_same_v<std::decay_t<F>, ChunkFn>, int> = 0>
  ChunkFn(F&& f)  // NOLINT(google-explicit-constructor): passed as a lambda
      : obj_(const_cast<void*>(static_cast<const void*>(std::addressof(f)))),
        call_([](void* o, int64_t i) { (*static_cast<std::remove_reference_t<F>*>(o))(i); }) {}
  /// Runs chunk `i`.
  void operator()(int64_t i) const { call_(obj_, i); }

 private:
  void* obj_;
  void (*call_)(void*, int64_t);
};

/// Runs the chunks of one piece of a model's work on the calling thread and on whichever threads
/// the runner owns that are idle at the time (serving: ThreadPool, whose workers spin for chunks
/// once their own tasks are done).
class ChunkRunner {
 public:
  virtual ~ChunkRunner() = default;
  /// Calls `fn(i)` exactly once for every i in [0, chunks), concurrently and in any order, on the
  /// caller and on idle threads; returns when every call has returned. When calls threw, the
  /// first exception is rethrown after all chunks ended. A chunk may run on another thread: its
  /// thread-local state (c10::InferenceMode, grad mode) is that thread's, so a chunk that makes
  /// tensors sets its own guard.
  virtual void parallel_for(int64_t chunks, ChunkFn fn) = 0;
};

/// `runner->parallel_for(chunks, fn)`; with no runner (null) every chunk runs in order on the
/// caller, and the first exception is rethrown after all chunks ran (the runner's contract).
void run_chunks(ChunkRunner* runner, int64_t chunks, ChunkFn fn);

/// [begin, end) of chunk `i` when `n` items are split into `chunks` near-equal ranges (the first
/// n % chunks ranges one longer). Requires 0 <= i < chunks.
inline std::pair<int64_t, int64_t> chunk_range(int64_t n, int64_t chunks, int64_t i) {
  const int64_t base = n / chunks, extra = n % chunks;
  const int64_t begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

}  // namespace foxhunt::models
