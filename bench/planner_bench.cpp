// Wall time of the batch planner per model: probe steps, fit, and the verification under the cap.
// Two budgets: the rtx3050ti-4gb profile (what `foxhunt plan` and `foxhunt validate` run) and
// 64 MiB (small batches: the probe-and-fit cost with a cheap verification).
// Run: ./build/planner_bench [--benchmark_filter=tft]
#include <benchmark/benchmark.h>

#include "foxhunt/memory/device_profile.h"
#include "foxhunt/models/model.h"
#include "foxhunt/plan/planner.h"

#include "bench_main.h"

namespace {

void BM_Plan(benchmark::State& state, const std::string& name, std::uint64_t budget) {
  foxhunt::plan::PlanOptions o;
  o.model = name;
  o.budget = foxhunt::memory::Budget::of_bytes(budget);
  foxhunt::plan::PlanResult r;
  for (auto _ : state) {
    r = foxhunt::plan::plan_batch(o);
    benchmark::DoNotOptimize(r.chosen_batch);
  }
  state.counters["batch"] = static_cast<double>(r.chosen_batch);
  state.counters["fit_err_pct"] = r.predicted_error_pct();
  state.counters["ref_err_pct"] = r.reference_error_pct();
  state.counters["verified_MiB"] = static_cast<double>(r.verified_peak_bytes) / (1 << 20);
}

int register_all() {
  const auto usable = foxhunt::memory::find_profile("rtx3050ti-4gb").usable_bytes();
  for (const auto& name : foxhunt::models::model_names()) {
    benchmark::RegisterBenchmark(("plan/" + name + "/rtx3050ti-4gb").c_str(), BM_Plan, name, usable)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("plan/" + name + "/64MiB").c_str(), BM_Plan, name,
                                 std::uint64_t{64} << 20)
        ->Iterations(3)
        ->Unit(benchmark::kMillisecond);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return foxhunt::bench::run_benchmarks(argc, argv, [] { register_all(); });
}
