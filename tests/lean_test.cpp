// The lean CPU inference path of the MLP models (models/lean.h): the finite scan, the kernel
// against LibTorch's Linear layers, and the models' switch between the two paths.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>

#include "foxhunt/core/error.h"
#include "foxhunt/models/dqn.h"
#include "foxhunt/models/lean.h"
#include "foxhunt/models/ppo.h"

namespace fm = foxhunt::models;

namespace {

// Max |a - b| relative to max(1, |b|).
double max_rel_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return ((a - b).abs() / b.abs().clamp_min(1.0)).max().item<double>();
}

}  // namespace

TEST(LeanTest, AllFiniteFindsEveryNanAndInfAtEveryPosition) {
  for (int64_t n : {0, 1, 15, 16, 17, 100, 1027}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i) - 50.5f;
    // The extremes of the finite range are finite.
    if (n > 2) {
      v[0] = std::numeric_limits<float>::max();
      v[1] = -std::numeric_limits<float>::max();
      v[2] = std::numeric_limits<float>::denorm_min();
    }
    EXPECT_TRUE(fm::all_finite(v.data(), n)) << n;
    for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      if (n == 0) continue;
      for (float bad :
           {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
            -std::numeric_limits<float>::infinity()}) {
        auto w = v;
        w[static_cast<size_t>(pos)] = bad;
        EXPECT_FALSE(fm::all_finite(w.data(), n)) << "n=" << n << " pos=" << pos << " " << bad;
      }
    }
  }
  // Tensors: CPU float32 in place; other dtypes and strided views through LibTorch.
  auto t = torch::randn({7, 9});
  EXPECT_TRUE(fm::tensor_all_finite(t));
  EXPECT_TRUE(fm::tensor_all_finite(t.t()));
  EXPECT_TRUE(fm::tensor_all_finite(t.to(torch::kDouble)));
  t[3][4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(fm::tensor_all_finite(t));
  EXPECT_FALSE(fm::tensor_all_finite(t.t()));
  EXPECT_FALSE(fm::tensor_all_finite(t.to(torch::kDouble)));
}

TEST(LeanTest, LeanMlpEqualsTheLibTorchLayersForEveryShapeAndBatch) {
  torch::manual_seed(3);
  torch::NoGradGuard no_grad;
  // Widths below, at and above the 16-column blocks; batches around the 4-row blocks.
  const std::vector<std::vector<int64_t>> hidden = {{}, {1}, {17}, {64, 33}, {130, 16, 5}};
  for (auto act : {fm::Activation::kReLU, fm::Activation::kTanh}) {
    for (const auto& h : hidden) {
      for (int64_t in : {1, 7, 256}) {
        for (int64_t out : {1, 3, 20}) {
          fm::Mlp mlp(fm::MlpOptions(in, h, out).activation(act));
          for (int64_t batch : {1, 3, 4, 5, 9, 64, 131}) {
            auto x = torch::randn({batch, in});
            auto want = mlp->forward(x);
            auto got = torch::full({batch, out}, std::numeric_limits<float>::quiet_NaN());
            ASSERT_TRUE(fm::lean_mlp_forward(*mlp, x.const_data_ptr<float>(), batch,
                                             got.mutable_data_ptr<float>()));
            EXPECT_LT(max_rel_diff(got, want), 1e-5)
                << "in=" << in << " hidden=" << h.size() << " out=" << out << " batch=" << batch;
          }
        }
      }
    }
  }
}

// The MLP through LibTorch's own layers (what MlpImpl::forward computed before the fused node).
torch::Tensor libtorch_mlp(fm::MlpImpl& mlp, const torch::Tensor& x) {
  auto y = x;
  for (size_t i = 0; i < mlp.layers.size(); ++i) {
    y = mlp.layers[i]->forward(y);
    if (i + 1 < mlp.layers.size())
      y = mlp.options.activation() == fm::Activation::kReLU ? torch::relu(y) : torch::tanh(y);
  }
  return y;
}

