// CUDA memory statistics (LibTorch's caching allocator) behind the ledger's query API. Tests
// named *_CUDA need a GPU and are skipped by tests/main.cpp where there is none.
#include "foxhunt/memory/cuda_memory.h"
#include "foxhunt/core/cuda_plugin.h"
#include "foxhunt/core/units.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "foxhunt/memory/profiler.h"
#include "test_util.h"

namespace foxhunt::memory {
namespace {

using foxhunt::kMiB;

TEST(CudaMemoryTest, BackendMatchesTheBuildAndNoGpuIsClean) {
  if (cuda_plugin_built()) {
    EXPECT_TRUE(cuda_stats_compiled());
    EXPECT_NE(cuda_stats_backend().find("CUDACachingAllocator"), std::string::npos);
  } else {
    EXPECT_FALSE(cuda_stats_compiled());
    EXPECT_EQ(cuda_stats_backend(), "none (built without CUDA)");
  }
  EXPECT_EQ(cuda_memory_available(), cuda_device_count() > 0);
  if (cuda_memory_available()) GTEST_SKIP() << "a GPU is present; see the *_CUDA tests";
  EXPECT_EQ(cuda_device_count(), 0);
  try {
    cuda_memory_stats(0);
    FAIL() << "expected foxhunt::Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.component(), "cuda");
    const std::string m = e.what();
    EXPECT_TRUE(m.find("no CUDA device 0") != std::string::npos ||
                m.find("built without CUDA") != std::string::npos)
        << m;
  }
  EXPECT_THROW(cuda_live_bytes(), Error);
  EXPECT_THROW(cuda_reset_peak(), Error);
  EXPECT_THROW(cuda_set_limit(kMiB), Error);
  EXPECT_THROW({ CudaLimitGuard g(kMiB, 0); }, Error);
  // The profiler simply has no device series.
  EXPECT_FALSE(take_snapshot().device_allocated_bytes.has_value());
}

TEST(CudaMemoryTest, TensorMovesAllocatedBytesExactly_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  torch::Device dev(torch::kCUDA, 0);
  torch::cuda::synchronize();
  const auto before = cuda_memory_stats(0);
  EXPECT_GT(before.total_bytes, 0u);
  {
    auto t = torch::zeros({256, 1024}, torch::TensorOptions().device(dev));  // 1 MiB
    EXPECT_EQ(cuda_live_bytes(0) - before.allocated_bytes, kMiB);
    EXPECT_GE(cuda_memory_stats(0).reserved_bytes, cuda_live_bytes(0));
    const auto l = cuda_ledger_stats(0);
    EXPECT_EQ(l.live_bytes, cuda_live_bytes(0));
    EXPECT_GE(l.alloc_count, before.alloc_count + 1);
  }
  EXPECT_EQ(cuda_live_bytes(0), before.allocated_bytes);
}

TEST(CudaMemoryTest, PeakResets_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  torch::Device dev(torch::kCUDA, 0);
  cuda_reset_peak(0);
  const auto base = cuda_live_bytes(0);
  EXPECT_EQ(cuda_peak_bytes(0), base);
  { auto t = torch::empty({64 * kMiB}, torch::TensorOptions().dtype(torch::kUInt8).device(dev)); }
  EXPECT_EQ(cuda_peak_bytes(0), base + 64 * kMiB);
  cuda_reset_peak(0);
  EXPECT_EQ(cuda_peak_bytes(0), base);
}

TEST(CudaMemoryTest, CapThrowsTheTypedErrorAndRestores_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  torch::Device dev(torch::kCUDA, 0);
  cuda_empty_cache();
  const auto opts = torch::TensorOptions().dtype(torch::kUInt8).device(dev);
  const std::uint64_t reserved = cuda_memory_stats(0).reserved_bytes;
  {
    CudaLimitGuard cap(reserved + 256 * kMiB, 0);
    EXPECT_EQ(cuda_get_limit(0), reserved + 256 * kMiB);
    auto ok = torch::empty({64 * static_cast<std::int64_t>(kMiB)}, opts);
    EXPECT_THROW(
        translate_oom([&] { return torch::empty({1024 * static_cast<std::int64_t>(kMiB)}, opts); }),
        OutOfMemoryError);
  }
  EXPECT_EQ(cuda_get_limit(0), 0u);
  auto big = torch::empty({1024 * static_cast<std::int64_t>(kMiB)}, opts);  // fits again
  EXPECT_EQ(big.numel(), 1024 * static_cast<std::int64_t>(kMiB));
  EXPECT_THROW(cuda_set_limit(cuda_memory_stats(0).total_bytes + 1, 0), InputError);
}

TEST(CudaMemoryTest, ProfilerSamplesTheDevice_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  ProfilerOptions o;
  o.period_ms = 1;
  Profiler prof(o);
  prof.start();
  auto t = torch::empty({8 * static_cast<std::int64_t>(kMiB)},
                        torch::TensorOptions().dtype(torch::kUInt8).device(torch::kCUDA));
  prof.stop();
  ASSERT_TRUE(prof.device_summary().has_value());
  EXPECT_GE(prof.device_summary()->last, 8 * kMiB);
}

}  // namespace
}  // namespace foxhunt::memory
