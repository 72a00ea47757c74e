#include "foxhunt/memory/runtime_init.h"

#include <torch/torch.h>

#include <cstdlib>
#include <mutex>
#include <thread>

#include "foxhunt/memory/ledger.h"

namespace foxhunt {

void runtime_init() {
  static std::once_flag once;
  std::call_once(once, [] {
    // First, before LibTorch allocates anything on our behalf: tensors allocated earlier are
    // never counted.
    memory::install_ledger();
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
