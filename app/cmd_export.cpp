// foxhunt export / import: a bundle's weights as a safetensors file for Python users, and back
// (library: serving/bundle.h, models/safetensors.h).
#include <iostream>

#include "command.h"
#include "foxhunt/core/error.h"
#include "foxhunt/models/safetensors.h"
#include "foxhunt/serving/bundle.h"

namespace foxhunt::cli {
namespace {

struct ExportArgs {
  static constexpr const char* kHelp =
      "Write a bundle's weights as a safetensors file (options and I/O spec in its metadata)";
  std::string bundle;
  std::string format = "safetensors";
  std::string out;
  bool json = false;
};

struct ImportArgs {
  static constexpr const char* kHelp =
      "Read safetensors weights back into a bundle: everything else (options, normaliser, "
      "feature spec) comes from --into";
  std::string weights;
  std::string into;
  std::string out;
  bool json = false;
};

Registrar export_reg = subcommand<ExportArgs>(
    "export", 55, [](CLI::App* sub, std::shared_ptr<ExportArgs> a) -> Runner {
      sub->add_option("bundle", a->bundle,
                      "Bundle file (DIR/<model>/bundle.fhb) or its model directory (DIR/<model>)")
          ->required();
      add_defaulted(sub, "--format", &a->format, "Output format")
          ->check(CLI::IsMember({"safetensors"}));
      sub->add_option("--out", a->out, "Output file (.safetensors)")->required();
      sub->add_flag("--json", a->json, "Print a JSON summary only");
      return [a]() {
        auto b = serving::load_bundle(a->bundle);
        const auto tensors = models::module_tensors(b.model->module());
        const std::map<std::string, std::string> metadata = {
            {"format", "foxhunt-weights"},
            {"foxhunt_version", FOXHUNT_VERSION},
            {"model", b.name()},
            {"options", b.model->options_json().dump()},
            {"spec", nlohmann::json(b.model->spec()).dump()},
            {"target_scale", nlohmann::json(b.target_scale).dump()},
            {"data_hash", b.data.hash}};
        models::save_safetensors(a->out, tensors, metadata);
        int64_t bytes = 0;
        for (const auto& [name, t] : tensors)
          bytes += t.numel() * static_cast<int64_t>(t.element_size());
        const nlohmann::json summary = {{"model", b.name()},
                                        {"out", a->out},
                                        {"tensors", tensors.size()},
                                        {"tensor_bytes", bytes}};
        if (a->json)
          print_json(summary.dump(2));
        else
          std::cout << "exported " << b.name() << " weights (" << tensors.size() << " tensors, "
                    << bytes << " bytes) to " << a->out << "\n";
        return 0;
      };
    });

Registrar import_reg = subcommand<ImportArgs>(
    "import", 56, [](CLI::App* sub, std::shared_ptr<ImportArgs> a) -> Runner {
      sub->add_option("weights", a->weights, "safetensors file (e.g. written by foxhunt export)")
          ->required();
      sub->add_option("--into", a->into, "Bundle whose model the weights belong to")->required();
      sub->add_option("--out", a->out, "Bundle to write (may equal --into)")->required();
      sub->add_flag("--json", a->json, "Print a JSON summary only");
      return [a]() {
        auto b = serving::load_bundle(a->into);
        const auto file = models::load_safetensors(a->weights);
        // A foxhunt export names its model and options: refuse weights of another model.
        if (auto it = file.metadata.find("model"); it != file.metadata.end())
          FOXHUNT_CHECK(it->second == b.name(), "import", "'", a->weights, "' holds '", it->second,
                        "' weights, the bundle '", a->into, "' is a '", b.name(), "' model");
        if (auto it = file.metadata.find("options"); it != file.metadata.end())
          FOXHUNT_CHECK(
              nlohmann::json::parse(it->second, nullptr, false) == b.model->options_json(),
              "import", "'", a->weights, "': model options ", it->second,
              " differ from the bundle's ", b.model->options_json().dump());
        models::load_module_tensors(b.model->module(), file, a->weights);  // all checks first
        serving::save_bundle(b, a->out);
        const nlohmann::json summary = {
            {"model", b.name()}, {"out", a->out}, {"tensors", file.tensors.size()}};
        if (a->json)
          print_json(summary.dump(2));
        else
          std::cout << "imported " << file.tensors.size() << " tensors into " << a->out << "\n";
        return 0;
      };
    });

}  // namespace
}  // namespace foxhunt::cli
