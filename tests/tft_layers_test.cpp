// Temporal Fusion Transformer building blocks: GLU, GateAddNorm, GRN, VSN (batched, fused,
// dropout), interpretable attention and the causal mask, and the ELU and LSTM kernels.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "foxhunt/models/model.h"
#include "foxhunt/models/tft.h"
#include "test_util.h"
// The fused VSN kernels are private to models/; their dropout contract is tested directly.
#include "../src/models/lstm_kernel.h"
#include "../src/models/tft_kernels.h"

namespace foxhunt::models {
namespace {

using foxhunt::testing::input_error;
using foxhunt::testing::max_abs_diff;
using foxhunt::testing::SeededTest;

// Parameters of a module (all, by numel).
int64_t layer_parameter_count(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// ---- GLU / GateAddNorm / GRN ------------------------------------------------------------------

class GluTest : public SeededTest {};

TEST_F(GluTest, ValueHalfTimesSigmoidOfGateHalf) {
  Glu glu(5, 3, 0.0);
  auto x = torch::randn({4, 5});
  auto y = glu->fc->forward(x);
  auto expected = y.narrow(1, 0, 3) * torch::sigmoid(y.narrow(1, 3, 3));
  EXPECT_TRUE(torch::allclose(glu->forward(x), expected));
  EXPECT_EQ(glu->fc->weight.sizes().vec(), (std::vector<int64_t>{6, 5}));
  EXPECT_EQ(glu->fc->bias.abs().sum().item<double>(), 0.0);
  const double bound = std::sqrt(6.0 / (5 + 6));
  EXPECT_LE(glu->fc->weight.abs().max().item<double>(), bound);
}

TEST_F(GluTest, GateAddNormNormalisesGluPlusSkip) {
  GateAddNorm gan(5, 4, 0.0);
  auto x = torch::randn({3, 5});
  auto skip = torch::randn({3, 4});
  auto out = gan->forward(x, skip);
  auto expected = torch::layer_norm(gan->glu->forward(x) + skip, {4});
  EXPECT_TRUE(torch::allclose(out, expected, 1e-5, 1e-6));
}

class GrnTest : public SeededTest {};

TEST_F(GrnTest, MatchesFormulaWithContextAndSkipProjection) {
  GatedResidualNetwork grn(GatedResidualNetworkOptions(5, 7, 3).context(4));
  ASSERT_TRUE(grn->has_skip_projection());
  ASSERT_FALSE(grn->context.is_empty());
  EXPECT_FALSE(grn->context->bias.defined());  // W3 has no bias
  auto a = torch::randn({2, 6, 5});
  auto c = torch::randn({2, 4});
  auto out = grn->forward(a, c);
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{2, 6, 3}));
  // eta2 = ELU(W2 a + b2 + W3 c); eta1 = W1 eta2 + b1; LN(GLU(eta1) + skip(a)).
  auto eta2 =
      torch::elu(grn->fc2->forward(a) + torch::matmul(c, grn->context->weight.t()).unsqueeze(1));
  auto eta1 = grn->fc1->forward(eta2);
  auto expected =
      torch::layer_norm(grn->gate_norm->glu->forward(eta1) + grn->skip->forward(a), {3});
  EXPECT_LT(max_abs_diff(out, expected), 1e-5);
  // The context matters.
  EXPECT_GT(max_abs_diff(grn->forward(a, c + 1.0), out), 1e-4);
  EXPECT_EQ(layer_parameter_count(*grn), parameter_count(grn->options));
}

TEST_F(GrnTest, IdentitySkipWithoutContext) {
  GatedResidualNetwork grn(GatedResidualNetworkOptions(6, 10, 6));
  EXPECT_FALSE(grn->has_skip_projection());
  EXPECT_TRUE(grn->context.is_empty());
  auto a = torch::randn({3, 6});
  auto out = grn->forward(a);
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{3, 6}));
  auto eta1 = grn->fc1->forward(torch::elu(grn->fc2->forward(a)));
  auto expected = torch::layer_norm(grn->gate_norm->glu->forward(eta1) + a, {6});
  EXPECT_LT(max_abs_diff(out, expected), 1e-5);
  EXPECT_EQ(layer_parameter_count(*grn), parameter_count(grn->options));
  // 6*10+10 + 10*10+10 + 10*12+12 + 12 = 324, no skip, no context.
  EXPECT_EQ(parameter_count(grn->options), 324);
}

