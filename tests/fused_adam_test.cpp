// FusedAdam (train/fused_adam.h) against LibTorch's Adam: the same trajectory, the same state.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <sstream>

#include "foxhunt/train/fused_adam.h"

namespace {

// Two copies of the same parameters, stepped with the same gradients by `a` and `b`.
template <typename A, typename B>
void run_pair(torch::Dtype dtype, const torch::optim::AdamOptions& o, int steps, double tol) {
  torch::manual_seed(11);
  std::vector<torch::Tensor> pa, pb, start;
  for (auto shape :
       {std::vector<int64_t>{37, 5}, std::vector<int64_t>{33}, std::vector<int64_t>{1}}) {
    auto t = torch::randn(shape, dtype);
    pa.push_back(t.clone().requires_grad_(true));
    pb.push_back(t.clone().requires_grad_(true));
    start.push_back(t);
  }
  A a(pa, o);
  B b(pb, o);
  for (int s = 0; s < steps; ++s) {
    for (size_t i = 0; i < pa.size(); ++i) {
      // Gradients of very different scales, including exact zeros.
      auto g = torch::randn(pa[i].sizes(), dtype) * std::pow(10.0, (s % 5) - 2);
      if (g.numel() > 1) g.view(-1)[0] = 0;
      pa[i].mutable_grad() = g.clone();
      pb[i].mutable_grad() = g.clone();
    }
    a.step();
    b.step();
  }
  for (size_t i = 0; i < pa.size(); ++i) {
    const double diff = (pa[i] - pb[i]).abs().max().item<double>();
    const double scale = pb[i].abs().max().item<double>();
    EXPECT_LE(diff, tol * std::max(1.0, scale)) << "parameter " << i;
    // And they moved: the check compares updates, not two untouched copies.
    EXPECT_GT((pa[i].detach() - start[i]).abs().max().item<double>(), 1e-3) << "parameter " << i;
  }
}

}  // namespace

TEST(FusedAdamTest, FollowsLibTorchAdamStepForStep) {
  for (double wd : {0.0, 1e-2}) {
    auto o = torch::optim::AdamOptions(3e-3).eps(1e-6).weight_decay(wd);
    run_pair<foxhunt::train::FusedAdam, torch::optim::Adam>(torch::kFloat, o, 200, 2e-6);
  }
  // Non-float parameters take LibTorch's step: bit for bit.
  run_pair<foxhunt::train::FusedAdam, torch::optim::Adam>(torch::kDouble,
                                                          torch::optim::AdamOptions(1e-2), 20, 0.0);
}

TEST(FusedAdamTest, StateIsLibTorchAdamStateBothWays) {
  torch::manual_seed(12);
  auto w = torch::randn({8, 3}).requires_grad_(true);
  auto w_ref = w.detach().clone().requires_grad_(true);
  foxhunt::train::FusedAdam fused({w}, torch::optim::AdamOptions(1e-2));
  torch::optim::Adam ref({w_ref}, torch::optim::AdamOptions(1e-2));
  auto grad = [](int s) { return torch::full({8, 3}, 0.1 * (s + 1)); };
  for (int s = 0; s < 5; ++s) {
    w.mutable_grad() = grad(s);
    w_ref.mutable_grad() = grad(s);
    fused.step();
    ref.step();
  }
  // Save the fused state, load it into a LibTorch Adam, and the reverse; both continue alike.
  const auto saved = [](torch::optim::Optimizer& opt) {
    torch::serialize::OutputArchive out;
    opt.save(out);
    std::stringstream bytes;
    out.save_to(bytes);
    return bytes.str();
  };
  const auto load = [](torch::optim::Optimizer& opt, const std::string& bytes) {
    std::stringstream in_bytes(bytes);
    torch::serialize::InputArchive in;
    in.load_from(in_bytes);
    opt.load(in);
  };
  auto w2 = w.detach().clone().requires_grad_(true);
  auto w3 = w_ref.detach().clone().requires_grad_(true);
  torch::optim::Adam from_fused({w2}, torch::optim::AdamOptions(1e-2));
  foxhunt::train::FusedAdam from_ref({w3}, torch::optim::AdamOptions(1e-2));
  load(from_fused, saved(fused));
  load(from_ref, saved(ref));
  w2.mutable_grad() = grad(5);
  w3.mutable_grad() = grad(5);
  from_fused.step();
  from_ref.step();
  EXPECT_LT((w2 - w3).abs().max().item<double>(), 1e-6);
  // Step counts carried over: a fresh optimizer would take a much larger first step.
  auto& st =
      static_cast<torch::optim::AdamParamState&>(*from_ref.state().at(w3.unsafeGetTensorImpl()));
  EXPECT_EQ(st.step(), 6);
}
