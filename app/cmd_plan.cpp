#include <cmath>
#include <iostream>

#include "command.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/memory/planner.h"

namespace foxhunt::cli {
namespace {

struct PlanArgs {
  std::string model;
  std::string profile = "rtx3050ti-4gb";
  std::string profiles_file;
  double budget_mib = 0;
  std::string optimizer = "adam";
  std::int64_t seq_len = 0;
  double margin = 0.1;
  bool pow2 = false;
  std::int64_t min_batch = 1;
  std::int64_t max_batch = 65536;
  std::uint64_t seed = 42;
  bool no_verify = false;
  bool json = false;
};

Registrar reg("plan", 40, [](CLI::App& app) -> Runner {
  auto a = std::make_shared<PlanArgs>();
  auto* sub = app.add_subcommand(
      "plan",
      "Largest training batch that fits a memory budget: probe steps, a linear fit, then a real "
      "training step verified under the enforced cap");
  sub->add_option("model", a->model, "Model name (see `foxhunt models`)")->required();
  auto* prof = sub->add_option("--device-profile", a->profile,
                               "Device profile whose usable bytes are the budget")
                   ->capture_default_str();
  sub->add_option("--profiles", a->profiles_file, "JSON file with custom device profiles to add");
  auto* budget_opt =
      sub->add_option("--budget-mib", a->budget_mib, "Budget in MiB (overrides the profile)")
          ->excludes(prof);
  sub->add_option("--optimizer", a->optimizer, "adam, adamw, sgd or sgd-momentum")
      ->capture_default_str();
  sub->add_option("--seq-len", a->seq_len,
                  "Window length (0 = model default; ignored by models without a time axis)")
      ->capture_default_str();
  sub->add_option("--margin", a->margin, "Fraction of the budget kept free by the prediction")
      ->capture_default_str();
  sub->add_flag("--pow2", a->pow2, "Round the batch down to a power of two");
  sub->add_option("--min-batch", a->min_batch, "Smallest batch allowed")->capture_default_str();
  sub->add_option("--max-batch", a->max_batch, "Largest batch allowed (clamp)")
      ->capture_default_str();
  sub->add_option("--seed", a->seed, "Seed of the model and the synthetic batches")
      ->capture_default_str();
  sub->add_flag("--no-verify", a->no_verify,
                "Skip the verification step under the cap (the plan is then a prediction only)");
  sub->add_flag("--json", a->json, "Print JSON only");
  return [a, budget_opt]() {
    memory::PlanOptions o;
    o.model = a->model;
    o.train.optimizer = memory::parse_optimizer(a->optimizer);
    o.train.seq_len = a->seq_len;
    o.train.seed = a->seed;
    o.margin = a->margin;
    o.pow2 = a->pow2;
    o.min_batch = a->min_batch;
    o.max_batch = a->max_batch;
    o.verify = !a->no_verify;
    if (!a->profiles_file.empty())
      memory::register_profiles(memory::load_profiles(a->profiles_file));
    if (budget_opt->count() > 0) {
      FOXHUNT_CHECK(std::isfinite(a->budget_mib) && a->budget_mib > 0, "plan",
                    "--budget-mib: expected a positive number, got ", a->budget_mib);
      o.budget_bytes = static_cast<std::uint64_t>(std::llround(a->budget_mib * 1048576.0));
      FOXHUNT_CHECK(o.budget_bytes > 0, "plan", "--budget-mib: expected at least 1 byte, got ",
                    a->budget_mib, " MiB");
      o.budget_source = "--budget-mib";
    } else {
      const auto p = memory::find_profile(a->profile);
      o.budget_bytes = p.usable_bytes();
      o.budget_source = p.name + " usable";
    }
    try {
      const auto r = memory::plan_batch(o);
      if (a->json) {
        auto j = r.to_json();
        j["ok"] = true;
        print_json(j.dump(2));
      } else {
        std::cout << r.report();
      }
      return 0;
    } catch (const memory::PlanError& e) {
      if (a->json) {
        print_json(nlohmann::json{{"ok", false},
                                  {"model", o.model},
                                  {"budget_bytes", o.budget_bytes},
                                  {"error", e.what()},
                                  {"tag", e.tag()},
                                  {"tag_bytes", e.tag_bytes()},
                                  {"needed_bytes", e.requested()}}
                       .dump(2));
      }
      std::cerr << "foxhunt: " << e.what() << std::endl;
      return 1;
    }
  };
});

}  // namespace
}  // namespace foxhunt::cli
