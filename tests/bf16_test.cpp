// The BF16 forms of the TFT and Mamba-2 (models/bf16.h): their forward against the FP32 forward
// on the same weights (a stated tolerance), which parameters are BF16, the closed-form bytes
// against the live module, `foxhunt quantize --precision bf16` and the bundle round trip served
// by the ensemble, and the refusal where the CPU lacks BF16 (FOXHUNT_ASSUME_NO_BF16).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/jobs/quantize_job.h"
#include "foxhunt/models/bf16.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/models/streaming.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt {
namespace {

using models::Precision;
using testing::input_error;
using testing::run_cli;
using testing::TempDir;

// Relative RMS error of the BF16 forecasts against the FP32 ones on the same weights: BF16
// operands carry 8 significant bits (relative rounding 2^-9 per value); the TFT rounds its VSNs'
// weights and the per-variable GRNs' activations, Mamba-2 only at its six projections.
struct Case {
  const char* model;
  nlohmann::json options;  // small, for the bundle and job tests
  double tolerance;        // relative RMS, default options
};
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"tft", {{"hidden", 8}, {"heads", 2}, {"window", 20}, {"dropout", 0.0}}, 3e-2},
      {"mamba2", {{"d_model", 16}, {"n_layers", 1}}, 2e-2},
  };
  return c;
}

double relative_rms(const torch::Tensor& got, const torch::Tensor& ref) {
  return ((got - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item<double>();
}

// Sets FOXHUNT_ASSUME_NO_BF16 for one scope.
struct AssumeNoBf16 {
  explicit AssumeNoBf16(const char* value = "1") { ::setenv("FOXHUNT_ASSUME_NO_BF16", value, 1); }
  ~AssumeNoBf16() { ::unsetenv("FOXHUNT_ASSUME_NO_BF16"); }
};

#define SKIP_WITHOUT_BF16()                                                                 \
  do {                                                                                      \
    if (!models::cpu_has_bf16()) GTEST_SKIP() << "this CPU has no avx512_bf16 or amx_bf16"; \
  } while (0)

// An untrained FP32 bundle of `model` over the embedded synthetic series.
std::string fp32_bundle(const std::string& model, const nlohmann::json& options, TempDir& tmp) {
  return foxhunt::testing::save_untrained_synthetic_bundle(model, options,
                                                           tmp.file(model + "-fp32.fhb"));
}

class Bf16Test : public testing::SeededTest {};

TEST_F(Bf16Test, ForwardMatchesFp32OnTheSameWeightsWithinTolerance) {
  SKIP_WITHOUT_BF16();
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.model);
    auto fp32 = models::make_model(c.model);  // default options: the served size
    fp32->module().eval();
    const auto& form = models::quantized_form(c.model, Precision::kBf16, "test");
    auto bf16 = form.quantize(*fp32, models::QuantizeRequest{}).model;
    ASSERT_NE(bf16, nullptr);
    EXPECT_EQ(bf16->precision(), Precision::kBf16);
    EXPECT_EQ(bf16->name(), c.model);
    EXPECT_EQ(bf16->options_json(), fp32->options_json());
    const auto batch = fp32->example_batch(16, 0, torch::kCPU, 7);
    torch::NoGradGuard no_grad;
    const auto ref = fp32->forward(batch)[0];
    const auto got = bf16->forward(batch)[0];
    EXPECT_EQ(got.scalar_type(), torch::kFloat);
    ASSERT_EQ(got.sizes(), ref.sizes());
    const double err = relative_rms(got, ref);
    RecordProperty(std::string(c.model) + "_relative_rms", std::to_string(err));
    EXPECT_LE(err, c.tolerance);
    EXPECT_GT(err, 0.0);  // the weights are BF16: not the FP32 forward
    // The pinball loss on the same batch, within 1% (the bar is 0.5% on real data).
    const double l32 = fp32->loss(batch).item<double>(), l16 = bf16->loss(batch).item<double>();
    EXPECT_NEAR(l16, l32, 0.01 * l32);
  }
}

