// A C++ trading engine embedding foxhunt: load the bundles `foxhunt train all --out DIR` wrote,
// stream bars from a CSV through the ensemble, print one decision per bar. Built against an
// installed foxhunt (find_package(foxhunt CONFIG)); see README "Embedding".
//
//   embed DIR bars.csv [rule.json]
#include <cstdio>
#include <fstream>
#include <string>

#include "foxhunt/core/error.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/serving/serving.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: %s BUNDLE_DIR BARS_CSV [RULE_JSON]\n", argv[0]);
    return 2;
  }
  try {
    // DIR/rule.json (what train all fitted), or a rule file as predict --rule.
    const auto rule = foxhunt::serving::ensemble_rule(argv[1], argc == 4 ? argv[3] : "");
    auto ensemble = foxhunt::serving::Ensemble::load(argv[1], rule);  // on the CPU
    std::ifstream in(argv[2]);
    if (!in) throw foxhunt::InputError("embed", std::string("cannot open ") + argv[2]);
    foxhunt::data::BarCsvReader reader(argv[2]);  // one line at a time, as a live feed
    std::string line;
    long decisions = 0;
    while (std::getline(in, line)) {
      const auto bar = reader.read_line(line);
      if (!bar) continue;  // the header, a blank line
      const auto d = ensemble.on_bar(*bar);
      std::printf("%s %+.4f", foxhunt::data::format_timestamp(d.timestamp).c_str(), d.decision);
      for (const auto& s : d.signals)
        std::printf(" %s=%s", s.model.c_str(), s.ready ? std::to_string(s.signal).c_str() : "-");
      std::printf("\n");
      ++decisions;
    }
    std::fprintf(stderr, "embed: %ld decisions\n", decisions);
    return 0;
  } catch (const foxhunt::Error& e) {
    std::fprintf(stderr, "embed: %s\n", e.what());
    return foxhunt::exit_code_for(e);
  }
}
