#pragma once
/// \file reports.h
/// The sections of the product's reports (report/html_report.h pages: self-contained HTML with
/// inline SVG, and the same content as Markdown): stress runs and backtests, alone (`foxhunt stress
/// --report`, `foxhunt backtest --report`) or together (`foxhunt validate`).

#include <nlohmann/json.hpp>
#include <string>

#include "foxhunt/harness/stress.h"
#include "foxhunt/report/html_report.h"
#include "foxhunt/serving/backtest.h"

namespace foxhunt::harness {

/// A summary table, then per scenario its verdict, memory timeline per model, RSS, latency
/// histogram, throughput over time and figures.
void add_stress_sections(HtmlReport& page, const StressReport& report);

/// Metrics tables (every strategy, every forecaster against its naive baselines), equity curves
/// against buy-and-hold, drawdowns, a forecast fan chart (P10/P50/P90 against the realised
/// returns) and a calibration plot (nominal vs observed) per forecaster.
void add_backtest_sections(HtmlReport& page, const serving::BacktestRun& run);

/// Writes a stress run's DIR/stress.json, DIR/report.html (inline SVG: memory timeline per
/// model, latency histogram and throughput over time per scenario) and DIR/report.md (each
/// atomically); returns the HTML path.
std::string write_stress_report(const StressReport& report, const std::string& dir);

/// Writes DIR/report.html, DIR/report.md and `json` as DIR/`json_name`, each atomically (DIR is
/// created); returns the HTML path.
std::string write_report(const HtmlReport& page, const std::string& dir, const nlohmann::json& json,
                         const std::string& json_name);

}  // namespace foxhunt::harness
