// foxhunt predict: stream bars through the four-model ensemble, one decision per bar
// (library: serving/serving.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/data/panel.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bar_stream.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/serving.h"
#include "predict_ticks.h"
#include "tape_flags.h"

namespace foxhunt::cli {
namespace {

// The first line of a stream followed by the rest of it: lets predict look at the header (is it
// a panel?) and still stream a single series line by line from stdin. It keeps the last
// non-blank line of the rest it passed on (what the input's last bar was, once it has ended).
class PrefixedBuf : public std::streambuf {
 public:
  PrefixedBuf(std::string prefix, std::streambuf* rest) : prefix_(std::move(prefix)), rest_(rest) {
    setg(prefix_.data(), prefix_.data(), prefix_.data() + prefix_.size());
  }
  /// The last non-blank line passed on after the prefix ("" when none).
  std::string last_line() const { return is_blank(line_) ? last_ : line_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    const int_type c = rest_->sgetc();
    if (c == traits_type::eof()) return c;
    ch_ = traits_type::to_char_type(rest_->sbumpc());
    if (ch_ == '\n') {
      if (!is_blank(line_)) last_.swap(line_);
      line_.clear();
    } else {
      line_ += ch_;
    }
    setg(&ch_, &ch_, &ch_ + 1);
    return c;
  }

