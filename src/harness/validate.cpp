#include "foxhunt/harness/validate.h"

#include <chrono>
#include <cmath>
#include <sstream>
#include <thread>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "foxhunt/core/container.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/strings.h"
#include "foxhunt/core/units.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/harness/reports.h"
#include "foxhunt/harness/stress.h"
#include "foxhunt/jobs/quantize_job.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/precision.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/models/summary.h"
#include "foxhunt/plan/budget.h"
#include "foxhunt/plan/planner.h"
#include "foxhunt/serving/backtest.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::harness {

bool ValidateReport::ok() const {
  for (const auto& s : steps)
    if (!s.ok) return false;
  return !steps.empty() && report_error.empty();
}

nlohmann::json ValidateReport::to_json() const {
  nlohmann::json j;
  j["ok"] = ok();
  if (!report_error.empty()) j["report_error"] = report_error;
  j["report"] = report_path;
  j["steps"] = nlohmann::json::array();
  for (const auto& s : steps)
    j["steps"].push_back({{"name", s.name},
                          {"ok", s.ok},
                          {"summary", s.summary},
                          {"seconds", s.seconds},
                          {"details", s.details}});
  return j;
}

void to_json(nlohmann::json& j, const ModelCheck& c) {
  j = nlohmann::json::object();
  FOXHUNT_JSON_FIELDS(j, c, name, parameters, parameter_bytes, buffer_bytes, seq_len, ok);
  for (const auto& f : c.forwards)
    FOXHUNT_JSON_FIELDS(j["batch_" + std::to_string(f.batch)], f, ok, shapes_ok, finite, outputs);
}

void to_json(nlohmann::json& j, const TrainCheck& c) {
  j = nlohmann::json::object();
  FOXHUNT_JSON_FIELDS(j, c, model, ok, completed, checkpoint_ok, seconds, eval, memory_cap,
                      summary);
}

void validate_models_step(const ValidateOptions& options, StepResult& result, std::ostream& log) {
  const torch::Device device = models::to_torch(options.device);
  c10::InferenceMode guard;
  std::vector<ModelCheck> rows;
  bool all_ok = true;
  log << fmt::format("  {:<8} {:>12} {:>14} {:>8} {}\n", "model", "parameters", "fp32 bytes",
                     "window", "forward checks");
  for (const auto& name : models::model_names()) {
    auto m = models::make_model(name);
    m->to(device);
    m->module().eval();
    ModelCheck row;
    row.name = name;
    row.parameters = m->parameter_count();
    row.parameter_bytes = m->parameter_bytes();
    row.buffer_bytes = m->buffer_bytes();
    row.seq_len = m->default_seq_len();
    std::string checks;
    bool ok = true;
    for (int64_t b : options.batches) {
      auto batch = m->example_batch(b, 0, device, options.seed);
      auto outs = m->forward(batch);
      auto expected = m->output_shapes(b, m->default_seq_len());
      bool shapes_ok = outs.size() == expected.size();
      bool finite = true;
      for (size_t i = 0; shapes_ok && i < outs.size(); ++i) {
        shapes_ok = outs[i].sizes().vec() == expected[i];
        finite = finite && torch::isfinite(outs[i]).all().item<bool>();
      }
      const bool step_ok = shapes_ok && finite;
      ok = ok && step_ok;
      std::string out_shapes;
      for (const auto& o : outs) out_shapes += models::shape_str(o.sizes().vec()) + " ";
      row.forwards.push_back({b, shapes_ok, finite, step_ok, out_shapes});
      // Appended piecewise: GCC 12 warns falsely (-Wstringop-overflow) on `"b" + to_string(b)`.
      checks.append("b").append(std::to_string(b)).append(step_ok ? ":ok " : ":FAIL ");
    }
    row.ok = ok;
    all_ok = all_ok && ok;
    log << fmt::format("  {:<8} {:>12} {:>14} {:>8} {}\n", name, m->parameter_count(),
                       human_bytes(static_cast<double>(m->parameter_bytes())), m->default_seq_len(),
                       checks);
    rows.push_back(row);
  }
  result.ok = all_ok;
  result.details["models"] = rows;
  result.summary = std::to_string(rows.size()) + " models built; forward outputs " +
                   (all_ok ? "finite and shaped right" : "WRONG (see details)");
}

