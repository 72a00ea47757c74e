// Memory profiler: snapshots and deltas, the background sampler, report and JSON.
#include "foxhunt/memory/profiler.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <thread>

#include "foxhunt/core/units.h"
#include "test_util.h"

namespace foxhunt::memory {
namespace {

using foxhunt::testing::SeededTest;

class ProfilerTest : public SeededTest {};

TEST_F(ProfilerTest, SnapshotDeltaEqualsAKnownAllocation) {
  const auto before = take_snapshot();
  torch::Tensor t;
  {
    MemoryScope s("profilertest_known");
    t = torch::empty({3 * 1024 * 1024}, torch::kUInt8);
  }
  const auto after = take_snapshot();
  const auto d = diff(before, after);
  EXPECT_EQ(d.live_bytes, 3 * 1024 * 1024);
  EXPECT_EQ(d.alloc_count, 1u);
  EXPECT_EQ(d.free_count, 0u);
  ASSERT_EQ(d.scopes.size(), 1u);
  EXPECT_EQ(d.scopes[0].name, "profilertest_known");
  EXPECT_EQ(d.scopes[0].live_bytes, 3 * 1024 * 1024);
  EXPECT_GE(after.rss_bytes, 1u) << "RSS must be readable from /proc/self/statm";
  t = torch::Tensor();
  EXPECT_EQ(diff(before, take_snapshot()).live_bytes, 0);
}

TEST_F(ProfilerTest, SamplerCollectsASeriesWithPeakAboveAverage) {
  ProfilerOptions opts;
  opts.period_ms = 2;
  Profiler prof(opts);
  EXPECT_THROW(prof.baseline(), InputError);
  prof.start();
  EXPECT_TRUE(prof.running());
  // Hold a known block for part of the run so the series is not flat.
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  {
    auto t = torch::empty({8 * 1024 * 1024}, torch::kUInt8);
    t.fill_(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  prof.stop();
  EXPECT_FALSE(prof.running());
  const auto samples = prof.samples();
  // start() and stop() each take one; the thread adds more. Counting loosely: a loaded machine
  // may run the thread rarely, but it does run in 120 ms of wall time.
  ASSERT_GE(samples.size(), 5u);
  for (std::size_t i = 1; i < samples.size(); ++i) EXPECT_GE(samples[i].t, samples[i - 1].t);
  const auto live = prof.live_summary();
  EXPECT_GE(static_cast<double>(live.peak), live.average);
  const auto base = prof.baseline().ledger.live_bytes;
  EXPECT_EQ(live.first, base);
  EXPECT_EQ(live.last, base);
  // The exact ledger peak saw the 8 MiB block even if no sample did.
  EXPECT_GE(prof.current().ledger.peak_bytes, base + 8 * 1024 * 1024);
  const auto rss = prof.rss_summary();
  EXPECT_GE(static_cast<double>(rss.peak), rss.average);
  EXPECT_GT(rss.peak, 0u);
}

TEST_F(ProfilerTest, ReportAndJson) {
  ProfilerOptions opts;
  opts.period_ms = 1;
  Profiler prof(opts);
  prof.start();
  torch::Tensor t;
  {
    MemoryScope s("profilertest_report");
    t = torch::empty({1536}, torch::kUInt8);
  }
  add_external("profilertest/blob", 2048);
  prof.stop();
  const auto text = prof.report();
  EXPECT_NE(text.find("ledger live"), std::string::npos) << text;
  EXPECT_NE(text.find("+1.50 KiB"), std::string::npos) << text;
  EXPECT_NE(text.find("profilertest_report"), std::string::npos) << text;
  EXPECT_NE(text.find(kExternalLabel), std::string::npos) << text;
  const auto j = prof.to_json();
  EXPECT_EQ(j["delta"]["live_bytes"].get<std::int64_t>(), 1536);
  EXPECT_EQ(j["delta"]["external_bytes"].get<std::int64_t>(), 2048);
  EXPECT_GE(j["samples"].size(), 2u);
  EXPECT_GE(j["live"]["peak"].get<double>(), j["live"]["average"].get<double>());
  bool found = false;
  for (const auto& s : j["scopes"]) found |= s["name"] == "profilertest_report";
  EXPECT_TRUE(found);
  EXPECT_EQ(j["external"][0]["label"], kExternalLabel);
  remove_external("profilertest/blob", 2048);
}

TEST_F(ProfilerTest, MaxSamplesBoundsTheSeries) {
  ProfilerOptions opts;
  opts.period_ms = 1;
  opts.max_samples = 3;
  Profiler prof(opts);
  prof.start();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  prof.stop();
  EXPECT_LE(prof.samples().size(), 3u);
  EXPECT_GE(prof.samples().size(), 2u);
}

TEST_F(ProfilerTest, BadOptionsAreInputErrors) {
  ProfilerOptions opts;
  opts.period_ms = 0;
  EXPECT_THROW(Profiler{opts}, InputError);
}

TEST(UnitsTest, HumanBytes) {
  EXPECT_EQ(human_bytes(0), "0 B");
  EXPECT_EQ(human_bytes(1023), "1023 B");
  EXPECT_EQ(human_bytes(1024), "1.00 KiB");
  EXPECT_EQ(human_bytes(1.5 * 1024 * 1024), "1.50 MiB");
  EXPECT_EQ(human_bytes(4.0 * 1024 * 1024 * 1024), "4.00 GiB");
  EXPECT_EQ(human_bytes(-2048), "-2.00 KiB");
}

}  // namespace
}  // namespace foxhunt::memory
