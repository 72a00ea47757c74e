// INT8 building blocks: quantization parameters, observers, quantize/dequantize round trips,
// the int8 linear layer against fp32 within the bound its scales imply, and fake quantization's
// straight-through gradient.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "foxhunt/quant/int8_linear.h"
#include "foxhunt/quant/quantize.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using namespace foxhunt::quant;

TEST(QuantParamsTest, SymmetricAndAffineRangesIncludeZero) {
  const auto s = symmetric_qparams({-2.54f, 1.0f});
  EXPECT_FLOAT_EQ(s.scale, 2.54f / 127.0f);
  EXPECT_EQ(s.zero_point, 0);
  EXPECT_EQ(s.qmin, -127);
  EXPECT_EQ(s.qmax, 127);
  // A one-sided range is widened to include 0: [0.5, 2] quantizes like [0, 2].
  const auto a = affine_qparams({0.5f, 2.0f});
  EXPECT_FLOAT_EQ(a.scale, 2.0f / 255.0f);
  EXPECT_EQ(a.zero_point, 0);
  const auto b = affine_qparams({-1.0f, 3.0f});
  EXPECT_FLOAT_EQ(b.scale, 4.0f / 255.0f);
  EXPECT_EQ(b.zero_point, 64);  // round(1 / (4/255)) = round(63.75)
  // Nothing observed / all zeros: a tiny positive scale, never 0 or NaN.
  EXPECT_GT(symmetric_qparams(Range{}).scale, 0.0f);
  EXPECT_GT(symmetric_qparams({0.0f, 0.0f}).scale, 0.0f);
}

TEST(ObserverTest, MinMaxMovingAverageAndPerChannel) {
  MinMaxObserver mm;
  mm.observe(torch::tensor({1.0f, -3.0f}));
  mm.observe(torch::tensor({2.0f}));
  EXPECT_EQ(mm.range().min, -3.0f);
  EXPECT_EQ(mm.range().max, 2.0f);
  EXPECT_THROW(mm.observe(torch::tensor({NAN})), InputError);

  MovingAverageMinMaxObserver ma(0.5);
  ma.observe(torch::tensor({-1.0f, 1.0f}));  // first batch sets the range
  ma.observe(torch::tensor({-3.0f, 5.0f}));  // then half way towards each new extreme
  EXPECT_FLOAT_EQ(ma.range().min, -2.0f);
  EXPECT_FLOAT_EQ(ma.range().max, 3.0f);
  EXPECT_THROW(MovingAverageMinMaxObserver(0.0), InputError);

  PerChannelMinMaxObserver pc;
  pc.observe(torch::tensor({{1.0f, -2.0f}, {0.5f, 0.25f}}));
  pc.observe(torch::tensor({{3.0f, 0.0f}, {0.0f, -1.0f}}));
  EXPECT_TRUE(torch::equal(pc.min(), torch::tensor({-2.0f, -1.0f})));
  EXPECT_TRUE(torch::equal(pc.max(), torch::tensor({3.0f, 0.5f})));
  EXPECT_TRUE(torch::allclose(pc.symmetric_scales(), torch::tensor({3.0f, 1.0f}) / 127.0f));
  EXPECT_THROW(pc.observe(torch::zeros({3, 2})), InputError);  // channel count changed
}

TEST(ObserverTest, HistogramClipBeatsTheMaxForHeavyTails) {
  // A million Gaussian values and one outlier at 20: covering the outlier makes every step
  // 5x coarser; the L2-optimal clip sacrifices the outlier and its measured error is lower.
  torch::manual_seed(4);
  auto x = torch::randn({1000000});
  x[999999] = 20.0f;
  HistogramObserver h;
  h.observe(x.slice(0, 0, 500000));
  h.observe(x.slice(0, 500000));  // the range grows to cover 20: bins merge, nothing is lost
  EXPECT_EQ(h.count(), 1000000);
  EXPECT_FLOAT_EQ(h.max_abs(), 20.0f);
  const float c = h.l2_optimal_threshold();
  EXPECT_GT(c, 2.5f);
  EXPECT_LT(c, 8.0f);
  EXPECT_LT(h.expected_squared_error(c), h.expected_squared_error(h.max_abs()));
  auto mse = [&](float clip) {
    const float s = clip / 127.0f;
    return (dequantize_symmetric(quantize_symmetric(x, s), s) - x).pow(2).mean().item<double>();
  };
  EXPECT_LT(mse(c), mse(20.0f) * 0.5) << "clip " << c;
  // The 95th percentile of |N(0,1)| is 1.96.
  EXPECT_NEAR(h.percentile(95.0), 1.96, 0.05);
}