TEST_F(GrnTest, ContextWithoutContextLayerIsAnError) {
  GatedResidualNetwork grn(GatedResidualNetworkOptions(4, 4, 4));
  auto msg = input_error([&] { grn->forward(torch::randn({2, 4}), torch::randn({2, 4})); });
  EXPECT_NE(msg.find("context"), std::string::npos) << msg;
  GatedResidualNetwork with_ctx(GatedResidualNetworkOptions(4, 4, 4).context(3));
  msg = input_error([&] { with_ctx->forward(torch::randn({2, 4}), torch::randn({2, 5})); });
  EXPECT_NE(msg.find("expected context of shape [2, 3]"), std::string::npos) << msg;
}

TEST_F(GrnTest, InitKaimingXavierZeroBias) {
  GatedResidualNetwork grn(GatedResidualNetworkOptions(400, 300, 200).context(100));
  for (auto* l : {&grn->fc2, &grn->fc1, &grn->skip, &grn->gate_norm->glu->fc})
    EXPECT_EQ((*l)->bias.abs().max().item<double>(), 0.0);
  // Kaiming normal, fan_in: std sqrt(2 / fan_in).
  EXPECT_NEAR(grn->fc2->weight.std().item<double>(), std::sqrt(2.0 / 400), 0.002);
  EXPECT_NEAR(grn->fc1->weight.std().item<double>(), std::sqrt(2.0 / 300), 0.002);
  // Xavier uniform: bounded by sqrt(6 / (fan_in + fan_out)), std bound / sqrt(3).
  const double ctx_bound = std::sqrt(6.0 / (100 + 300));
  EXPECT_LE(grn->context->weight.abs().max().item<double>(), ctx_bound);
  EXPECT_NEAR(grn->context->weight.std().item<double>(), ctx_bound / std::sqrt(3.0), 0.003);
}

// ---- VSN --------------------------------------------------------------------------------------

class VsnTest : public SeededTest {};

/// Per-variable loop over the batched parameters, with the embeddings materialised (no folding).
torch::Tensor reference_vsn(VariableSelectionNetworkImpl& vsn, const torch::Tensor& x,
                            const torch::Tensor& c, torch::Tensor* weights_out) {
  const int64_t v = vsn.options.variables(), h = vsn.options.hidden();
  auto emb = vsn.embed(x);  // [B, T, V, E]
  std::vector<torch::Tensor> ys;
  for (int64_t i = 0; i < v; ++i) {
    auto e = emb.select(2, i);
    auto eta2 = torch::elu(torch::matmul(e, vsn.fc2_weight[i]) + vsn.fc2_bias[i]);
    auto eta1 = torch::matmul(eta2, vsn.fc1_weight[i]) + vsn.fc1_bias[i];
    auto g = torch::matmul(eta1, vsn.glu_weight[i]) + vsn.glu_bias[i];
    auto glu = g.narrow(-1, 0, h) * torch::sigmoid(g.narrow(-1, h, h));
    auto skip =
        vsn.skip_weight.defined() ? torch::matmul(e, vsn.skip_weight[i]) + vsn.skip_bias[i] : e;
    ys.push_back(torch::layer_norm(glu + skip, {h}) * vsn.norm_weight[i] + vsn.norm_bias[i]);
  }
  auto y = torch::stack(ys, 2);  // [B, T, V, H]
  if (v == 1) {
    *weights_out = torch::ones({x.size(0), x.size(1), 1});
    return y.squeeze(2);
  }
  auto flat = emb.reshape({x.size(0), x.size(1), -1});
  auto w = torch::softmax(vsn.selection->forward(flat, c), -1);
  *weights_out = w;
  return (y * w.unsqueeze(-1)).sum(2);
}

