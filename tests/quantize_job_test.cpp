// `foxhunt quantize` and the INT8 bundle: PTQ from an FP32 bundle, the INT8 bundle served by
// the same runtime, refusals (an INT8 input, foreign bars, --out over --bundle) that write
// nothing, `foxhunt models --json` precisions, `foxhunt bench-memory`'s five checks, and (slow)
// the accuracy bounds of PTQ and QAT on the held-out split of the embedded synthetic data.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>

#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/jobs/quant_report.h"
#include "foxhunt/models/tft_int8.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"
#include "serving_test_util.h"
#include "test_util.h"

namespace foxhunt::jobs {
using namespace foxhunt::serving;
namespace {

using foxhunt::testing::run_cli;
using foxhunt::testing::TempDir;

const nlohmann::json kSmallTft = {{"hidden", 8}, {"heads", 2}, {"window", 20}, {"dropout", 0.0}};

// An untrained TFT bundle over the embedded synthetic series (what `train` writes, untrained).
std::string fp32_bundle(TempDir& tmp) {
  return foxhunt::testing::save_untrained_synthetic_bundle("tft", kSmallTft, tmp.file("fp32.fhb"));
}

// The accuracy bound is the verdict: beyond it `quantize` exits 1 and says so; the bundle is
// still written (nothing lost), and the JSON carries the verdict.
TEST(QuantizeJobTest, ExitsOneWhenTheLossDeltaExceedsTheBound) {
  TempDir tmp;
  const auto fp = fp32_bundle(tmp);
  const auto q8 = tmp.file("int8.fhb");
  // INT8 cannot be 50% better than FP32: a bound of -50% is missed.
  const auto r = run_cli("quantize tft --bundle " + fp +
                         " --calib 16 --max-loss-delta-pct -50 --out " + q8 + " --json");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("verdict FAIL"), std::string::npos) << r.err;
  const auto s = nlohmann::json::parse(r.out);
  EXPECT_FALSE(s["bound"]["ok"].get<bool>());
  EXPECT_TRUE(std::filesystem::exists(q8));
  EXPECT_EQ(run_cli("quantize tft --bundle " + fp + " --calib 16 --max-loss-delta-pct nan --out " +
                    tmp.file("x.fhb"))
                .exit_code,
            2);
}

TEST(QuantizeJobTest, PtqBundleServesThroughTheSameRuntime) {
  TempDir tmp;
  const auto fp = fp32_bundle(tmp);
  const auto q8 = tmp.file("int8.fhb");
  const auto r =
      run_cli("quantize tft --bundle " + fp + " --ptq --calib 64 --out " + q8 + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto s = nlohmann::json::parse(r.out);
  EXPECT_EQ(s["method"], "ptq");
  EXPECT_EQ(s["calibration_windows"].get<int64_t>(), 64);
  const double fl = s["fp32_test_loss"].get<double>(), il = s["int8_test_loss"].get<double>();
  EXPECT_GT(fl, 0.0);
  EXPECT_NEAR(s["loss_delta_pct"].get<double>(), 100.0 * (il - fl) / fl, 1e-9);
  EXPECT_EQ(s["bound"]["max_loss_delta_pct"].get<double>(), 5.0);
  EXPECT_EQ(s["bound"]["ok"].get<bool>(), s["loss_delta_pct"].get<double>() <= 5.0);
  const auto layout = models::int8_tft_layout(models::tft_options_from_json(kSmallTft));
  EXPECT_EQ(s["layer_errors"].size(), layout.layers.size());
  EXPECT_EQ(s["precisions"]["int8"]["parameter_bytes"].get<int64_t>(), layout.total_bytes());
  EXPECT_EQ(s["resident_bytes"]["int8"].get<int64_t>(), layout.total_bytes());
  EXPECT_LT(std::filesystem::file_size(q8), std::filesystem::file_size(fp));

  // The INT8 bundle loads as int8 and gives the same forecasts on every load.
  auto a = load_bundle(q8), b = load_bundle(q8, torch::kCPU, "tft");
  EXPECT_EQ(a.model->precision(), models::Precision::kInt8);
  EXPECT_EQ(a.training["quantization"]["method"], "ptq");
  EXPECT_EQ(a.model->parameter_bytes(), 0);
  EXPECT_EQ(a.model->buffer_bytes(), layout.total_bytes());
  auto batch = a.model->example_batch(3, 0, torch::kCPU, 5);
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::equal(a.model->forward(batch)[0], b.model->forward(batch)[0]));
  auto f = load_bundle(fp);
  const auto ref = f.model->forward(batch)[0];
  const auto got = a.model->forward(batch)[0];
  EXPECT_LT((ref - got).abs().max().item<double>(), 0.1 * ref.abs().max().item<double>() + 1e-6);

  // Served by the ensemble bar by bar, like the FP32 bundle, with close forecasts.
  auto series = data::generate_synthetic(data::SyntheticOptions{});
  std::vector<Bundle> one8, one32;
  one8.push_back(load_bundle(q8));
  one32.push_back(load_bundle(fp));
  Ensemble e8(std::move(one8)), e32(std::move(one32));
  int64_t ready = 0;
  double max_diff = 0, max_abs = 0;
  for (int64_t i = 0; i < 400; ++i) {
    const auto d8 = e8.on_bar(series.bars[static_cast<size_t>(i)]);
    const auto d32 = e32.on_bar(series.bars[static_cast<size_t>(i)]);
    ASSERT_EQ(d8.signals.size(), 1u);
    if (!d8.signals[0].ready) continue;
    ASSERT_TRUE(d32.signals[0].ready);
    ++ready;
    for (size_t k = 0; k < d8.signals[0].raw.size(); ++k) {
      max_diff = std::max(
          max_diff, std::abs(static_cast<double>(d8.signals[0].raw[k]) - d32.signals[0].raw[k]));
      max_abs = std::max(max_abs, std::abs(static_cast<double>(d32.signals[0].raw[k])));
    }
  }
  EXPECT_GT(ready, 0);
  EXPECT_LT(max_diff, 0.1 * max_abs + 1e-6);
}

TEST(QuantizeJobTest, RefusalsWriteNothing) {
  TempDir tmp;
  const auto fp = fp32_bundle(tmp);
  const auto q8 = tmp.file("int8.fhb");
  ASSERT_EQ(run_cli("quantize tft --bundle " + fp + " --calib 16 --out " + q8).exit_code, 0);
  // An INT8 bundle is not quantized again.
  const auto again = tmp.file("again.fhb");
  auto r = run_cli("quantize tft --bundle " + q8 + " --out " + again);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("expected an FP32 bundle"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(again));
  // Bars other than the bundle's.
  const auto csv = tmp.file("other.csv");
  {
    std::ofstream out(csv);
    out << "Date,Open,High,Low,Close,Volume\n";
    auto other = data::generate_synthetic({.bars = 600, .seed = 9});
    for (const auto& b : other.bars)
      out << b.timestamp << ',' << b.open << ',' << b.high << ',' << b.low << ',' << b.close << ','
          << b.volume << '\n';
  }
  r = run_cli("quantize tft --bundle " + fp + " --data " + csv + " --out " + again);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("the bundle was trained on"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(again));
  // Usage errors.
  EXPECT_EQ(run_cli("quantize tft --bundle " + fp + " --out " + fp).exit_code, 2);
  EXPECT_EQ(run_cli("quantize tft --bundle " + fp + " --ptq --qat --out " + again).exit_code, 2);
  EXPECT_EQ(run_cli("quantize mamba2 --bundle " + fp + " --out " + again).exit_code, 2);
  EXPECT_EQ(run_cli("quantize tft --bundle " + fp + " --calib 0 --out " + again).exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(again));
}

TEST(QuantizeJobTest, ModelsJsonReportsBytesPerPrecision) {
  const auto j = testing::run_cli_json("models --json", 0);
  bool seen = false;
  for (const auto& m : j["models"]) {
    ASSERT_TRUE(m.contains("precisions")) << m.dump();
    EXPECT_EQ(m["precisions"]["fp32"]["parameter_bytes"].get<int64_t>(),
              m["parameter_bytes"].get<int64_t>());
    if (m["name"] != "tft") continue;
    seen = true;
    const auto layout = models::int8_tft_layout(models::TftOptions());
    const auto& i8 = m["precisions"]["int8"];
    EXPECT_EQ(i8["parameter_bytes"].get<int64_t>(), layout.total_bytes());
    EXPECT_EQ(i8["int8_bytes"].get<int64_t>() + i8["fp32_bytes"].get<int64_t>(),
              layout.total_bytes());
    EXPECT_LT(i8["parameter_bytes"].get<int64_t>(),
              m["precisions"]["fp32"]["parameter_bytes"].get<int64_t>());
  }
  EXPECT_TRUE(seen);
}

TEST(QuantizeJobTest, FiveMemoryChecksPass) {
  Int8MemoryOptions o;
  // Hidden 32 as the default model (a 16-wide model at batch 16 inverts: its transient int8
  // buffers outweigh the 110 KB it saves, and check 3 says so).
  o.model = models::TftOptions().hidden(32).heads(4).window(20).past_features(60);
  o.inferences = 10000;
  o.big_batch = 16;
  o.calibration_batches = 2;
  const auto r = tft_int8_memory_checks(o);
  const auto json = to_json(r);
  ASSERT_EQ(json["checks"].size(), 5u);
  for (const auto& c : json["checks"]) EXPECT_TRUE(c["passed"].get<bool>()) << c.dump(2);
  EXPECT_TRUE(r.passed());
  EXPECT_TRUE(json["passed"].get<bool>());
  EXPECT_EQ(r.fp32_baseline.resident_bytes, 4 * models::parameter_count(o.model));
  EXPECT_EQ(r.int8_under_threshold.resident_bytes, models::int8_tft_layout(o.model).total_bytes());
  EXPECT_EQ(r.int8_no_leak.leaked_bytes, 0);
  EXPECT_EQ(r.int8_no_leak.inferences, 10000);
  // The JSON names the big-batch figures by the batch, and carries the typed figures.
  EXPECT_EQ(json["checks"][0]["peak_inference_bytes_batch16"].get<int64_t>(),
            r.fp32_baseline.peak_inference_bytes_big_batch);
  EXPECT_EQ(json["checks"][4]["leaked_bytes"].get<int64_t>(), 0);
  EXPECT_EQ(json["fp32"]["resident_bytes"].get<int64_t>(), r.fp32_baseline.resident_bytes);
  EXPECT_FALSE(json.contains("qat"));
  // A threshold below the model's bytes fails check 2 (the check can fail).
  o.inferences = 1;
  o.int8_threshold_bytes = 1000;
  const auto bad = tft_int8_memory_checks(o);
  EXPECT_FALSE(bad.int8_under_threshold.passed);
  EXPECT_FALSE(bad.passed());
  EXPECT_FALSE(to_json(bad)["checks"][1]["passed"].get<bool>());

  const auto qat = tft_qat_memory(o);
  const auto& t = qat.training_bytes;
  EXPECT_EQ(t.fp32_master_weights, 4 * models::parameter_count(o.model));
  EXPECT_EQ(t.gradient_tensors, 4 * models::parameter_count(o.model));
  EXPECT_GE(t.optimizer_adam, 2 * 4 * models::parameter_count(o.model));
  EXPECT_GT(t.observers, 0);
  const auto qj = to_json(qat);
  EXPECT_EQ(qj["training_bytes"]["fake_quant_overhead"].get<int64_t>(),
            t.forward_peak_fake_quant - t.forward_peak_fp32);
  EXPECT_TRUE(qj["converted_inference_bytes"].contains("peak_batch16"));
}

// Accuracy on the held-out split of the embedded synthetic series: a trained TFT, then PTQ
// within 5% and QAT within 2% of its test quantile loss.
TEST(QuantizeJobTest, PtqAndQatStayCloseToFp32_SLOW) {
  TempDir tmp;
  // The 3,000 bars `foxhunt validate` trains on (the compact TFT defaults).
  const auto csv = tmp.file("bars.csv");
  data::write_bars_csv(csv, data::generate_synthetic({.bars = 3000, .seed = 42}));
  const auto out = (tmp.path() / "run").string();
  auto train =
      run_cli("train tft --data " + csv + " --epochs 6 --out " + out + " --progress off --json");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  const auto fp = (tmp.path() / "run" / kBundleFile).string();
  ASSERT_TRUE(std::filesystem::exists(fp));
  const auto ptq = testing::run_cli_json(
      "quantize tft --bundle " + fp + " --ptq --out " + tmp.file("ptq.fhb") + " --json", 0);
  EXPECT_LE(ptq["loss_delta_pct"].get<double>(), 5.0) << ptq.dump(2);
  const auto qat =
      testing::run_cli_json("quantize tft --bundle " + fp + " --qat --epochs 1 --out " +
                                tmp.file("qat.fhb") + " --progress off --json",
                            0);
  EXPECT_LE(qat["loss_delta_pct"].get<double>(), 2.0) << qat.dump(2);
  EXPECT_EQ(qat["method"], "qat");
  EXPECT_GT(qat["qat"]["steps"].get<int64_t>(), 0);
  // The QAT bundle is the same INT8 form as PTQ's and loads bit-exactly.
  auto a = load_bundle(tmp.file("qat.fhb")), b = load_bundle(tmp.file("qat.fhb"));
  EXPECT_EQ(a.model->precision(), models::Precision::kInt8);
  EXPECT_EQ(a.training["quantization"]["method"], "qat");
  auto batch = a.model->example_batch(4, 0, torch::kCPU, 3);
  EXPECT_TRUE(torch::equal(a.model->forward(batch)[0], b.model->forward(batch)[0]));
  EXPECT_EQ(a.model->buffer_bytes(), load_bundle(tmp.file("ptq.fhb")).model->buffer_bytes());
  for (const auto& r : ptq["layer_errors"]) EXPECT_GT(r["snr_db"].get<double>(), 15.0) << r.dump();
  // QAT's frozen scales cover each layer's range too (an observer averaged over LSTM steps once
  // clipped the initial state: 4 dB on encoder.hh0).
  for (const auto& r : qat["layer_errors"]) EXPECT_GT(r["snr_db"].get<double>(), 15.0) << r.dump();
}

}  // namespace
}  // namespace foxhunt::jobs