TEST(LeanTest, FusedTrainingMlpGivesTheLibTorchLayersOutputsAndGradients) {
  torch::manual_seed(4);
  const std::vector<std::vector<int64_t>> hidden = {{}, {17}, {64, 33}, {130, 16, 5}};
  for (auto act : {fm::Activation::kReLU, fm::Activation::kTanh}) {
    for (const auto& h : hidden) {
      for (int64_t in : {1, 7, 256}) {
        for (int64_t out : {1, 3, 20}) {
          fm::Mlp mlp(fm::MlpOptions(in, h, out).activation(act));
          for (int64_t batch : {1, 5, 9, 64}) {
            const auto x = torch::randn({batch, in});
            const auto r = torch::randn({batch, out});
            auto grads = [&](bool fused) {
              mlp->zero_grad();
              auto xg = x.clone().requires_grad_(true);
              auto y = fused ? mlp->forward(xg) : libtorch_mlp(*mlp, xg);
              if (fused) {
                EXPECT_NE(y.grad_fn()->name().find("MlpFunction"), std::string::npos)
                    << y.grad_fn()->name();
              }
              (y * r).sum().backward();
              std::vector<torch::Tensor> g{y.detach(), xg.grad()};
              for (const auto& p : mlp->parameters()) g.push_back(p.grad().clone());
              return g;
            };
            const auto got = grads(true), want = grads(false);
            ASSERT_EQ(got.size(), want.size());
            for (size_t k = 0; k < got.size(); ++k)
              EXPECT_LT(max_rel_diff(got[k], want[k]), 2e-5)
                  << "tensor " << k << " (0 output, 1 input grad, then W/b per layer) in=" << in
                  << " hidden=" << h.size() << " out=" << out << " batch=" << batch;
          }
        }
      }
    }
  }
}

TEST(LeanTest, LargeBatchesSplitAcrossThreadsGiveTheSameRows) {
  torch::manual_seed(4);
  torch::NoGradGuard no_grad;
  fm::Mlp mlp(fm::MlpOptions(40, {96, 32}, 3));
  auto x = torch::randn({1000, 40});
  auto one = torch::empty({1000, 3});
  ASSERT_TRUE(
      fm::lean_mlp_forward(*mlp, x.const_data_ptr<float>(), 1000, one.mutable_data_ptr<float>()));
  const int before = torch::get_num_threads();
  torch::set_num_threads(2);
  auto two = torch::empty({1000, 3});
  ASSERT_TRUE(
      fm::lean_mlp_forward(*mlp, x.const_data_ptr<float>(), 1000, two.mutable_data_ptr<float>()));
  torch::set_num_threads(before);
  // Each row is computed by the same kernel whichever thread runs it: bit for bit.
  EXPECT_TRUE(torch::equal(one, two));
  EXPECT_LT(max_rel_diff(one, mlp->forward(x)), 1e-5);
  // Weights that are not CPU float32 are refused (the caller takes the LibTorch path).
  fm::Mlp wide(fm::MlpOptions(40, {8}, 3));
  wide->to(torch::kDouble);
  EXPECT_FALSE(
      fm::lean_mlp_forward(*wide, x.const_data_ptr<float>(), 2, one.mutable_data_ptr<float>()));
}

