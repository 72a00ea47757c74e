#include "foxhunt/jobs/quant_report.h"

#include <torch/torch.h>

#include <cmath>
#include <functional>
#include <string>
#include <string_view>

#include "foxhunt/core/error.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/adapter.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/models/tft_int8.h"

namespace foxhunt::jobs {

namespace {

// The byte tables' keys are the precisions' text forms: to_string(Precision::kFp32), ...
using models::Precision;

int64_t live() {
  return static_cast<int64_t>(memory::live_bytes());
}

// Peak bytes above the live bytes at the start while `f` runs.
int64_t peak_during(const std::function<void()>& f) {
  const int64_t before = live();
  memory::reset_peak();
  f();
  return static_cast<int64_t>(memory::peak_bytes()) - before;
}

struct Inputs {
  torch::Tensor past, future, id;
};

Inputs inputs_of(const models::TftOptions& o, int64_t batch, uint64_t seed) {
  auto b = models::example_batch_of(o, batch, 0, torch::kCPU, seed);
  return {b.inputs[0], b.inputs[1], b.inputs[2]};
}

models::InputScales calibrate(models::TftNet& net, const Int8MemoryOptions& o) {
  models::TftCalibrator cal(net);
  for (int64_t i = 0; i < o.calibration_batches; ++i) {
    auto in = inputs_of(net->options, o.big_batch, o.seed + 100 + static_cast<uint64_t>(i));
    cal.observe(in.past, in.future, in.id);
  }
  return cal.scales();
}

}  // namespace

// The JSON keys are the field names (in a check, "..._big_batch" is named by the batch: see
// check() below).
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(QatTrainingBytes, fp32_master_weights, gradients,
                                   gradient_tensors, optimizer_adam, observers,
                                   forward_peak_fake_quant, forward_peak_fp32, fake_quant_overhead,
                                   saved_activations_fake_quant)
// "fp32" and "int8": the precisions' text forms, to_string(Precision::kFp32), ...
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Fp32Int8Bytes, fp32, int8)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Fp32BaselineCheck, passed, parameter_bytes, resident_bytes,
                                   peak_inference_bytes_batch1, peak_inference_bytes_big_batch)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Int8UnderThresholdCheck, passed, resident_bytes,
                                   closed_form_bytes, threshold_bytes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Int8SmallerCheck, passed, code_bytes, scale_bytes,
                                   fp32_weight_bytes_of_the_same_layers, weight_ratio,
                                   resident_ratio_to_fp32_model, ratio_to_the_same_layout_in_fp32,
                                   peak_inference_bytes_batch1, peak_inference_bytes_big_batch,
                                   serving_bytes_batch1, serving_bytes_big_batch)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Int8InferenceCheck, passed, input_batch1, output_batch1,
                                   input_big_batch, output_big_batch, two_d_window_error)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(Int8NoLeakCheck, passed, inferences, baseline_live_bytes,
                                   after_live_bytes, leaked_bytes, max_retained_between_calls_bytes)

namespace {

// One check's JSON: its fields, "..._big_batch" named "..._batch<N>", and its name.
nlohmann::json check(const char* name, const nlohmann::json& fields, int64_t big_batch) {
  constexpr std::string_view kBig = "big_batch";
  nlohmann::json figures = nlohmann::json::object();
  for (const auto& [key, value] : fields.items()) {
    if (key.ends_with(kBig))
      figures[key.substr(0, key.size() - kBig.size()) + "batch" + std::to_string(big_batch)] =
          value;
    else
      figures[key] = value;
  }
  figures["name"] = name;
  return figures;
}

}  // namespace

nlohmann::json to_json(const Int8MemoryReport& r) {
  const auto& c1 = r.fp32_baseline;
  const auto& c2 = r.int8_under_threshold;
  const auto& c3 = r.int8_smaller_than_fp32;
  const nlohmann::json checks = nlohmann::json::array(
      {check("fp32_baseline", c1, r.big_batch), check("int8_under_threshold", c2, r.big_batch),
       check("int8_smaller_than_fp32", c3, r.big_batch),
       check("int8_3d_inference", r.int8_3d_inference, r.big_batch),
       check("int8_no_leak", r.int8_no_leak, r.big_batch)});
  nlohmann::json j = {
      {"checks", checks},
      {"passed", r.passed()},
      {"model", models::to_json(r.model)},
      {to_string(Precision::kFp32),
       {{"resident_bytes", c1.resident_bytes}, {"parameter_bytes", c1.parameter_bytes}}},
      {to_string(Precision::kInt8),
       {{"resident_bytes", c2.resident_bytes},
        {"code_bytes", c3.code_bytes},
        {"fp32_bytes", r.int8_fp32_bytes}}},
      // Everything above lives in ATen tensors allocated through the ledger: there are no
      // prepacked weights (plain int8 tensors feed at::_int_mm), and the only memory the
      // ledger cannot see is the BLAS/oneDNN libraries' own scratch, reported here as the
      // ledger's declared external bytes.
      {"not_in_ledger",
       {{"prepacked_weight_bytes", 0},
        {"declared_external_bytes", r.declared_external_bytes},
        {"note",
         "no prepacked weights; BLAS and int8 GEMM scratch is allocated by the libraries "
         "themselves and is not counted"}}}};
  if (r.qat) j["qat"] = to_json(*r.qat);
  return j;
}

