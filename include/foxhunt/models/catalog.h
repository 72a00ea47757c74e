#pragma once
/// \file catalog.h
/// The model catalog: everything the layers above need to know about each model, in one
/// registration per model (src/models/catalog.cpp). Code outside models/ asks the catalog (its
/// family, its trainer, its defaults, its quantized forms) and never compares a model's name nor
/// casts to a model type. Precisions other than fp32 are the entry's quantized forms (the INT8 TFT,
/// models/tft_int8.h; the BF16 TFT and Mamba-2, models/bf16.h); precisions.h asks about them and
/// runs their quantize hook.
///
/// Adding a fifth model: its module and ModelAdapter in models/, one CatalogEntry below (with a
/// QuantizedForm for each quantized form it has), and (if it trains with a new kind of step) a
/// TrainerKind with its case in train/trainer_step.cpp and jobs/train_job.cpp, which the
/// compiler's -Wswitch points to.
/// A policy trained by the DQN or PPO trainer also gives the entry's policy_options/policy_shape
/// hooks and overrides Model::as_value_policy() or as_actor_critic() (policy.h).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "foxhunt/models/precision.h"
#include "foxhunt/models/spec.h"

namespace foxhunt::models {

class Model;
struct QuantizeRequest;
struct QuantizeResult;

/// What a model produces: an RL policy (actions from a state) or a quantile forecaster.
enum class Family { kPolicy, kForecaster };

/// The training step a model runs (train/ maps each kind to its trainer classes).
enum class TrainerKind { kDqn, kPpo, kForecast };

/// The network sizes an RL trainer builds a policy with (from its environment and options).
struct PolicyShape {
  std::int64_t state_dim = 0;        ///< observation width
  std::vector<std::int64_t> hidden;  ///< hidden layer widths
  std::int64_t actions = 0;          ///< number of discrete actions
};

/// One quantized form of a catalog model (precisions.h asks about them).
struct QuantizedForm {
  Precision precision;  ///< the form's precision (not kFp32)
  /// Builds the form from the fp32 model's options JSON (missing keys take defaults), with
  /// zero-filled weights to be loaded from a bundle.
  std::unique_ptr<Model> (*make)(const nlohmann::json& options);
  /// Parameter bytes per precision at these options: {"fp32": {"parameter_bytes"}, "<this
  /// precision>": {"parameter_bytes", ... the form's own breakdown}}. The bundle loader bounds a
  /// file's weights by "<precision>_bytes" where the breakdown has it, else "parameter_bytes".
  nlohmann::json (*bytes)(const nlohmann::json& options);
  /// The quantize hook: calibrates (and for QAT fine-tunes through the request's callback) the
  /// trained fp32 model `fp32` of this entry and converts it. `fp32` is left in eval mode; a QAT
  /// run leaves its fine-tuned weights in it.
  QuantizeResult (*quantize)(Model& fp32, const QuantizeRequest& request);
};

/// One model of the catalog.
struct CatalogEntry {
  std::string name;         ///< registry name ("dqn", ...), also the bundle directory's name
  Family family;            ///< policy or forecaster
  TrainerKind trainer;      ///< which trainer step trains it
  std::string description;  ///< one line for listings
  /// Builds the fp32 model from options JSON (missing keys take defaults).
  std::unique_ptr<Model> (*make)(const nlohmann::json& options);
  /// Model and trainer options for a short series (see jobs/train_job.cpp, which measured
  /// them); empty objects where the defaults already suit one.
  nlohmann::json compact_model_options;
  nlohmann::json compact_trainer_options;
  /// Serving memory targets (plan/budget.h: twice the measured fp32 batch-64 footprint), on the
  /// CPU and on CUDA (where the fused CPU kernels do not run).
  std::uint64_t serving_target_cpu_bytes = 0;
  std::uint64_t serving_target_cuda_bytes = 0;
  /// The reference system's claimed serving footprint (its README's "MB" = MiB).
  std::uint64_t reference_claim_bytes = 0;
  /// Weight of the model's signal in the default ensemble decision.
  double ensemble_weight = 1.0;
  /// The model option that sizes its instrument input (the number of instrument ids it embeds),
  /// "" for a model without one. Training on a panel sets it to at least the instrument count.
  std::string instrument_count_option = {};
  /// A policy's options JSON for a network of `shape`, its other options at their defaults (the
  /// RL trainers build their model from it); null for a model no RL trainer sizes.
  nlohmann::json (*policy_options)(const PolicyShape& shape) = nullptr;
  /// The network shape a policy's options JSON describes (missing keys at their defaults;
  /// unknown keys and bad values are InputErrors); null for a model no RL trainer sizes.
  PolicyShape (*policy_shape)(const nlohmann::json& options) = nullptr;
  /// Its forms at precisions other than fp32 (none for most models).
  std::vector<QuantizedForm> quantized_forms = {};
  /// The option that sets the width of each past-feature input, by input name ({"x",
  /// "input_dim"}): training on bars built from a tape sizes the input to its feature set with
  /// the flow columns (data/flow_features.h; sized_inputs). A model without an entry for an
  /// input trains on bar CSVs only (training it on a tape is refused, naming the input).
  std::vector<std::pair<std::string, std::string>> input_width_options = {};
  /// The fp32 parameter count of the model with options JSON `options`, in closed form before
  /// anything is allocated (missing keys at their defaults; bad values and an overflowing count
  /// are InputErrors): the bundle loader refuses options that describe more weights than the
  /// file holds. Null for a model that gives none (the loader then builds it unchecked).
  std::int64_t (*parameter_count)(const nlohmann::json& options) = nullptr;
};

/// Every model, in canonical order (dqn, ppo, mamba2, tft): reports list models in this order.
const std::vector<CatalogEntry>& catalog();

/// Adds a model to the catalog, after the built-in ones: everything above models/ (training,
/// serving, the ensemble and the desk, budgets, backtests, listings) then knows it by this entry
/// and its Model's hooks alone. Call it before any of them runs (it invalidates references into
/// catalog() and is not synchronised with readers). InputError for an empty name, a missing
/// factory or a name already registered.
void register_model(CatalogEntry entry);
/// Removes a model that register_model added (same contract: nothing may be using it).
/// InputError for a name not registered, or one of the built-in models.
void unregister_model(const std::string& name);

/// The entry named `name`; InputError naming `component` and the known names otherwise.
const CatalogEntry& catalog_entry(const std::string& name, const char* component = "models");

/// True when `name` is in the catalog.
bool in_catalog(const std::string& name);

/// The names of one family, in canonical order.
std::vector<std::string> model_names(Family family);

/// The catalog's names joined by `separator` ("dqn, ppo, mamba2, tft"), for messages and help.
std::string joined_model_names(const char* separator = ", ");
/// The names of one family joined by `separator` ("dqn/ppo").
std::string joined_model_names(Family family, const char* separator);

/// Whether `name` is an RL policy (InputError for an unknown name).
bool is_policy(const std::string& name);

/// The model a trainer of `kind` builds when its caller names none: the first catalog entry
/// trained by it (the built-in dqn for kDqn, ppo for kPpo, mamba2 for kForecast).
const CatalogEntry& trainer_model(TrainerKind kind);
/// The algorithm id a trainer of `kind` writes into its checkpoints and metrics ("algo"): the
/// name of the model it was written for (trainer_model) for the RL kinds, "forecast" for the
/// forecast trainer, which trains any forecaster.
std::string trainer_algo(TrainerKind kind);

/// The options JSON of policy `name` for a network of `shape` (CatalogEntry::policy_options).
/// InputError naming `component` for an unknown name or a model without that hook.
nlohmann::json policy_options(const std::string& name, const PolicyShape& shape,
                              const char* component = "models");
/// `options` of model `name` with every past-feature input `width(input)` values wide: an
/// input of another width gets the option the entry's input_width_options names for it; inputs
/// already that wide are left as they are (so a model trained on bar CSVs keeps its options).
/// InputError naming `component`, the model and the input when an input needs another width and
/// the entry names no option for it, or when the model built from the new options still reads
/// another width.
nlohmann::json sized_inputs(const std::string& name, nlohmann::json options,
                            const std::function<std::int64_t(const InputSpec&)>& width,
                            const char* component = "models");

/// The network shape of policy `name` with options JSON `options` (CatalogEntry::policy_shape;
/// null means {}). InputError naming `component` for an unknown name or a model without that
/// hook, and as the model's reader throws for bad options.
PolicyShape policy_shape(const std::string& name, const nlohmann::json& options,
                         const char* component = "models");

}  // namespace foxhunt::models
