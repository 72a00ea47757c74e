// The typed result of `foxhunt train`: its JSON form (summary.json, --json) and its text form.
#include "foxhunt/jobs/train_summary.h"

#include <fmt/format.h>

#include "foxhunt/core/fields.h"
#include "foxhunt/core/units.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::jobs {

// The JSON keys are the field names.
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CompactDefaults, reason, model, trainer)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(BatchPlanSummary, chosen_batch, budget_bytes, budget_source,
                                   max_batch, limited_by, verified, predicted_peak_bytes,
                                   verified_peak_bytes, world_size, comm_bucket_bytes,
                                   external_bytes, trainer_state_bytes, step, seconds)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MemoryCapReport, enforced_cap_bytes, enforced_on, mechanism,
                                   run_peak_bytes, budget_bytes, budget_source)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(PolicyEvaluation, episodes, mean_return, min_return, max_return,
                                   policy)

using train::json_number;

nlohmann::json to_json(const MarketDataInfo& d) {
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, d, source, bars, train, validation, test, target_scale, target_vol_feature,
                      periods_per_year, periods_per_year_basis);
  if (!d.bar_spec.empty()) j["bar_spec"] = d.bar_spec;
  if (d.target_vol_selection_loss) {
    nlohmann::json losses = nlohmann::json::object();
    for (const auto& [name, loss] : *d.target_vol_selection_loss) losses[name] = json_number(loss);
    j["target_vol_selection_loss"] = losses;
  }
  if (!d.instruments.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& i : d.instruments) {
      nlohmann::json& row = list.emplace_back();
      FOXHUNT_JSON_FIELDS(row, i, symbol, instrument_id, bars, train, validation, test,
                          target_scale);
    }
    j["instruments"] = list;
  }
  if (d.cuts)
    j["cuts"] = {{"validation_begin", data::format_timestamp(d.cuts->validation_begin)},
                 {"test_begin", data::format_timestamp(d.cuts->test_begin)}};
  return j;
}

namespace {

nlohmann::json by_instrument(const ForecastTestEvaluation& e) {
  if (e.next_bar_by_instrument.empty()) return nullptr;
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [symbol, ev] : e.next_bar_by_instrument) j[symbol] = data::to_json(ev);
  return j;
}

nlohmann::json pooled(const ForecastTestEvaluation& e) {
  if (!e.next_bar_pooled) return nullptr;
  const auto& p = *e.next_bar_pooled;
  return {{"instruments", p.instruments},
          {"points", p.points},
          {"model_pinball", json_number(p.model_pinball)},
          {"baseline_pinball", json_number(p.baseline_pinball)},
          {"skill", json_number(p.skill)},
          {"beating_instruments", p.beating_instruments}};
}

nlohmann::json eval_json(const TrainSummary& s) {
  if (const auto* e = s.policy_eval()) return *e;
  const auto* e = s.forecast_eval();
  if (!e) return nullptr;
  return {{"split", "test"},
          {"windows", e->windows},
          {"loss", json_number(e->loss)},
          {"baseline_loss", json_number(e->baseline_loss)},
          {"skill", json_number(e->skill)},
          {"best_val_loss", json_number(e->best_val_loss)},
          {"best_epoch", e->best_epoch},
          {"initial_val_loss", json_number(e->initial_val_loss)},
          {"next_bar", e->next_bar ? data::to_json(*e->next_bar) : nlohmann::json(nullptr)},
          {"next_bar_by_instrument", by_instrument(*e)},
          {"next_bar_pooled", pooled(*e)}};
}

}  // namespace