void validate_plan_step(const ValidateOptions& options, StepResult& result, std::ostream& log) {
  const auto profile = memory::find_profile(memory::kReferenceProfile);
  nlohmann::json plans = nlohmann::json::array();
  bool all_ok = true;
  std::string summary;
  log << fmt::format("  {:<8} {:>8} {:<16} {:>12} {:>12} {:>9} {:>9} {:>7}\n", "model", "batch",
                     "limited by", "verified", "predicted", "fit err", "ref err", "time");
  for (const auto& name : models::model_names()) {
    plan::PlanOptions o;
    o.model = name;
    o.train.seed = options.seed;
    // The trainers' real steps, measured and capped on the device validated (CUDA: the
    // caching allocator under the profile's usable bytes as its memory fraction).
    o.train.device = options.device;
    o.budget = memory::Budget::of_profile(profile.name);
    const auto r = plan::plan_batch(o);
    const bool ok = r.verified && std::abs(r.predicted_error_pct()) <= 10.0;
    all_ok = all_ok && ok;
    auto j = r.to_json();
    j["ok"] = ok;
    plans.push_back(j);
    log << fmt::format("  {:<8} {:>8} {:<16} {:>12} {:>12} {:>+8.1f}% {:>+8.1f}% {:>6.2f}s\n", name,
                       r.chosen_batch, r.limited_by, human_bytes(double(r.verified_peak_bytes)),
                       human_bytes(double(r.predicted_peak_bytes)), r.predicted_error_pct(),
                       r.reference_error_pct(), r.seconds);
    summary += (summary.empty() ? "" : ", ") + name + " b=" + std::to_string(r.chosen_batch) +
               (ok ? "" : " FAIL");
  }
  result.ok = all_ok;
  result.details["profile"] = memory::to_json(profile);
  result.details["plans"] = plans;
  result.details["device"] = options.device;
  result.summary = "batches on " + profile.name + " (" + options.device.str() +
                   ") verified under the cap: " + summary;
}

void validate_budget_step(const ValidateOptions& options, StepResult& result, std::ostream& log) {
  plan::BudgetOptions o;
  o.budget = memory::Budget::of_profile(memory::kReferenceProfile);
  o.device = options.device;  // CUDA: measured on the card under the profile's cap
  o.seed = options.seed;
  const auto rep = plan::validate_budget(o);
  std::istringstream table(rep.table());
  for (std::string l; std::getline(table, l);) log << "  " << l << "\n";
  result.ok = rep.ok;
  result.details = rep.to_json();
  result.summary = fmt::format(
      "total {} of {} ({:.2f}%), headroom {} (required {})", human_bytes(double(rep.total_bytes)),
      human_bytes(double(rep.budget_bytes)), rep.total_pct_of_budget,
      human_bytes(double(rep.headroom_bytes)), human_bytes(double(rep.headroom_required_bytes)));
}

