#pragma once
// Subcommand registry of the foxhunt CLI. Each app/cmd_*.cpp registers itself with a static
// Registrar; main() parses and runs the chosen one. The app sources are linked directly into the
// executable, so the registrars are never dropped by the linker.

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace foxhunt::cli {

/// Runs a parsed subcommand; returns the exit code.
using Runner = std::function<int()>;
/// Adds a subcommand to `app` and returns its runner (which reads the parsed options).
using Setup = std::function<Runner(CLI::App& app)>;

struct CommandEntry {
  std::string name;
  int order;  ///< position in --help
  Setup setup;
};

std::vector<CommandEntry>& commands();

struct Registrar {
  Registrar(std::string name, int order, Setup setup) {
    commands().push_back({std::move(name), order, std::move(setup)});
  }
};

/// Prints JSON to stdout (the only thing --json commands print there).
void print_json(const std::string& dumped);

}  // namespace foxhunt::cli
