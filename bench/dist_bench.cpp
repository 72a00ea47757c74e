// What data parallelism costs per step on this machine: c10d Gloo all-reduce over loopback
// between two ranks (rank 1 on a helper thread, as in PyTorch's c10d tests), at the bucket sizes
// foxhunt's models produce.
//   build/dist_bench [--benchmark_filter=AllReduce]
#include <atomic>
#include <thread>

#include "bench_main.h"
#include "foxhunt/dist/communicator.h"
#include "foxhunt/dist/launcher.h"

namespace {

using foxhunt::dist::Communicator;
using foxhunt::dist::DistOptions;

// Two connected ranks in one process.
struct Pair {
  std::shared_ptr<Communicator> r0, r1;

  Pair() {
    const int port = foxhunt::dist::free_local_port();
    auto opts = [&](int64_t r) {
      return DistOptions().world_size(2).rank(r).master("127.0.0.1:" + std::to_string(port));
    };
    std::thread t([&] { r1 = Communicator::connect(opts(1), torch::kCPU); });
    r0 = Communicator::connect(opts(0), torch::kCPU);
    t.join();
  }
};

// All-reduce of `bytes` (state.range(0)) of float32 per iteration, timed on rank 0; rank 1 runs
// the same fixed number of all-reduces on its own thread (each size runs once, with a fixed
// iteration count, so both ranks know it).
void BM_AllReduce(benchmark::State& state) {
  static Pair* pair = new Pair();  // one rendezvous for all sizes
  const int64_t n = state.range(0) / 4;
  const int64_t iterations = static_cast<int64_t>(state.max_iterations);
  auto a = torch::ones({n});
  auto b = torch::ones({n});
  std::thread peer([&] {
    for (int64_t i = 0; i < iterations; ++i) pair->r1->allreduce_sum_(b);
  });
  for (auto _ : state) pair->r0->allreduce_sum_(a);
  peer.join();
  state.SetBytesProcessed(state.iterations() * state.range(0));
  state.counters["bytes"] = static_cast<double>(state.range(0));
}

}  // namespace

int main(int argc, char** argv) {
  return foxhunt::bench::run_benchmarks(argc, argv, [] {
    // 4 KiB (dqn's last layers), 256 KiB (compact mamba2: 234,700 B in one bucket), 3.1 MiB
    // (the default TFT, 807,564 parameters), 25 MiB (a full DDP-sized bucket).
    const std::pair<int64_t, int64_t> sizes[] = {
        {4 << 10, 4000}, {256 << 10, 1000}, {3230256, 200}, {25 << 20, 30}};
    for (const auto& [bytes, iterations] : sizes)
      benchmark::RegisterBenchmark("BM_AllReduce", BM_AllReduce)
          ->Arg(bytes)
          ->Iterations(iterations)
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  });
}
