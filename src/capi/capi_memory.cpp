// The C ABI's memory questions (include/foxhunt/foxhunt.h): `foxhunt plan --json` and
// `foxhunt budget --json [--instruments N]` as calls that take a JSON request and return the
// library's JSON result; the request's keys are the CLI's flags, bound to the same option structs.
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "foxhunt/core/device.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/units.h"
#include "foxhunt/foxhunt.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/memory/runtime_init.h"
#include "foxhunt/models/json_get.h"
#include "foxhunt/plan/budget.h"
#include "foxhunt/plan/footprint.h"
#include "foxhunt/plan/planner.h"
#include "foxhunt/serving/desk_capacity.h"
#include "foxhunt/serving/serving.h"
#include "guard.h"

namespace foxhunt::capi {
namespace {

constexpr const char* kPlanFn = "foxhunt_plan_json";
constexpr const char* kBudgetFn = "foxhunt_budget_json";

// The request object; InputError naming `function` for NULL, malformed JSON or a non-object.
nlohmann::json parse_request(const char* text, const char* function) {
  check_not_null(text, function, "request_json", "a JSON object (\"{}\" for the defaults)");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(function, std::string("request_json: expected a JSON object, got text that "
                                           "is not valid JSON (") +
                                   e.what() + ")");
  }
  FOXHUNT_CHECK(j.is_object(), function, "request_json: expected a JSON object, got ",
                j.type_name());
  return j;
}

// The budget a request names: "budget_mib" (> 0), else "device_profile", else none.
std::optional<memory::Budget> request_budget(const nlohmann::json& j, const char* function) {
  if (j.contains("budget_mib")) {
    double mib = 0;
    models::json_get(j, function, "budget_mib", mib);
    return memory::Budget::of_bytes(mib_to_bytes(mib, function, "budget_mib"), "budget_mib");
  }
  if (j.contains("device_profile")) {
    std::string profile;
    models::json_get(j, function, "device_profile", profile);
    return memory::Budget::of_profile(profile);
  }
  return std::nullopt;
}

Device request_device(const nlohmann::json& j, const char* function) {
  std::string device = "cpu";
  models::json_get(j, function, "device", device);
  return Device::parse(device, function);
}

nlohmann::json plan_request(const nlohmann::json& j) {
  models::check_known_keys(
      j, kPlanFn,
      {"model", "device", "device_profile", "budget_mib", "seq_len", "seed", "margin", "pow2",
       "min_batch", "max_batch", "step", "optimizer", "trainer_options", "verify"});
  FOXHUNT_CHECK(j.contains("model"), kPlanFn,
                "request_json: expected a \"model\" key (a name `foxhunt models` lists), got ",
                j.dump());
  plan::PlanOptions o;
  models::json_get(j, kPlanFn, "model", o.model);
  o.train.device = request_device(j, kPlanFn);
  o.budget =
      request_budget(j, kPlanFn).value_or(memory::Budget::of_profile(memory::kReferenceProfile));
  models::json_get(j, kPlanFn, "seq_len", o.train.seq_len);
  models::json_get(j, kPlanFn, "seed", o.train.seed);
  models::json_get(j, kPlanFn, "margin", o.margin);
  models::json_get(j, kPlanFn, "pow2", o.pow2);
  models::json_get(j, kPlanFn, "min_batch", o.min_batch);
  models::json_get(j, kPlanFn, "max_batch", o.max_batch);
  models::json_get(j, kPlanFn, "verify", o.verify);
  std::string step = plan::to_string(o.train.step), optimizer = plan::to_string(o.train.optimizer);
  models::json_get(j, kPlanFn, "step", step);
  models::json_get(j, kPlanFn, "optimizer", optimizer);
  o.train.step = plan::parse_step_kind(step);
  o.train.optimizer = plan::parse_optimizer(optimizer);
  if (j.contains("trainer_options")) {
    const auto& t = j["trainer_options"];
    FOXHUNT_CHECK(t.is_object(), kPlanFn, "option 'trainer_options': expected a JSON object, got ",
                  t.type_name());
    FOXHUNT_CHECK(o.train.step == plan::StepKind::kTrainer, kPlanFn,
                  "option 'trainer_options' applies to \"step\": \"trainer\", got \"step\": \"",
                  step, "\"");
    o.train.trainer_options = t;
  }
  auto out = plan::plan_batch(o).to_json();
  out["ok"] = true;
  return out;
}

nlohmann::json budget_request(const nlohmann::json& j) {
  models::check_known_keys(j, kBudgetFn,
                           {"device", "device_profile", "budget_mib", "headroom_mib", "views",
                            "serving_batch", "training_batch", "seed", "precision", "targets_mib",
                            "targets_bytes", "instruments", "bundles", "exhaustive"});
  plan::BudgetOptions o;
  o.device = request_device(j, kBudgetFn);
  if (auto b = request_budget(j, kBudgetFn)) o.budget = *b;
  if (j.contains("headroom_mib")) {
    double mib = 0;
    models::json_get(j, kBudgetFn, "headroom_mib", mib);
    o.headroom_bytes = mib_to_bytes(mib, kBudgetFn, "headroom_mib", true);
  }
  models::json_get(j, kBudgetFn, "views", o.deployment_views);
  models::json_get(j, kBudgetFn, "serving_batch", o.serving_batch);
  models::json_get(j, kBudgetFn, "training_batch", o.training_batch);
  models::json_get(j, kBudgetFn, "seed", o.seed);
  if (j.contains("precision")) {
    std::string text;
    models::json_get(j, kBudgetFn, "precision", text);
    o.precision = plan::parse_precisions(text);
  }
  if (j.contains("targets_mib") || j.contains("targets_bytes")) {
    nlohmann::json doc = nlohmann::json::object();
    for (const char* k : {"targets_mib", "targets_bytes"})
      if (j.contains(k)) doc[k] = j[k];
    o.targets = plan::targets_from_json(doc, std::string(kBudgetFn) + " request",
                                        plan::default_targets(o.device));
  }
  const bool desk = j.contains("instruments");
  std::string bundles;
  models::json_get(j, kBudgetFn, "bundles", bundles);
  FOXHUNT_CHECK(desk || bundles.empty(), kBudgetFn,
                "option 'bundles': only used with \"instruments\" (the desk's bundles)");
  FOXHUNT_CHECK(!desk || !o.device.is_cuda(), kBudgetFn,
                "option 'instruments': the desk is measured on the CPU ledger; got \"device\": \"",
                o.device.str(), "\"");
  // As `foxhunt budget --instruments`: the models' rows first, then the desk.
  auto out = plan::validate_budget(o).to_json();
  if (desk) {
    serving::DeskCapacityOptions dopt;
    models::json_get(j, kBudgetFn, "instruments", dopt.instruments);
    dopt.budget = o.budget;
    dopt.headroom_bytes = o.headroom_bytes;
    dopt.seed = o.seed;
    dopt.probe_instruments = std::min<int64_t>(8, dopt.instruments / 2);
    models::json_get(j, kBudgetFn, "exhaustive", dopt.exhaustive);
    out["desk"] =
        serving::measure_desk_capacity(bundles.empty() ? serving::default_bundles(o.seed)
                                                       : serving::load_ensemble_bundles(bundles),
                                       dopt)
            .to_json();
  }
  return out;
}

// One JSON entry point: `request_json` parsed, answered by `answer`, the result copied to *out
// (nullptr on failure), every error a status naming `function`.
foxhunt_status json_call(const char* request_json, char** out, const char* function,
                         nlohmann::json (*answer)(const nlohmann::json&)) noexcept {
  return guarded([&] {
    check_not_null(out, function, "out", "where to write the result");
    *out = nullptr;
    runtime_init();
    *out = copy_out(answer(parse_request(request_json, function)).dump());
  });
}

}  // namespace
}  // namespace foxhunt::capi

extern "C" {

FOXHUNT_API foxhunt_status foxhunt_plan_json(const char* request_json, char** out) {
  using namespace foxhunt::capi;
  return json_call(request_json, out, kPlanFn, plan_request);
}

FOXHUNT_API foxhunt_status foxhunt_budget_json(const char* request_json, char** out) {
  using namespace foxhunt::capi;
  return json_call(request_json, out, kBudgetFn, budget_request);
}

}  // extern "C"
