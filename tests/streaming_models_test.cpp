// Per-instrument streaming of the sequence models: every bar's stream output must equal the full
// forward over that bar's window (the last `window` bars; all bars so far during warm-up).
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "foxhunt/models/fused_kernels.h"
#include "foxhunt/models/mamba2.h"
#include "foxhunt/models/tft.h"
#include "test_util.h"

namespace foxhunt::models {
namespace {

using foxhunt::testing::max_abs_diff;
using foxhunt::testing::SeededTest;

using foxhunt::testing::input_error;

// ---- Mamba-2 ----------------------------------------------------------------------------------

class Mamba2StreamTest : public SeededTest {
 protected:
  // Several chunks per window, two groups, a horizon > 1.
  static Mamba2Options small() {
    return Mamba2Options()
        .input_dim(5)
        .d_model(16)
        .d_state(4)
        .headdim(8)
        .ngroups(2)
        .chunk_size(4)
        .horizon(2)
        .window(12);
  }
};

// Bars [T, input_dim] from a local generator (the global RNG only seeds the weights).
torch::Tensor random_bars(int64_t T, int64_t dim, uint64_t seed,
                          torch::ScalarType dtype = torch::kFloat) {
  auto gen = at::detail::createCPUGenerator(seed);
  return torch::randn({T, dim}, gen).to(dtype);
}

// The reference: forward over the window ending at bar t (batch 1).
torch::Tensor mamba2_reference(Mamba2Net& net, const torch::Tensor& bars, int64_t t,
                               int64_t window) {
  const int64_t start = std::max<int64_t>(0, t - window + 1);
  return net->forward(bars.narrow(0, start, t - start + 1).unsqueeze(0)).squeeze(0);
}

// Pushes bars [from, to) into `stream`; each output must be within `tol` of the forward over the
// window of `window` bars ending at that bar.
void expect_mamba2_pushes_match(Mamba2Net& net, Mamba2Stream& stream, const torch::Tensor& bars,
                                int64_t from, int64_t to, int64_t window, double tol) {
  for (int64_t t = from; t < to; ++t)
    EXPECT_LT(max_abs_diff(stream.push(bars[t]), mamba2_reference(net, bars, t, window)), tol) << t;
}

// Pushes bars 0 .. n-1 (`push(t)` returns the stream's output at bar t) and compares each output
// with `reference(t)`, the forward over its window: same shape, an inference tensor (push runs
// under InferenceMode), within 1e-5. Prints and returns the largest |stream - forward|.
template <typename Push, typename Reference>
double stream_error(const char* model, int64_t n, Push push, Reference reference) {
  double worst = 0.0;
  torch::NoGradGuard ng;
  for (int64_t t = 0; t < n; ++t) {
    auto y = push(t);
    auto ref = reference(t);
    EXPECT_EQ(y.sizes().vec(), ref.sizes().vec());
    EXPECT_TRUE(y.is_inference());
    const double e = max_abs_diff(y, ref);
    EXPECT_LT(e, 1e-5) << "bar " << t;
    worst = std::max(worst, e);
  }
  std::printf("[%s worst %.3g]\n", model, worst);
  return worst;
}

// Pushes every bar and returns the largest |stream - forward| over all bars.
double mamba2_stream_error(Mamba2Net& net, const torch::Tensor& bars, int64_t window = 0) {
  Mamba2Stream stream(net, window);
  const double worst = stream_error(
      "mamba2", bars.size(0), [&](int64_t t) { return stream.push(bars[t]); },
      [&](int64_t t) { return mamba2_reference(net, bars, t, stream.window()); });
  EXPECT_EQ(stream.bars(), bars.size(0));
  EXPECT_EQ(stream.filled(), std::min(bars.size(0), stream.window()));
  return worst;
}

TEST_F(Mamba2StreamTest, MatchesWindowForwardSmall) {
  Mamba2Net net(small());
  net->eval();
  const double e = mamba2_stream_error(net, random_bars(200, 5, 7));
  EXPECT_LT(e, 1e-5);
}

TEST_F(Mamba2StreamTest, MatchesWindowForwardDefaults) {
  Mamba2Net net(Mamba2Options{});
  net->eval();
  EXPECT_LT(mamba2_stream_error(net, random_bars(200, 32, 8)), 1e-5);
}

TEST_F(Mamba2StreamTest, OneAndThreeLayers) {
  // One layer: the first layer is also the last (last-position scan from the cache); three: a
  // middle layer runs in full over the window.
  for (int64_t layers : {1, 3}) {
    Mamba2Net net(small().n_layers(layers));
    net->eval();
    EXPECT_LT(mamba2_stream_error(net, random_bars(60, 5, 9)), 1e-5) << layers << " layers";
  }
}

TEST_F(Mamba2StreamTest, CustomWindowAndFloat64AreExact) {
  // In fp64 the only differences are rounding: far below the fp32 tolerance.
  Mamba2Net net(small());
  net->to(torch::kDouble);
  net->eval();
  auto bars = random_bars(80, 5, 10, torch::kDouble);
  Mamba2Stream stream(net, 20);
  EXPECT_EQ(stream.window(), 20);
  torch::NoGradGuard ng;
  expect_mamba2_pushes_match(net, stream, bars, 0, bars.size(0), 20, 1e-10);
}

TEST_F(Mamba2StreamTest, WindowShorterThanTheConvolution) {
  Mamba2Net net(small());
  net->eval();
  EXPECT_LT(mamba2_stream_error(net, random_bars(20, 5, 14), 2), 1e-5);
}

TEST_F(Mamba2StreamTest, StreamsArePerInstrument) {
  Mamba2Net net(small());
  net->eval();
  auto a = random_bars(40, 5, 11), b = random_bars(40, 5, 12) * 2.0;
  Mamba2Stream sa(net), sb(net);
  torch::NoGradGuard ng;
  for (int64_t t = 0; t < 40; ++t) {
    auto ya = sa.push(a[t]);
    if (t % 3 != 2) continue;  // b advances more slowly
    auto yb = sb.push(b[t / 3]);
    EXPECT_LT(max_abs_diff(ya, mamba2_reference(net, a, t, 12)), 1e-5) << t;
    EXPECT_LT(max_abs_diff(yb, mamba2_reference(net, b, t / 3, 12)), 1e-5) << t;
  }
  EXPECT_EQ(sa.bars(), 40);
  EXPECT_EQ(sb.bars(), 13);
}

TEST_F(Mamba2StreamTest, FollowsWeightAndDtypeChanges) {
  Mamba2Net net(small());
  net->eval();
  auto bars = random_bars(40, 5, 13);
  Mamba2Stream stream(net);
  torch::NoGradGuard ng;
  for (int64_t t = 0; t < 20; ++t) stream.push(bars[t]);
  // An in-place weight update (as an optimizer step): the cached rows are recomputed.
  net->embed->weight.add_(0.05);
  net->blocks->ptr(0)->as<Mamba2BlockImpl>()->mixer->in_proj->weight.mul_(1.1);
  expect_mamba2_pushes_match(net, stream, bars, 20, 30, 12, 1e-5);
  // A dtype move: the buffers follow, raw rows are kept.
  net->to(torch::kDouble);
  auto bars64 = bars.to(torch::kDouble);
  for (int64_t t = 30; t < 40; ++t) {
    auto y = stream.push(bars64[t]);
    EXPECT_EQ(y.scalar_type(), torch::kDouble);
    EXPECT_LT(max_abs_diff(y, mamba2_reference(net, bars64, t, 12)), 1e-10) << t;
  }
  stream.reset();
  EXPECT_EQ(stream.bars(), 0);
  EXPECT_LT(
      max_abs_diff(stream.push(bars64[5]), mamba2_reference(net, bars64.narrow(0, 5, 1), 0, 12)),
      1e-10);
}

TEST_F(Mamba2StreamTest, RejectsBadInputs) {
  Mamba2Net net(small());
  net->eval();
  Mamba2Stream stream(net);
  EXPECT_NE(input_error([&] { stream.push(torch::randn({4})); }).find("expected"),
            std::string::npos);
  EXPECT_NE(input_error([&] { stream.push(torch::randn({1, 5})); }), "");
  EXPECT_NE(input_error([&] { stream.push(torch::randn({5}, torch::kDouble)); }).find("dtype"),
            std::string::npos);
  auto bad = torch::randn({5});
  bad[2] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_NE(input_error([&] { stream.push(bad); }).find("finite"), std::string::npos);
  EXPECT_EQ(stream.bars(), 0);  // rejected bars are not appended
  EXPECT_NE(input_error([&] { Mamba2Stream(net, -1); }).find("window"), std::string::npos);
  net->train();
  EXPECT_NE(input_error([&] { stream.push(torch::randn({5})); }).find("eval"), std::string::npos);
}

// ---- TFT --------------------------------------------------------------------------------------

class TftStreamTest : public SeededTest {
 protected:
  static TftOptions small() { return foxhunt::testing::small_tft_options(); }
};

struct TftBars {
  torch::Tensor past;    // [T, past_features]
  torch::Tensor future;  // [T, horizon, future_features]: the known-future rows given at bar t
};

TftBars random_tft_bars(const TftOptions& o, int64_t T, uint64_t seed,
                        torch::ScalarType dtype = torch::kFloat) {
  auto gen = at::detail::createCPUGenerator(seed);
  TftBars b;
  b.past = torch::randn({T, o.past_features()}, gen).to(dtype);
  b.future = torch::randn({T, o.horizon(), o.future_features()}, gen).to(dtype);
  return b;
}

torch::Tensor tft_reference(TftNet& net, const TftBars& b, int64_t t, int64_t window, int64_t id) {
  const int64_t start = std::max<int64_t>(0, t - window + 1);
  auto sid = torch::full({1}, id, torch::TensorOptions(torch::kLong).device(b.past.device()));
  return net
      ->forward(b.past.narrow(0, start, t - start + 1).unsqueeze(0), b.future[t].unsqueeze(0), sid)
      .squeeze(0);
}

// Pushes bars [from, to) of `b` for instrument `id` into `stream`; each output must be within `tol`
// of the forward over the window of `window` bars ending at that bar.
void expect_tft_pushes_match(TftNet& net, TftStream& stream, const TftBars& b, int64_t from,
                             int64_t to, int64_t window, int64_t id, double tol) {
  for (int64_t t = from; t < to; ++t)
    EXPECT_LT(
        max_abs_diff(stream.push(b.past[t], b.future[t], id), tft_reference(net, b, t, window, id)),
        tol)
        << t;
}

double tft_stream_error(TftNet& net, const TftBars& b, int64_t id, int64_t window = 0) {
  TftStream stream(net, window);
  return stream_error(
      "tft", b.past.size(0), [&](int64_t t) { return stream.push(b.past[t], b.future[t], id); },
      [&](int64_t t) { return tft_reference(net, b, t, stream.window(), id); });
}

TEST_F(TftStreamTest, VsnForwardRowsMatchesForward) {
  // The stream's batch-1 VSN: many variables with a skip projection, E == H (identity skip),
  // E == 1 (the selection skip is the flattened embedding), a single variable, with and without
  // a context.
  struct Case {
    int64_t v, e, h, ctx;
  };
  for (const auto& c : {Case{7, 3, 8, 8}, Case{5, 8, 8, 8}, Case{4, 1, 6, 0}, Case{1, 3, 8, 8}}) {
    VariableSelectionNetwork vsn(VariableSelectionNetworkOptions(c.v, c.e, c.h).context(c.ctx));
    vsn->eval();
    torch::NoGradGuard ng;
    auto x = torch::randn({1, 6, c.v});
    auto ctx = c.ctx > 0 ? torch::randn({1, c.ctx}) : torch::Tensor();
    auto ref = vsn->forward(x, ctx).output.squeeze(0);
    auto f = vsn->fold();
    auto bias = vsn->selection_bias(f, ctx);
    EXPECT_LT(max_abs_diff(vsn->forward_rows(x[0], bias, f), ref), 1e-6) << c.v << " " << c.e;
    EXPECT_LT(max_abs_diff(vsn->forward_rows(x[0].narrow(0, 2, 1), bias, f), ref.narrow(0, 2, 1)),
              1e-6)
        << c.v << " " << c.e;
  }
}

TEST_F(TftStreamTest, MatchesWindowForwardSmall) {
  TftNet net(small());
  net->eval();
  EXPECT_LT(tft_stream_error(net, random_tft_bars(small(), 200, 21), 3), 1e-5);
}

TEST_F(TftStreamTest, MatchesWindowForwardDefaults) {
  TftNet net(TftOptions{});  // 225 past features, window 60, horizon 5, dropout 0.1 (off in eval)
  net->eval();
  EXPECT_LT(tft_stream_error(net, random_tft_bars(TftOptions{}, 200, 22), 7), 1e-5);
}

// The CPU fp32 stream runs row kernels with 16-float lanes and scalar tails: widths on both sides
// of a lane, one and three LSTM layers, one to four heads, a horizon of one and a window of one
// must all give the window forward, and the LibTorch ops the stream runs with the kernels off.
TEST_F(TftStreamTest, RowKernelsMatchTheForwardAndTheOpsAcrossShapes) {
  struct Case {
    int64_t hidden, layers, heads, horizon, window;
  };
  for (const auto& c : {Case{8, 2, 2, 4, 7}, Case{20, 1, 4, 1, 5}, Case{48, 3, 1, 3, 9},
                        Case{32, 2, 4, 5, 1}, Case{16, 1, 2, 2, 12}}) {
    const auto o =
        small().hidden(c.hidden).lstm_layers(c.layers).heads(c.heads).horizon(c.horizon).window(
            c.window);
    TftNet net(o);
    net->eval();
    const auto b = random_tft_bars(o, 3 * c.window + 4, 31);
    const std::string at = fmt::format("hidden {} layers {} heads {} horizon {} window {}",
                                       c.hidden, c.layers, c.heads, c.horizon, c.window);
    EXPECT_LT(tft_stream_error(net, b, 2), 1e-5) << at;
    TftStream rows(net), ops(net);
    for (int64_t t = 0; t < b.past.size(0); ++t) {
      const auto y = rows.push(b.past[t], b.future[t], 2);
      FusedCpuKernels off(false);
      EXPECT_LT(max_abs_diff(y, ops.push(b.past[t], b.future[t], 2)), 1e-5) << at << " bar " << t;
    }
  }
}

TEST_F(TftStreamTest, CustomWindowAndFloat64AreExact) {
  TftNet net(small().lstm_layers(1).heads(4));
  net->to(torch::kDouble);
  net->eval();
  auto b = random_tft_bars(small(), 60, 23, torch::kDouble);
  TftStream stream(net, 11);
  torch::NoGradGuard ng;
  expect_tft_pushes_match(net, stream, b, 0, 60, 11, 1, 1e-10);
}

TEST_F(TftStreamTest, CachedRowsOfManyInstrumentsMatchTheWindowForward) {
  // What the desk runs: the past VSN once per bar for a batch of instruments (encode_past_rows),
  // then forward_cached on each instrument's window of cached rows, equal to forward.
  TftNet net(small());
  net->eval();
  const auto o = small();
  const int64_t n = 5, w = o.window();
  auto past = torch::randn({n, w, o.past_features()});
  auto future = torch::randn({n, o.horizon(), o.future_features()});
  auto ids = torch::tensor({0, 3, 1, 3, 2}, torch::kLong);
  std::vector<torch::Tensor> cached;
  for (int64_t t = 0; t < w; ++t) cached.push_back(net->encode_past_rows(past.select(1, t), ids));
  torch::NoGradGuard ng;
  const auto ref = net->forward(past, future, ids);
  const auto y = net->forward_cached(torch::stack(cached, 1), future, ids);
  EXPECT_LT(max_abs_diff(y, ref), 1e-5);
  // Each instrument's row equals that instrument alone (batch 1).
  for (int64_t i = 0; i < n; ++i)
    EXPECT_LT(max_abs_diff(y[i], net->forward(past.narrow(0, i, 1), future.narrow(0, i, 1),
                                              ids.narrow(0, i, 1))[0]),
              1e-5)
        << i;
  // Inputs are validated like forward's.
  foxhunt::testing::expect_input_error(
      [&] {
        net->encode_past_rows(torch::randn({2, 3}), ids.narrow(0, 0, 2));
      },
      "tft", {"rows"});
  foxhunt::testing::expect_input_error(
      [&] { net->encode_past_rows(past.select(1, 0), ids.narrow(0, 0, 2)); }, "tft", {"static_id"});
  foxhunt::testing::expect_input_error(
      [&] { net->forward_cached(torch::stack(cached, 1), future.narrow(0, 0, 2), ids); }, "tft",
      {"future"});
}

TEST_F(TftStreamTest, StaticIdChangeAndPerInstrumentStreams) {
  TftNet net(small());
  net->eval();
  auto a = random_tft_bars(small(), 30, 24), c = random_tft_bars(small(), 30, 25);
  TftStream sa(net), sc(net);
  torch::NoGradGuard ng;
  for (int64_t t = 0; t < 30; ++t) {
    const int64_t id_a = t < 15 ? 0 : 4;  // the cached VSN outputs are recomputed for the new id
    auto ya = sa.push(a.past[t], a.future[t], id_a);
    auto yc = sc.push(c.past[t], c.future[t], 2);
    EXPECT_LT(max_abs_diff(ya, tft_reference(net, a, t, 7, id_a)), 1e-5) << t;
    EXPECT_LT(max_abs_diff(yc, tft_reference(net, c, t, 7, 2)), 1e-5) << t;
  }
}

TEST_F(TftStreamTest, FollowsWeightChanges) {
  TftNet net(small());
  net->eval();
  auto b = random_tft_bars(small(), 20, 26);
  TftStream stream(net);
  torch::NoGradGuard ng;
  for (int64_t t = 0; t < 10; ++t) stream.push(b.past[t], b.future[t], 1);
  net->past_vsn->fc1_weight.mul_(1.2);
  net->static_embedding->weight.add_(0.1);
  expect_tft_pushes_match(net, stream, b, 10, 20, 7, 1, 1e-5);
}

TEST_F(TftStreamTest, RejectsBadInputsAndTrainMode) {
  TftNet net(small());
  net->eval();
  TftStream stream(net);
  auto past = torch::randn({6}), future = torch::randn({4, 3});
  EXPECT_NE(input_error([&] { stream.push(torch::randn({5}), future, 0); }).find("stream past"),
            std::string::npos);
  EXPECT_NE(input_error([&] {
              stream.push(past, torch::randn({3, 3}), 0);
            }).find("stream future"),
            std::string::npos);
  EXPECT_NE(input_error([&] { stream.push(past, future, 5); }).find("static_id"),
            std::string::npos);
  EXPECT_EQ(stream.bars(), 0);
  net->train();
  EXPECT_NE(input_error([&] { stream.push(past, future, 0); }).find("eval"), std::string::npos);
}

// ---- on the GPU: the same contract (run only where one is present, see tests/main.cpp) ---------

TEST_F(Mamba2StreamTest, MatchesWindowForward_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  Mamba2Net net(small());
  net->to(torch::kCUDA);
  net->eval();
  auto bars = random_bars(40, 5, 31).to(torch::kCUDA);
  EXPECT_LT(mamba2_stream_error(net, bars), 1e-5);
}

TEST_F(TftStreamTest, MatchesWindowForward_CUDA) {
  FOXHUNT_REQUIRE_CUDA();
  TftNet net(small());
  net->to(torch::kCUDA);
  net->eval();
  auto b = random_tft_bars(small(), 40, 32);
  b.past = b.past.to(torch::kCUDA);
  b.future = b.future.to(torch::kCUDA);
  EXPECT_LT(tft_stream_error(net, b, 2), 1e-5);
}

}  // namespace
}  // namespace foxhunt::models
