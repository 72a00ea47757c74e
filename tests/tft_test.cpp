// Temporal Fusion Transformer, the whole model: causality, shapes, parameter counts, validation,
// the registry entry, a short learning check and inference against the autograd forward. The
// building blocks are tested in tft_layers_test.cpp.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <map>

#include "foxhunt/models/model.h"
#include "foxhunt/models/tft.h"
#include "test_util.h"

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