TEST(QuantizeTest, RoundTripIsWithinHalfAStep) {
  torch::manual_seed(1);
  const auto x = torch::randn({1000}) * 3;
  const float s = symmetric_qparams({x.min().item<float>(), x.max().item<float>()}).scale;
  const auto q = quantize_symmetric(x, s);
  EXPECT_EQ(q.scalar_type(), torch::kChar);
  EXPECT_LE(q.abs().max().item<int>(), 127);
  EXPECT_LE((dequantize_symmetric(q, s) - x).abs().max().item<float>(), s / 2 * (1 + 1e-5f));
  // Per channel: each row within half of its own step; zero stays exactly zero.
  auto w = torch::randn({4, 16}) * torch::tensor({0.01f, 1.0f, 100.0f, 0.0f}).unsqueeze(1);
  PerChannelMinMaxObserver obs;
  obs.observe(w);
  const auto scales = obs.symmetric_scales();
  const auto back = dequantize_per_channel(quantize_per_channel(w, scales), scales);
  const auto err = (back - w).abs().amax(1);
  for (int r = 0; r < 4; ++r)
    EXPECT_LE(err[r].item<float>(), scales[r].item<float>() / 2 * (1 + 1e-5f)) << "row " << r;
  EXPECT_TRUE(torch::equal(back[3], torch::zeros({16})));
  // Rows: dynamic per-row scales.
  const auto rows = quantize_rows(w);
  EXPECT_TRUE(torch::allclose(rows.scales.slice(0, 0, 3), scales.slice(0, 0, 3)));
}

TEST(Int8LinearTest, MatchesFp32WithinTheBoundItsScalesImply) {
  torch::manual_seed(7);
  torch::nn::Linear fp(torch::nn::LinearOptions(48, 20));
  const auto l = Int8Linear::from_float(fp->weight, fp->bias);
  EXPECT_EQ(l.codes_t().scalar_type(), torch::kChar);
  EXPECT_EQ(l.bytes(), 48 * 20 + 4 * 20 + 4 * 20);
  torch::NoGradGuard ng;
  // Few rows take the scalar path, many the ATen one (above 4,096 elements): both are checked.
  for (const auto& shape : {std::vector<int64_t>{3, 5, 48}, std::vector<int64_t>{200, 48}}) {
    SCOPED_TRACE(shape.size() == 3 ? "15 rows" : "200 rows");
    const auto x = torch::randn(shape);
    const auto y = l.forward(x);
    const auto ref = fp->forward(x);
    ASSERT_EQ(y.sizes(), ref.sizes());
    // Elementwise bound from the scales.
    const auto x2 = x.reshape({-1, 48});
    const auto sx = (x2.abs().amax(1) / 127).unsqueeze(1);  // [N, 1]
    const auto sw = l.scales().unsqueeze(0);                // [1, out]
    const auto bound = sw / 2 * x2.abs().sum(1, true) +
                       sx / 2 * fp->weight.abs().sum(1).unsqueeze(0) + 48 * sx * sw / 4;
    const auto err = (y.reshape({-1, 20}) - ref.reshape({-1, 20})).abs();
    EXPECT_TRUE((err <= bound * (1 + 1e-4) + 1e-6).all().item<bool>())
        << "max err " << err.max().item<float>() << ", min slack "
        << (bound - err).min().item<float>();
    // A real approximation, not an exact copy: some error, well under 2% of the output scale.
    EXPECT_GT(err.max().item<float>(), 0.0f);
    EXPECT_LT(err.max().item<float>(), 0.02 * ref.abs().max().item<float>());
  }
  // The two paths quantize identically (ties to even, same scales).
  const auto small = quantize_rows(torch::randn({4, 48}) * 3);
  const auto x_big = torch::cat({torch::randn({4, 48}) * 3, torch::randn({200, 48})});
  const auto big = quantize_rows(x_big);
  const auto again = quantize_rows(x_big.slice(0, 0, 4));
  EXPECT_TRUE(torch::equal(big.codes.slice(0, 0, 4), again.codes));
  EXPECT_TRUE(torch::equal(big.scales.slice(0, 0, 4), again.scales));
  EXPECT_EQ(small.codes.scalar_type(), torch::kChar);
  // The int8 codes reproduce the weight within half a step per channel.
  EXPECT_TRUE(((l.dequantized_weight() - fp->weight).abs() <= l.scales().unsqueeze(1) / 2 + 1e-7)
                  .all()
                  .item<bool>());
  EXPECT_THROW(l.forward(torch::zeros({2, 47})), InputError);
}

TEST(FakeQuantTest, StraightThroughGradientIsOneInsideAndZeroOutside) {
  const float s = 0.1f;  // codes cover [-12.7, 12.7]
  auto x = torch::tensor({-20.0f, -1.23f, 0.0f, 4.56f, 12.7f, 13.0f}).requires_grad_();
  auto y = fake_quantize_symmetric(x, s);
  // Forward: quantize-dequantize (clamped at +-12.7).
  EXPECT_TRUE(torch::allclose(y.detach(), torch::tensor({-12.7f, -1.2f, 0.0f, 4.6f, 12.7f, 12.7f}),
                              1e-5, 1e-5));
  y.sum().backward();
  EXPECT_TRUE(torch::equal(x.grad(), torch::tensor({0.0f, 1.0f, 1.0f, 1.0f, 1.0f, 0.0f})));
  // Per channel: row 1's range is ten times row 0's.
  auto w = torch::tensor({{0.5f, 2.0f}, {5.0f, 20.0f}}).requires_grad_();
  auto wq = fake_quantize_per_channel(w, torch::tensor({1.0f / 127, 10.0f / 127}));
  wq.sum().backward();
  EXPECT_TRUE(torch::equal(w.grad(), torch::tensor({{1.0f, 0.0f}, {1.0f, 0.0f}})));
  EXPECT_NEAR(wq[1][0].item<float>(), 5.0f, 10.0f / 127 / 2 + 1e-6);
}

}  // namespace
}  // namespace foxhunt
