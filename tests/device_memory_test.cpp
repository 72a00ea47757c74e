// One memory interface over the CPU ledger and the CUDA caching allocator (device_memory.h), and
// the planner on CUDA. The *_CUDA tests need a GPU and report as skipped without one; they are
// what scripts/gpu-check.sh runs: each model's forward on CUDA against the CPU, the CPU ledger's
// training footprint against the allocator's for the same step, the plan verified under the
// allocator's cap, and an over-budget step failing with the typed error.
#include "foxhunt/memory/device_memory.h"

#include <gtest/gtest.h>

#include <torch/torch.h>
#include "foxhunt/data/bars.h"

#include <cmath>

#include "foxhunt/models/fused_kernels.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/budget.h"
#include "foxhunt/plan/footprint.h"
#include "foxhunt/plan/planner.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using memory::device_in_use_bytes;
using memory::device_live_bytes;
using memory::device_peak_bytes;
using memory::device_reset_peak;
using memory::MemoryDevice;

TEST(DeviceMemoryTest, ParsesDevicesAndRejectsOthers) {
  EXPECT_FALSE(Device::parse("cpu", "t").is_cuda());
  const auto c = Device::parse("cuda", "t");
  EXPECT_TRUE(c.is_cuda());
  EXPECT_EQ(c.index(), -1);  // the current device: data-parallel ranks pick their own
  EXPECT_EQ(c.ordinal(), 0);
  EXPECT_EQ(c.str(), "cuda");
  EXPECT_EQ(c.resolved().str(), "cuda:0");
  const auto c1 = Device::parse("cuda:1", "t");
  EXPECT_EQ(c1.index(), 1);
  EXPECT_EQ(c1.str(), "cuda:1");
  EXPECT_EQ(Device::parse("cpu", "t").str(), "cpu");
  EXPECT_EQ(Device::parse("cuda:12", "t").ordinal(), 12);
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:x", "cuda:1x", "CPU", "", "cuda:99999"})
    EXPECT_THROW(Device::parse(bad, "t"), InputError) << bad;
  try {
    Device::parse("gpu", "stress");
    ADD_FAILURE() << "no throw";
  } catch (const InputError& e) {
    EXPECT_NE(
        std::string(e.what()).find("[stress] device: expected cpu, cuda or cuda:N, got 'gpu'"),
        std::string::npos)
        << e.what();
  }
  // Options read as the flag does; JSON is the string both ways.
  Device d;
  EXPECT_TRUE(d.is_cpu());
  d = "cuda:2";
  EXPECT_EQ(d, Device::cuda(2));
  EXPECT_NE(Device::cuda(), Device::cuda(0));
  EXPECT_EQ(Device::cuda().resolved(), Device::cuda(0));
  EXPECT_EQ(nlohmann::json(d).get<std::string>(), "cuda:2");
  EXPECT_EQ(nlohmann::json("cpu").get<Device>(), Device::cpu());
  EXPECT_THROW(nlohmann::json(3).get<Device>(), InputError);
  EXPECT_THROW(nlohmann::json("tpu").get<Device>(), InputError);
  // The torch device: a plain "cuda" stays the current device, an index is kept; a CUDA device
  // that is not there is an InputError saying so in one line (not LibTorch's CUDA text).
  EXPECT_EQ(models::to_torch(Device::cpu()), torch::Device(torch::kCPU));
  if (models::cuda_available()) {
    EXPECT_EQ(models::to_torch(Device::cuda(0)), torch::Device(torch::kCUDA, 0));
    EXPECT_EQ(models::to_torch(Device::cuda()), torch::Device(torch::kCUDA));
    EXPECT_THROW(models::to_torch(Device::cuda(999)), InputError);
  } else {
    for (const auto& d : {Device::cuda(), Device::cuda(3)}) {
      try {
        models::to_torch(d);
        ADD_FAILURE() << d.str() << " converted without a GPU";
      } catch (const InputError& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("device " + d.str() + ": expected a usable CUDA device, found none"),
                  std::string::npos)
            << m;
        EXPECT_EQ(m.find('\n'), std::string::npos) << m;
        EXPECT_EQ(m.find("http"), std::string::npos) << m;
      }
    }
  }
}

