// Test entry point: installs the accounting allocator before any tensor exists (runtime_init) and
// skips tests whose name ends in _CUDA when no GPU is present.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "foxhunt/memory/runtime_init.h"

int main(int argc, char** argv) {
  foxhunt::runtime_init();
  ::testing::InitGoogleTest(&argc, argv);
  if (!torch::cuda::is_available()) {
    std::string filter = ::testing::GTEST_FLAG(filter);
    filter += (filter.find('-') == std::string::npos ? "-" : ":");
    filter += "*_CUDA:*_CUDA/*";
    ::testing::GTEST_FLAG(filter) = filter;
  }
  return RUN_ALL_TESTS();
}
