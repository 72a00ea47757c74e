// Temporal Fusion Transformer: building blocks (GLU, GRN, VSN, attention), causality, shapes,
// parameter counts, validation, and a short learning check.
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

using foxhunt::testing::max_abs_diff;
using foxhunt::testing::SeededTest;

TftOptions small_options() {
  return foxhunt::testing::small_tft_options();
}

struct Inputs {
  torch::Tensor past, future, static_id;
};

Inputs random_inputs(const TftOptions& o, int64_t batch, int64_t window = 0) {
  const int64_t t = window > 0 ? window : o.window();
  return {torch::randn({batch, t, o.past_features()}),
          torch::randn({batch, o.horizon(), o.future_features()}),
          torch::randint(0, o.static_categories(), {batch}, torch::kLong)};
}

int64_t live_count(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

using foxhunt::testing::input_error;

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
  EXPECT_EQ(live_count(*grn), parameter_count(grn->options));
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
  EXPECT_EQ(live_count(*grn), parameter_count(grn->options));
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
    EXPECT_EQ(live_count(*vsn), parameter_count(vsn->options)) << "V=" << v;
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

// ---- the model --------------------------------------------------------------------------------

class TftTest : public SeededTest {};

// A TftNet with options `o` in eval mode and `batch` random windows for it: what the tests of
// the whole network start from.
struct EvalSetup {
  TftOptions o;
  TftNet net;
  Inputs in;
};

EvalSetup eval_setup(int64_t batch, const TftOptions& o = small_options()) {
  TftNet net(o);
  net->eval();
  return {o, net, random_inputs(o, batch)};
}

TEST_F(TftTest, DefaultParameterCountIsClosedForm) {
  // By hand (H 32, E 8, P 225, F 4): per-variable GRN(8 -> 8 -> 32) = 72 + 72 + 576 + 64 + 288
  // = 1072; past VSN 225 * (16 + 1072) + selection GRN(1800 -> 32 -> 225, ctx 32) 480237
  // = 725037; future VSN 4 * 1088 + 3540 = 7892; static 512 + 5 * 4288 = 21952; LSTMs
  // 4 * 8448 = 33792; gated skip 2176; enrichment 5312; attention 2664; 2 GateAddNorms + GRN
  // 2176 * 2 + 4288; head 99.
  constexpr int64_t kDefault =
      725037 + 7892 + 21952 + 33792 + 2176 + 5312 + 2664 + 2 * 2176 + 4288 + 99;
  static_assert(kDefault == 807564);
  TftOptions o;
  EXPECT_EQ(parameter_count(o), kDefault);
  TftNet net(o);
  EXPECT_EQ(live_count(*net), kDefault);
  auto m = make_model("tft");
  EXPECT_EQ(m->parameter_count(), kDefault);
  EXPECT_EQ(m->parameter_bytes(), 4 * kDefault);
  EXPECT_EQ(m->buffer_bytes(), 0);
}

TEST_F(TftTest, ClosedFormMatchesLiveForVariedOptions) {
  std::vector<TftOptions> variants = {
      small_options(),
      small_options().future_features(1),  // single-variable future VSN
      small_options().real_embedding(8),   // E == H: identity per-variable skip
      small_options().real_embedding(1),   // E == 1: identity selection skip
      small_options().heads(1).lstm_layers(1).quantiles({0.5}),
      small_options().hidden(12).heads(3).lstm_layers(3).static_categories(1),
  };
  for (const auto& o : variants) {
    TftNet net(o);
    EXPECT_EQ(live_count(*net), parameter_count(o)) << to_json(o).dump();
  }
}

TEST_F(TftTest, OutputShapeForAnyWindow) {
  auto o = small_options();
  TftNet net(o);
  net->eval();
  for (int64_t window : {int64_t{1}, int64_t{7}, int64_t{20}}) {
    auto in = random_inputs(o, 3, window);
    auto d = net->forward_with_details(in.past, in.future, in.static_id);
    EXPECT_EQ(d.prediction.sizes().vec(), (std::vector<int64_t>{3, 4, 3})) << window;
    EXPECT_EQ(d.attention.sizes().vec(), (std::vector<int64_t>{3, 4, window + 4}));
    EXPECT_EQ(d.past_weights.sizes().vec(), (std::vector<int64_t>{3, window, 6}));
    EXPECT_EQ(d.future_weights.sizes().vec(), (std::vector<int64_t>{3, 4, 3}));
    EXPECT_TRUE(torch::isfinite(d.prediction).all().item<bool>());
  }
}

TEST_F(TftTest, DefaultModelForwardShape) {
  auto m = make_model("tft");
  m->module().eval();
  auto b = m->example_batch(2, 0, torch::kCPU, 5);
  EXPECT_EQ(b.inputs[0].sizes().vec(), (std::vector<int64_t>{2, 60, 225}));
  EXPECT_EQ(b.inputs[1].sizes().vec(), (std::vector<int64_t>{2, 5, 4}));
  EXPECT_EQ(b.inputs[2].sizes().vec(), (std::vector<int64_t>{2}));
  EXPECT_EQ(b.target.sizes().vec(), (std::vector<int64_t>{2, 5}));
  torch::NoGradGuard ng;
  EXPECT_EQ(m->forward(b)[0].sizes().vec(), (std::vector<int64_t>{2, 5, 3}));
  // seq_len overrides the window; the same seed gives the same batch.
  EXPECT_EQ(m->example_batch(1, 9, torch::kCPU, 5).inputs[0].size(1), 9);
  EXPECT_TRUE(torch::equal(m->example_batch(2, 0, torch::kCPU, 5).inputs[0], b.inputs[0]));
  EXPECT_FALSE(torch::equal(m->example_batch(2, 0, torch::kCPU, 6).inputs[0], b.inputs[0]));
}

TEST_F(TftTest, KnownFutureInputIsCausal) {
  auto [o, net, in] = eval_setup(4, small_options().horizon(5));
  torch::NoGradGuard ng;
  const auto base = net->forward(in.past, in.future, in.static_id);
  // Changing nothing changes nothing.
  EXPECT_TRUE(torch::equal(net->forward(in.past.clone(), in.future.clone(), in.static_id), base));
  for (int64_t k = 0; k < o.horizon(); ++k) {
    auto future = in.future.clone();
    future.select(1, k).add_(3.0);
    const auto pred = net->forward(in.past, future, in.static_id);
    if (k > 0) {
      EXPECT_TRUE(torch::equal(pred.narrow(1, 0, k), base.narrow(1, 0, k)))
          << "future step " << k << " leaked into earlier forecasts; max diff "
          << max_abs_diff(pred.narrow(1, 0, k), base.narrow(1, 0, k));
    }
    EXPECT_GT(max_abs_diff(pred.select(1, k), base.select(1, k)), 1e-6) << "step " << k;
  }
}

TEST_F(TftTest, PastInputAffectsEveryForecastStep) {
  auto [o, net, in] = eval_setup(2);
  torch::NoGradGuard ng;
  const auto base = net->forward(in.past, in.future, in.static_id);
  auto past = in.past.clone();
  past.select(1, 0).add_(2.0);  // the oldest bar
  const auto pred = net->forward(past, in.future, in.static_id);
  for (int64_t k = 0; k < o.horizon(); ++k)
    EXPECT_GT(max_abs_diff(pred.select(1, k), base.select(1, k)), 1e-6) << k;
}

TEST_F(TftTest, AttentionRowsSumToOneAndMaskedPositionsAreZero) {
  auto [o, net, in] = eval_setup(3);
  torch::NoGradGuard ng;
  auto w = net->forward_with_details(in.past, in.future, in.static_id).attention;
  const int64_t t = o.window(), k = o.horizon();
  ASSERT_EQ(w.sizes().vec(), (std::vector<int64_t>{3, k, t + k}));
  EXPECT_TRUE(torch::allclose(w.sum(-1), torch::ones({3, k}), 1e-5, 1e-6));
  for (int64_t q = 0; q < k; ++q) {
    auto visible = w.select(1, q).narrow(1, 0, t + q + 1);  // encoder + decoder steps <= q
    EXPECT_GT(visible.min().item<double>(), 0.0) << q;
    if (q + 1 < k) {
      auto hidden = w.select(1, q).narrow(1, t + q + 1, k - q - 1);
      EXPECT_EQ(hidden.abs().max().item<double>(), 0.0) << q;
    }
  }
}

TEST_F(TftTest, VariableSelectionWeightsSumToOne) {
  auto [o, net, in] = eval_setup(3);
  auto d = net->forward_with_details(in.past, in.future, in.static_id);
  EXPECT_TRUE(torch::allclose(d.past_weights.sum(-1), torch::ones({3, o.window()}), 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(d.future_weights.sum(-1), torch::ones({3, o.horizon()}), 1e-5, 1e-6));
  EXPECT_GE(d.past_weights.min().item<double>(), 0.0);
  // Weights depend on the inputs (not a constant).
  EXPECT_GT(d.past_weights.std().item<double>(), 0.0);
}

TEST_F(TftTest, StaticInputAffectsOutput) {
  auto [o, net, in] = eval_setup(2);
  torch::NoGradGuard ng;
  auto ids_a = torch::tensor({0, 1}, torch::kLong), ids_b = torch::tensor({3, 1}, torch::kLong);
  auto a = net->forward(in.past, in.future, ids_a);
  auto b = net->forward(in.past, in.future, ids_b);
  EXPECT_GT(max_abs_diff(a[0], b[0]), 1e-5);  // sample 0's instrument changed
  EXPECT_TRUE(torch::equal(a[1], b[1]));      // sample 1's did not
}

TEST_F(TftTest, EveryParameterGetsAGradient) {
  auto o = small_options();
  TftNet net(o);
  net->train();
  auto in = random_inputs(o, 4);
  auto pred = net->forward(in.past, in.future, in.static_id);
  auto loss = (pred - torch::randn_like(pred)).pow(2).mean();
  loss.backward();
  for (const auto& p : net->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0.0) << p.key();
  }
}

TEST_F(TftTest, FewAdamStepsReduceQuantileLoss) {
  auto o = small_options().dropout(0.0);
  auto model = make_model("tft", to_json(o));
  auto batch = model->example_batch(16, 0, torch::kCPU, 1);
  // A target the inputs explain: the first past feature of the last bar plus the future input.
  batch.target =
      batch.inputs[0].select(1, o.window() - 1).narrow(1, 0, 1) + batch.inputs[1].select(2, 0);
  torch::optim::Adam opt(model->module().parameters(), torch::optim::AdamOptions(2e-2));
  model->module().train();
  const double first = model->loss(batch).item<double>();
  double last = first;
  for (int i = 0; i < 25; ++i) {
    opt.zero_grad();
    auto loss = model->loss(batch);
    loss.backward();
    opt.step();
    last = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

TEST_F(TftTest, RejectsBadInputsWithClearMessages) {
  auto o = small_options();
  TftNet net(o);
  auto in = random_inputs(o, 2);
  // Rank mismatch: [window, features] instead of [batch, window, features].
  auto msg = input_error([&] { net->forward(in.past[0], in.future, in.static_id); });
  EXPECT_NE(msg.find("[tft] past: expected rank 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("got rank 2"), std::string::npos) << msg;
  msg = input_error([&] { net->forward(in.past, in.future[0], in.static_id); });
  EXPECT_NE(msg.find("future: expected rank 3"), std::string::npos) << msg;
  // Wrong feature counts.
  msg = input_error([&] { net->forward(torch::randn({2, 7, 5}), in.future, in.static_id); });
  EXPECT_NE(msg.find("expected shape [*, *, 6], got [2, 7, 5]"), std::string::npos) << msg;
  msg = input_error([&] { net->forward(in.past, torch::randn({2, 4, 2}), in.static_id); });
  EXPECT_NE(msg.find("expected shape [2, 4, 3], got [2, 4, 2]"), std::string::npos) << msg;
  // Wrong horizon, wrong batch, empty window.
  EXPECT_FALSE(input_error([&] {
                 net->forward(in.past, torch::randn({2, 5, 3}), in.static_id);
               }).empty());
  EXPECT_FALSE(input_error([&] {
                 net->forward(in.past, torch::randn({3, 4, 3}), in.static_id);
               }).empty());
  msg = input_error([&] { net->forward(torch::randn({2, 0, 6}), in.future, in.static_id); });
  EXPECT_NE(msg.find("window >= 1"), std::string::npos) << msg;
  // Static id: range, dtype, shape.
  msg = input_error([&] { net->forward(in.past, in.future, torch::tensor({0, 5}, torch::kLong)); });
  EXPECT_NE(msg.find("static_id: expected values in [0, 5), got 5"), std::string::npos) << msg;
  msg = input_error([&] {
    net->forward(in.past, in.future, torch::tensor({-1, 0}, torch::kLong));
  });
  EXPECT_NE(msg.find("got -1"), std::string::npos) << msg;
  msg = input_error([&] { net->forward(in.past, in.future, in.static_id.to(torch::kFloat)); });
  EXPECT_NE(msg.find("expected dtype Long"), std::string::npos) << msg;
  EXPECT_FALSE(input_error([&] {
                 net->forward(in.past, in.future, torch::zeros({3}, torch::kLong));
               }).empty());
  // Non-finite and integer features.
  auto nan_past = in.past.clone();
  nan_past[1][3][2] = std::numeric_limits<float>::quiet_NaN();
  msg = input_error([&] { net->forward(nan_past, in.future, in.static_id); });
  EXPECT_NE(msg.find("past: expected finite values"), std::string::npos) << msg;
  auto inf_future = in.future.clone();
  inf_future[0][0][0] = std::numeric_limits<float>::infinity();
  EXPECT_FALSE(input_error([&] { net->forward(in.past, inf_future, in.static_id); }).empty());
  msg = input_error([&] { net->forward(in.past.to(torch::kInt32), in.future, in.static_id); });
  EXPECT_NE(msg.find("expected a floating dtype"), std::string::npos) << msg;
}

TEST_F(TftTest, DoubleInputsAreAccepted) {
  auto [o, net, in] = eval_setup(2);
  torch::NoGradGuard ng;
  auto a = net->forward(in.past, in.future, in.static_id);
  auto b = net->forward(in.past.to(torch::kDouble), in.future.to(torch::kDouble), in.static_id);
  EXPECT_EQ(b.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::equal(a, b));
}

TEST_F(TftTest, OptionsJsonRoundTripAndValidation) {
  auto o = small_options().quantiles({0.05, 0.5, 0.95}).dropout(0.2);
  auto j = to_json(o);
  auto back = tft_options_from_json(j);
  EXPECT_EQ(to_json(back), j);
  EXPECT_EQ(back.quantiles(), (std::vector<double>{0.05, 0.5, 0.95}));
  auto msg = input_error([] { tft_options_from_json({{"hiden", 3}}); });
  EXPECT_NE(msg.find("unknown option 'hiden'"), std::string::npos) << msg;
  msg = input_error([] { tft_options_from_json({{"hidden", 30}, {"heads", 4}}); });
  EXPECT_NE(msg.find("heads"), std::string::npos) << msg;
  EXPECT_FALSE(input_error([] { tft_options_from_json({{"quantiles", {0.5, 1.0}}}); }).empty());
  EXPECT_FALSE(input_error([] { tft_options_from_json({{"window", 0}}); }).empty());
  EXPECT_FALSE(input_error([] { tft_options_from_json({{"dropout", 1.0}}); }).empty());
  EXPECT_FALSE(input_error([] { tft_options_from_json({{"horizon", "five"}}); }).empty());
  EXPECT_FALSE(input_error([] { make_model("tft", {{"static_categories", 0}}); }).empty());
}

TEST_F(TftTest, RegisteredLastWithQuantileLoss) {
  auto names = model_names();
  ASSERT_FALSE(names.empty());
  EXPECT_EQ(names.back(), "tft");
  auto m = make_model("tft", to_json(small_options()));
  EXPECT_EQ(m->input_names(), (std::vector<std::string>{"past", "future", "static_id"}));
  EXPECT_EQ(m->default_seq_len(), 7);
  EXPECT_EQ(m->output_shapes(2, 7), (std::vector<std::vector<int64_t>>{{2, 4, 3}}));
  m->module().eval();
  auto b = m->example_batch(3, 0, torch::kCPU, 2);
  auto pred = m->forward(b)[0];
  // Pinball loss by hand, averaged over batch, horizon and quantiles.
  const std::vector<double> q = {0.1, 0.5, 0.9};
  double total = 0;
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t j = 0; j < 3; ++j) {
        const double e = b.target[i][k].item<double>() - pred[i][k][j].item<double>();
        total += std::max(q[j] * e, (q[j] - 1.0) * e);
      }
  EXPECT_NEAR(m->loss(b).item<double>(), total / 36.0, 1e-5);
  auto bad = b;
  bad.target = torch::randn({3, 5});
  EXPECT_THROW(m->loss(bad), InputError);
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

// Inference (fused VSN and LSTM kernels) equals the autograd forward (LibTorch ops), with the
// LSTM in one, two and three layers and hidden widths on and off the kernels' vector sizes.
TEST_F(TftTest, InferenceForwardMatchesTheAutogradForward) {
  const std::vector<TftOptions> cases = {
      small_options(),
      small_options().lstm_layers(1),
      small_options().hidden(12).heads(3).lstm_layers(3),
      small_options().hidden(32).heads(4).window(20),
  };
  for (const auto& o : cases) {
    TftNet net(o);
    net->eval();
    for (int64_t batch : {1, 3}) {
      auto in = random_inputs(o, batch);
      ASSERT_TRUE(torch::GradMode::is_enabled());
      auto ref = net->forward(in.past, in.future, in.static_id).detach();
      torch::NoGradGuard ng;
      auto out = net->forward(in.past, in.future, in.static_id);
      const double scale = ref.abs().max().item<double>();
      EXPECT_LT(max_abs_diff(out, ref), 2e-5 * std::max(scale, 1.0))
          << "hidden " << o.hidden() << " layers " << o.lstm_layers() << " batch " << batch;
      // The kernels ran: LibTorch's LSTM did not (it does with autograd on).
      const auto ops =
          foxhunt::testing::ops_run([&] { net->forward(in.past, in.future, in.static_id); });
      EXPECT_EQ(ops.count("aten::lstm"), 0u);
      EXPECT_FALSE(ops.empty());  // the counter sees inference ops
      torch::AutoGradMode on(true);
      EXPECT_EQ(foxhunt::testing::ops_run([&] {
                  net->forward(in.past, in.future, in.static_id);
                }).count("aten::lstm"),
                1u);
    }
  }
}

}  // namespace
}  // namespace foxhunt::models