void validate_train_step(const ValidateOptions& options, StepResult& result, std::ostream& log) {
  namespace fs = std::filesystem;
  const ScopedDirectory work(options.out_dir, "foxhunt-validate-train");
  const fs::path root = work.path();

  data::SyntheticOptions synth;
  synth.bars = options.train_bars;
  synth.seed = options.seed;
  const std::string csv = (root / "bars.csv").string();
  // One series: the first train_bars train the models, the rest is held out for the backtest.
  synth.bars = options.train_bars + options.backtest_bars;
  auto all = data::generate_synthetic(synth);
  data::write_bars_csv((root / "all_bars.csv").string(), all);
  all.bars.resize(static_cast<size_t>(options.train_bars));
  data::write_bars_csv(csv, all);
  log << "  data: " << options.train_bars << " synthetic bars for training, "
      << options.backtest_bars << " held out (seed " << options.seed << ")\n";

  // The runs are sequential, so the step may use every core; the later steps (stress: four
  // serving threads) get the thread count they started with back.
  struct ThreadsGuard {
    int before = at::get_num_threads();
    ~ThreadsGuard() { at::set_num_threads(before); }
  } threads_guard;
  const int64_t threads =
      options.train_threads > 0
          ? options.train_threads
          : std::clamp<int64_t>(static_cast<int64_t>(std::thread::hardware_concurrency()), 1, 4);
  at::set_num_threads(static_cast<int>(threads));
  log << "  threads: " << threads << " intra-op\n";

  bool all_ok = true;
  std::vector<TrainCheck> rows;
  for (const auto& model : jobs::trainable_models()) {
    jobs::TrainJob job;
    job.model = model;
    job.data = csv;
    job.seed = options.seed;
    job.device = options.device;
    job.budget = memory::Budget::of_profile(memory::kReferenceProfile);  // each run capped
    job.out_dir = serving::BundleDirectory(root.string()).model_dir(model);
    job.progress = train::ProgressMode::kOff;
    const bool rl = models::is_policy(model);
    if (rl) {
      job.env = "trading";
      job.steps = options.rl_steps;
      job.eval_episodes = 5;
    } else {
      // Up to forecast_epochs with early stopping on the validation split.
      job.epochs = options.forecast_epochs;
      job.options = {{"patience", options.forecast_patience}};
    }
    const auto summary = jobs::run_train_job(job);
    const bool completed = summary.completed;
    // The checkpoint must parse (magic, version, CRC) and name the model.
    bool checkpoint_ok = false;
    try {
      const auto c = read_container(summary.checkpoint);
      checkpoint_ok = c.header.value("model", "") == model;
    } catch (const std::exception&) {
      checkpoint_ok = false;
    }
    // Non-finite figures (null in the summary's JSON) read as NaN.
    const auto finite = [](double v) { return std::isfinite(v) ? v : NAN; };
    std::string verdict;
    bool finite_ok = true;
    bool skill_ok = true;
    if (rl) {
      const auto* e = summary.policy_eval();
      const double mean = e ? e->mean_return : NAN;
      finite_ok = std::isfinite(mean);
      verdict = fmt::format("greedy mean log-return {:.4f} over {} windows", mean,
                            e ? static_cast<int>(e->episodes) : 0);
    } else {
      const auto* e = summary.forecast_eval();
      const double loss = e ? finite(e->loss) : NAN;
      const double base = e ? finite(e->baseline_loss) : NAN;
      finite_ok = std::isfinite(loss) && std::isfinite(base);
      const data::ForecastEvaluation* nb = e && e->next_bar ? &*e->next_bar : nullptr;
      const double skill = nb ? nb->skill_vs_best : NAN;
      const double cover = nb ? nb->coverage_p10_p90.value_or(NAN) : NAN;
      // Best epoch -1: no epoch beat the initial constant (volatility-scaled) forecast.
      const int64_t best_epoch = e ? e->best_epoch : -2;
      const std::string epoch = best_epoch == -1 ? "initial" : std::to_string(best_epoch);
      verdict = fmt::format(
          "test quantile loss {:.4f} vs unconditional {:.4f} ({:+.1f}%); next bar: skill "
          "{:+.1f}% vs {}, P10-P90 coverage {:.1f}%; best epoch {}",
          loss, base, 100.0 * (loss / base - 1.0), 100.0 * skill,
          nb ? nb->best_baseline : std::string("?"), 100.0 * cover, epoch);
      // A forecaster worse than its best naive baseline on the held-out test split is not "ok".
      if (nb) skill_ok = nb->beats_best_baseline;
    }
    if (!skill_ok) verdict += " [WORSE than the naive baseline]";
    const bool ok = completed && checkpoint_ok && finite_ok && skill_ok;
    all_ok = all_ok && ok;
    const double seconds = summary.seconds;
    log << fmt::format("  {:<7} {:<4} {:>6.1f} s  ", model, ok ? "ok" : "FAIL", seconds) << verdict
        << (checkpoint_ok ? "" : " [checkpoint unreadable]") << "\n";
    log.flush();
    const nlohmann::json json = jobs::to_json(summary);  // the run's eval and cap, as reported
    rows.push_back({model, completed, checkpoint_ok, ok, seconds, json.at("eval"),
                    json.at("memory_cap"), verdict});
  }
  // The ensemble's weights, fitted on the validation split as train all does (DIR/rule.json).
  if (serving::BundleDirectory(root.string()).complete()) {
    const auto fit = jobs::fit_ensemble_rule(root.string(), csv);
    if (fit.contains("error")) {
      log << "  rule    not fitted: " << fit["error"].get<std::string>() << "\n";
    } else {
      log << fmt::format(
          "  rule    weights fitted on {} validation bars: Sharpe after costs equal "
          "{:.2f}, best {:.2f}, written {:.2f}; chosen {} (DSR {:.3f})\n",
          fit.value("bars", 0), fit.value("sharpe_equal", 0.0), fit.value("sharpe_best", 0.0),
          fit.value("sharpe_fitted", 0.0), fit.value("chosen", std::string("models")),
          fit.value("dsr", 0.0));
    }
    result.details["rule_fit"] = fit;
  }
  result.ok = all_ok;
  result.details["runs"] = rows;
  result.details["bars"] = options.train_bars;
  result.details["threads"] = threads;
  result.summary =
      std::to_string(rows.size()) + " short training runs " +
      (all_ok ? "completed with finite metrics and loadable checkpoints, forecasters no worse than "
                "their best naive baselines"
              : "FAILED: an incomplete run, an unreadable checkpoint, a non-finite metric or a "
                "forecaster worse than its best naive baseline (see the lines above)");
}

