// The BF16 TFT's fused variable-selection kernel (src/models/tft_bf16_kernels.h): the kernel
// against a scalar reference doing the same BF16 arithmetic, the fused BF16 VSN against its FP32
// path on the same (BF16) weights, the whole BF16 TFT against the FP32 TFT on the BF16-rounded
// weights, and the FP32 path where the CPU lacks BF16 (FOXHUNT_ASSUME_NO_BF16).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <cstdlib>
#include <vector>

#include "foxhunt/models/bf16.h"
#include "foxhunt/models/fused_kernels.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/models/tft.h"
#include "test_util.h"

#include "../src/models/tft_bf16_kernels.h"

namespace foxhunt {
namespace {

using models::Precision;

class Bf16KernelTest : public testing::SeededTest {};

#define SKIP_WITHOUT_BF16()                                                                 \
  do {                                                                                      \
    if (!models::cpu_has_bf16()) GTEST_SKIP() << "this CPU has no avx512_bf16 or amx_bf16"; \
  } while (0)

double relative_rms(const torch::Tensor& got, const torch::Tensor& ref) {
  return ((got - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item<double>();
}

double bf16_round(double x) {
  return models::kernels::bf16_float(models::kernels::bf16_bits(static_cast<float>(x)));
}

// Random FP32 per-variable weights in VsnGrnWeights layouts (tensors keep them alive).
struct RandomVsn {
  RandomVsn(int64_t v, int64_t hi, int64_t h) {
    const auto r = [](std::vector<int64_t> shape, double scale, double offset = 0.0) {
      return (torch::randn(shape) * scale + offset).contiguous();
    };
    t = {r({v, hi}, 0.5),        r({v, hi}, 0.3),    r({v, hi, hi}, 0.5), r({v, hi}, 0.1),
         r({v, hi, 2 * h}, 0.4), r({v, 2 * h}, 0.1), r({v, h}, 0.3),      r({v, h}, 0.1),
         r({v, h}, 0.1, 1.0),    r({v, h}, 0.1)};
    w.variables = v;
    w.inner = hi;
    w.hidden = h;
    w.fc2_slope = t[0].data_ptr<float>();
    w.fc2_offset = t[1].data_ptr<float>();
    w.fc1_weight = t[2].data_ptr<float>();
    w.fc1_bias = t[3].data_ptr<float>();
    w.glu_weight = t[4].data_ptr<float>();
    w.glu_bias = t[5].data_ptr<float>();
    w.skip_slope = t[6].data_ptr<float>();
    w.skip_offset = t[7].data_ptr<float>();
    w.norm_weight = t[8].data_ptr<float>();
    w.norm_bias = t[9].data_ptr<float>();
  }
  std::vector<torch::Tensor> t;
  models::kernels::VsnGrnWeights w;
};

// What the BF16 kernel computes, in double with exact elementwise functions: fc1's and the GLU's
// weights and their inputs eta2, eta1 rounded to BF16, everything else unrounded.
torch::Tensor scalar_reference(const models::kernels::VsnGrnWeights& p, const float* x,
                               const float* w, int64_t n) {
  const int64_t V = p.variables, hi = p.inner, h = p.hidden;
  auto out = torch::zeros({n, h}, torch::kDouble);
  auto* o = out.data_ptr<double>();
  std::vector<double> e2(hi), e1(hi), y(h);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t v = 0; v < V; ++v) {
      const double xv = x[r * V + v];
      for (int64_t k = 0; k < hi; ++k) {
        const double z = xv * p.fc2_slope[v * hi + k] + p.fc2_offset[v * hi + k];
        e2[k] = bf16_round(z > 0 ? z : std::expm1(z));
      }
      for (int64_t j = 0; j < hi; ++j) {
        double s = p.fc1_bias[v * hi + j];
        for (int64_t k = 0; k < hi; ++k)
          s += e2[k] * bf16_round(p.fc1_weight[(v * hi + k) * hi + j]);
        e1[j] = bf16_round(s);
      }
      double mean = 0.0;
      for (int64_t c = 0; c < h; ++c) {
        double a = p.glu_bias[v * 2 * h + c], g = p.glu_bias[v * 2 * h + h + c];
        for (int64_t j = 0; j < hi; ++j) {
          a += e1[j] * bf16_round(p.glu_weight[(v * hi + j) * 2 * h + c]);
          g += e1[j] * bf16_round(p.glu_weight[(v * hi + j) * 2 * h + h + c]);
        }
        y[c] = xv * p.skip_slope[v * h + c] + p.skip_offset[v * h + c] + a / (1.0 + std::exp(-g));
        mean += y[c] / static_cast<double>(h);
      }
      double var = 0.0;
      for (int64_t c = 0; c < h; ++c) var += (y[c] - mean) * (y[c] - mean) / static_cast<double>(h);
      const double rstd = 1.0 / std::sqrt(var + p.norm_eps);
      for (int64_t c = 0; c < h; ++c)
        o[r * h + c] += w[r * V + v] *
                        ((y[c] - mean) * rstd * p.norm_weight[v * h + c] + p.norm_bias[v * h + c]);
    }
  return out;
}

// Tolerance 5e-4 relative RMS: the kernel's sigmoid, ELU and 1/sqrt are accurate to ~1e-4
// relative (measured 4e-5..8e-5 at the default widths), and where its FP32 eta1 differs from the
// reference's in the last bits a BF16 rounding can land one step (2^-8) apart.
TEST_F(Bf16KernelTest, KernelMatchesAScalarReferenceDoingTheSameBf16Arithmetic) {
  SKIP_WITHOUT_BF16();
  struct Widths {
    int64_t v, hi, h;
  };
  // The default TFT's widths (the compiled 8/32 path), then odd ones (the general path, an odd
  // inner width paired with zero).
  for (const auto& s : {Widths{9, 8, 32}, Widths{5, 5, 24}}) {
    RandomVsn vsn(s.v, s.hi, s.h);
    const auto pack = models::kernels::pack_bf16_vsn(vsn.w);
    EXPECT_EQ(pack.bytes(),
              s.v * ((s.hi + 1) / 2) * (s.hi + 2 * s.h) * 4 + s.v * (3 * s.hi + 6 * s.h) * 4);
    for (int64_t n : {1, 37}) {  // one position; not a multiple of the 16 lanes
      SCOPED_TRACE(std::to_string(s.hi) + "/" + std::to_string(s.h) + " n=" + std::to_string(n));
      const auto x = torch::randn({n, s.v});
      const auto w = torch::softmax(torch::randn({n, s.v}), -1);
      auto out = torch::full({n, s.h}, 99.0f);
      models::kernels::vsn_weighted_grns_bf16(pack.weights, x.data_ptr<float>(),
                                              w.data_ptr<float>(), n, out.data_ptr<float>());
      const auto ref = scalar_reference(vsn.w, x.data_ptr<float>(), w.data_ptr<float>(), n);
      const double err = relative_rms(out.to(torch::kDouble), ref);
      RecordProperty("kernel_relative_rms_" + std::to_string(s.hi) + "_" + std::to_string(n),
                     std::to_string(err));
      EXPECT_LE(err, 5e-4);
    }
  }
}

// A VSN whose per-variable weights are BF16 (as the BF16 TFT converts them, bf16.h).
models::VariableSelectionNetwork bf16_vsn(int64_t v) {
  models::VariableSelectionNetwork vsn(
      models::VariableSelectionNetworkOptions(v, 8, 32).context(32));
  vsn->eval();
  torch::NoGradGuard no_grad;
  for (auto* t : {&vsn->emb_weight, &vsn->emb_bias, &vsn->fc2_weight, &vsn->fc2_bias,
                  &vsn->fc1_weight, &vsn->fc1_bias, &vsn->glu_weight, &vsn->glu_bias,
                  &vsn->norm_weight, &vsn->norm_bias, &vsn->skip_weight, &vsn->skip_bias})
    if (t->defined()) t->set_data(t->to(torch::kBFloat16));
  return vsn;
}

// The fused BF16 VSN against the same module's FP32 path (fused kernels off: LibTorch ops on the
// BF16 weights upcast), batch 1 and a batch whose 3 x 7 positions are not a multiple of 16.
// Tolerance 1e-2 relative RMS: BF16 rounds eta2 and eta1 (2^-9 relative each) before ~10-term
// products (measured ~2.5e-3 on the kernel's output, scratch); above 1e-5: the kernel ran.
TEST_F(Bf16KernelTest, FusedBf16VsnMatchesItsFp32PathOnTheSameWeights) {
  SKIP_WITHOUT_BF16();
  auto vsn = bf16_vsn(12);
  torch::NoGradGuard no_grad;
  for (int64_t b : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(b));
    const auto x = torch::randn({b, 7, 12}), c = torch::randn({b, 32});
    const auto got = vsn->forward(x, c);
    models::VsnOutput ref;
    {
      models::FusedCpuKernels off(false);
      ref = vsn->forward(x, c);
    }
    // The selection runs FP32 in both (its ELU on the vector kernel in one, LibTorch's in the
    // other).
    EXPECT_LE(relative_rms(got.weights, ref.weights), 1e-5);
    const double err = relative_rms(got.output, ref.output);
    RecordProperty("vsn_relative_rms_batch_" + std::to_string(b), std::to_string(err));
    EXPECT_LE(err, 1e-2);
    EXPECT_GT(err, 1e-5);
  }
}

// Where the CPU lacks BF16 the kernel is not entered: the module runs its FP32 path on the BF16
// weights upcast (the BF16 model itself refuses first: bf16_test.cpp's
// RefusedWithAClearMessageWhereTheCpuLacksBf16).
TEST_F(Bf16KernelTest, WithoutBf16TheVsnRunsItsFp32Path) {
  auto vsn = bf16_vsn(12);
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({2, 7, 12}), c = torch::randn({2, 32});
  models::VsnOutput ref;
  {
    models::FusedCpuKernels off(false);
    ref = vsn->forward(x, c);
  }
  ::setenv("FOXHUNT_ASSUME_NO_BF16", "1", 1);
  const auto got = vsn->forward(x, c);
  ::unsetenv("FOXHUNT_ASSUME_NO_BF16");
  // The same FP32 arithmetic but for the ELUs (the vector kernel here, LibTorch's in `ref`): float
  // rounding apart, where the BF16 kernel lands ~2.5e-3 apart.
  EXPECT_LE(relative_rms(got.output, ref.output), 1e-5);
}

// The whole BF16 TFT (fused BF16 VSNs, FP32 elsewhere) against the FP32 TFT holding the same
// BF16-rounded weights, default options, batch 1 and 5 (300 past positions: not a multiple of
// 16). Tolerance 1e-2 relative RMS (the VSN's 2.5e-3, through the rest of the network in FP32);
// above 1e-6: the BF16 kernel ran (the FP32 paths agree to float rounding).
TEST_F(Bf16KernelTest, FusedBf16TftMatchesFp32OnTheBf16RoundedWeights) {
  SKIP_WITHOUT_BF16();
  auto fp32 = models::make_model("tft");
  auto bf16 = testing::bf16_form_of(*fp32);
  auto rounded = models::make_model("tft");
  rounded->module().eval();
  {
    torch::NoGradGuard no_grad;
    const auto src = bf16->module().named_parameters();
    for (auto& p : rounded->module().named_parameters()) p.value().copy_(src[p.key()]);
    const auto bufs = bf16->module().named_buffers();
    for (auto& b : rounded->module().named_buffers()) b.value().copy_(bufs[b.key()]);
  }
  torch::NoGradGuard no_grad;
  for (int64_t b : {1, 5}) {
    SCOPED_TRACE("batch " + std::to_string(b));
    const auto batch = fp32->example_batch(b, 0, torch::kCPU, 11);
    const auto got = bf16->forward(batch)[0];
    const auto ref = rounded->forward(batch)[0];
    ASSERT_EQ(got.sizes(), ref.sizes());
    const double err = relative_rms(got, ref);
    RecordProperty("tft_relative_rms_batch_" + std::to_string(b), std::to_string(err));
    EXPECT_LE(err, 1e-2);
    EXPECT_GT(err, 1e-6);
  }
}

}  // namespace
}  // namespace foxhunt
