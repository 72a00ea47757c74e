#pragma once
// Shared helpers for the test suite.
#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data_cache.h"
#include "error_test_util.h"
#include "foxhunt/core/error.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/models/torch_device.h"

/// First line of every *_CUDA test: skips it, visibly (ctest and gtest report it as skipped),
/// where no CUDA device is available.
#define FOXHUNT_REQUIRE_CUDA()                                                            \
  do {                                                                                    \
    if (!::foxhunt::models::cuda_available()) GTEST_SKIP() << "no CUDA device available"; \
  } while (0)

namespace foxhunt::testing {

/// Fixture that seeds LibTorch's RNG so every test is reproducible.
class SeededTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(1234); }
};

/// A quiet NaN, for inputs with gaps.
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Where `ops_run` counts (a callback of RecordFunction is a plain function pointer).
inline std::map<std::string, int>*& ops_sink() {
  thread_local std::map<std::string, int>* sink = nullptr;
  return sink;
}

inline std::unique_ptr<at::ObserverContext> count_op(const at::RecordFunction& fn) {
  if (auto* sink = ops_sink()) ++(*sink)[fn.name()];
  return nullptr;
}

/// The LibTorch ops `f` runs on this thread (RecordFunction names, e.g. "aten::mm") and how
/// often: tells which path a forward took.
inline std::map<std::string, int> ops_run(const std::function<void()>& f) {
  std::map<std::string, int> ops;
  ops_sink() = &ops;
  const auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(count_op).scopes({at::RecordScope::FUNCTION}));
  f();
  at::removeCallback(handle);
  ops_sink() = nullptr;
  return ops;
}

/// Result of running the CLI.
struct CliResult {
  int exit_code = -1;
  std::string out;  ///< stdout only
  std::string err;  ///< stderr
};

/// Runs `command_line` through the shell: stdout, stderr and the exit code.
inline CliResult run_command(const std::string& command_line) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("foxhunt_cli_" + std::to_string(::getpid()) + "_" + std::to_string(std::rand()));
  std::filesystem::create_directories(dir);
  const auto err_path = dir / "stderr.txt";
  const std::string cmd = command_line + " 2>" + err_path.string();
  CliResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  FILE* e = std::fopen(err_path.c_str(), "r");
  if (e) {
    while ((n = std::fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
    std::fclose(e);
  }
  std::filesystem::remove_all(dir);
  return r;
}

/// Runs the built `foxhunt` binary with `args` (a shell-quoted string).
inline CliResult run_cli(const std::string& args) {
  return run_command(std::string(FOXHUNT_CLI_PATH) + " " + args);
}

/// Runs the CLI with `args`, expects `exit_code`, and returns stdout parsed as JSON.
inline nlohmann::json run_cli_json(const std::string& args, int exit_code) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, exit_code) << args << ": " << r.err;
  return nlohmann::json::parse(r.out);
}

/// Where scripts/setup.sh put the S&P 500 daily closes (1999-2018, 5,031 bars, date,close):
/// $FOXHUNT_DATA_DIR, else $XDG_CACHE_HOME/foxhunt, else ~/.cache/foxhunt.
inline std::string sp500_csv() {
  return data_cache_file("sp500_close.csv");
}

/// Where scripts/setup.sh put the long-format panel next to sp500_csv()
/// (date,symbol,open,high,low,close,volume): SP500 and NASDAQ daily OHLCV 1999-2018, 5,031 bars
/// each, and WTI daily closes 1986-2019 (8,321 close-only rows).
inline std::string panel_csv() {
  return data_cache_file("panel_sp500_nasdaq_wti.csv");
}

/// A fresh temporary directory removed at the end of the scope.
class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("foxhunt_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::filesystem::path path_;
};

/// A small TFT: fast, but every path (multi-variable VSNs with skip projections, 2 LSTM layers).
inline models::TftOptions small_tft_options() {
  return models::TftOptions()
      .past_features(6)
      .future_features(3)
      .static_categories(5)
      .hidden(8)
      .heads(2)
      .window(7)
      .horizon(4)
      .real_embedding(3);
}

/// Renders `html` to `png` in headless Chromium (scripts/render-report.sh) and checks the
/// screenshot is not blank: 0 = drawn, 1 = blank, other = the script failed; -1 when Chromium or
/// python3 is not installed (the caller skips).
inline int render_in_chromium(const std::string& html, const std::string& png) {
  if (std::system("command -v chromium >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1") != 0)
    return -1;
  const std::string cmd = std::string(FOXHUNT_SOURCE_DIR) + "/scripts/render-report.sh '" + html +
                          "' '" + png + "' >/dev/null 2>&1";
  const int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -2;
}

/// Max absolute difference of two tensors (as double).
inline double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

/// The BF16 form (a cast, models/precisions.h) of `fp32`, which is put in eval mode first.
inline std::unique_ptr<models::Model> bf16_form_of(models::Model& fp32) {
  fp32.module().eval();
  return models::quantized_form(fp32.name(), models::Precision::kBf16, "test")
      .quantize(fp32, models::QuantizeRequest{})
      .model;
}

}  // namespace foxhunt::testing
