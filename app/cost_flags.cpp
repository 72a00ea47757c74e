// The cost flags shared by backtest and train (cost_flags.h).
#include "cost_flags.h"

#include "command.h"

namespace foxhunt::cli {

CLI::Option* add_cost_flags(CLI::App* sub, double* cost_bps, data::CostModel* costs,
                            const std::string& what) {
  auto* flat = add_defaulted(sub, "--cost-bps", cost_bps,
                             "Cost per unit of position change, basis points of notional, " + what +
                                 "; flat: the cost model's terms below add to it (a per-contract "
                                 "fee: --fee-per-contract)")
                   ->check(non_negative_number());
  add_defaulted(sub, "--spread-bps", &costs->spread_bps,
                "Quoted spread (ask - bid) / mid in basis points; half of it is paid per unit "
                "traded (a bar CSV has no quotes)")
      ->check(non_negative_number());
  add_defaulted(sub, "--fee-bps", &costs->fee_bps, "Fee per notional traded, basis points")
      ->check(non_negative_number());
  add_defaulted(sub, "--fee-per-contract", &costs->fee_per_contract,
                "Fee per contract traded, in the price's currency (see --contract-multiplier)")
      ->check(non_negative_number());
  add_defaulted(sub, "--contract-multiplier", &costs->contract_multiplier,
                "Units of the instrument per contract (1 for shares, 50 for an E-mini)")
      ->check(positive_number());
  add_defaulted(sub, "--notional", &costs->notional,
                "Account notional (price currency) that a position of 1 is; > 0 charges the "
                "square-root market impact k * sigma * sqrt(traded / ADV) from the bars' "
                "volume (capacity is reported either way)")
      ->check(non_negative_number());
  add_defaulted(sub, "--impact-k", &costs->impact_k,
                "k of the square-root market impact (0 turns it off)")
      ->check(non_negative_number());
  return flat;
}

}  // namespace foxhunt::cli
