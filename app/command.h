#pragma once
// Subcommand registry of the foxhunt CLI. Each app/cmd_*.cpp registers itself with a static
// Registrar; main() parses and runs the chosen one. The app sources are linked directly into the
// executable, so the registrars are never dropped by the linker.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "foxhunt/core/device.h"
#include "foxhunt/memory/device_profile.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace foxhunt::cli {

/// A number > 0 (CLI::PositiveNumber's message prints DBL_MAX in 309 digits): "expected a
/// number > 0, got '-5'".
inline CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (CLI::detail::lexical_cast(text, v) && v > 0) return "";
        return "expected a number > 0, got '" + text + "'";
      },
      "POSITIVE");
}
/// A number >= 0: "expected a number >= 0, got '-1'".
inline CLI::Validator non_negative_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (CLI::detail::lexical_cast(text, v) && v >= 0) return "";
        return "expected a number >= 0, got '" + text + "'";
      },
      "NONNEGATIVE");
}

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

/// Registers subcommand `name` (position `order` in --help, described by `Args::kHelp`) whose
/// flags bind a fresh `Args`: `setup(sub, args)` adds the flags to the subcommand and returns its
/// runner.
template <typename Args>
Registrar subcommand(std::string name, int order,
                     std::function<Runner(CLI::App*, std::shared_ptr<Args>)> setup) {
  return Registrar(name, order, [name, setup](CLI::App& app) -> Runner {
    return setup(app.add_subcommand(name, Args::kHelp), std::make_shared<Args>());
  });
}

/// The budget flags of plan, budget, train and stress, declared once: --device-profile NAME,
/// --profiles FILE and --budget-mib N (which excludes the profile). They become one
/// memory::Budget, the library's budget value; only app/ knows the flag names.
struct BudgetFlags {
  std::string profile;        ///< --device-profile ("" = the default given to add())
  std::string profiles_file;  ///< --profiles
  double budget_mib = 0;      ///< --budget-mib
  CLI::Option* budget_option = nullptr;

  /// Adds the three flags to `sub`. `default_profile` is the budget when neither flag is given
  /// ("" = none: resolve() returns no budget); the helps replace the generic lines when given.
  void add(CLI::App* sub, const std::string& default_profile, const std::string& profile_help = "",
           const std::string& mib_help = "");
  /// Registers --profiles, then the budget: --budget-mib when given (source "--budget-mib"),
  /// else the profile's usable bytes, else none. InputError naming `component` for a bad MiB
  /// value or an unknown profile.
  std::optional<memory::Budget> resolve(const char* component);
  /// The budget where add() was given a default profile (plan, budget): never none.
  memory::Budget resolve_required(const char* component);
};

/// Adds --device to `sub`, parsed into `*target` once, while the flags are read: "cpu", "cuda"
/// or "cuda:N" (anything else is a usage error, exit 2). `help` describes what the device does
/// for this command ("" = the generic line); the default shown is `*target`'s.
CLI::Option* add_device_flag(CLI::App* sub, Device* target, const std::string& help = "");

/// Adds option `name` to `sub`, bound to `*target`, its default shown in --help (chain ->check()
/// for the values it takes).
template <typename T>
CLI::Option* add_defaulted(CLI::App* sub, const std::string& name, T* target,
                           const std::string& help) {
  return sub->add_option(name, *target, help)->capture_default_str();
}

/// Adds --seed to `sub`, bound to `*target` (a number >= 0, its default shown); `help` says what
/// it seeds.
template <typename T>
CLI::Option* add_seed_flag(CLI::App* sub, T* target, const std::string& help) {
  return add_defaulted(sub, "--seed", target, help)->check(non_negative_number());
}

/// The JSON object given to flag `flag` of `component` (--options '{"lr": 1e-3}'); InputError
/// "[component] FLAG: not valid JSON (...)" or "...: expected a JSON object, got TYPE".
nlohmann::json parse_json_flag(const std::string& text, const char* flag, const char* component);

/// Prints JSON to stdout (the only thing --json commands print there).
void print_json(const std::string& dumped);

/// The command line main() was called with (argv[0] first), for commands that re-run themselves
/// (train --nproc).
std::vector<std::string>& program_args();

}  // namespace foxhunt::cli
