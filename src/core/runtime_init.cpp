#include "foxhunt/core/runtime_init.h"

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
    // LibTorch defaults to 1 intra-op thread on these machines; use the cores unless told
    // otherwise.
    if (std::getenv("OMP_NUM_THREADS") == nullptr) {
      const unsigned hc = std::thread::hardware_concurrency();
      torch::set_num_threads(static_cast<int>(hc == 0 ? 1 : hc));
    }
  });
}

}  // namespace foxhunt
