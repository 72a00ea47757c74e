// Test entry point: installs the accounting allocator before any tensor exists (runtime_init).
// Tests named *_CUDA start with FOXHUNT_REQUIRE_CUDA() (test_util.h): without a GPU they are
// reported as skipped, not hidden.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "foxhunt/memory/runtime_init.h"

int main(int argc, char** argv) {
  foxhunt::runtime_init();
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
