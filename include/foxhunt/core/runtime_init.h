#pragma once
/// \file runtime_init.h
/// Process start-up shared by the CLI, the tests and the benchmarks.

namespace foxhunt {

/// Call first thing in main(), before any tensor exists: installs the accounting allocator (so
/// every CPU tensor byte is counted) and sets the intra-op thread count (OMP_NUM_THREADS or the
/// number of cores). Idempotent.
void runtime_init();

}  // namespace foxhunt