nlohmann::json to_json(const TrainSummary& s) {
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, s, model, env, steps, total_steps, episodes, completed, interrupted,
                      seconds, checkpoint, metrics, metrics_file, options, world_size);
  j["resumed_from"] = json_or_null(s.resumed_from);
  j["resumed_world_size"] = json_or_null(s.resumed_world_size);
  j["bundle"] = json_or_null(s.bundle);
  j["eval"] = eval_json(s);
  j["memory_cap"] = json_or_null(s.memory_cap);
  j["enforced_cap_bytes"] =
      s.memory_cap ? nlohmann::json(s.memory_cap->enforced_cap_bytes) : nlohmann::json(nullptr);
  if (s.data) j["data"] = to_json(*s.data);
  if (s.forecaster()) j["compact_defaults"] = json_or_null(s.compact_defaults);
  if (s.batch_plan) {
    nlohmann::json plan = *s.batch_plan;
    // A capped run's plan also carries the cap and the run's peak.
    if (s.memory_cap) {
      plan["enforced_cap_bytes"] = s.memory_cap->enforced_cap_bytes;
      plan["enforced_on"] = s.memory_cap->enforced_on;
      plan["run_peak_bytes"] = s.memory_cap->run_peak_bytes;
    }
    j["batch_plan"] = plan;
  }
  if (!s.distributed.is_null()) {
    j["distributed"] = s.distributed;
    j["weight_checksum"] = s.distributed.value("last_weight_check", nlohmann::json(nullptr));
  }
  if (s.samples_per_s_all_ranks) j["samples_per_s_all_ranks"] = *s.samples_per_s_all_ranks;
  return j;
}

nlohmann::json to_json(const TrainAllSummary& s) {
  nlohmann::json models = nlohmann::json::object();
  for (const auto& [name, summary] : s.models) models[name] = to_json(summary);
  nlohmann::json j = {{"models", models}};
  FOXHUNT_JSON_FIELDS(j, s, out, bundles, interrupted, complete, rule, rule_fit);
  return j;
}

std::string format_train_summary(const TrainAllSummary& s) {
  std::string out;
  for (const auto& [name, m] : s.models) out += format_train_summary(m);
  if (!s.rule.empty() && s.rule_fit.is_object()) {
    const auto& f = s.rule_fit;
    out += fmt::format(
        "decision rule: weights fitted on {} validation bars (Sharpe after costs: "
        "equal {:.2f}, best {:.2f}, written {:.2f}) -> {}\n",
        f.value("bars", 0), f.value("sharpe_equal", 0.0), f.value("sharpe_best", 0.0),
        f.value("sharpe_fitted", 0.0), s.rule);
    // The costs it was fitted at: a backtest at other costs scores a rule tuned for these.
    if (f.contains("cost_bps")) {
      out += fmt::format("  costs: cost_bps {:g}", f.value("cost_bps", 0.0));
      const auto costs = f.value("costs", nlohmann::json::object());
      for (const auto& [name, v] : costs.items())
        if (v.is_number()) out += fmt::format(", {} {:g}", name, v.get<double>());
      out += " (backtest at the same costs)\n";
    }
    // Which candidate the rule holds (models or a baseline) and why (serving/rule_fit.h).
    if (f.contains("chosen"))
      out += fmt::format("  chosen: {} (PSR {:.3f}, DSR {:.3f} over {} trials): {}\n",
                         f.value("chosen", std::string()), f.value("psr", 0.0), f.value("dsr", 0.0),
                         f.value("trials", 0), f.value("reason", std::string()));
    out += "  weights:";
    const auto weights = f.value("weights", nlohmann::json::object());  // outlives the loop
    for (const auto& [m, w] : weights.items()) {
      out += fmt::format(" {} {:.2f}", m, w.get<double>());
    }
    if (f.value("vol_target_weight", 0.0) > 0)
      out += fmt::format(" vol_target {:.2f}", f.value("vol_target_weight", 0.0));
    if (f.contains("band"))
      out += fmt::format("; no-trade band {:.2g} (turnover {:.0f}/year)", f.value("band", 0.0),
                         f.value("turnover_per_year", 0.0));
    out += "\n";
  } else if (s.rule_fit.is_object() && s.rule_fit.contains("error")) {
    out += "decision rule: not fitted (" + s.rule_fit["error"].get<std::string>() +
           "); the built-in rule applies\n";
  }
  out += "bundles (" + std::to_string(s.bundles.size()) + ") in " + s.out + "\n";
  return out;
}

