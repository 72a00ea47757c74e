#pragma once
/// \file checkpointing.h
/// Trainer checkpoints: one container file (core/container.h), written atomically, that holds
/// everything a trainer needs to continue exactly where it stopped — model weights, optimizer
/// state, random streams, counters and algorithm state (replay buffer, environment states, ...).
///
/// A trainer checkpoint is also a model checkpoint: header "model"/"options" and blob "module"
/// are laid out as in models/checkpoint.h, so models::load_model() reads the trained weights from
/// it directly. Trainer-specific data sits under header["trainer"] and in further blobs.

#include <torch/torch.h>

#include <nlohmann/json.hpp>
#include <string>

#include "foxhunt/core/container.h"
#include "foxhunt/models/model.h"

namespace foxhunt::train {

/// Format version of the trainer section; other versions are rejected on resume.
inline constexpr int kTrainerCheckpointVersion = 1;

/// Serialises an optimizer's state (torch archive).
std::string optimizer_to_bytes(torch::optim::Optimizer& opt);
/// Restores an optimizer's state; throws InputError naming `source` when it does not fit.
void optimizer_from_bytes(torch::optim::Optimizer& opt, const std::string& bytes,
                          const std::string& source);

/// State of LibTorch's default CPU generator (used by dropout and by model initialisation).
/// CUDA generators are not saved: a resumed CUDA run with dropout continues with a fresh CUDA
/// stream (everything else is restored).
std::string torch_rng_state();
/// Restores the default CPU generator from torch_rng_state().
void set_torch_rng_state(const std::string& bytes, const std::string& source);

/// Builds a trainer checkpoint container: the model checkpoint of `model` with header kind
/// "trainer" and header["trainer"] = {version, algo, ...`trainer`}.
Container trainer_container(models::Model& model, const std::string& algo,
                            const nlohmann::json& trainer);
/// Reads a trainer checkpoint and checks its kind, version and algorithm.
/// Throws InputError("[checkpoint] ...") for anything else (including plain model checkpoints).
Container read_trainer_checkpoint(const std::string& path, const std::string& algo);
/// Checks a container read elsewhere as read_trainer_checkpoint does (kind, version, algo);
/// `source` names it in errors.
void check_trainer_container(const Container& c, const std::string& source,
                             const std::string& algo);
/// The blob `name` of `c`; throws InputError naming `source` when it is missing.
const std::string& require_blob(const Container& c, const std::string& name,
                                const std::string& source);

}  // namespace foxhunt::train
