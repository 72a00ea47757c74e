// The INT8 TFT's catalog form: its bytes at options JSON and its quantize hook (tft_int8.h).
#include <algorithm>
#include <memory>

#include "foxhunt/core/error.h"
#include "foxhunt/models/tft_int8.h"

namespace foxhunt::models {

nlohmann::json int8_tft_bytes(const nlohmann::json& options) {
  return tft_precision_bytes(tft_options_from_json(options));
}

QuantizeResult quantize_int8_tft(Model& fp32, const QuantizeRequest& request) {
  // The one cast to the TFT's module: the hook is that model's algorithm (catalog.cpp registers
  // it on the tft entry only).
  auto net = TftNet(std::dynamic_pointer_cast<TftNetImpl>(fp32.module_ptr()));
  FOXHUNT_CHECK(net.ptr() != nullptr && fp32.precision() == Precision::kFp32, "quant",
                "int8 tft quantize: expected an fp32 TFT, got '", fp32.name(), "' at ",
                fp32.precision());
  FOXHUNT_CHECK(request.calibration_windows >= 1 && request.calibration_batch, "quant",
                "int8 tft quantize: expected >= 1 calibration windows and their batches, got ",
                request.calibration_windows);
  FOXHUNT_CHECK(request.method != QuantizeMethod::kQat || request.fine_tune, "quant",
                "int8 tft quantize: qat expected a fine_tune callback, got none");

  // PTQ calibration on the first windows the request gives, the last batch cut to what is left.
  TftCalibrator cal(net, request.percentile);
  net->eval();
  for (int64_t i = 0;
       i < request.calibration_batches && cal.windows() < request.calibration_windows; ++i) {
    auto batch = request.calibration_batch(i);
    const int64_t take = std::min(batch.size(), request.calibration_windows - cal.windows());
    cal.observe(batch.inputs[0].narrow(0, 0, take), batch.inputs[1].narrow(0, 0, take),
                batch.inputs[2].narrow(0, 0, take));
  }
  auto scales = cal.scales();

  QuantizeResult result;
  if (request.method == QuantizeMethod::kQat) {
    // The observers start at the PTQ scales; the fine-tuned weights are the network's own.
    QatTftModel qat(net, QatOptions().observer_steps(request.observer_steps), scales);
    request.fine_tune(qat);
    qat.freeze();
    scales = qat.scales();
    result.observer_steps = qat.observed_steps();
  }
  net->eval();
  auto int8 = Int8Tft(Int8TftImpl::convert(*net, scales));
  const auto& probe = request.error_batch.inputs;
  FOXHUNT_CHECK(probe.size() == 3, "quant",
                "int8 tft quantize: error_batch expected 3 inputs (past, future, static_id), got ",
                probe.size());
  result.layer_errors = int8->layer_errors(*net, probe[0], probe[1], probe[2]);
  result.model = int8_tft_model(int8);
  result.calibration_windows = cal.windows();
  return result;
}

}  // namespace foxhunt::models