// The BF16 TFT serves bar by bar through its network's own stream (the converted weights inside):
// every bar's forecast equals the form's full-window forward on that window to float rounding,
// at the served size, so a BF16 bundle is served at the stream's cost, not a full window per
// bar. The BF16 Mamba-2 has none (its stream folds weights of one dtype).
TEST_F(Bf16Test, TheFormsStreamAsTheirFullWindowForward) {
  SKIP_WITHOUT_BF16();
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.model);
    auto fp32 = models::make_model(c.model);
    auto bf16 = testing::bf16_form_of(*fp32);
    const auto spec = bf16->spec();
    auto stream = bf16->make_stream(spec.window);
    if (std::string(c.model) == "mamba2") {  // its stream folds weights of one dtype: none
      EXPECT_EQ(stream, nullptr);
      continue;
    }
    ASSERT_NE(stream, nullptr);
    const int64_t bars = spec.window + 3;  // the window slides over the first bars
    const auto batch = bf16->example_batch(1, bars, torch::kCPU, 11);
    c10::InferenceMode guard;
    for (int64_t t = 0; t < bars; ++t) {
      models::StreamBar bar;
      models::Batch window;
      for (size_t k = 0; k < spec.inputs.size(); ++k) {
        const auto& in = spec.inputs[k];
        const auto& x = batch.inputs[k];
        if (in.role == models::InputRole::kPastFeatures) {
          bar.past = x[0][t];
          const int64_t first = std::max<int64_t>(0, t + 1 - spec.window);
          window.inputs.push_back(x.narrow(1, first, t + 1 - first));
        } else {
          if (in.role == models::InputRole::kKnownFuture) bar.future = x[0];
          if (in.role == models::InputRole::kStaticId) bar.static_id = x[0].item<int64_t>();
          window.inputs.push_back(x);
        }
      }
      const auto got = stream->push(bar);
      const auto ref = bf16->forward(window)[0][0];
      ASSERT_EQ(got.sizes(), ref.sizes()) << "bar " << t;
      EXPECT_EQ(got.scalar_type(), torch::kFloat);
      const double diff = (got.to(torch::kFloat) - ref).abs().max().item<double>();
      EXPECT_LT(diff, 1e-4 * (1.0 + ref.abs().max().item<double>())) << "bar " << t;
    }
  }
}

// What a batched desk runs on the BF16 TFT: its cached per-bar stage (the BF16 VSN once per bar
// for a batch of instruments), then forward_cached on the windows of cached rows, equal to the
// form's forward; the BF16 Mamba-2 has no cached stage.
TEST_F(Bf16Test, TheTftFormsCachedStageEqualsItsForward) {
  SKIP_WITHOUT_BF16();
  auto fp32 = models::make_model("tft");
  auto bf16 = testing::bf16_form_of(*fp32);
  ASSERT_GT(bf16->cached_width(), 0);
  const auto spec = bf16->spec();
  const auto batch = bf16->example_batch(5, spec.window, torch::kCPU, 13);
  c10::InferenceMode guard;
  const auto& past = batch.inputs[0];
  std::vector<torch::Tensor> rows;
  for (int64_t t = 0; t < past.size(1); ++t)
    rows.push_back(bf16->encode_rows(past.select(1, t), batch.inputs[2]));
  models::Batch cached = batch;
  cached.inputs[0] = torch::stack(rows, 1);
  const auto got = bf16->forward_cached(cached);
  const auto ref = bf16->forward(batch)[0];
  EXPECT_EQ(got.scalar_type(), torch::kFloat);
  ASSERT_EQ(got.sizes(), ref.sizes());
  EXPECT_LT((got - ref).abs().max().item<double>(), 1e-4 * (1.0 + ref.abs().max().item<double>()));
  auto mamba = testing::bf16_form_of(*models::make_model("mamba2"));
  EXPECT_EQ(mamba->cached_width(), 0);
  EXPECT_THROW(mamba->forward_cached(cached), InputError);
}

TEST_F(Bf16Test, OnlyTheStatedParametersAreBf16) {
  auto tft = models::make_model_at("tft", Precision::kBf16, nullptr, "test");
  int64_t tft_bf16 = 0;
  for (const auto& p : tft->module().named_parameters()) {
    // The VSNs' per-variable weights and their selection GRNs' fc2 and skip; all else FP32.
    const auto& k = p.key();
    const bool vsn = k.rfind("past_vsn.", 0) == 0 || k.rfind("future_vsn.", 0) == 0;
    const bool selection = k.find(".selection.") != std::string::npos;
    const bool bf16 = vsn && (!selection || k.find(".selection.fc2.") != std::string::npos ||
                              k.find(".selection.skip.") != std::string::npos);
    tft_bf16 += bf16;
    EXPECT_EQ(p.value().scalar_type(), bf16 ? torch::kBFloat16 : torch::kFloat) << k;
  }
  // Per VSN: 12 per-variable tensors (with the skip projection's two: E != H at the defaults),
  // the selection GRN's fc2 and skip weight and bias.
  EXPECT_EQ(tft_bf16, 2 * (12 + 4));
  auto mamba = models::make_model_at("mamba2", Precision::kBf16, nullptr, "test");
  int64_t projections = 0;
  for (const auto& p : mamba->module().named_parameters()) {
    const auto& k = p.key();
    const bool projection = k.rfind("embed.", 0) == 0 || k.rfind("head.", 0) == 0 ||
                            k.find(".in_proj.") != std::string::npos ||
                            k.find(".out_proj.") != std::string::npos;
    projections += projection;
    EXPECT_EQ(p.value().scalar_type(), projection ? torch::kBFloat16 : torch::kFloat) << k;
  }
  EXPECT_EQ(projections, 4 + 2 * 2);  // embed, head (weight, bias); two blocks' two weights
}