std::string format_train_summary(const TrainSummary& s) {
  std::string out;
  const auto& m = s.metrics;
  out += fmt::format("{} on {}: {}/{} steps, {} {} in {}{}\n", s.model, s.env, s.steps,
                     s.total_steps, s.episodes, s.forecaster() ? "epochs" : "episodes",
                     train::format_duration(s.seconds), s.interrupted ? " (interrupted)" : "");
  if (s.resumed_world_size) {
    out += fmt::format("  resumed at world size {} from a world-size-{} checkpoint\n", s.world_size,
                       *s.resumed_world_size);
  }
  if (s.distributed.is_object()) {
    const auto& d = s.distributed;
    const auto& w = d.value("last_weight_check", nlohmann::json());
    out += fmt::format(
        "  data-parallel: {} ranks ({}), {} buckets of {}, {:.3g} s waiting for "
        "all-reduce; weights {} at step {} (checksum {})\n",
        d.value("world_size", int64_t{1}), d.value("backend", "?"), d.value("buckets", int64_t{0}),
        human_bytes(static_cast<double>(d.value("bucket_bytes", int64_t{0}))),
        d.value("communication_wait_s", 0.0),
        w.is_object() && w.value("identical", false) ? "identical on every rank" : "not compared",
        w.is_object() ? w.value("step", int64_t{-1}) : int64_t{-1},
        w.is_object() ? w.value("weight_checksum", "") : std::string("-"));
  }
  if (m.contains("return_mean")) {
    if (m["return_mean"].is_null())
      out += "  training return (last 100 episodes): n/a\n";
    else
      out += fmt::format("  training return (last 100 episodes): {:.4g}\n",
                         m["return_mean"].get<double>());
  }
  if (const auto* e = s.policy_eval()) {
    out += fmt::format(
        "  greedy evaluation: mean return {:.4g} over {} episodes (min {:.4g}, max {:.4g})\n",
        e->mean_return, e->episodes, e->min_return, e->max_return);
  }
  // Non-finite figures are null in the JSON: shown as nan, and no line without a test loss.
  const auto finite = [](double v) { return std::isfinite(v) ? v : NAN; };
  if (const auto* e = s.forecast_eval(); e && std::isfinite(e->loss)) {
    out += fmt::format(
        "  best validation loss {:.5g} (epoch {}); test loss {:.5g} vs unconditional "
        "baseline {:.5g} over {} windows\n",
        finite(e->best_val_loss), e->best_epoch, e->loss, finite(e->baseline_loss), e->windows);
    if (const auto& p = e->next_bar_pooled) {
      out += fmt::format(
          "  next bar over {} instruments ({} test bars): skill {:+.2f}% vs each "
          "one's best naive baseline, pooled; {} of {} beat theirs\n",
          p->instruments, p->points, 100.0 * p->skill, p->beating_instruments, p->instruments);
    }
  }
  if (s.data && !s.data->instruments.empty() && s.data->cuts)
    out += "  panel: " + std::to_string(s.data->instruments.size()) +
           " instruments, validation from " +
           data::format_timestamp(s.data->cuts->validation_begin) + ", test from " +
           data::format_timestamp(s.data->cuts->test_begin) + " for all\n";
  if (s.data && !s.data->periods_per_year_basis.empty())
    out += "  periods/year: " + s.data->periods_per_year_basis +
           (s.data->bar_spec.empty() ? "" : "; bars " + s.data->bar_spec + " from the tape") + "\n";
  out += "  checkpoint: " + s.checkpoint + "\n";
  out += "  metrics:    " + s.metrics_file + "\n";
  if (s.interrupted) out += "  interrupted: the checkpoint holds the run so far\n";
  return out;
}

}  // namespace foxhunt::jobs