void validate_quantize_step(const ValidateOptions& options, StepResult& result, std::ostream& log) {
  namespace fs = std::filesystem;
  // The model with an INT8 form (the TFT): its FP32 bundle is what is quantized.
  const std::string quantizable = models::models_with_precision(models::Precision::kInt8).front();
  const fs::path fp = serving::BundleDirectory(options.out_dir).bundle_path(quantizable);
  FOXHUNT_CHECK(!options.out_dir.empty() && fs::exists(fp), "validate",
                "quantize: needs the train step's TFT bundle ", fp.string());
  // Outside DIR/<model>/bundle.fhb, so the backtest's ensemble stays the four FP32 models.
  fs::create_directories(fs::path(options.out_dir) / "quantized");
  jobs::QuantizeJob job;
  job.bundle = fp.string();
  job.out = (fs::path(options.out_dir) / "quantized" / (quantizable + "-int8.fhb")).string();
  job.method = "ptq";
  job.device = options.device;
  job.seed = options.seed;
  const auto s = jobs::run_quantize_job(job);
  std::istringstream text(jobs::format_quantize_summary(s));
  for (std::string l; std::getline(text, l);) log << "  " << l << "\n";
  result.details = jobs::to_json(s);
  const double delta = s.quantization.loss_delta_pct;
  const auto& fp32 = s.precisions[models::to_string(models::Precision::kFp32)];
  const auto& int8 = s.precisions[models::to_string(models::Precision::kInt8)];
  const double ratio = int8["ratio_to_fp32"].get<double>();
  result.ok = s.within_bound && ratio <= 0.35;  // the job's bound: +5% by default
  result.summary = fmt::format(
      "TFT PTQ: {} int8 vs {} fp32 ({:.2f}x), test loss {:+.2f}% vs fp32 (bound {:+.0f}%)",
      human_bytes(int8["parameter_bytes"].get<double>()),
      human_bytes(fp32["parameter_bytes"].get<double>()), ratio, delta, s.max_loss_delta_pct);
}

void validate_backtest_step(const ValidateOptions& options, StepResult& result, std::ostream& log) {
  namespace fs = std::filesystem;
  FOXHUNT_CHECK(!options.out_dir.empty() && fs::exists(fs::path(options.out_dir) / "all_bars.csv"),
                "validate", "backtest: needs the train step's bundles and held-out bars in ",
                options.out_dir.empty() ? "(no directory)" : options.out_dir);
  serving::BacktestJob job;
  job.bundles = options.out_dir;
  // The rule train all fitted on its validation bars.
  job.rule = serving::ensemble_rule(options.out_dir);
  job.data = (fs::path(options.out_dir) / "all_bars.csv").string();
  job.device = options.device;
  job.seed = options.seed;
  auto run = std::make_shared<serving::BacktestRun>(serving::run_backtest_job(job, log));
  std::istringstream table(run->table());
  for (std::string l; std::getline(table, l);) log << "  " << l << "\n";
  result.details = run->to_json();
  // The same gate as `foxhunt backtest`.
  const auto failures = serving::forecaster_gate_failures(*run);
  const bool forecasters_ok = failures.empty();
  std::string worse;
  for (const auto& f : failures) worse += (worse.empty() ? "" : ", ") + f;
  result.ok = forecasters_ok && !run->forecasts.empty();
  const auto& ens = run->results.at("ensemble");
  const auto& bh = run->results.at("buy_and_hold");
  result.summary = fmt::format(
      "{} held-out bars: ensemble return {:+.2f}% (Sharpe {:.2f}) vs buy-and-hold {:+.2f}% "
      "(Sharpe {:.2f}); ",
      run->closes.size(), 100 * ens.total_return, ens.sharpe, 100 * bh.total_return, bh.sharpe);
  if (run->short_window)
    result.summary += "fewer than a year of bars (per-bar Sharpe " +
                      std::to_string(ens.sharpe_per_bar).substr(0, 7) + " vs " +
                      std::to_string(bh.sharpe_per_bar).substr(0, 7) + "); ";
  result.summary += forecasters_ok ? "forecasters no worse than their best naive baselines"
                                   : "WORSE than the best naive baseline: " + worse;
  // An idle model passes no gate by being idle: it is named, with the reason.
  for (const auto& [name, why] : run->idle) result.summary += "; " + name + " idle (" + why + ")";
  result.backtest = std::move(run);
}