 private:
  static bool is_blank(const std::string& s) {
    return s.find_first_not_of(" \t\r") == std::string::npos;
  }
  std::string prefix_;
  std::streambuf* rest_;
  char ch_ = 0;
  std::string line_, last_;  // the line being passed on, the last complete non-blank one
};

// The last non-blank line of a seekable file, read backwards from its end; the read position is
// restored. "" when the file has none or cannot seek.
std::string last_line_of(std::istream& in) {
  const auto here = in.tellg();
  if (here < 0) return {};
  in.seekg(0, std::ios::end);
  std::streamoff pos = in.tellg();
  std::string tail;
  std::string line;
  while (pos > 0) {
    const std::streamoff n = std::min<std::streamoff>(pos, 4096);
    pos -= n;
    std::string chunk(static_cast<size_t>(n), '\0');
    in.seekg(pos);
    in.read(chunk.data(), n);
    tail.insert(0, chunk);
    const auto end = tail.find_last_not_of(" \t\r\n");
    if (end == std::string::npos) {
      tail.clear();  // only blanks so far
      continue;
    }
    const auto nl = tail.rfind('\n', end);
    if (nl != std::string::npos || pos == 0) {
      const size_t begin = nl == std::string::npos ? 0 : nl + 1;
      line = tail.substr(begin, end + 1 - begin);
      break;
    }
  }
  in.clear();
  in.seekg(here);
  return line;
}

// The timestamp of the bar on `last` (a line of the CSV whose lines up to its header are
// `head`); none when it holds no bar or does not parse (the stream then says why, at its line).
std::optional<int64_t> last_bar_time(const std::string& head, const std::string& last,
                                     const std::string& source) {
  try {
    data::BarCsvReader reader(source);
    std::istringstream lines(head);
    std::string line;
    while (std::getline(lines, line)) (void)reader.read_line(line);
    if (const auto bar = reader.read_line(last)) return bar->timestamp;
  } catch (const InputError&) {
  }
  return std::nullopt;
}

// --from after the data's last bar would print nothing: refused, naming both times.
void check_from(int64_t from, std::optional<int64_t> last, const std::string& source) {
  FOXHUNT_CHECK(!last || *last >= from, "predict", "--from ", data::format_timestamp(from),
                " is after the last bar of ", source, " (", data::format_timestamp(*last),
                "): nothing to print; expected a time at or before it");
}

struct PredictArgs {
  static constexpr const char* kHelp =
      "Stream bars through the four-model ensemble: each model's signal and one target position "
      "in [-1, 1] per bar";
  std::string shard;
  std::string bundles;
  std::string data;
  std::string from;
  std::string rule;
  std::string symbol;
  Device device;
  bool skip_bad = false;
  bool serial = false;
  bool json = false;
  bool explain = false;
  TapeFlags tape;
  double periods_per_year = 0;
};

// predict on a panel: the desk, one block (or one JSON line per symbol) per timestamp. A panel
// in time order is served line by line (memory for its symbols, not its rows). A file is scanned
// first, as a panel read whole was: a bad row is refused before anything is printed and --from is
// checked against its last timestamp; one whose rows are not in time order (grouped by symbol) is
// read whole. `in` has given up `head` (the lines up to the header): a file is read again from
// its start, stdin goes on after it.
int predict_panel(const PredictArgs& a, std::istream& in, const std::string& head,
                  const std::string& source, std::vector<serving::Bundle> bundles,
                  const serving::DecisionRule& rule, int64_t from) {
  serving::PanelStreamOptions po;
  po.from = from;
  if (!a.shard.empty()) po.shard = serving::parse_shard(a.shard, "--shard");
  in.clear();  // the header may have been the input's last line
  // A file that can be read twice (not stdin, not a pipe named as a file).
  const bool is_file = a.data != "-" && in.tellg() >= 0;
  std::optional<data::Panel> panel;  // a file not in time order, read whole
  if (is_file) {
    in.seekg(0);
    const auto scan = data::scan_panel_csv(in, source);
    in.clear();
    in.seekg(0);
    if (!scan.time_ordered)
      panel = data::parse_panel_csv(std::string(std::istreambuf_iterator<char>(in), {}), source);
    if (from != INT64_MIN)
      check_from(from, panel ? panel->timestamps.back() : scan.last_timestamp, source);
  }
  serving::DeskOptions dopt;
  dopt.parallel = !a.serial;
  serving::Desk desk(std::move(bundles), rule, dopt);
  const auto print = [&](int64_t t, const std::vector<serving::InstrumentDecision>& ds) {
    if (a.json) {
      for (const auto& d : ds) std::cout << serving::to_json(d).dump() << '\n';
      return;
    }
    std::printf("== %s  %zu instruments  %.1f us\n", data::format_timestamp(t).c_str(), ds.size(),
                ds.front().decision.latency_us);
    for (const auto& d : ds) {
      std::printf("  %-12s", d.symbol.c_str());
      for (const auto& s : d.decision.signals) {
        if (s.ready)
          std::printf(" %s %+7.3f", s.model.c_str(), s.signal);
        else
          std::printf(" %s %7s", s.model.c_str(), "warmup");
      }
      std::printf("  decision %+7.3f\n", d.decision.decision);
    }
  };
  serving::StreamStats stats;
  if (panel) {
    stats = serving::stream_panel(desk, *panel, po, print);
  } else {
    const auto r = serving::stream_panel_csv(desk, in, source, po, print, is_file ? "" : head);
    stats = r.stream;
    // stdin: checked once it has ended (nothing was printed then), as a series is.
    if (from != INT64_MIN && stats.reported == 0) check_from(from, r.last_timestamp, source);
  }
  std::cout.flush();
  std::fprintf(stderr,
               "foxhunt: %lld instruments, %lld timestamps, %lld instrument-bars (%lld printed); "
               "latency per timestamp p50 %.1f us, p99 %.1f us\n",
               static_cast<long long>(stats.instruments), static_cast<long long>(stats.timestamps),
               static_cast<long long>(stats.bars), static_cast<long long>(stats.reported),
               stats.latency_us.p50, stats.latency_us.p99);
  return 0;
}

Registrar registered_predict = subcommand<PredictArgs>(
    "predict", 50, [](CLI::App* sub, std::shared_ptr<PredictArgs> a) -> Runner {
      sub->add_option("--bundles", a->bundles,
                      "Directory with dqn/, ppo/, mamba2/, tft/ bundles (foxhunt train all --out)")
          ->required();
      sub->add_option("--data", a->data, "Bars CSV to stream, or - for stdin (or --ticks)");
      a->tape.add(sub,
                  "Tape of trade prints to stream, or - for stdin: bars built as prints arrive "
                  "(the bundles' recorded --bar), a decision each time one closes (excludes "
                  "--data)");
      auto* ppy = add_periods_per_year_flag(
          sub, &a->periods_per_year,
          "the rule's volatility targeting (default: the rule's, else the bundles' calendar)");
      sub->add_option("--from", a->from,
                      "Print bars from this time on (Unix seconds or ISO 8601); earlier bars only "
                      "warm the state up");
      sub->add_option(
          "--rule", a->rule,
          "Decision rule JSON (default: DIR/rule.json that train all fits, else the built-in "
          "rule): {\"weights\": {...}, \"target_volatility\", \"dead_band\", ...}");
      add_device_flag(sub, &a->device);
      using Flag = std::tuple<const char*, bool*, const char*>;
      for (const auto& [name, target, help] : std::initializer_list<Flag>{
               {"--skip-bad-bars", &a->skip_bad,
                "Skip an invalid bar with a warning on stderr instead of stopping (exit 2)"},
               {"--serial", &a->serial, "Run the four models one by one instead of concurrently"},
               {"--json", &a->json,
                "One JSON object per bar on stdout (JSON lines; on a panel one per timestamp and "
                "symbol, with a \"symbol\" key)"},
               {"--explain", &a->explain,
                "Add the TFT's variable-selection weights (top variables) and its attention over "
                "past bars for each bar (JSON: models.tft.explain); one series only"}})
        sub->add_flag(name, *target, help);
      sub->add_option("--symbol", a->symbol,
                      "One series with bundles trained on a panel: the instrument it is (its "
                      "normaliser and id serve it)");
      sub->add_option("--shard", a->shard,
                      "Panel only: serve the symbols of shard K of N (K/N, by a stable hash of "
                      "the symbol), so that N processes split a universe");
      return [a, ppy]() {
        auto rule = serving::ensemble_rule(a->bundles, a->rule);
        if (ppy->count() > 0) rule.periods_per_year = a->periods_per_year;
        const int64_t from = a->from.empty() ? INT64_MIN : data::parse_timestamp(a->from);
        a->tape.check_used("predict");
        FOXHUNT_CHECK(a->tape.given() != !a->data.empty(), "predict",
                      "expected one input: --data (bars) or --ticks (a tape), got ",
                      a->tape.given() ? "both" : "neither");
        if (a->tape.given()) {
          FOXHUNT_CHECK(!a->explain && a->shard.empty(), "predict",
                        "--explain and --shard apply to bars (--data), not to --ticks");
          TickPredictArgs t;
          t.bundles = a->bundles;
          t.tape = a->tape;
          t.symbol = a->symbol;
          t.from = from;
          t.device = a->device;
          t.skip_bad = a->skip_bad;
          t.serial = a->serial;
          t.json = a->json;
          return predict_ticks(t, rule);
        }
        const torch::Device device = models::to_torch(a->device);
        auto bundles = serving::load_ensemble_bundles(a->bundles, device);
        std::ifstream file;
        std::istream* in = &std::cin;
        if (a->data != "-") {
          file.open(a->data);
          FOXHUNT_CHECK(file.good(), "predict", "--data: cannot open '", a->data, "'");
          in = &file;
        }
        const std::string source = a->data == "-" ? "stdin" : a->data;
        // The header says whether this is a panel (a symbol column) or one series.
        std::string first, line;  // the lines up to the first non-blank one
        while (std::getline(*in, line)) {
          first += line + '\n';
          if (line.find_first_not_of(" \t\r") != std::string::npos) break;
        }
        if (data::has_symbol_column(first)) {
          FOXHUNT_CHECK(a->symbol.empty(), "predict",
                        "--symbol applies to one series; a panel serves each symbol as itself");
          FOXHUNT_CHECK(!a->explain, "predict",
                        "--explain: expected one series, got a panel (a symbol column) in ", source,
                        "; a panel is served batched without the per-bar explanation");
          return predict_panel(*a, *in, first, source, std::move(bundles), rule, from);
        }
        FOXHUNT_CHECK(a->shard.empty(), "predict",
                      "--shard: expected a panel (a CSV with a symbol column), got a single "
                      "series in ",
                      source);
        // A file is checked before any bar is fed; stdin, once it has ended.
        if (from != INT64_MIN && a->data != "-")
          check_from(from, last_bar_time(first, last_line_of(file), source), source);
        PrefixedBuf buf(first, in->rdbuf());
        std::istream joined(&buf);
        in = &joined;
        if (!a->symbol.empty()) bundles = serving::select_instrument(std::move(bundles), a->symbol);
        for (const auto& b : bundles)
          FOXHUNT_CHECK(!b.panel() || !b.symbol.empty(), "predict", "--data ", source,
                        " is one series and the bundles were trained on a panel of ",
                        b.instruments.size(), " instruments (", b.symbols_text(),
                        "): name the one it is with --symbol, or give a panel CSV");
        const std::string basis = serving::periods_per_year_basis(rule, bundles);
        serving::Ensemble ensemble(std::move(bundles), rule);
        ensemble.set_parallel(!a->serial);
        ensemble.set_explain(a->explain);

        serving::BarStreamOptions so;
        so.source = source;
        so.skip_bad = a->skip_bad;
        so.from = from;
        // The table's header goes out with its first row: nothing is printed when no bar is.
        bool header = a->json;
        const auto print = [&](const data::Bar& bar, const serving::BarDecision& d) {
          if (a->json) {
            std::cout << serving::to_json(d).dump() << '\n';
            return;
          }
          if (!header) {
            header = true;
            std::printf("%-20s %12s", "time", "close");
            for (const auto& m : ensemble.model_names()) std::printf(" %8s", m.c_str());
            std::printf(" %9s %10s\n", "decision", "latency_us");
          }
          std::printf("%-20s %12.6g", data::format_timestamp(d.timestamp).c_str(), bar.close);
          for (const auto& s : d.signals) {
            if (s.ready)
              std::printf(" %+8.3f", s.signal);
            else
              std::printf(" %8s", "warmup");
          }
          std::printf(" %+9.3f %10.1f", d.decision, d.latency_us);
          for (const auto& s : d.signals) {
            if (!s.explanation) continue;
            // The three variables the model weighs most, and the past bar it attends to most.
            const auto j = serving::explanation_json(*s.explanation, 3);
            std::printf("  %s:", s.model.c_str());
            for (const auto& v : j["past"])
              std::printf(" %s %.2f", v[0].get<std::string>().c_str(), v[1].get<double>());
            const auto& att = s.explanation->attention;
            if (!att.empty()) {
              const auto at = std::max_element(att.begin(), att.end()) - att.begin();
              std::printf("; attends most to t-%lld (%.2f)",
                          static_cast<long long>(att.size()) - 1 - static_cast<long long>(at),
                          att[static_cast<size_t>(at)]);
            }
          }
          std::printf("\n");
        };
        const auto warn = [](const std::string& m) {
          std::fprintf(stderr, "foxhunt: warning: %s\n", m.c_str());
        };
        const auto stats = serving::stream_bars(ensemble, *in, so, print, warn);
        std::cout.flush();
        if (from != INT64_MIN && stats.reported == 0)
          check_from(from, last_bar_time(first, buf.last_line(), source), source);
        std::fprintf(stderr,
                     "foxhunt: %lld bars (%lld printed, %lld skipped); latency per bar p50 %.1f "
                     "us, p99 %.1f us; periods/year: %s\n",
                     static_cast<long long>(stats.bars), static_cast<long long>(stats.reported),
                     static_cast<long long>(stats.skipped), stats.latency_us.p50,
                     stats.latency_us.p99, basis.c_str());
        return 0;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