TEST(LeanTest, DqnTakesTheLeanPathOnlyWithoutGradAndFollowsWeightUpdates) {
  torch::manual_seed(5);
  fm::DqnNet net(fm::DqnOptions().state_dim(12).hidden({32, 16}).actions(3));
  auto x = torch::randn({6, 12});
  // 16 rows: every layer in the output-lane form; under InferenceMode over cached transposes.
  auto x16 = torch::randn({16, 12});
  auto reference = [&](const torch::Tensor& in) {
    torch::NoGradGuard ng;
    return net->q->forward(in);  // the LibTorch layers
  };
  // Grad mode: the autograd path (the output has a grad_fn), in train and eval mode.
  auto train_out = net->forward(x);
  EXPECT_TRUE(train_out.requires_grad());
  {
    // No grad in train mode (a trainer acting): the lean path, the same numbers.
    torch::NoGradGuard ng;
    auto acting = net->forward(x);
    EXPECT_FALSE(acting.requires_grad());
    EXPECT_LT(max_rel_diff(acting, train_out.detach()), 1e-5);
    net->forward(x16);
    EXPECT_FALSE(net->q->lane_weights.holds());  // a trainer's forwards keep no derived copy
  }
  net->eval();
  EXPECT_TRUE(net->forward(x).requires_grad());
  {
    torch::NoGradGuard ng;
    auto lean = net->forward(x);
    EXPECT_FALSE(lean.requires_grad());
    EXPECT_LT(max_rel_diff(lean, reference(x)), 1e-5);
    auto lean16 = net->forward(x16);
    EXPECT_LT(max_rel_diff(lean16, reference(x16)), 1e-5);
    {
      c10::InferenceMode im;  // serving: the transposed weights are made once and kept
      EXPECT_TRUE(torch::equal(net->forward(x16), lean16));
      EXPECT_TRUE(net->q->lane_weights.holds());
    }
    // An in-place update (what an optimizer step does) is seen by the next call.
    for (auto& p : net->parameters()) p.add_(0.25);
    auto after = net->forward(x);
    EXPECT_GT((after - lean).abs().max().item<double>(), 1e-3);
    EXPECT_LT(max_rel_diff(after, reference(x)), 1e-5);
    EXPECT_LT(max_rel_diff(net->forward(x16), reference(x16)), 1e-5);
    c10::InferenceMode im;
    EXPECT_LT(max_rel_diff(net->forward(x16), reference(x16)), 1e-5);
  }
  // An optimizer step through autograd, then inference mode: still the live weights.
  net->train();
  torch::optim::SGD opt(net->parameters(), 0.1);
  net->forward(x).pow(2).mean().backward();
  opt.step();
  net->eval();
  {
    c10::InferenceMode im;
    EXPECT_LT(max_rel_diff(net->forward(x), reference(x)), 1e-5);
    EXPECT_LT(max_rel_diff(net->forward(x16), reference(x16)), 1e-5);
  }
  // A clone has its own weights; changing the original does not reach it.
  auto copy = std::dynamic_pointer_cast<fm::DqnNetImpl>(net->clone());
  ASSERT_TRUE(copy);
  torch::NoGradGuard ng;
  auto before = copy->forward(x);
  auto before16 = copy->forward(x16);
  for (auto& p : net->parameters()) p.mul_(-1.0);
  EXPECT_TRUE(torch::equal(copy->forward(x), before));
  EXPECT_TRUE(torch::equal(copy->forward(x16), before16));
  EXPECT_LT(max_rel_diff(net->forward(x), reference(x)), 1e-5);
  EXPECT_LT(max_rel_diff(net->forward(x16), reference(x16)), 1e-5);
  // Bad input is still rejected with the count of bad values.
  auto bad = x.clone();
  bad[2][3] = std::numeric_limits<float>::infinity();
  try {
    net->forward(bad);
    FAIL() << "expected an InputError";
  } catch (const foxhunt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("1 of 72 values"), std::string::npos) << e.what();
  }
}

TEST(LeanTest, PpoLeanPathEqualsBothHeads) {
  torch::manual_seed(6);
  fm::ActorCritic net(fm::PpoOptions().state_dim(10).hidden({24, 24}).actions(4));
  net->eval();
  torch::NoGradGuard ng;
  for (int64_t batch : {1, 5, 70}) {
    auto x = torch::randn({batch, 10});
    auto out = net->forward(x);
    ASSERT_EQ(out.logits.sizes(), (std::vector<int64_t>{batch, 4}));
    ASSERT_EQ(out.value.sizes(), (std::vector<int64_t>{batch}));
    EXPECT_LT(max_rel_diff(out.logits, net->policy->forward(x)), 1e-5);
    EXPECT_LT(max_rel_diff(out.value, net->value->forward(x).squeeze(-1)), 1e-5);
  }
  // A strided (non-contiguous) input takes the LibTorch path and gives the same numbers.
  auto wide = torch::randn({10, 3});
  auto out = net->forward(wide.t());
  EXPECT_LT(max_rel_diff(out.logits, net->policy->forward(wide.t().contiguous())), 1e-5);
}
