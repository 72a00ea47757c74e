// The yardsticks of the benchmarks (bench/): the FLOPs of the forwards (forward_flops.h: exact
// for the MLPs, the documented approximation for the sequence models) and the operation counts
// and dispatch of the peak loops (peak_kernels.h). Counts only: no timing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "../bench/forward_flops.h"
#include "../bench/peak_kernels.h"
#include "foxhunt/models/model.h"
#include "test_util.h"

namespace foxhunt {
namespace {

class BenchYardstickTest : public foxhunt::testing::SeededTest {};

// 2 x sum(in x out) of an MLP of `hidden` layers from `in` to `out`.
double mlp_flops(int64_t in, const std::vector<int64_t>& hidden, int64_t out) {
  double macs = 0;
  int64_t prev = in;
  for (int64_t h : hidden) {
    macs += static_cast<double>(prev * h);
    prev = h;
  }
  return 2.0 * (macs + static_cast<double>(prev * out));
}

TEST_F(BenchYardstickTest, MlpForwardFlopsAreTwiceTheirWeightsPerSample) {
  auto dqn = models::make_model("dqn");
  const auto o = dqn->options_json();
  const auto hidden = o.at("hidden").get<std::vector<int64_t>>();
  const double one =
      mlp_flops(o.at("state_dim").get<int64_t>(), hidden, o.at("actions").get<int64_t>());
  EXPECT_EQ(bench::forward_flops(*dqn, 1), one);
  EXPECT_EQ(bench::forward_flops(*dqn, 64), 64 * one);
  // PPO runs its actor and its critic (one output).
  auto ppo = models::make_model("ppo");
  const auto p = ppo->options_json();
  const auto ph = p.at("hidden").get<std::vector<int64_t>>();
  EXPECT_EQ(bench::forward_flops(*ppo, 2),
            2 * (mlp_flops(p.at("state_dim").get<int64_t>(), ph, p.at("actions").get<int64_t>()) +
                 mlp_flops(p.at("state_dim").get<int64_t>(), ph, 1)));
}

TEST_F(BenchYardstickTest, SequenceModelFlopsFollowTheirWindow) {
  // Every weight but the head runs over the window, so the FLOPs grow with it; the batch scales
  // them exactly.
  for (const char* name : {"mamba2", "tft"}) {
    auto m = models::make_model(name);
    auto o = m->options_json();
    const double base = bench::forward_flops(*m, 1);
    EXPECT_GT(base, 1e6) << name;
    EXPECT_EQ(bench::forward_flops(*m, 8), 8 * base) << name;
    o["window"] = 2 * o.at("window").get<int64_t>();
    auto longer = models::make_model(name, o);
    const double twice = bench::forward_flops(*longer, 1);
    EXPECT_GT(twice, 1.6 * base) << name;
    EXPECT_LT(twice, 2.4 * base) << name;
  }
  // The TFT's variable embeddings count folded: fewer FLOPs than its unfolded weights over the
  // window (the past selection network alone holds ~680k weights at default options).
  auto tft = models::make_model("tft");
  EXPECT_LT(bench::forward_flops(*tft, 1), 40e6);
}

TEST_F(BenchYardstickTest, PeakLoopsCountTheirOperations) {
  namespace pk = bench::peak;
  const auto caps = pk::cpu_caps();
  if (auto f = pk::fp32_loop(caps)) {
    EXPECT_EQ(f(10), caps.avx512f ? 2.0 * 16 * 16 * 10 : 2.0 * 12 * 8 * 10);
  }
  if (auto f = pk::bf16_loop(caps)) {
    EXPECT_EQ(f(10), 64.0 * 16 * 10);
  }
  if (auto f = pk::int8_loop(caps)) {
    EXPECT_EQ(f(10), caps.avx512_vnni ? 128.0 * 16 * 10 : 64.0 * 12 * 10);
  }
  EXPECT_EQ(pk::bf16_loop(caps) != nullptr, caps.avx512_bf16);
  EXPECT_STREQ(pk::loop_isa(nullptr), "not supported");
  const pk::AlignedBuffer buf(4096 + 100);  // rounded down to 512 bytes
  EXPECT_EQ(buf.bytes(), 4096u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % 64, 0u);
  EXPECT_EQ(pk::read_sse2(buf.data(), buf.floats(), 3), 3.0 * 4096);
  if (caps.avx2_fma) {
    EXPECT_EQ(pk::read_avx2(buf.data(), buf.floats(), 2), 2.0 * 4096);
  }
  if (caps.avx512f) {
    EXPECT_EQ(pk::read_avx512(buf.data(), buf.floats(), 2), 2.0 * 4096);
  }
}

}  // namespace
}  // namespace foxhunt
