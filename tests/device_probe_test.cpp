// Device probes: the nvidia-smi CSV parser on real-format samples and junk, NVML via dlopen,
// and clean "no driver" reports on machines without a GPU.
#include "foxhunt/memory/device_probe.h"
#include "foxhunt/core/units.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "foxhunt/core/cuda_plugin.h"
#include "foxhunt/core/error.h"
#include "foxhunt/memory/cuda_memory.h"
#include "test_util.h"

namespace foxhunt::memory {
namespace {

using foxhunt::testing::TempDir;

using foxhunt::kMiB;

std::string error_of(std::string_view text) {
  try {
    parse_nvidia_smi_csv(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

// One parsed row: index, name, and used / total MiB.
void expect_gpu(const GpuMemoryInfo& g, int index, const std::string& name, uint64_t used_mib,
                uint64_t total_mib) {
  EXPECT_EQ(g.index, index);
  EXPECT_EQ(g.name, name);
  EXPECT_EQ(g.used_bytes, used_mib * kMiB);
  EXPECT_EQ(g.total_bytes, total_mib * kMiB);
}

TEST(DeviceProbeTest, ParsesOneGpu) {
  // nvidia-smi --query-gpu=name,memory.used,memory.free,memory.total --format=csv,noheader,nounits
  const auto gpus = parse_nvidia_smi_csv("NVIDIA GeForce RTX 3050 Ti Laptop GPU, 5, 3787, 4096\n");
  ASSERT_EQ(gpus.size(), 1u);
  expect_gpu(gpus[0], 0, "NVIDIA GeForce RTX 3050 Ti Laptop GPU", 5, 4096);
  EXPECT_EQ(gpus[0].free_bytes, 3787 * kMiB);
}

TEST(DeviceProbeTest, ParsesSeveralGpusWithCrLfAndBlankLines) {
  const auto gpus = parse_nvidia_smi_csv(
      "NVIDIA A100-SXM4-80GB, 1024, 80143, 81920\r\n"
      "\n"
      "NVIDIA A100-SXM4-80GB, 0, 81167, 81920\r\n"
      "NVIDIA H100 80GB HBM3, 72000, 9559, 81559\n");
  ASSERT_EQ(gpus.size(), 3u);
  expect_gpu(gpus[1], 1, "NVIDIA A100-SXM4-80GB", 0, 81920);
  expect_gpu(gpus[2], 2, "NVIDIA H100 80GB HBM3", 72000, 81559);
}

TEST(DeviceProbeTest, NotAvailableFieldsAreEmpty) {
  const auto gpus = parse_nvidia_smi_csv(
      "NVIDIA T4, [N/A], [N/A], 15360\n"
      "NVIDIA GRID vGPU, [Not Supported], 100, [Not Supported]\n"
      "Tesla K80, N/A, 11441, 11441\n");
  ASSERT_EQ(gpus.size(), 3u);
  EXPECT_FALSE(gpus[0].used_bytes.has_value());
  EXPECT_FALSE(gpus[0].free_bytes.has_value());
  EXPECT_EQ(gpus[0].total_bytes, 15360 * kMiB);
  EXPECT_FALSE(gpus[1].used_bytes.has_value());
  EXPECT_EQ(gpus[1].free_bytes, 100 * kMiB);
  EXPECT_FALSE(gpus[1].total_bytes.has_value());
  EXPECT_FALSE(gpus[2].used_bytes.has_value());
}

TEST(DeviceProbeTest, WrongColumnCountNamesTheLine) {
  const auto e = error_of("NVIDIA A10, 1, 2, 3\nNVIDIA A10, 1, 2\n");
  EXPECT_NE(e.find("[nvidia-smi] line 2"), std::string::npos) << e;
  EXPECT_NE(e.find("expected 4"), std::string::npos) << e;
  EXPECT_NE(e.find("got 3"), std::string::npos) << e;
  EXPECT_NE(error_of("NVIDIA A10, 1, 2, 3, 4\n").find("got 5"), std::string::npos);
  // What nvidia-smi prints when it has nothing to report is not a GPU line either.
  EXPECT_NE(error_of("No devices were found\n").find("line 1"), std::string::npos);
}

TEST(DeviceProbeTest, NonNumericAndNegativeValuesAreRejected) {
  auto e = error_of("NVIDIA A10, 12MiB, 2, 3\n");
  EXPECT_NE(e.find("line 1"), std::string::npos) << e;
  EXPECT_NE(e.find("memory.used"), std::string::npos) << e;
  EXPECT_NE(e.find("12MiB"), std::string::npos) << e;
  e = error_of("NVIDIA A10, 1, 2, 3\nNVIDIA A10, 1, -2, 3\n");
  EXPECT_NE(e.find("line 2: memory.free"), std::string::npos) << e;
  e = error_of("NVIDIA A10, 1, 2, \n");
  EXPECT_NE(e.find("memory.total"), std::string::npos) << e;
  e = error_of(" , 1, 2, 3\n");
  EXPECT_NE(e.find("GPU name"), std::string::npos) << e;
}

TEST(DeviceProbeTest, EmptyOutputIsAnError) {
  EXPECT_NE(error_of("").find("empty output"), std::string::npos);
  EXPECT_NE(error_of("\n \n\r\n").find("empty output"), std::string::npos);
}

TEST(DeviceProbeTest, MissingNvmlLibraryReportsNoDriver) {
  const auto p = probe_nvml("libfoxhunt-does-not-exist.so.1");
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.source, "nvml");
  EXPECT_NE(p.message.find("no NVIDIA driver"), std::string::npos) << p.message;
  EXPECT_TRUE(p.gpus.empty());
}

TEST(DeviceProbeTest, LibraryWithoutNvmlSymbolsIsReportedNotCalled) {
  const auto p = probe_nvml("libc.so.6");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.message.find("nvmlInit_v2"), std::string::npos) << p.message;
}

TEST(DeviceProbeTest, ProbesAgreeWithThisMachine) {
  // Here (no driver) both probes must say so; on a GPU machine they must list the GPUs.
  const auto nvml = probe_nvml();
  const auto smi = probe_nvidia_smi();
  const auto any = probe_devices();
  if (!nvml.ok) {
    EXPECT_NE(nvml.message.find("no NVIDIA driver"), std::string::npos) << nvml.message;
    EXPECT_TRUE(nvml.gpus.empty());
  } else {
    EXPECT_FALSE(nvml.gpus.empty());
    EXPECT_FALSE(nvml.driver_version.empty());
  }
  if (!smi.ok) {
    EXPECT_FALSE(smi.message.empty());
  }
  EXPECT_EQ(any.ok, nvml.ok || smi.ok);
  const auto j = to_json(any);
  EXPECT_EQ(j["ok"].get<bool>(), any.ok);
  EXPECT_TRUE(j["gpus"].is_array());
  if (!cuda_memory_available()) {
    EXPECT_EQ(cuda_device_count(), 0);
  }
}

TEST(DeviceProbeTest, NvidiaSmiNotFoundIsReported) {
  const auto p = probe_nvidia_smi("/nonexistent/nvidia-smi");
  EXPECT_FALSE(p.ok);
  EXPECT_NE(p.message.find("nvidia-smi not found"), std::string::npos) << p.message;
}

TEST(DeviceProbeTest, RunsAnExecutableAndParsesItsOutput) {
  // A stand-in nvidia-smi that prints what the real one prints for this query.
  TempDir dir;
  const auto exe = dir.file("nvidia-smi");
  {
    std::ofstream f(exe);
    f << "#!/bin/sh\n"
         "case \"$*\" in *--query-gpu=name,memory.used,memory.free,memory.total*) ;; "
         "*) echo bad args; exit 3;; esac\n"
         "echo 'NVIDIA H200, 512, 143259, 143771'\n";
  }
  ::chmod(exe.c_str(), 0755);
  const auto p = probe_nvidia_smi(exe);
  ASSERT_TRUE(p.ok) << p.message;
  ASSERT_EQ(p.gpus.size(), 1u);
  EXPECT_EQ(p.gpus[0].name, "NVIDIA H200");
  EXPECT_EQ(p.gpus[0].total_bytes, 143771 * kMiB);

  const auto bad = dir.file("failing-smi");
  {
    std::ofstream f(bad);
    f << "#!/bin/sh\necho 'NVIDIA-SMI has failed because it could not communicate with the "
         "NVIDIA driver.'\nexit 9\n";
  }
  ::chmod(bad.c_str(), 0755);
  const auto q = probe_nvidia_smi(bad);
  EXPECT_FALSE(q.ok);
  EXPECT_NE(q.message.find("status 9"), std::string::npos) << q.message;
  EXPECT_NE(q.message.find("NVIDIA-SMI has failed"), std::string::npos) << q.message;
}

TEST(DeviceProbeTest, InfoReportsLedgerAndProbes) {
  auto r = foxhunt::testing::run_cli("info --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["ledger_installed"].get<bool>());
  EXPECT_EQ(j["cuda_memory_stats_backend"].get<std::string>(), cuda_stats_backend());
  EXPECT_EQ(j["nvml"]["ok"].get<bool>(), probe_nvml().ok);
  EXPECT_EQ(j["nvidia_smi"]["source"], "nvidia-smi");
  // The CLI's plugin lies beside it (build/): info loads it to answer, and says from where.
  if (cuda_plugin_built()) {
    EXPECT_EQ(j["cuda_plugin"].get<std::string>().rfind("loaded from /", 0), 0u)
        << j["cuda_plugin"];
    EXPECT_NE(j["cuda_plugin"].get<std::string>().find("/libfoxhunt_cuda.so"), std::string::npos);
  }
  r = foxhunt::testing::run_cli("info");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CUDA plugin      " + j["cuda_plugin"].get<std::string>()),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("memory ledger    installed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NVML"), std::string::npos) << r.out;
}

TEST(DeviceProbeTest, NvmlListsGpus_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  const auto p = probe_nvml();
  ASSERT_TRUE(p.ok) << p.message;
  ASSERT_FALSE(p.gpus.empty());
  for (const auto& g : p.gpus) {
    EXPECT_FALSE(g.name.empty());
    ASSERT_TRUE(g.total_bytes && g.used_bytes && g.free_bytes);
    EXPECT_GT(*g.total_bytes, 0u);
    EXPECT_LE(*g.used_bytes, *g.total_bytes);
  }
}

}  // namespace
}  // namespace foxhunt::memory