nlohmann::json to_json(const QatMemoryReport& r) {
  return {{"batch", r.batch},
          {"training_bytes", r.training_bytes},
          {"converted_inference_bytes",
           {{"resident", r.converted_resident},
            {"peak_batch1", r.converted_peak_batch1},
            {"peak_batch" + std::to_string(r.big_batch), r.converted_peak_big_batch}}}};
}

Int8MemoryReport tft_int8_memory_checks(const Int8MemoryOptions& o) {
  FOXHUNT_CHECK(o.inferences >= 1 && o.big_batch >= 1 && o.calibration_batches >= 1, "bench-memory",
                "expected inferences, big_batch and calibration_batches >= 1");
  memory::install_ledger();
  const auto layout = models::int8_tft_layout(o.model);
  const auto small = inputs_of(o.model, 1, o.seed + 1);
  const auto big = inputs_of(o.model, o.big_batch, o.seed + 2);
  Int8MemoryReport report;
  report.big_batch = o.big_batch;
  report.model = o.model;

  // (1) FP32 baseline.
  torch::manual_seed(static_cast<int64_t>(o.seed));
  const int64_t before_fp32 = live();
  models::TftNet net(o.model);
  net->eval();
  const int64_t fp32_resident = live() - before_fp32;
  const int64_t fp32_params = 4 * models::parameter_count(o.model);
  int64_t fp32_peak1 = 0, fp32_peak_big = 0;
  {
    c10::InferenceMode guard;
    fp32_peak1 = peak_during([&] { net->forward(small.past, small.future, small.id); });
    fp32_peak_big = peak_during([&] { net->forward(big.past, big.future, big.id); });
  }
  report.fp32_baseline = {.passed = fp32_resident == fp32_params && fp32_peak1 > 0,
                          .parameter_bytes = fp32_params,
                          .resident_bytes = fp32_resident,
                          .peak_inference_bytes_batch1 = fp32_peak1,
                          .peak_inference_bytes_big_batch = fp32_peak_big};

  // The INT8 model as serving holds it: built from the layout, then loaded from bundle bytes.
  const auto scales = calibrate(net, o);
  std::string bytes;
  {
    auto converted = models::Int8TftImpl::convert(*net, scales);
    bytes = models::module_to_bytes(*converted);
  }
  const int64_t before_int8 = live();
  models::Int8Tft q(o.model);
  models::module_from_bytes(*q, bytes, "int8 bundle bytes");
  q->eval();
  const int64_t int8_resident = live() - before_int8;
  int64_t int8_peak1 = 0, int8_peak_big = 0;
  torch::Tensor out1, out_big;
  int8_peak1 = peak_during([&] { out1 = q->forward(small.past, small.future, small.id); });
  int8_peak_big = peak_during([&] { out_big = q->forward(big.past, big.future, big.id); });

  // (2) Under the threshold, and exactly the closed form.
  report.int8_under_threshold = {
      .passed = int8_resident == layout.total_bytes() && int8_resident <= o.int8_threshold_bytes,
      .resident_bytes = int8_resident,
      .closed_form_bytes = layout.total_bytes(),
      .threshold_bytes = o.int8_threshold_bytes};

  // (3) Never inverted.
  // Quantized weights (codes and their scales) against the same weights in fp32.
  const double code_ratio = static_cast<double>(layout.code_bytes() + layout.scale_bytes()) /
                            static_cast<double>(4 * layout.code_bytes());
  const double resident_ratio =
      static_cast<double>(int8_resident) / static_cast<double>(fp32_resident);
  const double layout_ratio =
      static_cast<double>(layout.total_bytes()) / static_cast<double>(layout.float_layout_bytes());
  // The whole serving footprint (resident + peak inference) at both batches, never inverted.
  const int64_t fp32_total1 = fp32_resident + fp32_peak1, int8_total1 = int8_resident + int8_peak1;
  const int64_t fp32_total_big = fp32_resident + fp32_peak_big;
  const int64_t int8_total_big = int8_resident + int8_peak_big;
  report.int8_smaller_than_fp32 = {
      .passed = code_ratio <= 0.3 && resident_ratio <= 0.35 && layout_ratio < 1.0 &&
                int8_total1 < fp32_total1 && int8_total_big < fp32_total_big,
      .code_bytes = layout.code_bytes(),
      .scale_bytes = layout.scale_bytes(),
      .fp32_weight_bytes_of_the_same_layers = 4 * layout.code_bytes(),
      .weight_ratio = code_ratio,
      .resident_ratio_to_fp32_model = resident_ratio,
      .ratio_to_the_same_layout_in_fp32 = layout_ratio,
      .peak_inference_bytes_batch1 = int8_peak1,
      .peak_inference_bytes_big_batch = int8_peak_big,
      .serving_bytes_batch1 = {.fp32 = fp32_total1, .int8 = int8_total1},
      .serving_bytes_big_batch = {.fp32 = fp32_total_big, .int8 = int8_total_big}};

  // (4) 3-D windows in, [batch, horizon, Q] out; a 2-D window is refused by the spec check.
  const std::vector<int64_t> want1 = {1, o.model.horizon(),
                                      static_cast<int64_t>(o.model.quantiles().size())};
  auto want_big = want1;
  want_big[0] = o.big_batch;
  bool refused = false;
  std::string refusal;
  try {
    q->forward(small.past[0], small.future, small.id);
  } catch (const InputError& e) {
    refused = true;
    refusal = e.what();
  }
  const bool shapes = out1.sizes().vec() == want1 && out_big.sizes().vec() == want_big &&
                      torch::isfinite(out_big).all().item<bool>();
  report.int8_3d_inference = {.passed = shapes && refused,
                              .input_batch1 = small.past.sizes().vec(),
                              .output_batch1 = out1.sizes().vec(),
                              .input_big_batch = big.past.sizes().vec(),
                              .output_big_batch = out_big.sizes().vec(),
                              .two_d_window_error = refusal};

  // (5) No leak: live bytes back at the baseline exactly.
  out1 = torch::Tensor();
  out_big = torch::Tensor();
  const int64_t baseline = live();
  int64_t worst = 0;
  for (int64_t i = 0; i < o.inferences; ++i) {
    { auto y = q->forward(small.past, small.future, small.id); }
    if (i % 1000 == 0) worst = std::max(worst, live() - baseline);
  }
  const int64_t after = live();
  report.int8_no_leak = {.passed = after == baseline,
                         .inferences = o.inferences,
                         .baseline_live_bytes = baseline,
                         .after_live_bytes = after,
                         .leaked_bytes = after - baseline,
                         .max_retained_between_calls_bytes = worst};
  report.int8_fp32_bytes = layout.layer_fp32_bytes() + layout.other_fp32_bytes();
  report.declared_external_bytes = memory::external_bytes();
  return report;
}

