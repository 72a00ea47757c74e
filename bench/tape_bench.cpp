// The tape's two hot paths on the real E-mini S&P 500 tape (scripts/setup.sh puts it in the data
// cache): parsing the CSV (bytes/s: the target is >= 150 MB/s on one core) and building bars from
// parsed prints (prints/s: the target for bars plus features is >= 10 million/s), per bar kind.
// Run: ./build/tape_bench [--benchmark_filter=Parse]
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/tape.h"

namespace {

/// The data cache's tape: $FOXHUNT_DATA_DIR, else $XDG_CACHE_HOME/foxhunt, else ~/.cache/foxhunt.
std::string emini_path() {
  if (const char* d = std::getenv("FOXHUNT_DATA_DIR"))
    return std::string(d) + "/emini_tick_data.csv";
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const char* home = std::getenv("HOME");
  const std::string cache = xdg ? xdg : std::string(home ? home : "/root") + "/.cache";
  return cache + "/foxhunt/emini_tick_data.csv";
}

/// The tape's text, read once ("" when absent).
const std::string& emini_text() {
  static const std::string text =
      std::filesystem::exists(emini_path()) ? foxhunt::read_file(emini_path()) : std::string();
  return text;
}

void BM_ParseTape(benchmark::State& state) {
  const std::string& text = emini_text();
  if (text.empty()) {
    state.SkipWithError((emini_path() + " absent (scripts/setup.sh)").c_str());
    return;
  }
  int64_t prints = 0;
  for (auto _ : state) {
    const auto tape = foxhunt::data::parse_tape_csv(text, "emini");
    prints = tape.size_prints();
    benchmark::DoNotOptimize(tape.price.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
  state.SetItemsProcessed(state.iterations() * prints);
}

void BM_BuildBars(benchmark::State& state, const char* spec_text) {
  const std::string& text = emini_text();
  if (text.empty()) {
    state.SkipWithError((emini_path() + " absent (scripts/setup.sh)").c_str());
    return;
  }
  static const foxhunt::data::Tape tape = foxhunt::data::parse_tape_csv(text, "emini");
  const auto spec = foxhunt::data::parse_bar_spec(spec_text);
  size_t bars = 0;
  for (auto _ : state) {
    const auto out = foxhunt::data::build_bars(tape, spec);
    bars = out.size();
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * tape.size_prints());  // prints per second
  state.counters["bars"] = static_cast<double>(bars);
}

BENCHMARK(BM_ParseTape)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildBars, time_60s, "time:60s")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildBars, tick_500, "tick:500")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildBars, volume_1000, "volume:1000")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_BuildBars, dollar_5e6, "dollar:5e6")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
