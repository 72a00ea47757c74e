#include <cmath>
#include <iostream>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/memory/budget.h"
#include "foxhunt/memory/device_profile.h"

namespace foxhunt::cli {
namespace {

struct BudgetArgs {
  std::string profile = "rtx3050ti-4gb";
  std::string profiles_file;
  double budget_mib = 0;
  double headroom_mib = 500;
  std::string targets;
  std::int64_t serving_batch = 64;
  std::uint64_t seed = 42;
  bool json = false;
};

std::uint64_t mib_to_bytes(double mib, const char* flag, bool allow_zero) {
  FOXHUNT_CHECK(std::isfinite(mib) && (allow_zero ? mib >= 0 : mib > 0), "budget", flag,
                ": expected a ", allow_zero ? "non-negative" : "positive", " number, got ", mib);
  return static_cast<std::uint64_t>(std::llround(mib * 1048576.0));
}

Registrar reg("budget", 45, [](CLI::App& app) -> Runner {
  auto a = std::make_shared<BudgetArgs>();
  auto* sub = app.add_subcommand(
      "budget",
      "Memory budget validation: every model's measured footprint against its target, the device "
      "budget and the required headroom");
  auto* prof = sub->add_option("--device-profile", a->profile,
                               "Device profile whose usable bytes are the budget")
                   ->capture_default_str();
  sub->add_option("--profiles", a->profiles_file, "JSON file with custom device profiles to add");
  auto* budget_opt =
      sub->add_option("--budget-mib", a->budget_mib, "Budget in MiB (overrides the profile)")
          ->excludes(prof);
  sub->add_option("--headroom-mib", a->headroom_mib, "Free memory required after all models")
      ->capture_default_str();
  sub->add_option("--targets", a->targets,
                  "JSON file of per-model targets: {\"targets_mib\": {\"dqn\": 150, ...}}");
  sub->add_option("--serving-batch", a->serving_batch, "Serving batch measured beside batch 1")
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "Seed of the models and the synthetic batches")
      ->capture_default_str();
  sub->add_flag("--json", a->json, "Print JSON only");
  return [a, budget_opt]() {
    memory::BudgetOptions o;
    o.device_profile = a->profile;
    o.serving_batch = a->serving_batch;
    o.seed = a->seed;
    if (!a->profiles_file.empty())
      memory::register_profiles(memory::load_profiles(a->profiles_file));
    if (budget_opt->count() > 0) {
      o.budget_bytes = mib_to_bytes(a->budget_mib, "--budget-mib", false);
      FOXHUNT_CHECK(o.budget_bytes > 0, "budget", "--budget-mib: expected at least 1 byte, got ",
                    a->budget_mib, " MiB");
    }
    o.headroom_bytes = mib_to_bytes(a->headroom_mib, "--headroom-mib", true);
    if (!a->targets.empty()) o.targets = memory::load_targets(a->targets);
    const auto rep = memory::validate_budget(o);
    if (a->json)
      print_json(rep.to_json().dump(2));
    else
      std::cout << rep.table();
    return rep.ok ? 0 : 1;
  };
});

}  // namespace
}  // namespace foxhunt::cli