TEST_F(VsnTest, BatchedMatchesPerVariableLoop) {
  // (V, E, H, T): skip projections everywhere; E == H (identity skip); E == 1 (identity
  // selection skip); a single variable; many variables and positions (several position blocks).
  for (auto [v, e, h, t] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {5, 3, 6, 5}, {4, 6, 6, 5}, {3, 1, 4, 5}, {1, 3, 5, 5}, {300, 3, 4, 70}}) {
    VariableSelectionNetwork vsn(VariableSelectionNetworkOptions(v, e, h).context(4));
    // Non-trivial norm and bias parameters so that every term is exercised.
    {
      torch::NoGradGuard ng;
      for (auto& p : vsn->parameters()) p.add_(0.1 * torch::randn_like(p));
    }
    auto x = torch::randn({3, t, v});
    auto c = torch::randn({3, 4});
    auto out = vsn->forward(x, c);
    torch::Tensor ref_w;
    auto ref = reference_vsn(*vsn, x, v > 1 ? c : torch::Tensor(), &ref_w);
    EXPECT_EQ(out.output.sizes().vec(), (std::vector<int64_t>{3, t, h}));
    EXPECT_EQ(out.weights.sizes().vec(), (std::vector<int64_t>{3, t, v}));
    EXPECT_LT(max_abs_diff(out.output, ref), 1e-4) << "V=" << v << " E=" << e << " H=" << h;
    EXPECT_LT(max_abs_diff(out.weights, ref_w), 1e-5) << "V=" << v;
    EXPECT_EQ(layer_parameter_count(*vsn), parameter_count(vsn->options)) << "V=" << v;
  }
}

TEST_F(VsnTest, WeightsSumToOneAndGradientsReachEveryParameter) {
  VariableSelectionNetwork vsn(VariableSelectionNetworkOptions(9, 4, 8).context(5).dropout(0.1));
  vsn->train();
  auto out = vsn->forward(torch::randn({2, 6, 9}), torch::randn({2, 5}));
  EXPECT_TRUE(torch::allclose(out.weights.sum(-1), torch::ones({2, 6}), 1e-5, 1e-6));
  EXPECT_GE(out.weights.min().item<double>(), 0.0);
  out.output.pow(2).sum().backward();
  for (const auto& p : vsn->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
}

// Gradients of sum(out * r) w.r.t. every parameter and the input, by name ("x" for the input).
std::map<std::string, torch::Tensor> vsn_gradients(VariableSelectionNetwork& vsn,
                                                   const torch::Tensor& x, const torch::Tensor& c,
                                                   const torch::Tensor& r, bool reference) {
  vsn->zero_grad();
  auto xg = x.clone().requires_grad_(true);
  torch::Tensor w;
  auto out = reference ? reference_vsn(*vsn, xg, c, &w) : vsn->forward(xg, c).output;
  (out * r).sum().backward();
  std::map<std::string, torch::Tensor> g{{"x", xg.grad().clone()}};
  for (const auto& p : vsn->named_parameters())
    g[p.key()] = p.value().grad().defined() ? p.value().grad().clone() : torch::Tensor();
  return g;
}

TEST_F(VsnTest, FusedTrainingGradientsMatchThePerVariableLoop) {
  // Train mode without dropout: the fused autograd node (forward + recomputing backward) must
  // give LibTorch autograd's gradients of the unfused per-variable loop, for every parameter
  // and the input. (V, E, H, T) as in BatchedMatchesPerVariableLoop.
  for (auto [v, e, h, t] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {5, 3, 6, 5}, {4, 6, 6, 5}, {3, 1, 4, 7}, {40, 8, 32, 9}}) {
    VariableSelectionNetwork vsn(VariableSelectionNetworkOptions(v, e, h).context(4));
    vsn->train();
    {
      torch::NoGradGuard ng;
      for (auto& p : vsn->parameters()) p.add_(0.1 * torch::randn_like(p));
    }
    auto x = torch::randn({3, t, v});
    auto c = torch::randn({3, 4});
    auto r = torch::randn({3, t, h});
    const auto fused = vsn_gradients(vsn, x, c, r, false);
    const auto ref = vsn_gradients(vsn, x, c, r, true);
    for (const auto& [name, g] : ref) {
      ASSERT_TRUE(g.defined()) << name;
      ASSERT_TRUE(fused.at(name).defined()) << name;
      const double scale = std::max(1.0, g.abs().max().item<double>());
      EXPECT_LT(max_abs_diff(fused.at(name), g), 2e-4 * scale)
          << name << " V=" << v << " E=" << e << " H=" << h;
    }
  }
}

