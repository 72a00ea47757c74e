// foxhunt: the command-line front end. Thin by design: it parses arguments and calls the library.

#include <algorithm>
#include <iostream>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/core/units.h"
#include "foxhunt/memory/runtime_init.h"

namespace foxhunt::cli {

std::vector<CommandEntry>& commands() {
  static std::vector<CommandEntry> c;
  return c;
}

void BudgetFlags::add(CLI::App* sub, const std::string& default_profile,
                      const std::string& profile_help, const std::string& mib_help) {
  profile = default_profile;
  auto* prof = sub->add_option(
      "--device-profile", profile,
      profile_help.empty() ? "Device profile whose usable bytes are the budget" : profile_help);
  if (!default_profile.empty()) prof->capture_default_str();
  sub->add_option("--profiles", profiles_file, "JSON file with custom device profiles to add");
  budget_option =
      sub->add_option("--budget-mib", budget_mib,
                      mib_help.empty() ? "Budget in MiB (overrides the profile)" : mib_help)
          ->excludes(prof);
}

std::optional<memory::Budget> BudgetFlags::resolve(const char* component) {
  if (!profiles_file.empty()) memory::register_profiles(memory::load_profiles(profiles_file));
  if (budget_option != nullptr && budget_option->count() > 0)
    return memory::Budget::of_bytes(mib_to_bytes(budget_mib, component, "--budget-mib"),
                                    "--budget-mib");
  if (!profile.empty()) return memory::Budget::of_profile(profile);
  return std::nullopt;
}

memory::Budget BudgetFlags::resolve_required(const char* component) {
  auto b = resolve(component);
  FOXHUNT_CHECK(b.has_value(), component,
                "expected a budget: --device-profile NAME or --budget-mib N, got neither");
  return *b;
}

CLI::Option* add_device_flag(CLI::App* sub, Device* target, const std::string& help) {
  return sub
      ->add_option_function<std::string>(
          "--device",
          [target](const std::string& text) { *target = Device::parse(text, "--device"); },
          help.empty() ? "cpu, cuda or cuda:N" : help)
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            try {
              Device::parse(text, "--device");
              return {};
            } catch (const InputError&) {
              return "expected cpu, cuda or cuda:N, got '" + text + "'";
            }
          },
          "DEVICE"))
      ->default_str(target->str());
}

nlohmann::json parse_json_flag(const std::string& text, const char* flag, const char* component) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(component, std::string(flag) + ": not valid JSON (" + e.what() + ")");
  }
  FOXHUNT_CHECK(j.is_object(), component, flag, ": expected a JSON object, got ", j.type_name());
  return j;
}

std::vector<std::string>& program_args() {
  static std::vector<std::string> args;
  return args;
}

void print_json(const std::string& dumped) {
  std::cout << dumped << std::endl;
}

}  // namespace foxhunt::cli

int main(int argc, char** argv) {
  using namespace foxhunt;
  // Must run before any tensor exists: installs the accounting allocator and sets threads.
  foxhunt::runtime_init();
  cli::program_args().assign(argv, argv + argc);

  CLI::App app{"foxhunt: train and serve a four-model trading ensemble under a memory budget"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("foxhunt ") + FOXHUNT_VERSION);
  auto& entries = cli::commands();
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.order < b.order; });
  std::vector<std::pair<CLI::App*, cli::Runner>> runners;
  for (auto& e : entries) {
    const size_t before = app.get_subcommands({}).size();
    cli::Runner r = e.setup(app);
    auto subs = app.get_subcommands({});
    if (subs.size() > before) runners.emplace_back(subs.back(), std::move(r));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // One line, exit 2 (usage), whatever CLI11's own code is.
    std::cerr << "foxhunt: " << e.what() << " (see --help)" << std::endl;
    return kExitUsage;
  } catch (const Error& e) {  // a flag's own parse (e.g. a profiles file) while reading flags
    std::cerr << "foxhunt: " << e.what() << std::endl;
    return exit_code_for(e);
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
    std::cerr << "foxhunt: no subcommand (see --help)" << std::endl;
    return kExitUsage;
  } catch (const Error& e) {
    std::cerr << "foxhunt: " << e.what() << std::endl;
    return exit_code_for(e);  // InputError 2; CheckFailure, OutOfMemoryError, others 1
  } catch (const c10::Error& e) {
    std::cerr << "foxhunt: [torch] " << e.what_without_backtrace() << std::endl;
    return kExitCheckFailed;
  } catch (const std::exception& e) {
    std::cerr << "foxhunt: " << e.what() << std::endl;
    return kExitCheckFailed;
  }
}
