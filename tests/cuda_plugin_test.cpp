// The CUDA plugin (core/cuda_plugin.h): a process that stays on the CPU never maps LibTorch's CUDA
// libraries; the first CUDA device asked for loads them, with CUDA's kernels and device guard;
// a missing or foreign plugin is a clear device error. Each check that needs a process in which
// nothing has asked for CUDA yet runs itself again in a fresh one.
#include "foxhunt/core/cuda_plugin.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "foxhunt/core/error.h"
#include "foxhunt/memory/cuda_memory.h"
#include "foxhunt/memory/profiler.h"
#include "foxhunt/models/torch_device.h"
#include "test_util.h"

namespace foxhunt {
namespace {

bool maps_contain(const std::string& name) {
  std::ifstream in("/proc/self/maps");
  std::stringstream s;
  s << in.rdbuf();
  return s.str().find(name) != std::string::npos;
}

bool fresh() {
  return cuda_plugin_status() == "not loaded yet";
}

std::string current_test() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  return std::string(info->test_suite_name()) + "." + info->name();
}

// Runs the current test again in a new process of this binary, with FOXHUNT_CUDA_PLUGIN set to
// `plugin` (unset when empty); its exit status.
int rerun(const std::string& plugin) {
  const auto self = std::filesystem::read_symlink("/proc/self/exe").string();
  const std::string env =
      plugin.empty() ? "env -u FOXHUNT_CUDA_PLUGIN" : "env FOXHUNT_CUDA_PLUGIN='" + plugin + "'";
  const std::string cmd =
      env + " '" + self + "' --gtest_filter=" + current_test() + " >/dev/null 2>&1";
  return std::system(cmd.c_str());
}

bool env_is(const std::string& plugin) {
  const char* e = std::getenv("FOXHUNT_CUDA_PLUGIN");
  return plugin.empty() ? (e == nullptr) : (e != nullptr && plugin == e);
}

TEST(CudaPlugin, ACpuProcessLoadsLibTorchCudaOnlyWhenACudaDeviceIsAskedFor) {
  if (!fresh() || !env_is("")) {
    EXPECT_EQ(rerun(""), 0) << "the same test in a fresh process failed";
    return;
  }
  // CPU work through the library: nothing of CUDA is mapped.
  torch::nn::Linear lin(4, 2);
  lin->to(models::to_torch(Device::cpu()));
  const auto y = lin->forward(torch::randn({3, 4}));
  EXPECT_EQ(y.size(0), 3);
  {  // the memory profiler samples the device series only where CUDA was asked for
    memory::Profiler prof;
    prof.start();
    prof.stop();
  }
  EXPECT_FALSE(cuda_plugin_loaded());
  EXPECT_FALSE(maps_contain("libtorch_cuda.so"));
  EXPECT_FALSE(maps_contain("libfoxhunt_cuda.so"));
  EXPECT_TRUE(fresh());
  if (!cuda_plugin_built()) GTEST_SKIP() << "built without CUDA: there is no plugin";

  // The first CUDA device asked for loads the plugin, and LibTorch's CUDA with it.
  try {
    (void)models::to_torch(Device::cuda());
  } catch (const InputError&) {  // no GPU on this machine: still loaded
  }
  EXPECT_TRUE(cuda_plugin_loaded());
  EXPECT_TRUE(maps_contain("libfoxhunt_cuda.so"));
  EXPECT_TRUE(maps_contain("libtorch_cuda.so"));
  EXPECT_NE(cuda_plugin_status().find("loaded from /"), std::string::npos) << cuda_plugin_status();
  EXPECT_TRUE(c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA));
  const auto op = c10::Dispatcher::singleton().findSchema({"aten::add", "Tensor"});
  ASSERT_TRUE(op.has_value());
  EXPECT_TRUE(op->hasKernelForDispatchKey(c10::DispatchKey::CUDA));
  EXPECT_TRUE(memory::cuda_stats_compiled());
}

