// Mamba-2: the chunked SSD scan against the plain recurrence, streaming against the full
// forward, closed-form sizes, input validation and fp32 stability.
#include "foxhunt/models/mamba2.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "foxhunt/models/quantile_loss.h"
#include "test_util.h"

namespace foxhunt::models {
namespace {

using foxhunt::testing::max_abs_diff;
using torch::indexing::Slice;

// max |a - b| / max |b|: relative error on the scale of the reference.
double rel_err(const torch::Tensor& a, const torch::Tensor& ref) {
  const double scale = ref.abs().max().item<double>();
  return max_abs_diff(a, ref) / std::max(scale, 1e-300);
}

struct SsdInputs {
  torch::Tensor X, A, B, C, s0;
};

// Random SSD inputs; A = -exp(N(-1, 1.5^2)) spans decays from ~1e-3 to ~10 per step.
SsdInputs random_ssd(int64_t b, int64_t L, int64_t H, int64_t P, int64_t G, int64_t N,
                     torch::ScalarType dtype) {
  auto opts = torch::TensorOptions().dtype(dtype);
  SsdInputs in;
  in.X = torch::randn({b, L, H, P}, opts);
  in.A = -torch::exp(torch::randn({b, L, H}, opts) * 1.5 - 1.0);
  in.B = torch::randn({b, L, G, N}, opts);
  in.C = torch::randn({b, L, G, N}, opts);
  in.s0 = torch::randn({b, H, P, N}, opts);
  return in;
}

class SsdTest : public foxhunt::testing::SeededTest {};

TEST_F(SsdTest, SegsumIsExactAndMasked) {
  auto a = torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kDouble);
  auto s = segsum(a);
  ASSERT_EQ(s.sizes().vec(), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(s[0][0].item<double>(), 0.0);
  EXPECT_EQ(s[3][1].item<double>(), 2.0 + 3.0 + 4.0 - 2.0);  // a_2 + a_3
  EXPECT_EQ(s[3][0].item<double>(), 9.0);                    // a_1 + a_2 + a_3
  EXPECT_EQ(s[2][1].item<double>(), 3.0);
  EXPECT_TRUE(std::isinf(s[1][2].item<double>()) && s[1][2].item<double>() < 0);
  EXPECT_TRUE(std::isinf(s[0][3].item<double>()));

  // Large prefix sums in fp32: a difference of two cumsums would lose the low bits; the masked
  // cumsum gives each one-step segment exactly.
  auto big = -(torch::rand({64}) * 50.0 + 300.0);  // prefix sums reach ~-20000
  auto sb = segsum(big);
  for (int64_t i = 1; i < 64; ++i) ASSERT_EQ(sb[i][i - 1].item<float>(), big[i].item<float>()) << i;
}

TEST_F(SsdTest, ScalarRecurrenceByHand) {
  // H = P = N = 1, L = 2: y0 = x0 b0 c0, y1 = (e^{a1} x0 b0 + x1 b1) c1.
  auto X = torch::tensor({2.0, 3.0}, torch::kDouble).view({1, 2, 1, 1});
  auto A = torch::tensor({-0.7, -0.5}, torch::kDouble).view({1, 2, 1});
  auto B = torch::tensor({1.5, -1.0}, torch::kDouble).view({1, 2, 1, 1});
  auto C = torch::tensor({0.5, 2.0}, torch::kDouble).view({1, 2, 1, 1});
  const double h0 = 2.0 * 1.5, h1 = std::exp(-0.5) * h0 + 3.0 * -1.0;
  for (const auto& r : {ssd_sequential(X, A, B, C), ssd_chunked(X, A, B, C, 1),
                        ssd_chunked(X, A, B, C, 2), ssd_chunked(X, A, B, C, 5)}) {
    EXPECT_NEAR(r.y.view(-1)[0].item<double>(), h0 * 0.5, 1e-14);
    EXPECT_NEAR(r.y.view(-1)[1].item<double>(), h1 * 2.0, 1e-14);
    EXPECT_NEAR(r.final_state.view(-1)[0].item<double>(), h1, 1e-14);
  }
}

TEST_F(SsdTest, ChunkedMatchesSequentialFp64) {
  // L = 37 is not a multiple of the chunk; G = 2 groups shared by 4 heads.
  auto in = random_ssd(2, 37, 4, 3, 2, 5, torch::kDouble);
  for (bool with_state : {false, true}) {
    auto s0 = with_state ? in.s0 : torch::Tensor();
    auto seq = ssd_sequential(in.X, in.A, in.B, in.C, s0);
    auto chk = ssd_chunked(in.X, in.A, in.B, in.C, 8, s0);
    ASSERT_EQ(chk.y.sizes(), seq.y.sizes());
    ASSERT_EQ(chk.final_state.sizes().vec(), (std::vector<int64_t>{2, 4, 3, 5}));
    EXPECT_LT(rel_err(chk.y, seq.y), 1e-10) << "state " << with_state;
    EXPECT_LT(rel_err(chk.final_state, seq.final_state), 1e-10) << "state " << with_state;
  }
}

TEST_F(SsdTest, ChunkedMatchesSequentialFp32) {
  auto in = random_ssd(3, 100, 8, 16, 1, 16, torch::kFloat);
  auto seq = ssd_sequential(in.X, in.A, in.B, in.C, in.s0);
  auto chk = ssd_chunked(in.X, in.A, in.B, in.C, 16, in.s0);
  EXPECT_EQ(chk.y.scalar_type(), torch::kFloat);
  EXPECT_LT(rel_err(chk.y, seq.y), 1e-4);
  EXPECT_LT(rel_err(chk.final_state, seq.final_state), 1e-4);
  // fp32 against an fp64 reference too: neither path drifts.
  auto ref =
      ssd_sequential(in.X.to(torch::kDouble), in.A.to(torch::kDouble), in.B.to(torch::kDouble),
                     in.C.to(torch::kDouble), in.s0.to(torch::kDouble));
  EXPECT_LT(rel_err(chk.y, ref.y), 1e-4);
}

TEST_F(SsdTest, IndependentOfChunkSize) {
  auto in = random_ssd(2, 64, 4, 4, 1, 8, torch::kDouble);
  auto base = ssd_chunked(in.X, in.A, in.B, in.C, 4, in.s0);
  for (int64_t q : {1, 7, 8, 16, 32, 64, 100}) {
    auto r = ssd_chunked(in.X, in.A, in.B, in.C, q, in.s0);
    EXPECT_LT(rel_err(r.y, base.y), 1e-11) << "chunk " << q;
    EXPECT_LT(rel_err(r.final_state, base.final_state), 1e-11) << "chunk " << q;
  }
}

TEST_F(SsdTest, TwoHalvesWithCarriedStateEqualWhole) {
  auto in = random_ssd(2, 50, 4, 4, 2, 6, torch::kDouble);
  auto whole = ssd_chunked(in.X, in.A, in.B, in.C, 8);
  const int64_t cut = 23;  // neither half is a multiple of the chunk
  auto first = ssd_chunked(in.X.narrow(1, 0, cut), in.A.narrow(1, 0, cut), in.B.narrow(1, 0, cut),
                           in.C.narrow(1, 0, cut), 8);
  auto second = ssd_chunked(in.X.narrow(1, cut, 50 - cut), in.A.narrow(1, cut, 50 - cut),
                            in.B.narrow(1, cut, 50 - cut), in.C.narrow(1, cut, 50 - cut), 8,
                            first.final_state);
  EXPECT_LT(rel_err(torch::cat({first.y, second.y}, 1), whole.y), 1e-11);
  EXPECT_LT(rel_err(second.final_state, whole.final_state), 1e-11);
  // Dropping the carried state must change the second half (the test can fail).
  auto cold = ssd_chunked(in.X.narrow(1, cut, 50 - cut), in.A.narrow(1, cut, 50 - cut),
                          in.B.narrow(1, cut, 50 - cut), in.C.narrow(1, cut, 50 - cut), 8);
  EXPECT_GT(rel_err(cold.y, second.y), 1e-6);
}

TEST_F(SsdTest, GradientsMatchSequential) {
  auto in = random_ssd(1, 19, 2, 3, 1, 4, torch::kDouble);
  std::vector<torch::Tensor> leaves = {in.X, in.A, in.B, in.C};
  auto grads = [&](bool chunked) {
    std::vector<torch::Tensor> ls;
    for (auto& t : leaves) ls.push_back(t.detach().clone().requires_grad_(true));
    auto r = chunked ? ssd_chunked(ls[0], ls[1], ls[2], ls[3], 4)
                     : ssd_sequential(ls[0], ls[1], ls[2], ls[3]);
    (r.y.pow(2).sum() + r.final_state.sum()).backward();
    std::vector<torch::Tensor> g;
    for (auto& t : ls) g.push_back(t.grad());
    return g;
  };
  auto gc = grads(true), gs = grads(false);
  for (size_t i = 0; i < gc.size(); ++i) {
    ASSERT_TRUE(gc[i].defined());
    EXPECT_TRUE(torch::isfinite(gc[i]).all().item<bool>()) << i;
    EXPECT_LT(rel_err(gc[i], gs[i]), 1e-10) << i;
  }
}

TEST_F(SsdTest, RejectsMismatchedShapes) {
  auto in = random_ssd(1, 8, 4, 2, 1, 3, torch::kFloat);
  EXPECT_THROW(ssd_chunked(in.X, in.A.narrow(2, 0, 3), in.B, in.C, 4), InputError);
  EXPECT_THROW(ssd_chunked(in.X, in.A, in.B, in.C.narrow(3, 0, 2), 4), InputError);
  EXPECT_THROW(ssd_chunked(in.X, in.A, in.B, in.C, 0), InputError);
  EXPECT_THROW(ssd_chunked(in.X, in.A.to(torch::kDouble), in.B, in.C, 4), InputError);
  EXPECT_THROW(ssd_sequential(in.X, in.A, in.B, in.C, torch::zeros({1, 4, 2, 4})), InputError);
  auto g3 = torch::randn({1, 8, 3, 3});  // 4 heads cannot share 3 groups
  EXPECT_THROW(ssd_chunked(in.X, in.A, g3, g3, 4), InputError);
}

// ---- the network --------------------------------------------------------------------------

class Mamba2Test : public foxhunt::testing::SeededTest {
 protected:
  // A small network whose sequences span several chunks and a partial one.
  static Mamba2Options small() {
    return Mamba2Options().input_dim(5).d_model(16).d_state(4).headdim(8).chunk_size(4).horizon(2);
  }
};

int64_t live_count(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

TEST_F(Mamba2Test, DefaultParameterCountIsClosedForm) {
  Mamba2Options o;
  EXPECT_EQ(o.nheads(), 8);
  EXPECT_EQ(parameter_count(o), 58675);
  Mamba2Net net(o);
  EXPECT_EQ(live_count(*net), 58675);
  auto m = make_model("mamba2");
  EXPECT_EQ(m->parameter_count(), 58675);
  EXPECT_EQ(m->parameter_bytes(), 4 * 58675);
}

TEST_F(Mamba2Test, CustomOptionsCountMatchesLiveModule) {
  auto o = Mamba2Options()
               .input_dim(7)
               .d_model(24)
               .d_state(6)
               .n_layers(3)
               .expand(3)
               .headdim(12)
               .ngroups(3)
               .d_conv(3)
               .horizon(4)
               .quantiles({0.05, 0.25, 0.5, 0.75, 0.95});
  Mamba2Net net(o);
  EXPECT_EQ(live_count(*net), parameter_count(o));
  EXPECT_EQ(net->blocks->size(), 3u);
  // in_proj width 2*72 + 2*3*6 + 6 heads.
  EXPECT_EQ(net->blocks[0]->as<Mamba2BlockImpl>()->mixer->in_proj->weight.size(0), 2 * 72 + 36 + 6);
}

TEST_F(Mamba2Test, OptionsValidateAndRoundTrip) {
  EXPECT_THROW(Mamba2Net(Mamba2Options().headdim(24)), InputError);  // 128 % 24 != 0
  EXPECT_THROW(Mamba2Net(Mamba2Options().ngroups(3)), InputError);   // 8 heads, 3 groups
  EXPECT_THROW(Mamba2Net(Mamba2Options().quantiles({0.5, 1.0})), InputError);
  EXPECT_THROW(Mamba2Net(Mamba2Options().chunk_size(0)), InputError);
  EXPECT_THROW(mamba2_options_from_json({{"d_modle", 8}}), InputError);
  EXPECT_THROW(mamba2_options_from_json({{"d_model", "wide"}}), InputError);
  EXPECT_THROW(make_model("mamba2", {{"expand", 3}, {"headdim", 7}}), InputError);

  auto o = small();
  auto back = mamba2_options_from_json(to_json(o));
  EXPECT_EQ(to_json(back), to_json(o));
  EXPECT_EQ(back.horizon(), 2);
  EXPECT_EQ(back.chunk_size(), 4);
}

TEST_F(Mamba2Test, InitFollowsReference) {
  Mamba2Net net(Mamba2Options{});
  for (const auto& m : *net->blocks) {
    auto& mixer = m->as<Mamba2BlockImpl>()->mixer;
    auto dt = torch::softplus(mixer->dt_bias).to(torch::kDouble);
    EXPECT_GE(dt.min().item<double>(), 1e-3 * (1 - 1e-4));
    EXPECT_LE(dt.max().item<double>(), 1e-1 * (1 + 1e-4));
    auto A = -torch::exp(mixer->A_log.to(torch::kDouble));
    EXPECT_GE(A.min().item<double>(), -16.0 * (1 + 1e-6));
    EXPECT_LE(A.max().item<double>(), -1.0 * (1 - 1e-6));
    EXPECT_TRUE(torch::equal(mixer->D, torch::ones_like(mixer->D)));
    EXPECT_TRUE(torch::equal(mixer->norm_weight, torch::ones_like(mixer->norm_weight)));
    EXPECT_FALSE(mixer->in_proj->options.bias());
    EXPECT_FALSE(mixer->out_proj->options.bias());
    EXPECT_TRUE(mixer->conv1d->bias.defined());
  }
  EXPECT_EQ(net->no_weight_decay_parameters().size(), 3u * 2);
}

TEST_F(Mamba2Test, ShapesAndCausality) {
  Mamba2Net net(small());
  net->eval();
  torch::NoGradGuard ng;
  auto x = torch::randn({3, 11, 5});
  auto out = net->forward(x);
  EXPECT_EQ(out.sizes().vec(), (std::vector<int64_t>{3, 2, 3}));
  auto seq = net->forward_sequence(x);
  EXPECT_EQ(seq.sizes().vec(), (std::vector<int64_t>{3, 11, 2, 3}));
  EXPECT_LT(max_abs_diff(seq.select(1, 10), out), 1e-6);
  // Position t only sees bars 0..t.
  auto prefix = net->forward(x.narrow(1, 0, 6));
  EXPECT_LT(max_abs_diff(seq.select(1, 5), prefix), 1e-6);
  auto x2 = x.clone();
  x2.narrow(1, 6, 5).normal_();
  auto seq2 = net->forward_sequence(x2);
  EXPECT_LT(max_abs_diff(seq2.narrow(1, 0, 6), seq.narrow(1, 0, 6)), 1e-6);
  EXPECT_GT(max_abs_diff(seq2.select(1, 10), seq.select(1, 10)), 1e-6);
}

// forward(u_0..u_T)[t] == prefill(u_0..u_{t0-1}) then step(u_{t0}), ..., step(u_t).
void check_streaming(Mamba2Net& net, torch::ScalarType dtype, double tol) {
  net->to(dtype);
  net->eval();
  torch::NoGradGuard ng;
  const int64_t L = 23;
  auto x = torch::randn({2, L, net->options.input_dim()}, torch::TensorOptions().dtype(dtype));
  auto full = net->forward_sequence(x);  // [2, L, horizon, Q]
  // Prefix lengths: shorter than d_conv, a whole number of chunks, and a partial chunk.
  for (int64_t t0 : {1, 2, 8, 13}) {
    auto [out, state] = net->prefill(x.narrow(1, 0, t0));
    EXPECT_LT(rel_err(out, full.select(1, t0 - 1)), tol) << "prefill " << t0;
    ASSERT_EQ(state.layers.size(), static_cast<size_t>(net->options.n_layers()));
    for (int64_t t = t0; t < L; ++t) {
      auto y = net->step(state, x.select(1, t));
      ASSERT_EQ(y.sizes().vec(), out.sizes().vec());
      EXPECT_LT(rel_err(y, full.select(1, t)), tol) << "prefill " << t0 << " step " << t;
    }
  }
  // From the empty history, stepping reproduces every position.
  auto state = net->zero_state(2);
  for (int64_t t = 0; t < L; ++t)
    EXPECT_LT(rel_err(net->step(state, x.select(1, t)), full.select(1, t)), tol) << "zero " << t;
}

TEST_F(Mamba2Test, StreamingMatchesForwardFp64) {
  Mamba2Net net(small().n_layers(2).ngroups(2));
  check_streaming(net, torch::kDouble, 1e-10);
}

TEST_F(Mamba2Test, StreamingMatchesForwardFp32) {
  Mamba2Net net(small());
  check_streaming(net, torch::kFloat, 1e-4);
}

TEST_F(Mamba2Test, StreamingDefaultsFp32) {
  // The default sizes (H = 8, P = 16, N = 16, chunk 16) over two windows.
  Mamba2Net net(Mamba2Options{});
  net->eval();
  torch::NoGradGuard ng;
  auto x = torch::randn({2, 64, 32});
  auto full = net->forward_sequence(x);
  auto [out, state] = net->prefill(x.narrow(1, 0, 40));
  EXPECT_LT(rel_err(out, full.select(1, 39)), 1e-4);
  for (int64_t t = 40; t < 64; ++t)
    EXPECT_LT(rel_err(net->step(state, x.select(1, t)), full.select(1, t)), 1e-4) << t;
}

TEST_F(Mamba2Test, LongSequenceFp32IsFiniteAndMatchesFp64) {
  Mamba2Net net(Mamba2Options{});
  net->eval();
  torch::NoGradGuard ng;
  auto x = torch::randn({2, 512, 32}) * 3.0;
  auto out = net->forward_sequence(x);
  EXPECT_EQ(out.scalar_type(), torch::kFloat);
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
  auto net64 = std::dynamic_pointer_cast<Mamba2NetImpl>(net->clone());
  ASSERT_TRUE(net64);
  net64->to(torch::kDouble);
  auto ref = net64->forward_sequence(x.to(torch::kDouble));
  EXPECT_LT(rel_err(out, ref), 1e-3);
}

TEST_F(Mamba2Test, RejectsBadInputs) {
  Mamba2Net net(small());
  auto x = torch::randn({2, 6, 5});
  auto expect_error = [](auto&& fn, const std::vector<std::string>& needles) {
    try {
      fn();
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      for (const auto& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
    }
  };
  expect_error([&] { net->forward(x[0]); },
               {"[mamba2]", "expected rank 3", "got rank 2", "[6, 5]"});
  expect_error([&] { net->forward(torch::randn({2, 6, 4})); }, {"[*, *, 5]", "[2, 6, 4]"});
  expect_error([&] { net->forward(x.to(torch::kDouble)); }, {"expected dtype Float", "got Double"});
  expect_error([&] { net->forward(x.to(torch::kInt32)); }, {"floating"});
  expect_error([&] { net->forward(torch::randn({2, 0, 5})); }, {"seq_len >= 1"});
  auto nan = x.clone();
  nan[1][3][2] = std::numeric_limits<float>::quiet_NaN();
  expect_error([&] { net->forward_sequence(nan); }, {"finite"});
  expect_error([&] { net->prefill(nan); }, {"finite"});

  auto [out, state] = net->prefill(x);
  expect_error([&] { net->step(state, torch::randn({2, 1, 5})); }, {"x_t", "expected rank 2"});
  expect_error([&] { net->step(state, torch::randn({3, 5})); }, {"state layer 0", "[3, "});
  Mamba2State empty;
  expect_error([&] { net->step(empty, torch::randn({2, 5})); }, {"expected 2 layers"});
  // The failed calls left the good state usable.
  EXPECT_EQ(net->step(state, torch::randn({2, 5})).sizes().vec(), (std::vector<int64_t>{2, 2, 3}));

  Mamba2Block blk(small());
  EXPECT_THROW(blk->forward(torch::randn({2, 6, 15})), InputError);
  EXPECT_THROW(blk->mixer->forward(torch::randn({2, 6})), InputError);
  EXPECT_EQ(blk->forward(torch::randn({2, 6, 16})).sizes().vec(), (std::vector<int64_t>{2, 6, 16}));
}

TEST_F(Mamba2Test, AcceptsFloat64Module) {
  Mamba2Net net(small());
  net->to(torch::kDouble);
  auto out = net->forward(torch::randn({2, 9, 5}, torch::kDouble));
  EXPECT_EQ(out.scalar_type(), torch::kDouble);
  EXPECT_THROW(net->forward(torch::randn({2, 9, 5})), InputError);
}

TEST_F(Mamba2Test, RegistryAdapter) {
  auto m = make_model("mamba2", {{"window", 20}, {"horizon", 3}});
  EXPECT_EQ(m->name(), "mamba2");
  EXPECT_EQ(m->input_names(), std::vector<std::string>{"x"});
  EXPECT_EQ(m->default_seq_len(), 20);
  auto b = m->example_batch(4, 0, torch::kCPU, 5);
  EXPECT_EQ(b.inputs.at(0).sizes().vec(), (std::vector<int64_t>{4, 20, 32}));
  EXPECT_EQ(b.target.sizes().vec(), (std::vector<int64_t>{4, 3}));
  auto b7 = m->example_batch(2, 7, torch::kCPU, 5);
  EXPECT_EQ(b7.inputs.at(0).size(1), 7);
  // Deterministic given the seed.
  EXPECT_TRUE(torch::equal(m->example_batch(4, 0, torch::kCPU, 5).inputs[0], b.inputs[0]));
  auto out = m->forward(b);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].sizes().vec(), m->output_shapes(4, 20)[0]);
  auto loss = m->loss(b);
  EXPECT_NEAR(loss.item<double>(), quantile_loss(out[0], b.target, {0.1, 0.5, 0.9}).item<double>(),
              1e-6);
  b.target = torch::randn({4, 2});
  EXPECT_THROW(m->loss(b), InputError);
}

TEST_F(Mamba2Test, GradientsReachStateSpaceParameters) {
  Mamba2Net net(small());
  auto x = torch::randn({2, 10, 5});
  auto y = torch::randn({2, 2});
  quantile_loss(net->forward(x), y, {0.1, 0.5, 0.9}).backward();
  for (const auto& m : *net->blocks) {
    auto& mixer = m->as<Mamba2BlockImpl>()->mixer;
    for (auto* p : {&mixer->A_log, &mixer->dt_bias, &mixer->D, &mixer->conv1d->weight}) {
      ASSERT_TRUE(p->grad().defined());
      EXPECT_TRUE(torch::isfinite(p->grad()).all().item<bool>());
      EXPECT_GT(p->grad().abs().sum().item<double>(), 0.0);
    }
  }
}

TEST_F(Mamba2Test, CloneIsIndependentAndEqual) {
  Mamba2Net net(small());
  net->eval();
  auto copy = std::dynamic_pointer_cast<Mamba2NetImpl>(net->clone());
  ASSERT_TRUE(copy);
  auto x = torch::randn({1, 7, 5});
  torch::NoGradGuard ng;
  EXPECT_TRUE(torch::equal(copy->forward(x), net->forward(x)));
  copy->head->bias.add_(1.0);
  EXPECT_FALSE(torch::equal(copy->forward(x), net->forward(x)));
}

// Every parameter moved off its init (D = 1, norm weights 1, zero biases), so each one reaches
// the outputs the fused kernels are compared on.
void perturb(torch::nn::Module& m) {
  torch::NoGradGuard ng;
  for (auto& p : m.parameters()) p.add_(torch::randn_like(p) * 0.2 * (p.abs().mean() + 0.1));
}

// The fused CPU kernels (inference: no grad, fp32) against the LibTorch ops of the same forward
// (autograd on) and against fp64, over sizes that take every tail: headdim below and above one
// 16-float vector, d_state not a multiple of 16, two groups, windows shorter than d_conv, odd
// lengths, up to the longest single-chunk window (64).
TEST_F(Mamba2Test, FusedInferenceMatchesLibTorchOps) {
  struct Case {
    Mamba2Options o;
    int64_t batch, len;
  };
  const std::vector<Case> cases = {
      {Mamba2Options{}, 1, 32},
      {Mamba2Options{}, 3, 64},
      {Mamba2Options{}, 2, 1},
      {small(), 2, 11},
      {small().ngroups(2).d_conv(3), 1, 17},
      {Mamba2Options().input_dim(7).d_model(48).headdim(32).d_state(20), 2, 33},
      {Mamba2Options().d_conv(6).ngroups(4), 1, 3},
  };
  for (const auto& c : cases) {
    const auto what = "d_model " + std::to_string(c.o.d_model()) + " headdim " +
                      std::to_string(c.o.headdim()) + " d_state " + std::to_string(c.o.d_state()) +
                      " groups " + std::to_string(c.o.ngroups()) + " batch " +
                      std::to_string(c.batch) + " len " + std::to_string(c.len);
    Mamba2Net net(c.o);
    perturb(*net);
    net->eval();
    auto x = torch::randn({c.batch, c.len, c.o.input_dim()});
    ASSERT_TRUE(torch::GradMode::is_enabled());
    const auto ref = net->forward(x).detach();
    const auto ref_seq = net->forward_sequence(x).detach();
    auto net64 = std::dynamic_pointer_cast<Mamba2NetImpl>(net->clone());
    net64->to(torch::kDouble);
    torch::NoGradGuard ng;
    const auto out = net->forward(x);
    const auto seq = net->forward_sequence(x);
    const auto ref64 = net64->forward(x.to(torch::kDouble));
    const auto seq64 = net64->forward_sequence(x.to(torch::kDouble));
    EXPECT_LT(rel_err(out, ref), 2e-5) << what;
    EXPECT_LT(rel_err(seq, ref_seq), 2e-5) << what;
    // No less accurate than LibTorch's own fp32 ops (plus rounding slack).
    EXPECT_LT(rel_err(out.to(torch::kDouble), ref64),
              2.0 * rel_err(ref.to(torch::kDouble), ref64) + 2e-6)
        << what;
    EXPECT_LT(rel_err(seq.to(torch::kDouble), seq64),
              2.0 * rel_err(ref_seq.to(torch::kDouble), seq64) + 2e-6)
        << what;
  }
}

// Inference through the mixer is the fused kernel, not the op-by-op path: none of the scan's
// LibTorch ops runs (they all run with autograd on).
TEST_F(Mamba2Test, InferenceMixerRunsTheFusedKernel) {
  const auto o = Mamba2Options{};
  Mamba2Mixer mixer(o);
  auto u = torch::randn({2, 32, o.d_model()});
  const std::vector<std::string> scan_ops = {"aten::cumsum", "aten::exp", "aten::masked_fill",
                                             "aten::silu", "aten::softplus"};
  const auto ops = foxhunt::testing::ops_run([&] { mixer->forward(u); });
  for (const auto& op : scan_ops) EXPECT_EQ(ops.count(op), 1u) << op << " with autograd on";
  torch::NoGradGuard ng;
  const auto fused = foxhunt::testing::ops_run([&] { mixer->forward(u); });
  for (const auto& op : scan_ops) EXPECT_EQ(fused.count(op), 0u) << op << " at inference";
  EXPECT_FALSE(fused.empty());  // the counter sees inference ops too (the projections' GEMMs)
}

}  // namespace
}  // namespace foxhunt::models