TEST_F(VsnTest, FusedDropoutIsSeededAndItsGradientsMatchFiniteDifferences) {
  VariableSelectionNetwork vsn(VariableSelectionNetworkOptions(6, 4, 8).context(3).dropout(0.3));
  vsn->train();
  auto x = torch::randn({2, 5, 6});
  auto c = torch::randn({2, 3});
  auto r = torch::randn({2, 5, 8});
  auto loss = [&](uint64_t seed) {
    torch::manual_seed(seed);
    return (vsn->forward(x, c).output * r).sum();
  };
  // The mask comes from LibTorch's generator: the same seed gives the same output.
  EXPECT_EQ(loss(11).item<double>(), loss(11).item<double>());
  EXPECT_NE(loss(11).item<double>(), loss(12).item<double>());
  {
    torch::NoGradGuard ng;
    vsn->eval();
    const double eval_loss = (vsn->forward(x, c).output * r).sum().item<double>();
    vsn->train();
    EXPECT_NE(loss(11).item<double>(), eval_loss) << "train mode must drop units out";
  }
  // Backward recomputes the forward's mask: central differences under the same seed agree with
  // the analytic gradient (a mask that differed would give unrelated numbers).
  vsn->zero_grad();
  loss(11).backward();
  const double eps = 1e-2;
  for (auto* p : {&vsn->fc1_weight, &vsn->glu_weight, &vsn->fc2_weight, &vsn->norm_weight}) {
    for (int64_t i : {0L, 7L, 29L}) {
      const double analytic = p->grad().view(-1)[i].item<double>();
      torch::NoGradGuard ng;
      auto flat = p->view(-1);
      const float orig = flat[i].item<float>();
      flat[i] = orig + eps;
      const double up = loss(11).item<double>();
      flat[i] = orig - eps;
      const double down = loss(11).item<double>();
      flat[i] = orig;
      EXPECT_NEAR(analytic, (up - down) / (2 * eps), 2e-2 * std::max(1.0, std::abs(analytic)))
          << "parameter element " << i;
    }
  }
}

