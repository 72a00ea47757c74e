// The desk's capacity (serving/desk_capacity.h, `foxhunt budget --instruments`): fitted from small
// desks whose instruments beyond a few are copies (Desk::replicate), verified under the enforced
// cap, and against the exhaustive measurement that warms every instrument up; Desk::replicate
// itself (the copies are warm, declared to the ledger, refused over the cap).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <thread>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/core/units.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/desk_capacity.h"
#include "foxhunt/serving/universe.h"
#include "test_util.h"

namespace foxhunt::serving {
namespace {

using foxhunt::testing::run_cli;

class DeskCapacityTest : public foxhunt::testing::SeededTest {};

uint64_t capacity_weights(const std::vector<Bundle>& bundles) {
  uint64_t weights = 0;
  for (const auto& b : bundles)
    weights += static_cast<uint64_t>(b.model->parameter_bytes() + b.model->buffer_bytes());
  return weights;
}

// The options of the capacity tests: a 48 MiB room beside the weights.
DeskCapacityOptions capacity_options(uint64_t weights) {
  DeskCapacityOptions o;
  o.budget = memory::Budget::of_bytes(weights + 48 * kMiB, "test");
  o.headroom_bytes = 4 * kMiB;
  o.instruments = 16;
  o.probe_instruments = 4;
  return o;
}

TEST_F(DeskCapacityTest, CapacityIsMeasuredAndTheLargestUniverseIsVerifiedUnderTheCap) {
  const auto bundles = default_bundles(7);
  const uint64_t weights = capacity_weights(bundles);
  DeskCapacityOptions o = capacity_options(weights);
  const auto c = measure_desk_capacity(bundles, o);
  EXPECT_EQ(c.method, "fit");
  EXPECT_EQ(c.weights_bytes, weights);
  EXPECT_EQ(c.asked.instruments, 16);
  EXPECT_FALSE(c.asked.refused);
  EXPECT_EQ(c.asked.distinct, 8);  // 8 warmed up, 8 copies
  EXPECT_EQ(c.asked.state_bytes, 16 * c.state_bytes_per_instrument);
  EXPECT_GT(c.asked.forward_peak_bytes, 0u);
  EXPECT_GT(c.derived_bytes, 0u);  // the kernels' transposed weights, kept after the first bar
  EXPECT_EQ(c.asked.bytes,
            weights + c.derived_bytes + c.asked.state_bytes + c.asked.forward_peak_bytes);
  EXPECT_GT(c.bytes_per_instrument, static_cast<double>(c.state_bytes_per_instrument));
  EXPECT_TRUE(c.asked_fits);
  // The fitted desks: 1, 2, 4, 8, then the ladder x4 up to an eighth of the maximum.
  ASSERT_GE(c.fit_runs.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(c.fit_runs[i].instruments, int64_t{1} << i);
  for (size_t i = 4; i < c.fit_runs.size(); ++i)
    EXPECT_EQ(c.fit_runs[i].instruments, 4 * c.fit_runs[i - 1].instruments);
  EXPECT_GE(c.fit_runs.back().instruments * 8, c.max_instruments);
  ASSERT_GT(c.max_instruments, 16);
  EXPECT_FALSE(c.verified.refused);
  EXPECT_EQ(c.verified.instruments, c.max_instruments);
  EXPECT_EQ(c.verified.distinct, 8);
  EXPECT_LE(c.verified.bytes + o.headroom_bytes, o.budget.bytes);
  // The line at the maximum (to a byte or two: the compiler may fuse the multiply-add).
  EXPECT_NEAR(static_cast<double>(c.predicted_bytes),
              c.fixed_bytes + c.bytes_per_instrument * static_cast<double>(c.max_instruments), 2.0);
  EXPECT_TRUE(c.ok);
  std::printf(
      "[desk] capacity in %llu MiB: %lld instruments (%.0f B each, %lld attempts, "
      "predicted %+.1f%%)\n",
      static_cast<unsigned long long>(o.budget.bytes / kMiB),
      static_cast<long long>(c.max_instruments), c.bytes_per_instrument,
      static_cast<long long>(c.verify_attempts), c.predicted_error_pct);
  // The verification means something: twice the universe, every instrument warmed up, is refused
  // under the same cap.
  {
    memory::LimitGuard cap(memory::live_bytes() + memory::external_bytes() +
                           (o.budget.bytes - o.headroom_bytes - weights));
    EXPECT_THROW(
        {
          Desk desk(bundles);
          SyntheticUniverse u(7, 2 * c.max_instruments);
          for (int64_t i = 0; i < desk.warmup_bars() + 2; ++i) {
            auto bars = u.next();
            desk.on_timestamp(u.timestamp(), bars);
          }
        },
        OutOfMemoryError);
  }
  // A universe that does not fit is reported as such (exit 1 from the CLI), not refused.
  o.budget = memory::Budget::of_bytes(weights + 3 * kMiB, "tiny");
  o.headroom_bytes = 1 * kMiB;
  const auto small = measure_desk_capacity(bundles, o);
  EXPECT_FALSE(small.asked_fits);
  EXPECT_TRUE(small.asked.refused);
  EXPECT_FALSE(small.ok);
  EXPECT_LT(small.max_instruments, 16);
  EXPECT_GT(small.asked_predicted_bytes + o.headroom_bytes, o.budget.bytes);
  // Bad options.
  o.instruments = 1;
  EXPECT_THROW(measure_desk_capacity(bundles, o), InputError);
  o.instruments = 16;
  o.fit_instruments = {0, 4};
  EXPECT_THROW(measure_desk_capacity(bundles, o), InputError);
  o.fit_instruments = {1, 2};
  o.distinct_instruments = 0;
  EXPECT_THROW(measure_desk_capacity(bundles, o), InputError);
  o.distinct_instruments = 8;
  o.headroom_bytes = o.budget.bytes;
  EXPECT_THROW(measure_desk_capacity(bundles, o), InputError);
}

// The same bytes on a loaded machine as on an idle one: the models are measured one by one and
// their concurrent overlap is the sum of their own peaks, not what the scheduler happened to
// overlap (a concurrent measurement moved the line by 20% when the CPUs were busy).
TEST_F(DeskCapacityTest, TheBytesDoNotDependOnTheLoad) {
  const auto bundles = default_bundles(7);
  const DeskCapacityOptions o = capacity_options(capacity_weights(bundles));
  const auto idle = measure_desk_capacity(bundles, o);
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int k = 0; k < 3; ++k)
    spinners.emplace_back([&] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x + 1;
    });
  const auto loaded = measure_desk_capacity(bundles, o);
  stop = true;
  for (auto& t : spinners) t.join();
  ASSERT_EQ(idle.fit_runs.size(), loaded.fit_runs.size());
  for (size_t i = 0; i < idle.fit_runs.size(); ++i)
    EXPECT_EQ(idle.fit_runs[i].bytes, loaded.fit_runs[i].bytes) << idle.fit_runs[i].instruments;
  EXPECT_EQ(idle.asked.bytes, loaded.asked.bytes);
  EXPECT_EQ(idle.max_instruments, loaded.max_instruments);
  EXPECT_EQ(idle.predicted_error_pct, loaded.predicted_error_pct);
  // Four models: the overlap is the three smaller transient peaks, inside the forwards' peak.
  EXPECT_GT(idle.asked.overlap_bytes, 0u);
  EXPECT_LT(idle.asked.overlap_bytes, idle.asked.forward_peak_bytes);
  // A concurrent desk of the asked universe stays within the measured forwards' peak.
  memory::reset_peak();
  const uint64_t live0 = memory::live_bytes();
  {
    Desk desk(bundles);
    SyntheticUniverse u(o.seed, o.instruments);
    for (int64_t i = 0; i < desk.warmup_bars() + o.timestamps; ++i) {
      auto bars = u.next();
      desk.on_timestamp(u.timestamp(), bars);
    }
  }
  EXPECT_LE(memory::peak_bytes() - live0, idle.asked.forward_peak_bytes);
}

// The fit against the full measurement (every instrument of every desk warmed up bar by bar):
// the same maximum within 20%, both verified under the cap, and the fitted line within 20% of
// the verified bytes.
TEST_F(DeskCapacityTest, TheFitAgreesWithTheExhaustiveMeasurement) {
  const auto bundles = default_bundles(7);
  DeskCapacityOptions o = capacity_options(capacity_weights(bundles));
  const auto fit = measure_desk_capacity(bundles, o);
  o.exhaustive = true;
  const auto full = measure_desk_capacity(bundles, o);
  EXPECT_EQ(full.method, "exhaustive");
  EXPECT_TRUE(full.fit_runs.empty());
  EXPECT_EQ(full.probe.instruments, 4);
  EXPECT_EQ(full.asked.distinct, 16);
  ASSERT_TRUE(fit.ok);
  ASSERT_TRUE(full.ok);
  EXPECT_EQ(full.verified.distinct, full.max_instruments);
  EXPECT_FALSE(full.verified.refused);
  EXPECT_NEAR(static_cast<double>(fit.max_instruments), static_cast<double>(full.max_instruments),
              0.2 * static_cast<double>(full.max_instruments));
  EXPECT_LT(std::abs(fit.predicted_error_pct), 20.0);
  // The state is the same per instrument, copied or warmed up.
  EXPECT_EQ(fit.state_bytes_per_instrument, full.state_bytes_per_instrument);
  std::printf("[desk] fit: %lld instruments in %.1f s (line %+.1f%%); exhaustive: %lld in %.1f s\n",
              static_cast<long long>(fit.max_instruments), fit.seconds, fit.predicted_error_pct,
              static_cast<long long>(full.max_instruments), full.seconds);
}

TEST_F(DeskCapacityTest, ReplicatedInstrumentsAreWarmDeclaredAndCapped) {
  memory::install_ledger();
  const auto bundles = default_bundles(7);
  Desk desk(bundles);
  SyntheticUniverse u(7, 4);
  for (int64_t i = 0; i < desk.warmup_bars(); ++i) {
    auto bars = u.next(1);
    ASSERT_EQ(bars.size(), 1u);
    desk.on_timestamp(u.timestamp(), bars);
  }
  ASSERT_EQ(desk.instruments(), 1);
  const std::string& src = u.symbol(0);
  const uint64_t one = desk.state_bytes();
  const uint64_t external0 = memory::external_bytes();
  desk.replicate(src, {u.symbol(1), u.symbol(2), u.symbol(3)});
  EXPECT_EQ(desk.instruments(), 4);
  EXPECT_EQ(desk.state_bytes(), 4 * one);
  EXPECT_EQ(memory::external_bytes() - external0, 3 * one);
  for (int64_t k = 1; k < 4; ++k) {
    EXPECT_EQ(desk.bars_seen(u.symbol(k)), desk.bars_seen(src));
    EXPECT_EQ(desk.position(u.symbol(k)), desk.position(src));
  }
  // The copies hold the source's state: given the source's bar, every model is ready on them and
  // gives the source's outputs (a row of a batch does not depend on the others).
  auto bars = u.next();
  ASSERT_EQ(bars.size(), 4u);
  for (size_t k = 1; k < bars.size(); ++k) bars[k].bar = bars[0].bar;
  const auto out = desk.on_timestamp(u.timestamp(), bars);
  ASSERT_EQ(out.size(), 4u);
  for (size_t k = 1; k < out.size(); ++k) {
    ASSERT_EQ(out[k].decision.signals.size(), out[0].decision.signals.size());
    for (size_t m = 0; m < out[k].decision.signals.size(); ++m) {
      const auto& a = out[0].decision.signals[m];
      const auto& b = out[k].decision.signals[m];
      EXPECT_TRUE(b.ready) << out[k].symbol << " " << b.model;
      ASSERT_EQ(b.raw.size(), a.raw.size()) << b.model;
      for (size_t i = 0; i < a.raw.size(); ++i) EXPECT_NEAR(b.raw[i], a.raw[i], 1e-5) << b.model;
    }
    EXPECT_EQ(out[k].decision.decision, out[0].decision.decision);
  }
  // Refused, nothing added: an unknown source, a symbol already there, repeated or empty.
  EXPECT_THROW(desk.replicate("NOPE", {"X"}), InputError);
  EXPECT_THROW(desk.replicate(src, {"X", u.symbol(1)}), InputError);
  EXPECT_THROW(desk.replicate(src, {"X", "X"}), InputError);
  EXPECT_THROW(desk.replicate(src, {""}), InputError);
  EXPECT_EQ(desk.instruments(), 4);
  EXPECT_FALSE(desk.has_symbol("X"));
  // Over the cap: the typed refusal, the copy not added, the ledger as before.
  {
    const uint64_t external1 = memory::external_bytes();
    memory::LimitGuard cap(memory::live_bytes() + memory::external_bytes() + one / 2);
    EXPECT_THROW(desk.replicate(src, {"EXTRA"}), OutOfMemoryError);
    EXPECT_EQ(memory::external_bytes(), external1);
  }
  EXPECT_FALSE(desk.has_symbol("EXTRA"));
  EXPECT_EQ(desk.state_bytes(), 4 * one);
  // A desk of per-instrument streams does not copy them.
  DeskOptions streams;
  streams.streams = true;
  Desk sd(bundles, {}, streams);
  SyntheticUniverse v(7, 1);
  auto first = v.next();
  sd.on_timestamp(v.timestamp(), first);
  EXPECT_THROW(sd.replicate(v.symbol(0), {"Z"}), InputError);
  // The universe: bars of the first instruments only, the same as the whole universe's.
  SyntheticUniverse all(3, 5), part(3, 5);
  for (int i = 0; i < 3; ++i) {
    const auto a = all.next();
    const auto p = part.next(2);
    ASSERT_EQ(p.size(), 2u);
    EXPECT_EQ(p[1].symbol, a[1].symbol);
    EXPECT_EQ(p[1].bar.close, a[1].bar.close);
    EXPECT_EQ(part.timestamp(), all.timestamp());
  }
  EXPECT_EQ(all.next()[4].bar.close, part.next()[4].bar.close);
  EXPECT_THROW(part.symbol(5), InputError);
}

TEST_F(DeskCapacityTest, BudgetInstrumentsOnTheCli) {
  const auto j = foxhunt::testing::run_cli_json(
      "budget --no-views --budget-mib 200 --headroom-mib 8 --instruments 8 --json", 0);
  ASSERT_TRUE(j.contains("desk")) << j.dump();
  EXPECT_EQ(j["desk"]["asked"]["instruments"].get<int64_t>(), 8);
  EXPECT_GT(j["desk"]["max_instruments"].get<int64_t>(), 8);
  EXPECT_TRUE(j["desk"]["ok"].get<bool>());
  EXPECT_EQ(j["desk"]["method"].get<std::string>(), "fit");
  EXPECT_FALSE(j["desk"]["fit_runs"].empty());
  EXPECT_EQ(run_cli("budget --no-views --instruments 1").exit_code, 2);
  EXPECT_EQ(run_cli("budget --no-views --bundles /nowhere").exit_code, 2);
  EXPECT_EQ(run_cli("budget --no-views --exhaustive").exit_code, 2);  // needs --instruments
}

}  // namespace
}  // namespace foxhunt::serving
