#include "foxhunt/models/parallel.h"

#include <exception>

namespace foxhunt::models {

void run_chunks(ChunkRunner* runner, int64_t chunks, ChunkFn fn) {
  if (runner != nullptr) return runner->parallel_for(chunks, fn);
  std::exception_ptr first;
  for (int64_t i = 0; i < chunks; ++i) {
    try {
      fn(i);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

}  // namespace foxhunt::models