QatMemoryReport tft_qat_memory(const Int8MemoryOptions& o) {
  memory::install_ledger();
  torch::manual_seed(static_cast<int64_t>(o.seed));
  const int64_t before = live();
  models::TftNet net(o.model);
  const int64_t weights = live() - before;
  auto scales = calibrate(net, o);
  models::QatTftModel qat(net, models::QatOptions(), scales);
  auto batch = models::example_batch_of(o.model, o.qat_batch, 0, torch::kCPU, o.seed + 3);
  net->train();
  torch::optim::Adam adam(net->parameters(), torch::optim::AdamOptions(1e-4));

  // The FP32 step's forward for comparison: the fake-quantized copies are the difference.
  int64_t fp32_forward = 0;
  {
    torch::Tensor loss;
    fp32_forward = peak_during([&] {
      loss = models::forecaster_loss(
          qat.name(), models::io_spec(o.model),
          net->forward(batch.inputs[0], batch.inputs[1], batch.inputs[2]), batch.target);
    });
  }
  adam.zero_grad();
  torch::Tensor loss;
  const int64_t before_forward = live();
  const int64_t qat_forward_peak = peak_during([&] { loss = qat.loss(batch); });
  const int64_t saved_activations = live() - before_forward;
  const int64_t before_backward = live();
  loss.backward();
  loss = torch::Tensor();
  const int64_t gradients = live() - before_backward + saved_activations;  // activations freed
  const int64_t before_step = live();
  adam.step();
  const int64_t optimizer = live() - before_step;
  int64_t grad_bytes = 0;
  for (const auto& p : net->parameters())
    if (p.grad().defined()) grad_bytes += p.grad().numel() * 4;

  net->eval();
  auto q = models::Int8Tft(models::Int8TftImpl::convert(*net, qat.scales()));
  const auto small = inputs_of(o.model, 1, o.seed + 1);
  const auto big = inputs_of(o.model, o.big_batch, o.seed + 2);
  const int64_t int8_peak1 = peak_during([&] { q->forward(small.past, small.future, small.id); });
  const int64_t int8_peak_big = peak_during([&] { q->forward(big.past, big.future, big.id); });
  QatMemoryReport r;
  r.batch = o.qat_batch;
  r.training_bytes = {.fp32_master_weights = weights,
                      .gradients = gradients,
                      .gradient_tensors = grad_bytes,
                      .optimizer_adam = optimizer,
                      .observers = qat.observer_bytes(),
                      .forward_peak_fake_quant = qat_forward_peak,
                      .forward_peak_fp32 = fp32_forward,
                      .fake_quant_overhead = qat_forward_peak - fp32_forward,
                      .saved_activations_fake_quant = saved_activations};
  r.big_batch = o.big_batch;
  r.converted_resident = models::int8_tft_layout(o.model).total_bytes();
  r.converted_peak_batch1 = int8_peak1;
  r.converted_peak_big_batch = int8_peak_big;
  return r;
}

}  // namespace foxhunt::jobs
