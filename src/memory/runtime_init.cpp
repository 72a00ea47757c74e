#include "foxhunt/memory/runtime_init.h"

#include <torch/torch.h>

#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <mutex>
#include <string>
#include <thread>

#include "foxhunt/memory/ledger.h"

namespace foxhunt {

namespace {

// glibc serves a block above its mmap threshold (128 KiB, raised as blocks are freed) with a
// fresh mapping, and trims the heap's free top above twice that: a transient buffer of a few
// hundred KiB allocated per call (LibTorch's CPU allocator does not cache) then page-faults
// on every call. Measured on a CartPole DQN run (50,000 steps): 8.7 -> 7.3 s. Blocks up to 4 MiB
// stay on the heap and up to 64 MiB of free heap is kept; a user's own MALLOC_MMAP_THRESHOLD_ /
// MALLOC_TRIM_THRESHOLD_, or FOXHUNT_MALLOC_TUNING=0, leaves glibc as it is.
void tune_malloc() {
#if defined(__GLIBC__)
  const char* off = std::getenv("FOXHUNT_MALLOC_TUNING");
  if (off != nullptr && std::string(off) == "0") return;
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") == nullptr) mallopt(M_MMAP_THRESHOLD, 4 << 20);
  if (std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr) mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
}

}  // namespace

void runtime_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    // First, before LibTorch allocates anything on our behalf: tensors allocated earlier are
    // never counted.
    memory::install_ledger();
    tune_malloc();
    // Intra-op threads: FOXHUNT_THREADS, else OMP_NUM_THREADS (LibTorch reads it), else 1.
    // One by default because the models are small: on 2 cores, an OpenMP team of 2 that shares
    // a core with any other busy process spins at every barrier and was measured 10-100x slower
    // than one thread (a 3 ms forward took 1 s); batch-1 serving is fastest on one thread anyway.
    if (const char* env = std::getenv("FOXHUNT_THREADS")) {
      const int n = std::atoi(env);
      if (n > 0) torch::set_num_threads(n);
    } else if (std::getenv("OMP_NUM_THREADS") == nullptr) {
      torch::set_num_threads(1);
    }
  });
}

}  // namespace foxhunt
