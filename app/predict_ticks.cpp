// foxhunt predict --ticks (predict_ticks.h).
#include "predict_ticks.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include "foxhunt/core/error.h"
#include "foxhunt/data/tape.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/desk.h"
#include "foxhunt/serving/tape_stream.h"

namespace foxhunt::cli {

int predict_ticks(const TickPredictArgs& a, const serving::DecisionRule& rule) {
  auto bundles = serving::load_ensemble_bundles(a.bundles, models::to_torch(a.device));
  // The bundles' recorded spec, or --bar; a different one is refused naming both.
  serving::TapeStreamOptions to;
  to.spec = serving::tape_bar_spec(bundles, a.bundles, a.tape.spec());
  to.read = a.tape.read_options();
  to.source = a.tape.ticks == "-" ? "stdin" : a.tape.ticks;
  std::ifstream file;
  std::istream* in = &std::cin;
  if (a.tape.ticks != "-") {
    file.open(a.tape.ticks);
    FOXHUNT_CHECK(file.good(), "predict", "--ticks: cannot open '", a.tape.ticks, "'");
    in = &file;
  }
  // The header says whether the tape has a symbol column (a desk) or is one instrument.
  std::string head, line;
  data::TapeCsvReader probe(to.source, to.read);
  while (!probe.has_header() && std::getline(*in, line)) {
    head += line + '\n';
    (void)probe.read_line(line);  // InputError for a header that is not a tape's
  }
  const bool panel = probe.has_symbol();
  FOXHUNT_CHECK(!panel || a.symbol.empty(), "predict",
                "--symbol applies to a tape of one instrument; a tape with a symbol column "
                "serves each symbol as itself");
  std::unique_ptr<serving::Ensemble> ensemble;
  std::unique_ptr<serving::Desk> desk;
  const std::string basis = serving::periods_per_year_basis(rule, bundles);
  if (panel) {
    serving::DeskOptions dopt;
    dopt.parallel = !a.serial;
    desk = std::make_unique<serving::Desk>(std::move(bundles), rule, dopt);
  } else {
    if (!a.symbol.empty()) bundles = serving::select_instrument(std::move(bundles), a.symbol);
    for (const auto& b : bundles)
      FOXHUNT_CHECK(!b.panel() || !b.symbol.empty(), "predict", "--ticks ", to.source,
                    " is one instrument and the bundles were trained on a panel of ",
                    b.instruments.size(), " instruments (", b.symbols_text(),
                    "): name the one it is with --symbol, or give a tape with a symbol column");
    ensemble = std::make_unique<serving::Ensemble>(std::move(bundles), rule);
    ensemble->set_parallel(!a.serial);
    to.symbol = ensemble->symbol().empty() ? std::string("series") : ensemble->symbol();
  }
  serving::Desk& d = panel ? *desk : ensemble->desk();

  serving::StreamOptions so;
  so.skip_bad = a.skip_bad;
  so.from = a.from;
  bool header = a.json;
  const auto print = [&](const std::vector<serving::SymbolBar>& bars,
                         const std::vector<serving::InstrumentDecision>& ds,
                         const serving::BarClose& close, int64_t latency_ns) {
    for (size_t i = 0; i < ds.size(); ++i) {
      const auto& dec = ds[i].decision;
      if (a.json) {
        auto j = panel ? serving::to_json(ds[i]) : serving::to_json(dec);
        j["close_print_ns"] = close.print_ns;
        j["close_print_time"] = data::format_time_ns(close.print_ns);
        j["closed_by_end"] = close.at_end;
        j["print_to_decision_ns"] = latency_ns;
        std::cout << j.dump() << '\n';
        continue;
      }
      if (!header) {
        header = true;
        std::printf("%-20s %-10s %12s", "time", "symbol", "close");
        for (const auto& s : dec.signals) std::printf(" %8s", s.model.c_str());
        std::printf(" %9s %12s\n", "decision", "print_to_us");
      }
      std::printf("%-20s %-10s %12.6g", data::format_timestamp(dec.timestamp).c_str(),
                  ds[i].symbol.c_str(), bars[i].bar.close);
      for (const auto& s : dec.signals) {
        if (s.ready)
          std::printf(" %+8.3f", s.signal);
        else
          std::printf(" %8s", "warmup");
      }
      std::printf(" %+9.3f %12.1f\n", dec.decision, static_cast<double>(latency_ns) / 1000.0);
    }
  };
  const auto warn = [](const std::string& m) {
    std::fprintf(stderr, "foxhunt: warning: %s\n", m.c_str());
  };
  const auto stats = serving::stream_tape(d, *in, to, so, print, warn, head);
  std::cout.flush();
  std::fprintf(stderr,
               "foxhunt: %lld prints -> %lld %s bars (%lld decisions printed, %lld skipped, %lld "
               "prints dropped); print-to-decision p50 %.1f us, p99 %.1f us; periods/year: %s\n",
               static_cast<long long>(stats.prints), static_cast<long long>(stats.tape_bars),
               data::to_string(to.spec).c_str(), static_cast<long long>(stats.stream.reported),
               static_cast<long long>(stats.stream.skipped),
               static_cast<long long>(stats.dropped.total()), stats.print_to_decision_us.p50,
               stats.print_to_decision_us.p99, basis.c_str());
  return 0;
}

}  // namespace foxhunt::cli
