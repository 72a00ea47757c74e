#include "foxhunt/jobs/quantize_job.h"

#include <cctype>
#include <chrono>
#include <cmath>
#include <sstream>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/strings.h"
#include "foxhunt/core/units.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/train/forecast_trainer.h"
#include "foxhunt/train/market_sources.h"

namespace foxhunt::jobs {

namespace {

// The byte tables' keys are the precisions' text forms: to_string(Precision::kFp32), ...
using models::Precision;

constexpr const char* kQuantizeJobComponent = "quantize";

// The bars the bundle was trained on: --data, else its file, else the embedded synthetic
// series; refused when they are not the bars of the bundle's fingerprint.
std::shared_ptr<const data::MarketDataset> bundle_dataset(const serving::Bundle& b,
                                                          const QuantizeJob& job) {
  const auto& source = b.data.source;
  FOXHUNT_CHECK(!b.flow_features, kQuantizeJobComponent, "the ", b.name(),
                " bundle was trained on bars built from a tape (flow features, '", source,
                "'); expected a bundle trained on a bar CSV: quantizing from a tape is not "
                "supported yet");
  const bool synthetic = job.data.empty() && source.rfind("synthetic", 0) == 0;
  const std::string path = job.data.empty() ? source : job.data;
  data::BarSeries series =
      synthetic ? data::generate_synthetic(data::SyntheticOptions{}) : data::load_bars_csv(path);
  const auto f = serving::fingerprint(series);
  FOXHUNT_CHECK(f.hash == b.data.hash && f.rows == b.data.rows, kQuantizeJobComponent, "'",
                synthetic ? std::string("synthetic") : path, "': expected the ", b.data.rows,
                " bars the bundle was trained on (hash ", b.data.hash, "), got ", f.rows,
                " bars (hash ", f.hash, "); pass the training CSV with data");
  data::DatasetOptions o;
  o.target_scale = b.target_scale;
  o.target_vol_feature = b.target_vol_feature;
  o.instrument_id = b.instrument_id;
  return std::make_shared<const data::MarketDataset>(std::move(series), o);
}

// "INT8", "BF16": the precision as the messages name it.
std::string upper(Precision p) {
  std::string s = to_string(p);
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

double test_loss(models::Model& model, train::MarketBatchSource& source) {
  const double loss = train::mean_batch_loss(model, source.test_batches(),
                                             [&](int64_t i) { return source.test_batch(i); });
  FOXHUNT_CHECK(std::isfinite(loss), kQuantizeJobComponent,
                "the test split holds no windows; nothing to evaluate");
  return loss;
}

}  // namespace

// The JSON keys are the field names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(QuantizationRecord, method, source_bundle, calibration_windows,
                                   activation_clip, fp32_test_loss, int8_test_loss, loss_delta_pct)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(QatFineTuning, epochs, steps, seconds, best_val_loss,
                                   observer_steps, learning_rate)

nlohmann::json to_json(const QuantizeSummary& s) {
  nlohmann::json j = s.quantization;
  j["precision"] = to_string(s.precision);
  j["out"] = s.out;
  j["precisions"] = s.precisions;
  j["resident_bytes"] = {{to_string(Precision::kFp32), s.fp32_resident_bytes},
                         {to_string(s.precision), s.int8_resident_bytes}};
  j["qat"] = s.qat ? nlohmann::json(*s.qat) : nlohmann::json(nullptr);
  j["layer_errors"] = s.layer_errors;
  j["seconds"] = s.seconds;
  j["bound"] = {{"max_loss_delta_pct", s.max_loss_delta_pct}, {"ok", s.within_bound}};
  return j;
}

QuantizeSummary run_quantize_job(const QuantizeJob& job) {
  const auto method = models::parse_quantize_method(job.method, kQuantizeJobComponent);
  const Precision target = job.precision;
  FOXHUNT_CHECK(target != Precision::kFp32 && !models::models_with_precision(target).empty(),
                kQuantizeJobComponent,
                "precision: expected one of a catalog model's quantized forms (",
                models::quantized_forms_text(), "), got '", target, "'");
  FOXHUNT_CHECK(!job.bundle.empty(), kQuantizeJobComponent,
                "bundle: expected an FP32 bundle of a model with an ", upper(target), " form");
  FOXHUNT_CHECK(!job.out.empty(), kQuantizeJobComponent, "out: expected the ", upper(target),
                " bundle to write");
  FOXHUNT_CHECK(job.out != job.bundle, kQuantizeJobComponent,
                "out: expected another file than bundle '", job.bundle, "'");
  FOXHUNT_CHECK(std::isfinite(job.max_loss_delta_pct), kQuantizeJobComponent,
                "max_loss_delta_pct: expected a finite bound in percent, got ",
                job.max_loss_delta_pct);
  FOXHUNT_CHECK(job.calib >= 1, kQuantizeJobComponent, "calib: expected >= 1 windows, got ",
                job.calib);
  FOXHUNT_CHECK(job.batch >= 1, kQuantizeJobComponent, "batch: expected >= 1, got ", job.batch);
  FOXHUNT_CHECK(method != models::QuantizeMethod::kQat || job.epochs >= 1, kQuantizeJobComponent,
                "epochs: expected >= 1, got ", job.epochs);
  const auto start = std::chrono::steady_clock::now();
  const torch::Device device = models::to_torch(job.device);
  serving::Bundle b = serving::load_bundle(job.bundle, device);
  FOXHUNT_CHECK(models::has_precision(b.name(), target), kQuantizeJobComponent, "'", job.bundle,
                "': expected a bundle of a model with an ", upper(target), " form (",
                join(models::models_with_precision(target), ", "), "), got '", b.name(), "'");
  FOXHUNT_CHECK(b.model->precision() == Precision::kFp32, kQuantizeJobComponent, "'", job.bundle,
                "': expected an FP32 bundle, got precision '", b.model->precision(), "'");
  // The model's form, from its catalog entry: everything model-specific is its hook.
  const auto& form = models::quantized_form(b.name(), target, kQuantizeJobComponent);
  const auto dataset = bundle_dataset(b, job);
  train::MarketBatchSource source(dataset, *b.model, job.batch, job.seed, device);
  const double fp32_loss = test_loss(*b.model, source);

  // PTQ calibration on the first training windows (epoch 0's shuffled order); QAT fine-tunes
  // the fake-quantized model with the forecast trainer, which lives up here.
  models::QuantizeRequest request;
  request.method = method;
  request.percentile = job.percentile;
  request.calibration_windows = job.calib;
  request.calibration_batches = source.train_batches();
  request.calibration_batch = [&](int64_t i) { return source.train_batch(0, i); };
  request.observer_steps = job.observer_steps;
  std::optional<QatFineTuning> qat_summary;
  request.fine_tune = [&](models::Model& qat) {
    train::ForecastTrainer trainer(qat, source,
                                   train::ForecastTrainerOptions()
                                       .epochs(job.epochs)
                                       .learning_rate(job.learning_rate)
                                       .seed(job.seed));
    train::RunConfig run;
    run.progress = job.progress;
    const auto r = trainer.train(run);
    FOXHUNT_CHECK(!r.interrupted, kQuantizeJobComponent, "interrupted; nothing written");
    qat_summary = QatFineTuning{.epochs = r.episodes,
                                .steps = r.steps,
                                .seconds = r.seconds,
                                .best_val_loss = trainer.best_validation_loss(),
                                .observer_steps = 0,
                                .learning_rate = job.learning_rate};
  };
  // The per-layer errors' batch. The FP32 reference of a QAT run is the fine-tuned network.
  request.error_batch = source.test_batch(0);
  auto quantized = form.quantize(*b.model, request);
  if (qat_summary) qat_summary->observer_steps = quantized.observer_steps;
  const double int8_loss = test_loss(*quantized.model, source);

  serving::Bundle out = b;
  out.model = std::shared_ptr<models::Model>(std::move(quantized.model));
  QuantizeSummary summary;
  summary.precision = target;
  auto& q = summary.quantization;
  q.method = to_string(method);
  q.source_bundle = job.bundle;
  q.calibration_windows = quantized.calibration_windows;
  q.activation_clip = quantized.calibration_windows == 0 ? "none"  // a cast (bf16)
                      : job.percentile > 0               ? "percentile"
                                                         : "l2_optimal";
  q.fp32_test_loss = fp32_loss;
  q.int8_test_loss = int8_loss;
  q.loss_delta_pct = 100.0 * (int8_loss - fp32_loss) / fp32_loss;
  out.training["quantization"] = q;
  serving::save_bundle(out, job.out);

  summary.out = job.out;
  summary.precisions = form.bytes(b.model->options_json());
  summary.fp32_resident_bytes = b.model->parameter_bytes() + b.model->buffer_bytes();
  summary.int8_resident_bytes = out.model->parameter_bytes() + out.model->buffer_bytes();
  summary.qat = qat_summary;
  summary.layer_errors = std::move(quantized.layer_errors);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.max_loss_delta_pct = job.max_loss_delta_pct;
  summary.within_bound =
      std::isfinite(q.loss_delta_pct) && q.loss_delta_pct <= job.max_loss_delta_pct;
  return summary;
}

std::string format_quantize_summary(const QuantizeSummary& s) {
  std::ostringstream os;
  const auto& p = s.precisions;
  const auto& q = s.quantization;
  const std::string name = to_string(s.precision);
  // A form with nothing to calibrate (bf16) is a cast of the weights, not a PTQ run.
  if (q.calibration_windows == 0)
    os << "cast to " << name << " (no calibration): " << s.out << "\n";
  else
    os << "quantize " << q.method << " to " << name << ": " << s.out << "\n";
  const auto& fp32 = p[to_string(Precision::kFp32)];
  const auto& form = p[name];
  os << "  bytes        fp32 " << human_bytes(fp32["parameter_bytes"].get<double>()) << "  " << name
     << " " << human_bytes(form["parameter_bytes"].get<double>());
  // The form's own part (int8 codes, bf16 weights) and what stays fp32, where its table has them.
  const std::string own = name + "_bytes";
  if (form.contains(own) && form.contains("fp32_bytes"))
    os << " (" << human_bytes(form[own].get<double>()) << " " << name << " + "
       << human_bytes(form["fp32_bytes"].get<double>()) << " fp32)";
  os << "\n";
  os << fmt::format("  test loss    fp32 {:.6f}  {} {:.6f}  delta {:+.2f}% (bound {:+.2f}%: {})\n",
                    q.fp32_test_loss, name, q.int8_test_loss, q.loss_delta_pct,
                    s.max_loss_delta_pct, s.within_bound ? "ok" : "EXCEEDED");
  if (s.layer_errors.empty()) return os.str();  // a cast: no per-layer errors
  double worst = 1e9;
  std::string worst_name;
  for (const auto& r : s.layer_errors) {
    if (r.snr_db < worst) {
      worst = r.snr_db;
      worst_name = r.layer;
    }
  }
  os << fmt::format("  layers       {} {}, lowest SNR {:.1f} dB ({})\n", s.layer_errors.size(),
                    name, worst, worst_name);
  return os.str();
}

}  // namespace foxhunt::jobs
