// DerivedCache / TensorFingerprint (models/derived_cache.h): a value derived from tensors is
// reused while they are unchanged and recomputed after any write that can change them.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "foxhunt/models/derived_cache.h"
#include "foxhunt/models/streaming.h"
#include "foxhunt/models/tft.h"
#include "foxhunt/train/fused_adam.h"
#include "test_util.h"

namespace foxhunt::models {
namespace {

using foxhunt::testing::max_abs_diff;

// The sum of `t`, counting how often it was computed.
struct Summed {
  DerivedCache<double> cache;
  int computed = 0;
  double get(const std::vector<torch::Tensor>& src) {
    return *cache.get(src, [&] {
      ++computed;
      return src[0].sum().item<double>();
    });
  }
};

TEST(DerivedCacheTest, ReusesTheValueWhileTheSourcesAreUnchanged) {
  torch::NoGradGuard ng;
  auto t = torch::ones({4, 4});
  Summed s;
  EXPECT_EQ(s.get({t}), 16.0);
  EXPECT_EQ(s.get({t}), 16.0);
  EXPECT_EQ(s.get({t, torch::Tensor()}), 16.0);  // another list: recomputed once
  EXPECT_EQ(s.computed, 2);
  EXPECT_TRUE(s.cache.holds());
  s.cache.clear();
  EXPECT_FALSE(s.cache.holds());
}

TEST(DerivedCacheTest, RecomputesAfterAnInPlaceWriteAReplacedTensorOrAMove) {
  torch::NoGradGuard ng;
  auto t = torch::ones({8});
  Summed s;
  EXPECT_EQ(s.get({t}), 8.0);
  t.add_(1.0);  // in place: the version moves
  EXPECT_EQ(s.get({t}), 16.0);
  t.detach().mul_(2.0);  // a detached alias shares the version counter
  EXPECT_EQ(s.get({t}), 32.0);
  auto u = t.clone();  // same contents, another tensor
  EXPECT_EQ(s.get({u}), 32.0);
  u.set_(torch::full({8}, 3.0));  // new storage behind the same tensor
  EXPECT_EQ(s.get({u}), 24.0);
  auto d = u.to(torch::kDouble);  // a moved copy is another tensor
  EXPECT_EQ(s.get({d}), 24.0);
  EXPECT_EQ(s.computed, 6);
  EXPECT_EQ(s.get({u}), 24.0);
  EXPECT_EQ(s.computed, 7);
  // A raw write is unseen until it is marked.
  u.mutable_data_ptr<float>()[0] = 10.0f;
  EXPECT_EQ(s.get({u}), 24.0);
  mark_written(u);
  EXPECT_EQ(s.get({u}), 31.0);
}

TEST(DerivedCacheTest, NothingIsKeptWithGradientsOnOrWithInferenceSources) {
  auto t = torch::ones({3}, torch::requires_grad());
  Summed s;
  EXPECT_EQ(s.get({t}), 3.0);
  EXPECT_EQ(s.get({t}), 3.0);
  EXPECT_EQ(s.computed, 2);
  EXPECT_FALSE(s.cache.holds());
  torch::Tensor inf;
  {
    c10::InferenceMode im;
    inf = torch::ones({5});
    EXPECT_EQ(s.get({inf}), 5.0);
    inf.add_(1.0);  // no version counter: a cached value could not notice this
    EXPECT_EQ(s.get({inf}), 10.0);
  }
  EXPECT_EQ(s.computed, 4);
  EXPECT_FALSE(s.cache.holds());
  EXPECT_FALSE(TensorFingerprint({inf}).valid());
  EXPECT_TRUE(TensorFingerprint({inf}, TensorFingerprint::Inference::kIdentity).valid());
}

// FusedAdam writes parameters through their pointers; it must mark them written, or every cache
// over them (and every stream's ParameterStamp) would keep values of the old weights.
TEST(DerivedCacheTest, AFusedAdamStepIsSeen) {
  torch::manual_seed(3);
  torch::nn::Linear lin(6, 4);
  train::FusedAdam opt(lin->parameters(), torch::optim::AdamOptions(1e-2));
  const ParameterStamp stamp(*lin);
  const TensorFingerprint fp(module_state(*lin));
  lin->forward(torch::randn({5, 6})).pow(2).sum().backward();
  opt.step();
  EXPECT_TRUE(stamp.changed());
  EXPECT_FALSE(fp.matches(module_state(*lin)));
}

// The TFT's variable selection keeps its folded embedding layers (a fold reads the whole
// selection skip matrix) and must give the outputs of the current weights after each change.
TEST(DerivedCacheTest, TheVsnFoldingFollowsTheWeights) {
  torch::manual_seed(5);
  VariableSelectionNetwork vsn(VariableSelectionNetworkOptions(12, 4, 16).context(16));
  vsn->eval();
  train::FusedAdam opt(vsn->parameters(), torch::optim::AdamOptions(5e-2));
  const auto x = torch::randn({2, 7, 12}), c = torch::randn({2, 16});
  const auto check = [&] {
    torch::NoGradGuard ng;
    const auto cached = vsn->forward(x, c).output;
    const auto fresh = vsn->forward(x, c, vsn->fold()).output;
    EXPECT_LT(max_abs_diff(cached, fresh), 1e-6);
    return cached;
  };
  const auto before = check();
  {
    torch::NoGradGuard ng;
    EXPECT_EQ(vsn->folded().get(), vsn->folded().get());  // reused
  }
  vsn->forward(x, c).output.pow(2).sum().backward();  // with gradients: the fold in the graph
  for (const auto& p : vsn->parameters()) ASSERT_TRUE(p.grad().defined());
  opt.step();
  const auto after = check();
  EXPECT_GT(max_abs_diff(before, after), 1e-4);
  {
    torch::NoGradGuard ng;
    vsn->emb_weight.mul_(1.5);
  }
  EXPECT_GT(max_abs_diff(after, check()), 1e-4);
}

// LibTorch's C++ SGD writes the weights without bumping their versions; a cache over
// with_gradients() still sees the step, because the backward before it changed the gradients.
TEST(DerivedCacheTest, ALibTorchSgdStepIsSeenThroughTheGradients) {
  torch::manual_seed(4);
  torch::nn::Linear lin(6, 4);
  torch::optim::SGD opt(lin->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  const auto step = [&] {
    opt.zero_grad();
    lin->forward(torch::randn({5, 6})).pow(2).sum().backward();
    const auto version = lin->weight._version();
    opt.step();
    return version;
  };
  step();  // the gradients exist from here on (zero_grad then clears them to none)
  const TensorFingerprint fp(with_gradients(module_state(*lin)));
  ASSERT_TRUE(fp.valid());
  EXPECT_TRUE(fp.matches(with_gradients(module_state(*lin))));
  const auto version = step();
  // What this test is about: the weights' own fingerprint misses the step ...
  EXPECT_EQ(lin->weight._version(), version);
  // ... the one with the gradients does not.
  EXPECT_FALSE(fp.matches(with_gradients(module_state(*lin))));

  // The TFT's folded selection layers, kept under a LibTorch SGD loop: the outputs of the
  // current weights after each step.
  VariableSelectionNetwork vsn(VariableSelectionNetworkOptions(12, 4, 16).context(16));
  vsn->eval();
  torch::optim::SGD sgd(vsn->parameters(), torch::optim::SGDOptions(0.5));
  const auto x = torch::randn({2, 7, 12}), c = torch::randn({2, 16});
  for (int i = 0; i < 2; ++i) {
    sgd.zero_grad();
    vsn->forward(x, c).output.pow(2).sum().backward();
    sgd.step();
    torch::NoGradGuard ng;
    const auto cached = vsn->forward(x, c).output;
    EXPECT_LT(max_abs_diff(cached, vsn->forward(x, c, vsn->fold()).output), 1e-6) << "step " << i;
  }
}

}  // namespace
}  // namespace foxhunt::models