TEST(DeviceMemoryTest, CommandsOnAMissingGpuSayItInOneLine) {
  if (models::cuda_available()) GTEST_SKIP() << "a GPU is present";
  testing::TempDir tmp;
  const auto csv = tmp.file("bars.csv");
  data::write_bars_csv(csv, data::generate_synthetic({.bars = 300, .seed = 2}));
  for (const std::string& cmd :
       {"train dqn --steps 10 --device cuda --out " + tmp.file("t"),
        "predict --bundles " + tmp.file("none") + " --data " + csv + " --device cuda",
        "backtest --bundles " + tmp.file("none") + " --data " + csv + " --device cuda"}) {
    const auto r = testing::run_cli(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.err;
    EXPECT_NE(r.err.find("expected a usable CUDA device, found none"), std::string::npos)
        << cmd << "\n"
        << r.err;
    EXPECT_EQ(r.err.find("https://"), std::string::npos) << cmd << "\n" << r.err;
  }
}

TEST(DeviceMemoryTest, CpuIsTheLedger) {
  const MemoryDevice cpu;
  const std::uint64_t live0 = device_live_bytes(cpu);
  EXPECT_EQ(live0, memory::live_bytes());
  EXPECT_EQ(device_in_use_bytes(cpu), memory::live_bytes() + memory::external_bytes());
  {
    auto t = torch::zeros({256, 1024});  // 1 MiB
    EXPECT_EQ(device_live_bytes(cpu), live0 + (1u << 20));
    device_reset_peak(cpu);
    EXPECT_EQ(device_peak_bytes(cpu), live0 + (1u << 20));
  }
  {
    memory::DeviceLimitGuard cap(cpu, device_in_use_bytes(cpu) + (1u << 20));
    EXPECT_EQ(memory::get_limit(), cap.bytes());
    EXPECT_THROW(memory::translate_oom([] { return torch::zeros({512, 1024}); }), OutOfMemoryError);
  }
  EXPECT_EQ(memory::get_limit(), 0u);
  const auto o = memory::measure_device_overheads(cpu);
  EXPECT_FALSE(o.measured);
  EXPECT_FALSE(o.note.empty());
}

// The switch the CUDA memory tests compare under: off, the CPU runs LibTorch's ops (same outputs,
// the unfused memory profile: Mamba-2's batch-64 serving peak was 16.37 MiB there against 5.29
// MiB fused), and the scope restores it.
TEST(DeviceMemoryTest, FusedCpuKernelsOffRunsTheLibTorchOps) {
  ASSERT_TRUE(models::fused_cpu_kernels());
  const auto fused = plan::measure_inference_footprint("mamba2", {64});
  plan::InferenceFootprint aten;
  {
    models::FusedCpuKernels off(false);
    EXPECT_FALSE(models::fused_cpu_kernels());
    aten = plan::measure_inference_footprint("mamba2", {64});
  }
  EXPECT_TRUE(models::fused_cpu_kernels());
  EXPECT_GT(aten.runs[0].activation_bytes, 2 * fused.runs[0].activation_bytes);
  // Same outputs either way.
  for (const auto& name : models::model_names()) {
    torch::manual_seed(3);
    auto m = models::make_model(name);
    m->module().eval();
    const auto b = m->example_batch(4, 0, torch::kCPU, 5);
    torch::NoGradGuard ng;
    const auto want = m->forward(b);
    models::FusedCpuKernels off(false);
    const auto got = m->forward(b);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_TRUE(torch::allclose(want[i], got[i], 1e-4, 1e-5)) << name << " output " << i;
  }
}

TEST(DeviceMemoryTest, PlanOnCudaWithoutAGpuIsAnInputError) {
  if (memory::cuda_memory_available()) GTEST_SKIP() << "a GPU is present; see the *_CUDA tests";
  plan::PlanOptions o;
  o.model = "ppo";
  o.train.device = "cuda";
  o.budget = memory::Budget::of_bytes(64u << 20);
  EXPECT_THROW(plan::plan_batch(o), InputError);
  const auto r = testing::run_cli("plan ppo --device cuda --budget-mib 64");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("expected a CUDA device"), std::string::npos) << r.err;
}