TEST(VsnKernelTest, DropoutDropsTheStatedFractionAndScalesTheKeptUnits) {
  // One variable with one inner unit: each position's output is either the GRN with eta1 = 0
  // (dropped) or with eta1 / (1 - p) (kept); every position must be exactly one of the two, and
  // the dropped share must be p.
  const int64_t n = 20000, h = 4;
  const float p_drop = 0.25f;
  const float s2 = 0.7f, o2 = 0.1f, w1 = 1.3f, b1 = 0.2f;
  const float wg[2 * h] = {0.5f, -0.4f, 0.9f, 0.3f, 0.8f, -0.6f, 0.2f, 1.1f};
  const float bg[2 * h] = {0.1f, 0.2f, -0.3f, 0.0f, 0.05f, -0.1f, 0.2f, 0.3f};
  const float ss[h] = {0.3f, -0.2f, 0.1f, 0.4f}, so[h] = {0.0f, 0.1f, -0.1f, 0.2f};
  const float nw[h] = {1, 1, 1, 1}, nb[h] = {0, 0, 0, 0};
  kernels::VsnGrnWeights p;
  p.variables = 1;
  p.inner = 1;
  p.hidden = h;
  p.fc2_slope = &s2;
  p.fc2_offset = &o2;
  p.fc1_weight = &w1;
  p.fc1_bias = &b1;
  p.glu_weight = wg;
  p.glu_bias = bg;
  p.skip_slope = ss;
  p.skip_offset = so;
  p.norm_weight = nw;
  p.norm_bias = nb;
  torch::manual_seed(3);
  auto x = torch::randn({n, 1});
  auto w = torch::ones({n, 1});
  auto out = torch::empty({n, h});
  kernels::vsn_weighted_grns(p, x.const_data_ptr<float>(), w.const_data_ptr<float>(), n,
                             out.mutable_data_ptr<float>(), {p_drop, 1234u});
  // The GRN of x with eta1 multiplied by `keep`, in double.
  auto grn = [&](double xv, double keep) {
    const double pre = xv * s2 + o2;
    const double e1 = (b1 + w1 * (pre > 0 ? pre : std::exp(pre) - 1.0)) * keep;
    double y[h], mean = 0, var = 0;
    for (int64_t c = 0; c < h; ++c) {
      const double a = bg[c] + e1 * wg[c], g = bg[h + c] + e1 * wg[h + c];
      y[c] = xv * ss[c] + so[c] + a / (1.0 + std::exp(-g));
      mean += y[c] / h;
    }
    for (double yc : y) var += (yc - mean) * (yc - mean) / h;
    std::array<double, h> z;
    for (int64_t c = 0; c < h; ++c) z[c] = (y[c] - mean) / std::sqrt(var + 1e-5);
    return z;
  };
  auto dist = [&](const float* row, const std::array<double, h>& z) {
    double d = 0;
    for (int64_t c = 0; c < h; ++c) d = std::max(d, std::abs(row[c] - z[c]));
    return d;
  };
  int64_t dropped = 0;
  const float* o = out.const_data_ptr<float>();
  for (int64_t r = 0; r < n; ++r) {
    const double xv = x.const_data_ptr<float>()[r];
    const double d_drop = dist(o + r * h, grn(xv, 0.0));
    const double d_keep = dist(o + r * h, grn(xv, 1.0 / (1.0 - p_drop)));
    ASSERT_LT(std::min(d_drop, d_keep), 1e-4) << "position " << r << " is neither dropped nor kept";
    dropped += d_drop < d_keep;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, p_drop, 0.015);
  // Another seed, another mask; no dropout = every unit kept unscaled.
  auto out2 = torch::empty({n, h});
  kernels::vsn_weighted_grns(p, x.const_data_ptr<float>(), w.const_data_ptr<float>(), n,
                             out2.mutable_data_ptr<float>(), {p_drop, 1235u});
  EXPECT_GT(max_abs_diff(out, out2), 0.01);
  kernels::vsn_weighted_grns(p, x.const_data_ptr<float>(), w.const_data_ptr<float>(), n,
                             out2.mutable_data_ptr<float>(), {});
  for (int64_t r = 0; r < n; r += 97)
    EXPECT_LT(dist(out2.const_data_ptr<float>() + r * h, grn(x.const_data_ptr<float>()[r], 1.0)),
              1e-4);
}

// ---- attention --------------------------------------------------------------------------------

class InterpretableMultiHeadAttentionTest : public SeededTest {};

TEST_F(InterpretableMultiHeadAttentionTest, SharedValueAveragedHeadsMatchHandComputation) {
  InterpretableMultiHeadAttention att(8, 4, 0.0);
  ASSERT_EQ(att->d_k, 2);
  EXPECT_EQ(att->value->weight.sizes().vec(), (std::vector<int64_t>{2, 8}));  // one shared V
  EXPECT_EQ(att->out->weight.sizes().vec(), (std::vector<int64_t>{8, 2}));    // W_H
  auto q = torch::randn({2, 3, 8});
  auto kv = torch::randn({2, 5, 8});
  auto mask = tft_causal_mask(2, 3, torch::kCPU);
  auto r = att->forward(q, kv, mask);
  // Per head: softmax(Q_h K_h^T / sqrt(d_k)) V, then mean over heads and W_H.
  auto qp = att->query->forward(q), kp = att->key->forward(kv), vp = att->value->forward(kv);
  torch::Tensor sum_out = torch::zeros({2, 3, 2}), sum_w = torch::zeros({2, 3, 5});
  for (int64_t hd = 0; hd < 4; ++hd) {
    auto s = torch::matmul(qp.narrow(2, 2 * hd, 2), kp.narrow(2, 2 * hd, 2).transpose(1, 2)) /
             std::sqrt(2.0);
    auto w = torch::softmax(s.masked_fill(mask, -1e30), -1);
    sum_w += w;
    sum_out += torch::matmul(w, vp);
  }
  EXPECT_LT(max_abs_diff(r.weights, sum_w / 4), 1e-6);
  EXPECT_LT(max_abs_diff(r.output, att->out->forward(sum_out / 4)), 1e-5);
}

