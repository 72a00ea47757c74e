// The library from a user's own C++ code: the typed boundaries (Device, Budget), the batch
// planner, and a bars CSV streamed through trained bundles.
//   library_example MODEL [DEVICE [BUNDLES_DIR BARS_CSV]]
//     MODEL        dqn, ppo, mamba2 or tft: plans its largest training batch on the reference card
//     DEVICE       cpu (default), cuda or cuda:N
//     BUNDLES_DIR  with BARS_CSV: streams the bars through the ensemble (foxhunt train all --out)
// Exit codes as the CLI's: 2 for bad input, 1 for a failed check, 0 otherwise.
#include <fstream>
#include <iostream>

#include "foxhunt/core/device.h"
#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/memory/device_profile.h"
#include "foxhunt/memory/runtime_init.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/planner.h"
#include "foxhunt/serving/bar_stream.h"
#include "foxhunt/serving/serving.h"

int main(int argc, char** argv) {
  using namespace foxhunt;
  runtime_init();  // before any tensor: the accounting allocator the budgets are measured by
  try {
    if (argc != 2 && argc != 3 && argc != 5)
      throw InputError("example", "usage: library_example MODEL [DEVICE [BUNDLES_DIR BARS_CSV]]");
    const Device device = argc >= 3 ? Device::parse(argv[2], "example") : Device::cpu();

    plan::PlanOptions o;
    o.model = argv[1];
    o.train.device = device;
    o.budget = memory::Budget::of_profile(memory::kReferenceProfile);
    o.max_batch = 4096;
    const plan::PlanResult plan = plan::plan_batch(o);
    std::cout << "largest verified batch of " << o.model << " on " << device << " within "
              << o.budget.source << ": " << plan.chosen_batch
              << (plan.verified ? " (verified)" : " (not verified)") << "\n";

    if (argc == 5) {
      auto ensemble = serving::Ensemble::load(argv[3], {}, models::to_torch(device));
      std::ifstream bars(argv[4]);
      if (!bars) throw InputError("example", std::string("cannot open '") + argv[4] + "'");
      serving::BarStreamOptions so;
      so.source = argv[4];
      const auto stats = serving::stream_bars(
          ensemble, bars, so, [](const data::Bar&, const serving::BarDecision& d) {
            std::cout << data::format_timestamp(d.timestamp) << " decision " << d.decision << "\n";
          });
      std::cout << stats.bars << " bars, p50 " << stats.latency_us.p50 << " us\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "library_example: " << e.what() << "\n";
    return exit_code_for(e);
  }
}