TEST(DeviceMemoryTest, BudgetOnCudaWithoutAGpuIsAnInputError) {
  if (memory::cuda_memory_available()) GTEST_SKIP() << "a GPU is present; see the *_CUDA tests";
  plan::BudgetOptions o;
  o.device = "cuda";
  EXPECT_THROW(plan::validate_budget(o), InputError);
  auto r = testing::run_cli("budget --device cuda --json");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << r.err;
  EXPECT_THROW(
      plan::measure_inference_footprint("dqn", {1}, 0, 42, {}, models::Precision::kFp32, "cuda"),
      InputError);
}

TEST(DeviceMemoryTest, CudaFootprintsRejectTheCpuOnlyInt8Tft) {
  // Checked before any device is touched, so it holds with or without a GPU.
  EXPECT_THROW(
      plan::measure_inference_footprint("tft", {1}, 0, 42, {}, models::Precision::kInt8, "cuda"),
      InputError);
  plan::BudgetOptions o;
  o.device = "cuda";
  o.precision = {{"tft", models::Precision::kInt8}};
  EXPECT_THROW(plan::validate_budget(o), InputError);
}

// cuDNN off for the scope: CUDA then runs the RNNs with the native kernels (the LibTorch ops the
// CPU runs), so the ledger comparison compares the same ops. With cuDNN on, its RNN workspace,
// reserve and dropout state are real card bytes the product's CUDA footprints do measure; the
// tests record them (gpu-check.sh reports them) but cannot predict them from the CPU ledger.
class CudnnOff {
 public:
  CudnnOff() : was_(at::globalContext().userEnabledCuDNN()) {
    at::globalContext().setUserEnabledCuDNN(false);
  }
  ~CudnnOff() { at::globalContext().setUserEnabledCuDNN(was_); }
  CudnnOff(const CudnnOff&) = delete;
  CudnnOff& operator=(const CudnnOff&) = delete;

 private:
  bool was_;
};

class CudaModelTest : public testing::SeededTest,
                      public ::testing::WithParamInterface<std::string> {};

TEST_P(CudaModelTest, ForwardMatchesCpu_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  const std::string name = GetParam();
  torch::manual_seed(7);
  auto cpu = models::make_model(name);
  auto gpu = models::make_model(name);
  // The same weights on both devices.
  {
    torch::NoGradGuard ng;
    auto src = cpu->module().parameters();
    auto dst = gpu->module().parameters();
    ASSERT_EQ(src.size(), dst.size());
    for (size_t i = 0; i < src.size(); ++i) dst[i].copy_(src[i]);
    auto bs = cpu->module().buffers();
    auto bd = gpu->module().buffers();
    for (size_t i = 0; i < bs.size(); ++i) bd[i].copy_(bs[i]);
  }
  cpu->module().eval();
  gpu->module().eval();
  gpu->to(torch::Device(torch::kCUDA));
  const auto b = cpu->example_batch(8, 0, torch::kCPU, 11);
  const auto gb = cpu->example_batch(8, 0, torch::Device(torch::kCUDA), 11);
  torch::NoGradGuard ng;
  const auto want = cpu->forward(b);
  const auto got = gpu->forward(gb);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto g = got[i].to(torch::kCPU);
    // cuDNN/cuBLAS reorder sums (and may use TF32 in convolutions): a relative band of 1e-3.
    const double err = (g - want[i]).abs().max().item<double>();
    const double scale = std::max(1.0, want[i].abs().max().item<double>());
    EXPECT_LE(err, 1e-3 * scale) << name << " output " << i;
  }
}

