// ChunkRunner (models/parallel.h) and the serving pool that implements it (serving/thread_pool.h):
// every chunk runs exactly once, a chunk's exception comes back to the caller, an idle worker
// takes chunks; and a TFT stream pushed with the pool's idle worker equals the one-thread push
// bit for bit (the desk's own check, concurrent == serial: serving_test.cpp,
// ConcurrentEnsembleEqualsSerialBitForBit).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "foxhunt/models/parallel.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/serving/thread_pool.h"
#include "test_util.h"

namespace foxhunt::serving {
namespace {

using foxhunt::testing::max_abs_diff;
using foxhunt::testing::SeededTest;
using models::chunk_range;
using models::run_chunks;

// Runs `body` as task 0 of a run of `pool` (on the calling thread) beside a task that ends at
// once: the worker that took that one is then out of tasks and spins for the chunks `body`
// publishes, as on a bar whose small models are done while the TFT still runs.
void with_idle_worker(ThreadPool& pool, const std::function<void()>& body) {
  pool.run({body, [] {}});
}

TEST(ChunkRunnerTest, ChunkRangesCoverEveryItemOnce) {
  for (int64_t n : {0, 1, 5, 7, 225}) {
    for (int64_t chunks : {1, 2, 3, 4, 8}) {
      int64_t next = 0;
      for (int64_t i = 0; i < chunks; ++i) {
        const auto [b, e] = chunk_range(n, chunks, i);
        EXPECT_EQ(b, next) << n << " " << chunks << " " << i;
        EXPECT_GE(e - b, n / chunks);
        EXPECT_LE(e - b, n / chunks + 1);
        next = e;
      }
      EXPECT_EQ(next, n) << n << " " << chunks;
    }
  }
}

TEST(ChunkRunnerTest, EveryChunkRunsExactlyOnce) {
  ThreadPool pool(1);
  // Spinning helpers (the default), and helpers that sleep at once and are woken by the publisher.
  for (int64_t spin_us : {100, 0}) {
    pool.set_spin_us(spin_us);
    for (int rep = 0; rep < 200; ++rep) {
      const int64_t chunks = 1 + rep % 37;
      std::vector<std::atomic<int>> counts(static_cast<size_t>(chunks) + 1);  // + 1: overruns
      const auto count = [&](int64_t i) { counts[static_cast<size_t>(i)].fetch_add(1); };
      if (rep % 3 == 0)
        pool.parallel_for(chunks, count);  // outside a run: the caller alone
      else
        with_idle_worker(pool, [&] { pool.parallel_for(chunks, count); });
      for (int64_t i = 0; i <= chunks; ++i)
        ASSERT_EQ(counts[static_cast<size_t>(i)].load(), i < chunks ? 1 : 0)
            << "chunk " << i << " of " << chunks << ", rep " << rep << ", spin " << spin_us;
    }
  }
  // Without a runner: in order on the caller.
  std::vector<int64_t> order;
  run_chunks(nullptr, 5, [&](int64_t i) { order.push_back(i); });
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 2, 3, 4}));
  // A chunk's own parallel_for (the job slot is taken) runs on its thread, every chunk once.
  std::atomic<int> inner{0};
  with_idle_worker(pool, [&] {
    pool.parallel_for(4, [&](int64_t) { pool.parallel_for(3, [&](int64_t) { inner++; }); });
  });
  EXPECT_EQ(inner.load(), 12);
}

// A chunk body that takes 200 us (time for the worker to arrive) and counts the chunks that ran
// off the thread that built it.
struct OffCallerChunks {
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<int> count{0};
  void operator()(int64_t) {
    if (std::this_thread::get_id() != caller) count++;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
};

TEST(ChunkRunnerTest, AnIdleWorkerTakesChunks) {
  // The point of the pool's runner: chunks published while the worker is out of tasks run there
  // too. Chunks that take 200 us leave the worker time to arrive.
  ThreadPool pool(1);
  OffCallerChunks elsewhere;
  for (int rep = 0; rep < 50; ++rep)
    with_idle_worker(pool, [&] { pool.parallel_for(8, [&](int64_t i) { elsewhere(i); }); });
  EXPECT_GT(elsewhere.count.load(), 0);
}

TEST(ChunkRunnerTest, AWorkerJoinsChunksPublishedWhileItRanATask) {
  // The bar's order: the small models' task is still running on the worker when the costliest
  // model publishes its chunks; the worker must still take some once its task ends.
  ThreadPool pool(1);
  OffCallerChunks elsewhere;
  for (int rep = 0; rep < 20; ++rep) {
    std::atomic<bool> busy{false};
    pool.run({[&] {
                while (!busy.load()) std::this_thread::yield();  // the worker is in task 1
                pool.parallel_for(16, [&](int64_t i) { elsewhere(i); });
              },
              [&] {
                busy = true;
                std::this_thread::sleep_for(std::chrono::microseconds(500));
              }});
  }
  EXPECT_GT(elsewhere.count.load(), 0);
}

TEST(ChunkRunnerTest, AChunksExceptionIsRethrownAfterEveryChunkRan) {
  ThreadPool pool(1);
  for (int how = 0; how < 3; ++how) {  // inside a run, outside one, without a runner
    std::vector<std::atomic<int>> counts(9);
    const auto body = [&](int64_t i) {
      counts[static_cast<size_t>(i)]++;
      if (i == 3 || i == 6) throw std::runtime_error("chunk " + std::to_string(i));
    };
    try {
      if (how == 0)
        with_idle_worker(pool, [&] { pool.parallel_for(9, body); });
      else if (how == 1)
        pool.parallel_for(9, body);
      else
        run_chunks(nullptr, 9, body);
      ADD_FAILURE() << "no exception, case " << how;
    } catch (const std::runtime_error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what == "chunk 3" || what == "chunk 6") << what;
    }
    for (size_t i = 0; i < counts.size(); ++i) EXPECT_EQ(counts[i].load(), 1) << how << " " << i;
  }
  // The pool still works after a failed job.
  std::atomic<int> n{0};
  with_idle_worker(pool, [&] { pool.parallel_for(6, [&](int64_t) { n++; }); });
  EXPECT_EQ(n.load(), 6);
}