void validate_stress_step(const ValidateOptions& options, StepResult& result, std::ostream& log) {
  namespace fs = std::filesystem;
  StressOptions o;
  o.device = options.device;
  o.budget = memory::Budget::of_profile(memory::kReferenceProfile);  // the reference card's cap
  o.seed = options.seed;
  o.iterations = options.stress_iterations;
  o.soak = options.stress_soak;
  o.switch_cycles = options.stress_cycles;
  // The bundles the train step wrote, when it ran; fresh default models otherwise.
  const bool trained = serving::BundleDirectory(options.out_dir).complete();
  if (trained) o.bundles = options.out_dir;
  auto shared =
      std::make_shared<StressReport>(run_stress(o, {"concurrent", "switch", "soak"}, log));
  const auto& report = *shared;
  result.stress = shared;
  result.ok = report.ok();
  result.details = report.to_json();
  std::string summary;
  for (const auto& s : report.scenarios) {
    const auto& d = s.details;
    std::string part;
    if (s.name == "concurrent" && s.error.empty())
      part = fmt::format("concurrent {:.0f} inferences/s, outputs {} serial",
                         d.value("throughput_per_s", 0.0),
                         d.value("outputs_match_serial", false) ? "==" : "!=");
    else if (s.name == "soak" && s.error.empty())
      part = fmt::format("soak {} bars {} (slope {:.1f} B/1k)", o.soak,
                         d.value("leak_detected", true) ? "LEAK" : "no leak",
                         d.value("slope_bytes_per_1k", 0.0));
    else if (s.name == "switch" && s.error.empty())
      part = fmt::format("switch {} cycles {}", o.switch_cycles,
                         s.ok ? "at baseline" : "OFF baseline");
    else
      part = fmt::format("{} FAILED: {}", s.name, s.error);
    summary += (summary.empty() ? "" : "; ") + part;
  }
  result.summary = (trained ? "trained bundles: " : "fresh models: ") + summary;
}

std::vector<std::pair<std::string, ValidateStep>> validate_steps() {
  return {{"models", &validate_models_step},     {"train", &validate_train_step},
          {"quantize", &validate_quantize_step}, {"plan", &validate_plan_step},
          {"budget", &validate_budget_step},     {"stress", &validate_stress_step},
          {"backtest", &validate_backtest_step}};
}

ValidateReport run_validate(const ValidateOptions& given, std::ostream& log) {
  namespace fs = std::filesystem;
  // One work directory for the whole run: later steps serve what the train step wrote.
  ValidateOptions options = given;
  // The report's directory is checked before the work (a file in the way fails now, not after
  // minutes of steps).
  if (!given.report_dir.empty()) check_output_dir(given.report_dir, "report");
  std::vector<std::string> known;
  for (const auto& [name, step] : validate_steps()) known.push_back(name);
  for (const auto& s : given.skip)
    FOXHUNT_CHECK(std::find(known.begin(), known.end(), s) != known.end(), "validate", "skip '", s,
                  "': expected a step name: ", join(known, ", "));
  const ScopedDirectory work(given.out_dir, "foxhunt-validate");
  options.out_dir = work.path();
  ValidateReport report;
  for (const auto& [name, step] : validate_steps()) {
    bool skipped = false;
    for (const auto& s : options.skip) skipped = skipped || s == name;
    if (skipped) continue;
    StepResult r;
    r.name = name;
    log << "== " << name << "\n";
    const auto t0 = std::chrono::steady_clock::now();
    try {
      step(options, r, log);
    } catch (const std::exception& e) {
      r.ok = false;
      r.summary = std::string("error: ") + e.what();
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log << (r.ok ? "   PASS " : "   FAIL ") << r.summary << fmt::format(" ({:.1f} s)", r.seconds)
        << "\n";
    log.flush();
    report.steps.push_back(std::move(r));
  }
  if (!options.report_dir.empty()) {
    try {
      HtmlReport page(std::string("foxhunt validate: ") + (report.ok() ? "PASS" : "FAIL"));
      std::vector<std::vector<std::string>> rows;
      for (const auto& st : report.steps) {
        rows.push_back(
            {st.name, st.ok ? "PASS" : "FAIL", fmt::format("{:.1f}", st.seconds), st.summary});
      }
      page.table({"step", "verdict", "seconds", "summary"}, rows);
      for (const auto& st : report.steps) {
        if (st.backtest) add_backtest_sections(page, *st.backtest);
        if (st.stress) add_stress_sections(page, *st.stress);
      }
      report.report_path =
          write_report(page, options.report_dir, report.to_json(), "validate.json");
      log << "report: " << report.report_path << "\n";
    } catch (const std::exception& e) {
      // A report that was asked for and not written fails the run (exit 1).
      report.report_error = e.what();
      log << "report: not written: " << e.what() << "\n";
    }
  }
  return report;
}

}  // namespace foxhunt::harness