TEST_P(CudaModelTest, LedgerFootprintMatchesTheAllocatorForTheSameStep_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  const std::string name = GetParam();
  plan::TrainConfig cfg;
  cfg.batch = 16;
  if (name == "dqn") cfg.trainer_options = {{"buffer_size", 2000}};
  // The CPU side runs the LibTorch ops CUDA runs (the fused CPU kernels recompute instead of
  // saving, which CUDA has no counterpart of: the TFT's VSN saved 18x less on the CPU).
  const auto cpu = [&] {
    models::FusedCpuKernels aten_ops(false);
    return plan::measure_training_footprint(name, cfg);
  }();
  cfg.device = "cuda";
  // What cuDNN adds (its kernels, their workspaces and state), recorded, not compared.
  const auto with_cudnn = plan::measure_training_footprint(name, cfg);
  RecordProperty("cudnn_activation_bytes", std::to_string(with_cudnn.activation_bytes));
  RecordProperty("cudnn_optimizer_bytes", std::to_string(with_cudnn.optimizer_bytes));
  const auto gpu = [&] {
    CudnnOff native_rnn;
    return plan::measure_training_footprint(name, cfg);
  }();
  RecordProperty("native_activation_bytes", std::to_string(gpu.activation_bytes));
  RecordProperty("native_optimizer_bytes", std::to_string(gpu.optimizer_bytes));
  RecordProperty("cpu_activation_bytes", std::to_string(cpu.activation_bytes));
  RecordProperty("cpu_optimizer_bytes", std::to_string(cpu.optimizer_bytes));
  EXPECT_EQ(gpu.device, "cuda:0");
  EXPECT_EQ(gpu.parameter_bytes, cpu.parameter_bytes);
  // The allocator rounds each block up to 512 B: the fixed tags agree within that per tensor
  // (a few hundred tensors at most: 10% or 256 KiB, whichever is larger).
  const auto band = [](std::uint64_t a) { return std::max<double>(0.10 * double(a), 256 << 10); };
  EXPECT_NEAR(double(gpu.fixed_bytes), double(cpu.fixed_bytes), band(cpu.fixed_bytes));
  EXPECT_NEAR(double(gpu.gradient_bytes), double(cpu.gradient_bytes), band(cpu.gradient_bytes));
  EXPECT_NEAR(double(gpu.optimizer_bytes), double(cpu.optimizer_bytes), band(cpu.optimizer_bytes));
  // Activations: the stated band is +-35% (different kernels keep different temporaries:
  // cuDNN workspaces, fused CPU paths), reported by gpu-check.sh for every model.
  EXPECT_NEAR(double(gpu.activation_bytes), double(cpu.activation_bytes),
              0.35 * double(cpu.activation_bytes) + (1 << 20));
  // Host buffers are not the card's.
  EXPECT_EQ(gpu.external_bytes, 0u);
  EXPECT_EQ(gpu.host_bytes, cpu.host_bytes);
}

TEST_P(CudaModelTest, PlanIsVerifiedUnderTheAllocatorCapAndTwiceRunsOut_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  const std::string name = GetParam();
  plan::PlanOptions o;
  o.model = name;
  o.train.device = "cuda";
  if (name == "dqn") o.train.trainer_options = {{"buffer_size", 2000}};
  o.budget = memory::Budget::of_bytes(256u << 20);
  o.max_batch = 1 << 20;
  const auto r = plan::plan_batch(o);
  ASSERT_TRUE(r.verified);
  EXPECT_EQ(r.fixed.device, "cuda:0");
  EXPECT_LE(r.verified_peak_bytes, o.budget.bytes);
  // The enforced cap makes an over-budget step fail with the typed error.
  const auto over = plan::verify_batch(name, r.train, 4 * r.chosen_batch, o.budget.bytes);
  EXPECT_FALSE(over.ok);
  EXPECT_NE(over.error.find("out of memory"), std::string::npos) << over.error;
  EXPECT_EQ(memory::cuda_get_limit(0), 0u) << "the cap must be restored";
  const auto ov = memory::measure_device_overheads(MemoryDevice::parse("cuda", "t"));
  EXPECT_TRUE(ov.measured);
}