TEST_F(InterpretableMultiHeadAttentionTest, CausalMaskHidesOnlyStrictlyLaterKeys) {
  auto m = tft_causal_mask(3, 2, torch::kCPU);
  ASSERT_EQ(m.sizes().vec(), (std::vector<int64_t>{2, 5}));
  // Decoder step 0 is key 3: sees keys 0..3 (itself included), not key 4. Step 1 sees all.
  auto expected =
      torch::tensor({{false, false, false, false, true}, {false, false, false, false, false}});
  EXPECT_TRUE(torch::equal(m, expected));
}

// The vector ELU equals LibTorch's to float rounding over the whole range: the Taylor branch
// near 0 (where exp(x) - 1 cancels), the exp branch, the clamp below -87 and the tail.
TEST(EluKernelTest, MatchesLibTorchElu) {
  auto x = torch::cat({torch::linspace(-100.0, 30.0, 100003), torch::linspace(-0.2, 0.2, 4001),
                       torch::tensor({-1e-30f, 1e-30f, -1e-8f, -0.125f, -0.12499f, -0.12501f, 0.0f,
                                      -0.0f, -87.5f, 88.5f})});
  auto out = torch::empty_like(x);
  kernels::elu(x.data_ptr<float>(), x.numel(), out.data_ptr<float>());
  const auto ref = torch::elu(x.to(torch::kDouble));
  const auto err = (out.to(torch::kDouble) - ref).abs();
  EXPECT_LT((err / ref.abs().clamp_min(1e-30)).max().item<double>(), 2e-6);
  EXPECT_LT(err.max().item<double>(), 4e-6);  // 30 * 6e-8 rounding at the top of the range
}

// ---- fused LSTM recurrence ----------------------------------------------------------------------

// The recurrence kernel after one input-gate GEMM equals LibTorch's LSTM layer, for widths that
// take every path: 4H a multiple of 128 (8 accumulators), of 16 only, and with a scalar tail.
TEST(LstmKernelTest, MatchesLibTorchLstmLayer) {
  torch::manual_seed(7);
  for (int64_t H : {32, 40, 20, 8, 5}) {
    for (int64_t B : {1, 3}) {
      for (int64_t T : {1, 9}) {
        torch::nn::LSTM lstm(torch::nn::LSTMOptions(7, H).batch_first(true));
        auto x = torch::randn({B, T, 7});
        auto h0 = torch::randn({1, B, H}), c0 = torch::randn({1, B, H}) * 2.0;
        auto [ref, ref_state] = lstm->forward(x, std::make_tuple(h0, c0));
        torch::NoGradGuard ng;
        const auto p = lstm->named_parameters();
        const auto w_ih = p["weight_ih_l0"], w_hh = p["weight_hh_l0"].contiguous();
        auto xg = torch::addmm(p["bias_ih_l0"] + p["bias_hh_l0"], x.view({B * T, 7}), w_ih.t());
        auto h = h0[0].clone(), c = c0[0].clone();
        auto out = torch::empty({B, T, H});
        auto scratch = torch::empty({kernels::lstm_scratch_floats(H)});
        kernels::lstm_recurrence(xg.data_ptr<float>(), w_hh.data_ptr<float>(), B, T, H,
                                 h.data_ptr<float>(), c.data_ptr<float>(), out.data_ptr<float>(),
                                 scratch.data_ptr<float>());
        const auto what =
            "H " + std::to_string(H) + " B " + std::to_string(B) + " T " + std::to_string(T);
        EXPECT_LT(max_abs_diff(out, ref), 2e-6) << what;
        EXPECT_LT(max_abs_diff(h, std::get<0>(ref_state)[0]), 2e-6) << what;
        EXPECT_LT(max_abs_diff(c, std::get<1>(ref_state)[0]), 4e-6) << what;
      }
    }
  }
}

}  // namespace
}  // namespace foxhunt::models
