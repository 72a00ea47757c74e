#pragma once
/// \file runtime_init.h
/// Process start-up shared by the CLI, the tests and the benchmarks.

namespace foxhunt {

/// Call first thing in main(), before any tensor exists: installs the accounting allocator (so
/// every CPU tensor byte is counted) and sets the intra-op thread count (FOXHUNT_THREADS, else
/// OMP_NUM_THREADS, else 1). Idempotent.
void runtime_init();

}  // namespace foxhunt
