// The stress scenario `tape`: a tape of prints replayed as fast as it goes through the streaming
// bar builder and the desk (stress.h).
#include <fmt/format.h>

#include <sstream>

#include "foxhunt/core/error.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/calendar.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/serving/tape_stream.h"
#include "stress_common.h"

namespace foxhunt::harness::stress_detail {

void run_tape(Context& c, ScenarioResult& r) {
  FOXHUNT_CHECK(!c.o.ticks.empty(), kStressComponent,
                "tape: expected a tape to replay (ticks: a tape CSV, e.g. --ticks TAPE)");
  auto bundles = load_bundles(c.src, c.device);
  // The bundles' spec (a different --bar is refused); fresh models record none: time:1m.
  std::optional<data::BarSpec> given;
  if (!c.o.bar_spec.empty()) given = data::parse_bar_spec(c.o.bar_spec);
  if (!given && !serving::recorded_bar_spec(bundles, c.src.dir))
    given = data::parse_bar_spec("time:1m");
  serving::TapeStreamOptions to;
  to.spec = serving::tape_bar_spec(bundles, c.src.dir, given);
  to.source = c.o.ticks;
  // From memory: the replay measures the builder and the desk, not the disk.
  std::istringstream in(read_file(c.o.ticks));
  serving::Desk desk(std::move(bundles), serving::DecisionRule{}, serving::DeskOptions{});
  const auto t0 = Clock::now();
  const auto stats = serving::stream_tape(desk, in, to, serving::StreamOptions{}, nullptr);
  const double seconds = seconds_since(t0);
  const auto& lat = stats.print_to_decision_us;
  r.ok = stats.tape_bars > 0;
  r.summary = fmt::format(
      "{} prints -> {} {} bars in {:.2f} s: {} prints/s, {} bars/s; print-to-decision p50 "
      "{:.1f} us, p99 {:.1f} us",
      stats.prints, stats.tape_bars, data::to_string(to.spec), seconds,
      data::format_count(stats.prints_per_s), data::format_count(stats.bars_per_s), lat.p50,
      lat.p99);
  r.details["tape"] = c.o.ticks;
  r.details["bar_spec"] = data::to_string(to.spec);
  r.details["prints"] = stats.prints;
  r.details["bars"] = stats.tape_bars;
  r.details["instruments"] = stats.stream.instruments;
  r.details["timestamps"] = stats.stream.timestamps;
  r.details["seconds"] = stats.seconds;
  r.details["prints_per_s"] = stats.prints_per_s;
  r.details["bars_per_s"] = stats.bars_per_s;
  r.details["print_to_decision_us"] = to_json(lat);
  r.details["desk_latency_us"] = to_json(stats.stream.latency_us);
  r.details["dropped_prints"] = stats.dropped.total();
}

}  // namespace foxhunt::harness::stress_detail