TEST_P(CudaModelTest, InferenceFootprintMatchesTheLedger_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  const std::string name = GetParam();
  // The same LibTorch ops on both sides (the fused CPU kernels have no CUDA counterpart).
  const auto cpu = [&] {
    models::FusedCpuKernels aten_ops(false);
    return plan::measure_inference_footprint(name, {1, 64});
  }();
  const auto with_cudnn =
      plan::measure_inference_footprint(name, {1, 64}, 0, 42, {}, models::Precision::kFp32, "cuda");
  for (const auto& r : with_cudnn.runs)
    RecordProperty("cudnn_activation_bytes_batch_" + std::to_string(r.batch),
                   std::to_string(r.activation_bytes));
  const auto gpu = [&] {
    CudnnOff native_rnn;
    return plan::measure_inference_footprint(name, {1, 64}, 0, 42, {}, models::Precision::kFp32,
                                             "cuda");
  }();
  for (size_t i = 0; i < gpu.runs.size() && i < cpu.runs.size(); ++i) {
    RecordProperty("native_activation_bytes_batch_" + std::to_string(gpu.runs[i].batch),
                   std::to_string(gpu.runs[i].activation_bytes));
    RecordProperty("cpu_activation_bytes_batch_" + std::to_string(cpu.runs[i].batch),
                   std::to_string(cpu.runs[i].activation_bytes));
  }
  EXPECT_EQ(gpu.device, "cuda:0");
  EXPECT_EQ(gpu.parameter_bytes, cpu.parameter_bytes);
  // The move to the card allocates the parameters and buffers, rounded to 512 B blocks.
  EXPECT_NEAR(double(gpu.construction_live_bytes), double(cpu.parameter_bytes + cpu.buffer_bytes),
              std::max(0.10 * double(cpu.parameter_bytes + cpu.buffer_bytes), 256.0 * 1024));
  ASSERT_EQ(gpu.runs.size(), 2u);
  // Serving activations: a stated band of +-50% + 2 MiB (cuDNN/cuBLAS keep other temporaries
  // than the CPU kernels); gpu-check.sh reports both.
  for (size_t i = 0; i < 2; ++i)
    EXPECT_NEAR(double(gpu.runs[i].activation_bytes), double(cpu.runs[i].activation_bytes),
                0.5 * double(cpu.runs[i].activation_bytes) + (2 << 20))
        << "batch " << gpu.runs[i].batch;
}

TEST(CudaBudgetTest, BudgetMeasuresTheCardUnderItsCapWithTheGpuTags_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  plan::BudgetOptions o;
  o.device = "cuda";
  const auto rep = plan::validate_budget(o);
  EXPECT_EQ(rep.device, "cuda:0");
  EXPECT_EQ(rep.enforced_cap_bytes, rep.budget_bytes);
  EXPECT_EQ(memory::cuda_get_limit(0), 0u) << "the cap must be restored";
  ASSERT_EQ(rep.views.size(), 3u);
  for (const auto& v : rep.views) EXPECT_GT(v.bytes, 0u) << v.name;
  for (const auto& r : rep.rows) EXPECT_EQ(r.footprint.device, "cuda:0");
  EXPECT_TRUE(rep.overheads.measured);
  EXPECT_TRUE(rep.ok) << rep.table();
  const auto j = rep.to_json();
  EXPECT_TRUE(j["device_overheads"]["measured"].get<bool>());
  // A budget the training view cannot fit: the allocator cap stops it with the typed error.
  o.budget = memory::Budget::of_bytes(4u << 20);
  EXPECT_THROW(plan::validate_budget(o), OutOfMemoryError);
  EXPECT_EQ(memory::cuda_get_limit(0), 0u);
}

INSTANTIATE_TEST_SUITE_P(Registry, CudaModelTest, ::testing::ValuesIn(models::model_names()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace foxhunt
