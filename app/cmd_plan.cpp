#include <cmath>
#include <iostream>

#include "command.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/plan/planner.h"

namespace foxhunt::cli {
namespace {

// The flags bind the library's PlanOptions directly: each default is declared once, there.
struct PlanArgs {
  static constexpr const char* kHelp =
      "Largest training batch that fits a memory budget: probe steps, a linear fit, then a real "
      "training step verified under the enforced cap";
  plan::PlanOptions o;
  BudgetFlags budget;
  std::string optimizer = plan::to_string(plan::TrainConfig{}.optimizer);
  std::string step = plan::to_string(plan::TrainConfig{}.step);
  std::string trainer_options;
  bool no_verify = !plan::PlanOptions{}.verify;
  bool json = false;
};

Registrar registered_plan =
    subcommand<PlanArgs>("plan", 40, [](CLI::App* sub, std::shared_ptr<PlanArgs> a) -> Runner {
      sub->add_option("model", a->o.model, "Model name (see `foxhunt models`)")->required();
      a->budget.add(sub, memory::kReferenceProfile);
      add_defaulted(sub, "--step", &a->step,
                    "Step measured: trainer (the trainer's own update: DQN target network and "
                    "replay buffer, PPO rollout, forecast step) or synthetic (example batch + "
                    "Model::loss, the first planner's stand-in)");
      sub->add_option("--trainer-options", a->trainer_options,
                      "JSON overrides of the trainer's options (--step trainer), e.g. "
                      "'{\"buffer_size\": 20000}'");
      add_defaulted(sub, "--optimizer", &a->optimizer,
                    "adam, adamw, sgd or sgd-momentum (others than adam need --step synthetic)");
      add_device_flag(sub, &a->o.train.device,
                      "cpu (the ledger, the card emulated by its usable bytes) or cuda[:N] (the "
                      "caching allocator, capped by its memory fraction)");
      add_defaulted(sub, "--seq-len", &a->o.train.seq_len,
                    "Window length (0 = model default; ignored by models without a time axis)");
      add_defaulted(sub, "--margin", &a->o.margin,
                    "Fraction of the budget kept free by the prediction");
      sub->add_flag("--pow2", a->o.pow2, "Round the batch down to a power of two");
      add_defaulted(sub, "--min-batch", &a->o.min_batch, "Smallest batch allowed");
      add_defaulted(sub, "--max-batch", &a->o.max_batch, "Largest batch allowed (clamp)");
      add_seed_flag(sub, &a->o.train.seed, "Seed of the model and the synthetic batches");
      sub->add_flag(
          "--no-verify", a->no_verify,
          "Skip the verification step under the cap (the plan is then a prediction only)");
      sub->add_flag("--json", a->json, "Print JSON only");
      return [a]() {
        plan::PlanOptions o = a->o;
        o.train.optimizer = plan::parse_optimizer(a->optimizer);
        o.train.step = plan::parse_step_kind(a->step);
        if (!a->trainer_options.empty()) {
          FOXHUNT_CHECK(o.train.step == plan::StepKind::kTrainer, "plan",
                        "--trainer-options applies to --step trainer, got --step ", a->step);
          o.train.trainer_options =
              parse_json_flag(a->trainer_options, "--trainer-options", "plan");
        }
        o.verify = !a->no_verify;
        o.budget = a->budget.resolve_required("plan");
        try {
          const auto r = plan::plan_batch(o);
          if (a->json) {
            auto j = r.to_json();
            j["ok"] = true;
            print_json(j.dump(2));
          } else {
            std::cout << r.report();
          }
          return 0;
        } catch (const plan::PlanError& e) {
          if (a->json) {
            print_json(nlohmann::json{{"ok", false},
                                      {"model", o.model},
                                      {"budget_bytes", o.budget.bytes},
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
