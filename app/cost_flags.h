#pragma once
// The cost flags of backtest and train, declared once: --cost-bps and the cost model's terms
// (data/cost_model.h). `train all` takes the same flags as `backtest`, so its policies train and
// its rule is fitted under the costs that score them. Only app/ knows the flag names.

#include <CLI/CLI.hpp>

#include <string>

#include "foxhunt/data/cost_model.h"

namespace foxhunt::cli {

/// Adds --cost-bps (bound to `*cost_bps`), --spread-bps, --fee-bps, --fee-per-contract,
/// --contract-multiplier, --notional and --impact-k (bound to `*costs`' fields) to `sub`, each
/// with its default shown and its domain checked (a negative term, a multiplier not > 0: exit 2
/// naming the flag). `what` says what the costs apply to in this command. Returns --cost-bps.
CLI::Option* add_cost_flags(CLI::App* sub, double* cost_bps, data::CostModel* costs,
                            const std::string& what);

}  // namespace foxhunt::cli