TEST_F(Bf16Test, BytesAreTheLiveModulesAndAboutHalfOfFp32) {
  const std::vector<std::pair<std::string, nlohmann::json>> sizes = {
      {"tft", nlohmann::json::object()},
      {"tft", {{"lstm_layers", 1}, {"hidden", 16}, {"heads", 2}}},
      {"mamba2", nlohmann::json::object()},
      {"mamba2", {{"n_layers", 3}, {"ngroups", 2}, {"horizon", 4}}},
  };
  for (const auto& [name, options] : sizes) {
    SCOPED_TRACE(name + " " + options.dump());
    const auto table = models::quantized_form(name, Precision::kBf16, "test").bytes(options);
    const auto& bf = table["bf16"];
    auto live = models::make_model_at(name, Precision::kBf16, options, "test");
    int64_t bf16_bytes = 0, fp32_bytes = 0;
    for (const auto& p : live->module().parameters()) {
      const int64_t n = p.numel() * static_cast<int64_t>(p.element_size());
      (p.scalar_type() == torch::kBFloat16 ? bf16_bytes : fp32_bytes) += n;
    }
    EXPECT_EQ(bf["parameter_bytes"].get<int64_t>(), live->parameter_bytes());
    EXPECT_EQ(bf["bf16_bytes"].get<int64_t>(), bf16_bytes);
    EXPECT_EQ(bf["fp32_bytes"].get<int64_t>(), fp32_bytes);
    EXPECT_EQ(table["fp32"]["parameter_bytes"].get<int64_t>(),
              models::make_model(name, options)->parameter_bytes());
    // The TFT keeps its hidden-width layers FP32 (~12% of the default one's parameters).
    const double ratio = bf["ratio_to_fp32"].get<double>();
    EXPECT_GE(ratio, 0.5);
    EXPECT_LE(ratio, 0.57);
  }
  // The registry's table at the defaults carries the bf16 row beside the others.
  EXPECT_TRUE(models::precision_bytes("mamba2").contains("bf16"));
  EXPECT_TRUE(models::precision_bytes("tft").contains("int8"));
}

TEST_F(Bf16Test, QuantizeWritesABundleThatServesTheSameForecastsAfterLoading) {
  SKIP_WITHOUT_BF16();
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.model);
    TempDir tmp;
    const auto fp = fp32_bundle(c.model, c.options, tmp);
    jobs::QuantizeJob job;
    job.bundle = fp;
    job.out = tmp.file("bf16.fhb");
    job.precision = Precision::kBf16;
    const auto s = jobs::run_quantize_job(job);
    EXPECT_EQ(s.precision, Precision::kBf16);
    EXPECT_TRUE(s.layer_errors.empty());
    EXPECT_EQ(s.quantization.calibration_windows, 0);
    EXPECT_EQ(s.quantization.activation_clip, "none");
    EXPECT_LT(std::abs(s.quantization.loss_delta_pct), 1.0);
    EXPECT_EQ(jobs::to_json(s)["precision"], "bf16");
    EXPECT_EQ(jobs::format_quantize_summary(s).rfind("cast to bf16 (no calibration): ", 0), 0u)
        << jobs::format_quantize_summary(s);
    EXPECT_EQ(s.int8_resident_bytes, s.precisions["bf16"]["parameter_bytes"].get<int64_t>());
    EXPECT_LT(std::filesystem::file_size(job.out), std::filesystem::file_size(fp));

    // The job's model, rebuilt in memory by the same hook, against the bundle it wrote.
    auto in_memory = serving::load_bundle(fp);
    in_memory.model =
        std::shared_ptr<models::Model>(models::quantized_form(c.model, Precision::kBf16, "test")
                                           .quantize(*in_memory.model, models::QuantizeRequest{})
                                           .model);
    auto loaded = serving::load_bundle(job.out, torch::kCPU, c.model);
    EXPECT_EQ(loaded.model->precision(), Precision::kBf16);
    EXPECT_EQ(loaded.model->parameter_bytes(), in_memory.model->parameter_bytes());
    const auto batch = loaded.model->example_batch(3, 0, torch::kCPU, 5);
    {
      torch::NoGradGuard no_grad;
      EXPECT_TRUE(
          torch::equal(loaded.model->forward(batch)[0], in_memory.model->forward(batch)[0]));
    }

    // Served bar by bar by the ensemble: the same decisions before and after the round trip.
    auto series = data::generate_synthetic(data::SyntheticOptions{});
    std::vector<serving::Bundle> before, after;
    before.push_back(in_memory);
    after.push_back(loaded);
    serving::Ensemble e_before(std::move(before)), e_after(std::move(after));
    int64_t ready = 0;
    // 400 bars: the feature bank warms up over the first 256.
    ASSERT_GE(series.bars.size(), 400u);
    for (size_t i = 0; i < 400; ++i) {
      const auto d0 = e_before.on_bar(series.bars[i]);
      const auto d1 = e_after.on_bar(series.bars[i]);
      ASSERT_EQ(d0.signals.size(), 1u);
      ASSERT_EQ(d0.signals[0].ready, d1.signals[0].ready);
      if (!d0.signals[0].ready) continue;
      ++ready;
      EXPECT_EQ(d0.signals[0].raw, d1.signals[0].raw) << "bar " << i;
    }
    EXPECT_GT(ready, 0);
  }
}

