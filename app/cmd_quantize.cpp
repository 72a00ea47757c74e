// foxhunt quantize MODEL: an FP32 bundle of a model with a quantized form to that form: INT8 by PTQ
// or QAT, BF16 by a cast (--precision; library: jobs/quantize_job.h, models/precisions.h).
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/strings.h"
#include "foxhunt/jobs/quantize_job.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/models/precisions.h"

namespace foxhunt::cli {
namespace {

struct QuantizeArgs {
  static constexpr const char* kHelp =
      "Quantize a bundle to INT8 (PTQ calibration or QAT fine-tuning) or BF16 (a cast); prints "
      "both test losses";
  std::string model;
  jobs::QuantizeJob job;
  std::string precision = models::to_string(models::Precision::kInt8);
  bool ptq = false, qat = false, json = false;
  std::string progress = "auto";
};

Registrar registered_quantize = subcommand<QuantizeArgs>(
    "quantize", 57, [](CLI::App* sub, std::shared_ptr<QuantizeArgs> a) -> Runner {
      auto& j = a->job;
      // The models whose catalog entry has a quantized form, and the forms' precisions.
      std::vector<std::string> quantizable, forms;
      for (const auto p : models::kAllPrecisions) {
        if (p == models::Precision::kFp32) continue;
        const auto names = models::models_with_precision(p);
        if (!names.empty()) forms.push_back(models::to_string(p));
        for (const auto& n : names)
          if (std::find(quantizable.begin(), quantizable.end(), n) == quantizable.end())
            quantizable.push_back(n);
      }
      sub->add_option("model", a->model, "The model to quantize (" + join(quantizable, ", ") + ")")
          ->required()
          ->check(CLI::IsMember(quantizable));
      sub->add_option("--bundle", j.bundle,
                      "FP32 bundle (DIR/MODEL/bundle.fhb, or the directory DIR/MODEL)")
          ->required();
      sub->add_option("--out", j.out, "Quantized bundle to write")->required();
      sub->add_option("--precision", a->precision,
                      "The form to write (" + models::quantized_forms_text() + "; default int8)")
          ->check(CLI::IsMember(forms));
      auto* ptq = sub->add_flag("--ptq", a->ptq, "Post-training quantization (default)");
      auto* qat = sub->add_flag("--qat", a->qat, "Quantization-aware fine-tuning after PTQ");
      ptq->excludes(qat);
      add_defaulted(sub, "--calib", &j.calib, "Calibration windows (training split)");
      add_defaulted(sub, "--percentile", &j.percentile,
                    "Activation clip: 0 = L2-optimal, else this percentile of |x|");
      add_defaulted(sub, "--epochs", &j.epochs, "QAT epochs");
      add_defaulted(sub, "--lr", &j.learning_rate, "QAT learning rate");
      add_defaulted(sub, "--observer-steps", &j.observer_steps,
                    "QAT steps before the activation observers freeze");
      add_defaulted(sub, "--batch", &j.batch, "Windows per batch");
      add_defaulted(sub, "--max-loss-delta-pct", &j.max_loss_delta_pct,
                    "Accuracy bound: exit 1 when the INT8 test loss exceeds the FP32 one by "
                    "more than this percent (the bundle is written either way)");
      sub->add_option("--data", j.data, "Bars CSV (default: the bundle's training data)");
      add_seed_flag(sub, &j.seed, "Seed (QAT batches, dropout)");
      add_device_flag(sub, &j.device);
      sub->add_option("--progress", a->progress, "auto, bar, lines or off (QAT, on stderr)")
          ->check(CLI::IsMember({"auto", "bar", "lines", "off"}));
      sub->add_flag("--json", a->json, "Print the JSON summary only");
      return [a]() {
        auto job = a->job;
        job.method = a->qat ? "qat" : "ptq";
        job.precision = models::parse_precision(a->precision, "quantize");
        // The model named must have that form ("'mamba2' has no int8 form; ...").
        (void)models::quantized_form(a->model, job.precision, "quantize");
        const auto& p = a->progress;
        job.progress = p == "bar"              ? train::ProgressMode::kBar
                       : p == "lines"          ? train::ProgressMode::kLines
                       : p == "off" || a->json ? train::ProgressMode::kOff
                                               : train::ProgressMode::kAuto;
        const auto summary = jobs::run_quantize_job(job);
        if (a->json)
          print_json(jobs::to_json(summary).dump(2));
        else
          std::cout << jobs::format_quantize_summary(summary);
        if (summary.within_bound) return 0;
        std::cerr << "foxhunt: quantize verdict FAIL: " << a->precision << " test loss "
                  << summary.quantization.loss_delta_pct << "% above FP32, bound "
                  << summary.max_loss_delta_pct << "% (" << summary.out << " was written)\n";
        return 1;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
