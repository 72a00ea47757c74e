#include <cstdio>
#include <iostream>

#include "command.h"
#include "foxhunt/core/units.h"
#include "foxhunt/memory/device_profile.h"

namespace foxhunt::cli {
namespace {

struct DevicesArgs {
  static constexpr const char* kHelp =
      "Device profile catalog: total, context reserve and usable memory per card";
  bool json = false;
  std::string profiles;
};

Registrar registered_devices = subcommand<DevicesArgs>(
    "devices", 15, [](CLI::App* sub, std::shared_ptr<DevicesArgs> args) -> Runner {
      sub->add_flag("--json", args->json, "Print JSON only");
      sub->add_option("--profiles", args->profiles,
                      "JSON file with custom profiles to add: {\"profiles\": [{\"name\", "
                      "\"total_mib\", \"reserve_mib\", \"description\"}]}");
      return [args]() {
        if (!args->profiles.empty())
          memory::register_profiles(memory::load_profiles(args->profiles));
        const auto catalog = memory::profile_catalog();
        if (args->json) {
          nlohmann::json arr = nlohmann::json::array();
          for (const auto& p : catalog) arr.push_back(memory::to_json(p));
          print_json(nlohmann::json{{"profiles", arr}}.dump(2));
          return 0;
        }
        std::printf("%-16s %12s %12s %12s  %s\n", "profile", "total", "reserve", "usable",
                    "description");
        for (const auto& p : catalog)
          std::printf("%-16s %12s %12s %12s  %s%s\n", p.name.c_str(),
                      human_bytes(double(p.total_bytes)).c_str(),
                      human_bytes(double(p.reserve_bytes)).c_str(),
                      human_bytes(double(p.usable_bytes())).c_str(), p.description.c_str(),
                      p.source == "builtin" ? "" : (" [" + p.source + "]").c_str());
        return 0;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