TEST_F(Bf16Test, CliChoosesTheFormWithPrecision) {
  SKIP_WITHOUT_BF16();
  TempDir tmp;
  const auto fp = fp32_bundle("mamba2", cases()[1].options, tmp);
  const auto out = tmp.file("m-bf16.fhb");
  const auto j = testing::run_cli_json(
      "quantize mamba2 --precision bf16 --bundle " + fp + " --out " + out + " --json", 0);
  EXPECT_EQ(j["precision"], "bf16");
  EXPECT_TRUE(j["resident_bytes"].contains("bf16"));
  EXPECT_EQ(serving::load_bundle(out).model->precision(), Precision::kBf16);
  // Mamba-2 has no int8 form (the default precision); bf16 with --qat is refused.
  const auto again = tmp.file("again.fhb");
  auto r = run_cli("quantize mamba2 --bundle " + fp + " --out " + again);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("'mamba2' has no int8 form"), std::string::npos) << r.err;
  r = run_cli("quantize mamba2 --precision bf16 --qat --bundle " + fp + " --out " + again);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("expected ptq"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(again));
}

TEST_F(Bf16Test, RefusedWithAClearMessageWhereTheCpuLacksBf16) {
  auto fp32 = models::make_model("tft", cases()[0].options);
  auto bf16 = models::make_model_at("tft", Precision::kBf16, cases()[0].options, "test");
  const auto batch = fp32->example_batch(2, 0, torch::kCPU, 1);
  TempDir tmp;
  const auto fp = fp32_bundle("mamba2", cases()[1].options, tmp);
  {
    AssumeNoBf16 no_bf16;
    EXPECT_FALSE(models::cpu_has_bf16());
    const std::string expected =
        "[bf16] bf16 on the cpu: expected a CPU with avx512_bf16 or amx_bf16 (BF16 dot "
        "products), FOXHUNT_ASSUME_NO_BF16 is set; serve this model at fp32 instead";
    EXPECT_EQ(input_error([&] { bf16->forward(batch); }), expected);
    EXPECT_EQ(input_error([&] {
                models::quantized_form("tft", Precision::kBf16, "test")
                    .quantize(*fp32, models::QuantizeRequest{});
              }),
              expected);
    EXPECT_EQ(input_error([] { models::check_bf16_device(torch::kCPU, "serve"); }),
              "[serve] bf16 on the cpu: expected a CPU with avx512_bf16 or amx_bf16 (BF16 dot "
              "products), FOXHUNT_ASSUME_NO_BF16 is set; serve this model at fp32 instead");
    // Not a CPU: nothing to refuse here (CUDA runs BF16 on its own units).
    EXPECT_NO_THROW(models::check_bf16_device(torch::Device(torch::kCUDA, 0), "serve"));
    // The job writes nothing.
    jobs::QuantizeJob job;
    job.bundle = fp;
    job.out = tmp.file("never.fhb");
    job.precision = Precision::kBf16;
    EXPECT_NE(input_error([&] { jobs::run_quantize_job(job); }).find("avx512_bf16"),
              std::string::npos);
    EXPECT_FALSE(std::filesystem::exists(job.out));
  }
  {
    AssumeNoBf16 zero("0");  // "0" does not assume anything
    if (models::cpu_has_bf16()) {
      EXPECT_NO_THROW(bf16->forward(batch));
    }
  }
  // QAT has nothing to fine-tune in a cast.
  models::QuantizeRequest qat;
  qat.method = models::QuantizeMethod::kQat;
  EXPECT_NE(input_error([&] {
              models::quantized_form("tft", Precision::kBf16, "test").quantize(*fp32, qat);
            }).find("expected ptq"),
            std::string::npos);
  // The fp32 precision is not a form to convert to.
  jobs::QuantizeJob job;
  job.bundle = fp;
  job.out = tmp.file("fp32-again.fhb");
  job.precision = Precision::kFp32;
  EXPECT_NE(input_error([&] {
              jobs::run_quantize_job(job);
            }).find("precision: expected one of a catalog model's quantized forms"),
            std::string::npos);
}

}  // namespace
}  // namespace foxhunt