// ---- a TFT stream on two threads ------------------------------------------------------------

class StreamOnThreadsTest : public SeededTest {};

// Pushes `bars` random bars (the instrument id changes every 50 bars, so the refresh path runs)
// into two streams over one network: one alone, one with the pool's idle worker. Every forecast
// must be equal bit for bit; a few are checked against the window forward too.
void expect_tft_same_on_two_threads(const models::TftOptions& o, int64_t bars, uint64_t seed) {
  models::TftNet net(o);
  net->eval();
  auto gen = at::detail::createCPUGenerator(seed);
  const auto past = torch::randn({bars, o.past_features()}, gen);
  const auto future = torch::randn({bars, o.horizon(), o.future_features()}, gen);
  models::TftStream one(net), two(net);
  ThreadPool pool(1);
  for (int64_t t = 0; t < bars; ++t) {
    const int64_t id = (t / 50) % o.static_categories();
    const auto a = one.push(past[t], future[t], id);
    torch::Tensor b;
    with_idle_worker(pool, [&] { b = two.push(past[t], future[t], id, &pool); });
    ASSERT_TRUE(torch::equal(a, b)) << "bar " << t << ": " << max_abs_diff(a, b);
    if (t % 37 == 36) {
      torch::NoGradGuard ng;
      const int64_t start = std::max<int64_t>(0, t - two.window() + 1);
      const auto ref = net->forward(past.narrow(0, start, t - start + 1).unsqueeze(0),
                                    future[t].unsqueeze(0), torch::full({1}, id, torch::kLong));
      EXPECT_LT(max_abs_diff(b, ref.squeeze(0)), 1e-5) << "bar " << t;
    }
  }
}

TEST_F(StreamOnThreadsTest, TftDefaultsEqualOneThreadBitForBit) {
  // 225 past features, hidden 32: the new bar's VSN runs the unit-lane row kernel in chunks.
  expect_tft_same_on_two_threads(models::TftOptions{}, 300, 5);
}

TEST_F(StreamOnThreadsTest, TftOtherWidthsEqualOneThreadBitForBit) {
  // Hidden 16, embedding 4: the row kernel's generic widths; hidden 8: the 16-position kernel
  // (no row chunks), the decoder / encoder split alone.
  expect_tft_same_on_two_threads(
      foxhunt::testing::small_tft_options().hidden(16).real_embedding(4).window(20), 250, 6);
  expect_tft_same_on_two_threads(foxhunt::testing::small_tft_options(), 250, 7);
}

TEST_F(StreamOnThreadsTest, VsnRowKernelMatchesTheForward) {
  // One row through the unit-lane kernel (hidden a multiple of 16) against the batched VSN.
  struct Case {
    int64_t v, e, h, ctx;
  };
  ThreadPool pool(1);
  for (const auto& c : {Case{225, 8, 32, 32}, Case{7, 4, 16, 0}, Case{3, 16, 16, 8}}) {
    models::VariableSelectionNetwork vsn(
        models::VariableSelectionNetworkOptions(c.v, c.e, c.h).context(c.ctx));
    vsn->eval();
    torch::NoGradGuard ng;
    const auto x = torch::randn({1, 6, c.v});
    const auto ctx = c.ctx > 0 ? torch::randn({1, c.ctx}) : torch::Tensor();
    const auto ref = vsn->forward(x, ctx).output.squeeze(0).narrow(0, 2, 1);
    const auto f = vsn->fold();
    const auto bias = vsn->selection_bias(f, ctx);
    const auto row = x[0].narrow(0, 2, 1).contiguous();
    const auto alone = vsn->forward_rows(row, bias, f);
    EXPECT_LT(max_abs_diff(alone, ref), 1e-5) << c.v << " " << c.e << " " << c.h;
    torch::Tensor shared;
    with_idle_worker(pool, [&] {
      c10::InferenceMode guard;
      shared = vsn->forward_rows(row, bias, f, &pool);
    });
    EXPECT_TRUE(torch::equal(alone, shared)) << c.v << " " << c.e << " " << c.h;
  }
}

}  // namespace
}  // namespace foxhunt::serving
