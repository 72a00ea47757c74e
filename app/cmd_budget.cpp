#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/units.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/plan/budget.h"
#include "foxhunt/serving/desk_capacity.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::cli {
namespace {

// The flags bind the library's BudgetOptions directly: each default is declared once, there.
struct BudgetArgs {
  static constexpr const char* kHelp =
      "Memory budget validation: every model's measured footprint against its target, the device "
      "budget and the required headroom";
  plan::BudgetOptions o;
  bool no_views = false;
  BudgetFlags budget;
  double headroom_mib = static_cast<double>(plan::BudgetOptions{}.headroom_bytes) / kMiB;
  std::string targets;
  std::string precision;
  serving::DeskCapacityOptions desk;
  std::string bundles;
  bool json = false;
};

Registrar registered_budget = subcommand<BudgetArgs>(
    "budget", 45, [](CLI::App* sub, std::shared_ptr<BudgetArgs> a) -> Runner {
      a->budget.add(sub, memory::kReferenceProfile);
      add_defaulted(sub, "--headroom-mib", &a->headroom_mib,
                    "Free memory required after all models");
      sub->add_option("--targets", a->targets,
                      "JSON file of per-model targets: {\"targets_mib\": {\"dqn\": 150, ...}}");
      add_defaulted(sub, "--serving-batch", &a->o.serving_batch,
                    "Serving batch measured beside batch 1");
      add_seed_flag(sub, &a->o.seed, "Seed of the models and the synthetic batches");
      add_defaulted(sub, "--training-batch", &a->o.training_batch,
                    "Training batch of the training and mixed views")
          ->check(positive_number());
      sub->add_option("--precision", a->precision,
                      "Serving precision per model, e.g. tft=int8 (default fp32 for all)");
      add_device_flag(sub, &a->o.device,
                      "cpu (the ledger, uncapped) or cuda[:N] (the caching allocator, capped at "
                      "the budget; adds the workspace and context tags)");
      sub->add_flag("--no-views", a->no_views,
                    "Skip the serving / training / mixed deployment views (per-model rows only)");
      sub->add_option("--instruments", a->desk.instruments,
                      "Also measure a desk serving this many instruments (state plus the "
                      "batched forwards, CPU ledger) and the largest universe that fits, "
                      "verified under the cap");
      sub->add_flag("--exhaustive", a->desk.exhaustive,
                    "With --instruments: warm every instrument of every desk up (minutes for "
                    "10,000s) instead of fitting the bytes from small desks and verifying the "
                    "answer under the cap (seconds)");
      sub->add_option("--bundles", a->bundles,
                      "With --instruments: the desk's bundles (foxhunt train all --out DIR); "
                      "default: untrained default models");
      sub->add_flag("--json", a->json, "Print JSON only");
      return [a, sub]() {
        plan::BudgetOptions o = a->o;
        o.deployment_views = !a->no_views;
        o.budget = a->budget.resolve_required("budget");
        o.headroom_bytes = mib_to_bytes(a->headroom_mib, "budget", "--headroom-mib", true);
        if (!a->targets.empty()) o.targets = plan::load_targets(a->targets, o.device);
        if (!a->precision.empty()) o.precision = plan::parse_precisions(a->precision);
        const bool desk = sub->count("--instruments") > 0;
        FOXHUNT_CHECK(desk || a->bundles.empty(), "budget",
                      "--bundles: only used with --instruments");
        FOXHUNT_CHECK(desk || !a->desk.exhaustive, "budget",
                      "--exhaustive: only used with --instruments");
        FOXHUNT_CHECK(!desk || !o.device.is_cuda(), "budget",
                      "--instruments: the desk is measured on the CPU ledger; got --device ",
                      o.device.str());
        auto dopt = a->desk;
        dopt.budget = o.budget;
        dopt.headroom_bytes = o.headroom_bytes;
        dopt.seed = o.seed;
        if (desk) dopt.probe_instruments = std::min<int64_t>(8, dopt.instruments / 2);
        dopt.progress = [](const std::string& m) { std::cerr << "foxhunt: " << m << std::endl; };
        const auto rep = plan::validate_budget(o);
        std::optional<serving::DeskCapacity> cap;
        if (desk)
          cap = serving::measure_desk_capacity(a->bundles.empty()
                                                   ? serving::default_bundles(o.seed)
                                                   : serving::load_ensemble_bundles(a->bundles),
                                               dopt);
        if (a->json) {
          auto j = rep.to_json();
          if (cap) j["desk"] = cap->to_json();
          print_json(j.dump(2));
        } else {
          std::cout << rep.table();
          if (cap) std::cout << cap->table();
        }
        return rep.ok && (!cap || cap->ok) ? 0 : 1;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
