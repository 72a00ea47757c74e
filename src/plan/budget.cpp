#include "foxhunt/plan/budget.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/core/strings.h"
#include "foxhunt/core/units.h"
#include "foxhunt/memory/device_memory.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/precisions.h"
#include "foxhunt/models/summary.h"
#include "probe_step.h"

namespace foxhunt::plan {

// The ledger, scopes and device counters this area measures with.
using memory::cuda_memory_available;
using memory::cuda_stats_backend;
using memory::device_live_bytes;
using memory::device_peak_bytes;
using memory::device_reset_peak;
using memory::DeviceLimitGuard;
using memory::measure_device_overheads;
using memory::MemoryDevice;
using memory::translate_oom;

namespace {

std::string hb(double bytes) {
  return human_bytes(bytes);
}

double pct(std::uint64_t part, std::uint64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

bool is_model(const std::string& name) {
  return models::in_catalog(name);
}

std::string known_models() {
  return models::joined_model_names();
}

}  // namespace

std::map<std::string, std::uint64_t> default_targets(const memory::MemoryDevice& device) {
  std::map<std::string, std::uint64_t> t;
  for (const auto& e : models::catalog())
    t[e.name] = device.is_cuda() ? e.serving_target_cuda_bytes : e.serving_target_cpu_bytes;
  return t;
}

std::map<std::string, std::uint64_t> reference_claims() {
  std::map<std::string, std::uint64_t> c;
  for (const auto& e : models::catalog()) c[e.name] = e.reference_claim_bytes;
  return c;
}

namespace {

// The four models built, their serving batches made, then the forwards run on one thread each,
// all at once: the ledger's peak over the whole run, beyond what was live before it.
std::uint64_t measure_concurrent_serving(std::int64_t batch, std::uint64_t seed,
                                         const PrecisionMap& precision, const MemoryDevice& dev) {
  const torch::Device tdev = models::to_torch(dev);
  const auto before = device_live_bytes(dev);
  device_reset_peak(dev);
  std::vector<std::unique_ptr<models::Model>> ms;
  std::vector<models::Batch> batches;
  for (const auto& name : models::model_names()) {
    torch::manual_seed(seed);
    ms.push_back(make_model_at(name, precision.of(name)));
    if (dev.is_cuda()) ms.back()->to(tdev);
    ms.back()->module().eval();
    batches.push_back(ms.back()->example_batch(batch, 0, tdev, seed));
  }
  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex m;
  for (size_t i = 0; i < ms.size(); ++i)
    threads.emplace_back([&, i] {
      try {
        c10::InferenceMode guard;
        ms[i]->forward(batches[i]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!error) error = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  return detail::beyond(device_peak_bytes(dev), before);
}

DeploymentView make_view(std::string name, std::string description, std::uint64_t bytes,
                         const BudgetReport& rep) {
  DeploymentView v;
  v.name = std::move(name);
  v.description = std::move(description);
  v.bytes = bytes;
  v.headroom_bytes = static_cast<std::int64_t>(rep.budget_bytes) - static_cast<std::int64_t>(bytes);
  v.ok = v.headroom_bytes >= static_cast<std::int64_t>(rep.headroom_required_bytes);
  return v;
}

}  // namespace

std::map<std::string, std::uint64_t> targets_from_json(const nlohmann::json& j,
                                                       const std::string& where,
                                                       std::map<std::string, std::uint64_t> base) {
  FOXHUNT_CHECK(j.is_object(), "budget", where, ": expected a JSON object, got ", j.type_name());
  for (auto it = j.begin(); it != j.end(); ++it)
    FOXHUNT_CHECK(it.key() == "targets_mib" || it.key() == "targets_bytes", "budget", where,
                  ": unknown key '", it.key(), "'; expected targets_mib or targets_bytes");
  const bool mib = j.contains("targets_mib");
  const bool bytes = j.contains("targets_bytes");
  FOXHUNT_CHECK(mib != bytes, "budget", where,
                ": expected exactly one of targets_mib or targets_bytes, got ",
                mib ? "both" : "neither");
  const char* key = mib ? "targets_mib" : "targets_bytes";
  const auto& t = j.at(key);
  FOXHUNT_CHECK(t.is_object(), "budget", where, ": ", key,
                ": expected an object {model: size}, got ", t.type_name());
  for (auto it = t.begin(); it != t.end(); ++it) {
    FOXHUNT_CHECK(is_model(it.key()), "budget", where, ": ", key, ": unknown model '", it.key(),
                  "'; expected one of: ", known_models());
    const auto& v = it.value();
    FOXHUNT_CHECK(v.is_number(), "budget", where, ": ", key, ".", it.key(),
                  ": expected a number, got ", v.type_name());
    const double d = v.get<double>();
    FOXHUNT_CHECK(std::isfinite(d) && d > 0, "budget", where, ": ", key, ".", it.key(),
                  ": expected a positive size, got ", v.dump());
    const double b = mib ? d * static_cast<double>(kMiB) : d;
    FOXHUNT_CHECK(b >= 1 && b < 1.8e19, "budget", where, ": ", key, ".", it.key(),
                  ": expected between 1 B and 16 EiB, got ", v.dump());
    base[it.key()] = static_cast<std::uint64_t>(std::llround(b));
  }
  return base;
}

models::Precision PrecisionMap::of(const std::string& model) const {
  const auto it = find(model);
  return it == end() ? models::Precision::kFp32 : it->second;
}

PrecisionMap parse_precisions(const std::string& text) {
  PrecisionMap out;
  std::stringstream ss(text);
  for (std::string pair; std::getline(ss, pair, ',');) {
    const auto eq = pair.find('=');
    FOXHUNT_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < pair.size(), "budget",
                  "precision: expected MODEL=PRECISION (e.g. tft=int8), got '", pair, "'");
    const std::string model = pair.substr(0, eq), precision = pair.substr(eq + 1);
    FOXHUNT_CHECK(is_model(model), "budget", "precision '", pair, "': unknown model '", model,
                  "'; expected one of: ", known_models());
    const auto p = models::try_parse_precision(precision);
    FOXHUNT_CHECK(
        p && models::has_precision(model, *p), "budget", "precision '", pair, "': ", model, " has ",
        models::precisions_text(models::precisions(model), " and "), ", got '", precision, "'");
    out[model] = *p;
  }
  return out;
}

std::map<std::string, std::uint64_t> load_targets(const std::string& path,
                                                  const memory::MemoryDevice& device) {
  const std::string text = read_file(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("budget", "targets file '" + path + "': invalid JSON: " + e.what());
  }
  return targets_from_json(j, "targets file '" + path + "'", default_targets(device));
}

nlohmann::json BudgetReport::to_json() const {
  nlohmann::json rows_json = nlohmann::json::array();
  for (const auto& r : rows) {
    nlohmann::json& row = rows_json.emplace_back();
    row["footprint"] = r.footprint.to_json();
    FOXHUNT_JSON_FIELDS(row, r, model, precision, memory_bytes, target_bytes, pct_of_budget,
                        pct_of_target, within_target, within_budget, ok, status, claimed_bytes,
                        claimed_over_measured, training_peak_bytes);
  }
  nlohmann::json views_json = nlohmann::json::array();
  for (const auto& v : views) {
    nlohmann::json& row = views_json.emplace_back();
    FOXHUNT_JSON_FIELDS(row, v, name, description, bytes, headroom_bytes, ok);
  }
  std::uint64_t claimed_total = 0;
  for (const auto& [m, b] : reference_claims()) claimed_total += b;
  nlohmann::json j = {{"device_overheads",
                       {{"measured", overheads.measured},
                        {"workspace_bytes", overheads.workspace_bytes},
                        {"context_bytes", overheads.context_bytes},
                        {"context_measured", overheads.context_measured},
                        {"profile_reserve_bytes", profile_reserve_bytes},
                        {"note", overheads.note}}},
                      {"views", views_json},
                      {"reference_claims",
                       {{"total_bytes", claimed_total},
                        {"headroom_bytes", 3656 * kMiB},
                        {"measured_total_bytes", total_bytes},
                        {"claimed_over_measured", total_bytes ? static_cast<double>(claimed_total) /
                                                                    static_cast<double>(total_bytes)
                                                              : 0.0}}},
                      {"models", rows_json}};
  nlohmann::json precision = nlohmann::json::object();
  for (const auto& r : rows) precision[r.model] = r.precision;
  j["precision"] = precision;
  FOXHUNT_JSON_FIELDS(j, *this, budget_source, device, enforced_cap_bytes, serving_concurrent_bytes,
                      budget_bytes, headroom_required_bytes, serving_batch, total_bytes,
                      total_pct_of_budget, headroom_bytes, total_within_budget, headroom_ok, ok,
                      seconds);
  return j;
}

std::string BudgetReport::table() const {
  std::ostringstream os;
  std::string precisions;
  for (const auto& r : rows)
    if (r.precision != models::Precision::kFp32)
      precisions +=
          (precisions.empty() ? "" : ", ") + r.model + " " + models::to_string(r.precision);
  os << fmt::format(
      "budget {} ({} B, {}); memory = parameters + buffers + peak inference "
      "activations of batch 1 / {}{}\n",
      hb(double(budget_bytes)), budget_bytes, budget_source, serving_batch,
      precisions.empty() ? std::string(" (fp32)") : " (fp32; " + precisions + ")");
  os << fmt::format("{:<8} {:>12} {:>12} {:>11} {:>11} {:>12} {:>9}  {}\n", "model", "memory",
                    "target", "% budget", "% target", "claimed", "claim/x", "status");
  for (const auto& r : rows) {
    os << fmt::format("{:<8} {:>12} {:>12} {:>10.3f}% {:>10.2f}% {:>12} {:>8.1f}x  {}\n", r.model,
                      hb(double(r.memory_bytes)),
                      r.target_bytes ? hb(double(r.target_bytes)) : std::string("-"),
                      r.pct_of_budget, r.pct_of_target,
                      r.claimed_bytes ? hb(double(r.claimed_bytes)) : std::string("-"),
                      r.claimed_over_measured, r.status);
  }
  os << fmt::format("{:<8} {:>12} {:>12} {:>10.3f}% {:>11}  {}\n", "total", hb(double(total_bytes)),
                    "", total_pct_of_budget, "",
                    total_within_budget ? "PASS" : "FAIL: over budget");
  os << fmt::format("headroom: budget - total = {} ({} B), required {} ({} B): {}\n",
                    hb(double(headroom_bytes)), headroom_bytes, hb(double(headroom_required_bytes)),
                    headroom_required_bytes, headroom_ok ? "PASS" : "FAIL");
  for (const auto& v : views) {
    os << fmt::format("view {:<8} {:>12}, headroom {:>12}: {} ({})\n", v.name, hb(double(v.bytes)),
                      hb(double(v.headroom_bytes)), v.ok ? "PASS" : "FAIL", v.description);
  }
  if (!views.empty()) {
    std::uint64_t claimed = 0;
    for (const auto& [m, b] : reference_claims()) claimed += b;
    os << fmt::format(
        "reference claims: total {} ({:.0f}x the measured {}), headroom 3.57 GiB on 4 GB; "
        "measured serving headroom {}\n",
        hb(double(claimed)), total_bytes ? double(claimed) / double(total_bytes) : 0.0,
        hb(double(total_bytes)),
        views.empty() ? std::string("-") : hb(double(views.front().headroom_bytes)));
  }
  if (overheads.measured) {
    os << fmt::format(
        "device {} (capped at {}): workspace tag {} (reserved - allocated), context tag "
        "{} (NVML used - reserved{}); the profile assumes a {} context reserve\n",
        device.str(), hb(double(enforced_cap_bytes)), hb(double(overheads.workspace_bytes)),
        overheads.context_measured ? hb(double(overheads.context_bytes)) : std::string("-"),
        overheads.context_measured ? std::string() : ": " + overheads.note,
        profile_reserve_bytes ? hb(double(profile_reserve_bytes)) : std::string("-"));
  }
  os << fmt::format("budget: {} ({:.2f} s)\n", ok ? "PASS" : "FAIL", seconds);
  return os.str();
}

namespace {

BudgetReport measure_budget(const BudgetOptions& o) {
  FOXHUNT_CHECK(o.serving_batch >= 1, "budget", "serving batch: expected >= 1, got ",
                o.serving_batch);
  const auto t0 = std::chrono::steady_clock::now();
  const MemoryDevice dev = o.device.resolved();
  for (const auto& [m, p] : o.precision)
    FOXHUNT_CHECK(!dev.is_cuda() || p == models::Precision::kFp32, "budget", "precision ", m, "=",
                  p, " on ", dev.str(),
                  ": the INT8 TFT runs on the CPU only; expected fp32 on CUDA");
  FOXHUNT_CHECK(!dev.is_cuda() || cuda_memory_available(), "budget", "device ", o.device,
                ": no CUDA device is available (", cuda_stats_backend(), ")");
  auto targets = default_targets(dev);
  for (const auto& [name, bytes] : o.targets) targets[name] = bytes;
  BudgetReport rep;
  rep.device = dev;
  FOXHUNT_CHECK(o.budget.bytes > 0, "budget", "budget (", o.budget.source,
                "): expected > 0 bytes, got 0");
  rep.budget_bytes = o.budget.bytes;
  rep.budget_source = o.budget.source;
  rep.profile_reserve_bytes = o.budget.reserve_bytes;
  // CUDA: the card is capped at the budget for the whole run (the CPU ledger measures uncapped
  // and judges the figures instead, so an over-budget model is a row that fails, not an abort).
  std::optional<DeviceLimitGuard> cap;
  if (dev.is_cuda()) {
    cap.emplace(dev, rep.budget_bytes);
    rep.enforced_cap_bytes = rep.budget_bytes;
  }
  rep.headroom_required_bytes = o.headroom_bytes;
  rep.serving_batch = o.serving_batch;
  bool rows_ok = true;
  for (const auto& name : models::model_names()) {
    BudgetRow r;
    r.model = name;
    std::vector<std::int64_t> batches = {1};
    if (o.serving_batch != 1) batches.push_back(o.serving_batch);
    r.precision = o.precision.of(name);
    r.footprint = measure_inference_footprint(name, batches, 0, o.seed, {}, r.precision, o.device);
    std::uint64_t act = 0;
    for (const auto& run : r.footprint.runs) act = std::max(act, run.activation_bytes);
    r.memory_bytes = r.footprint.parameter_bytes + r.footprint.buffer_bytes + act;
    auto it = targets.find(name);
    r.target_bytes = it == targets.end() ? 0 : it->second;
    r.pct_of_budget = pct(r.memory_bytes, rep.budget_bytes);
    r.pct_of_target = pct(r.memory_bytes, r.target_bytes);
    r.within_target = r.target_bytes > 0 && r.memory_bytes <= r.target_bytes;
    r.within_budget = r.memory_bytes <= rep.budget_bytes;
    r.ok = r.within_target && r.within_budget;
    std::string why;
    if (r.target_bytes == 0) why = "no target";
    if (r.target_bytes > 0 && !r.within_target) why = "over target";
    if (!r.within_budget) why += std::string(why.empty() ? "" : ", ") + "over budget";
    r.status = why.empty() ? "PASS" : "FAIL: " + why;
    const auto claims = reference_claims();
    if (auto c = claims.find(name); c != claims.end()) {
      r.claimed_bytes = c->second;
      r.claimed_over_measured =
          r.memory_bytes ? static_cast<double>(c->second) / static_cast<double>(r.memory_bytes) : 0;
    }
    if (o.deployment_views) {
      TrainConfig tc;
      tc.batch = o.training_batch;
      tc.seed = o.seed;
      tc.device = o.device;
      r.training_peak_bytes = measure_training_footprint(name, tc).peak_bytes;
    }
    rows_ok = rows_ok && r.ok;
    rep.total_bytes += r.memory_bytes;
    rep.rows.push_back(std::move(r));
  }
  rep.total_pct_of_budget = pct(rep.total_bytes, rep.budget_bytes);
  rep.headroom_bytes =
      static_cast<std::int64_t>(rep.budget_bytes) - static_cast<std::int64_t>(rep.total_bytes);
  rep.total_within_budget = rep.total_bytes <= rep.budget_bytes;
  rep.headroom_ok = rep.headroom_bytes >= static_cast<std::int64_t>(rep.headroom_required_bytes);
  bool views_ok = true;
  if (o.deployment_views) {
    FOXHUNT_CHECK(o.training_batch >= 1, "budget", "training batch: expected >= 1, got ",
                  o.training_batch);
    rep.serving_concurrent_bytes =
        measure_concurrent_serving(o.serving_batch, o.seed, o.precision, dev);
    std::uint64_t train_peak = 0;
    std::string trainer;
    for (const auto& r : rep.rows)
      if (r.training_peak_bytes > train_peak) {
        train_peak = r.training_peak_bytes;
        trainer = r.model;
      }
    const std::string b = std::to_string(o.serving_batch), tb = std::to_string(o.training_batch);
    rep.views.push_back(make_view("serving",
                                  "the four models resident, batch-" + b +
                                      " forwards on four threads at once (measured peak)",
                                  rep.serving_concurrent_bytes, rep));
    rep.views.push_back(make_view(
        "training", "the largest training step: " + trainer + "'s trainer step, batch " + tb,
        train_peak, rep));
    rep.views.push_back(make_view("mixed", "serving + " + trainer + " training (batch " + tb + ")",
                                  rep.serving_concurrent_bytes + train_peak, rep));
    for (const auto& v : rep.views) views_ok = views_ok && v.ok;
  }
  // At idle, everything measured above freed: the cache left is the workspace, the rest of the
  // card's used memory is the context.
  rep.overheads = measure_device_overheads(dev);
  rep.ok = rows_ok && rep.total_within_budget && rep.headroom_ok && views_ok;
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return rep;
}

}  // namespace

BudgetReport validate_budget(const BudgetOptions& o) {
  // CUDA's allocator error past the cap, as the typed one.
  return translate_oom([&] { return measure_budget(o); });
}

}  // namespace foxhunt::plan