TEST(CudaPlugin, AFileNamedByTheEnvironmentIsTheOnlyOneTried) {
  const char* saved = std::getenv("FOXHUNT_CUDA_PLUGIN");
  const std::string keep = saved ? saved : "";
  ::setenv("FOXHUNT_CUDA_PLUGIN", "/opt/x/libfoxhunt_cuda.so", 1);
  EXPECT_EQ(detail::cuda_plugin_candidates(),
            std::vector<std::string>{"/opt/x/libfoxhunt_cuda.so"});
  ::unsetenv("FOXHUNT_CUDA_PLUGIN");
  const auto c = detail::cuda_plugin_candidates();
  ASSERT_GE(c.size(), 2u);
  // Beside this test binary, made absolute; the loader's own search path last.
  const auto self = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  EXPECT_EQ(c.front(), (self / "libfoxhunt_cuda.so").string());
  EXPECT_EQ(c.back(), "libfoxhunt_cuda.so");
  if (!keep.empty()) ::setenv("FOXHUNT_CUDA_PLUGIN", keep.c_str(), 1);
}

TEST(CudaPlugin, AnInstallMovedToAnotherPrefixFindsItsOwnPlugin) {
  if (!cuda_plugin_built()) GTEST_SKIP() << "built without CUDA: there is no plugin";
  // PREFIX/bin/foxhunt and PREFIX/<libdir>/libfoxhunt_cuda.so, copied from the build: the CLI
  // must load the plugin of its own prefix before the build tree's.
  ::unsetenv("FOXHUNT_CUDA_PLUGIN");
  const auto c = detail::cuda_plugin_candidates();
  const auto self = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  ASSERT_GE(c.size(), 3u);
  const std::string up = self + "/../", file = "/libfoxhunt_cuda.so";
  ASSERT_EQ(c[1].rfind(up, 0), 0u) << c[1];
  const std::string libdir = c[1].substr(up.size(), c[1].size() - up.size() - file.size());
  const auto prefix =
      std::filesystem::temp_directory_path() / ("foxhunt_prefix_" + std::to_string(::getpid()));
  std::filesystem::remove_all(prefix);
  std::filesystem::create_directories(prefix / "bin");
  std::filesystem::create_directories(prefix / libdir);
  const auto build = std::filesystem::path(FOXHUNT_CLI_PATH).parent_path();
  std::filesystem::copy_file(FOXHUNT_CLI_PATH, prefix / "bin" / "foxhunt");
  std::filesystem::copy_file(build / "libfoxhunt_cuda.so", prefix / libdir / "libfoxhunt_cuda.so");
  const auto r = testing::run_command("env -u FOXHUNT_CUDA_PLUGIN '" +
                                      (prefix / "bin" / "foxhunt").string() + "' info --json");
  std::filesystem::remove_all(prefix);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const std::string expected = "loaded from " +
                               std::filesystem::weakly_canonical(prefix / "bin").string() + "/../" +
                               libdir + file;
  EXPECT_EQ(j["cuda_plugin"].get<std::string>(), expected);
}

TEST(CudaPlugin, AMissingPluginIsAClearDeviceError) {
  const std::string missing = "/nonexistent/libfoxhunt_cuda.so";
  if (!fresh() || !env_is(missing)) {
    EXPECT_EQ(rerun(missing), 0) << "the same test in a fresh process failed";
    return;
  }
  try {
    (void)models::to_torch(Device::cuda(0));
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("device cuda:0: expected a usable CUDA device"), std::string::npos) << m;
    EXPECT_NE(m.find(missing + ": no such file"), std::string::npos) << m;
    EXPECT_NE(m.find("use device cpu"), std::string::npos) << m;
  }
  EXPECT_FALSE(models::cuda_available());
  EXPECT_EQ(memory::cuda_device_count(), 0);
  EXPECT_FALSE(memory::cuda_stats_compiled());
  EXPECT_THROW(memory::cuda_memory_stats(0), Error);
  EXPECT_FALSE(maps_contain("libtorch_cuda.so"));
}

TEST(CudaPlugin, ALibraryThatIsNotThePluginIsRefused) {
  // libfoxhunt_c.so: a real shared library of this build without the plugin's entry point.
  const std::string foreign =
      (std::filesystem::path(FOXHUNT_CLI_PATH).parent_path() / "libfoxhunt_c.so").string();
  if (!std::filesystem::exists(foreign)) GTEST_SKIP() << foreign << " is not built";
  if (!fresh() || !env_is(foreign)) {
    EXPECT_EQ(rerun(foreign), 0) << "the same test in a fresh process failed";
    return;
  }
  EXPECT_FALSE(load_cuda_plugin());
  const std::string s = cuda_plugin_status();
  EXPECT_NE(s.find(foreign + ": expected plugin ABI 1, got no foxhunt_cuda_memory"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace foxhunt
