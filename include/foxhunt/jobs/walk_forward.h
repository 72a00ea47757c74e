#pragma once
/// \file walk_forward.h
/// `foxhunt backtest --walk-forward N`: the four models are retrained every N bars and each next
/// N bars are scored out of sample, the way a desk would have run them.
///
/// Folds: the first training window is bars [0, initial); fold k trains on [0, s_k) (expanding)
/// or [s_k - rolling, s_k) (rolling W), with s_k = initial + k N, then scores bars [s_k,
/// s_k + N) (the last fold may be shorter). Each fold runs `train all` on its window (its own
/// validation split fits its decision rule), writes WORK/fold-KKK/, and is served over up to
/// 1,000 bars before s_k as warm-up, then over its N bars. The folds' scored bars are joined
/// and scored once as one run (serving::score_backtest): strategies, baselines, bootstrap
/// statistics, forecast evaluation. The refits report each fold's training range, time, the
/// trained models' own evaluations and each strategy's Sharpe on the fold.
///
/// Resumable: a fold whose directory holds a complete ensemble and a record of the same
/// training range, data and settings (WORK/fold-KKK/walk_forward.json, written last) is reused,
/// not retrained; an interrupted run (Ctrl-C) keeps the finished folds and resumes from them.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "foxhunt/core/device.h"
#include "foxhunt/data/cost_model.h"
#include "foxhunt/serving/backtest.h"

namespace foxhunt::jobs {

/// What to walk forward.
struct WalkForwardJob {
  std::string data;      ///< bars CSV (one series)
  std::string work_dir;  ///< the folds' ensembles ("" = out/walk-forward)
  int64_t every = 0;     ///< N: bars scored per fold (refit every N bars), >= 20
  int64_t rolling = 0;   ///< W: fixed training window in bars (0 = expanding)
  int64_t initial = 0;   ///< bars of the first training window (0 = 60% of the series)
  int64_t steps = 0;     ///< RL steps per refit (0 = train all's default)
  int64_t epochs = 0;    ///< forecaster epochs per refit (0 = train all's default)
  uint64_t seed = 42;    ///< training, the random policy and the bootstrap
  Device device;         ///< training and serving device
  /// Cost per unit of position change, basis points: each fold scores, trains its policies and
  /// fits its rule under it and `costs` (part of the fold's record).
  double cost_bps = 1.0;
  data::CostModel costs;  ///< the cost terms beside cost_bps (serving::BacktestJob::costs)
  std::string rule;       ///< decision rule file ("" = each fold's fitted rule)
  bool progress = true;   ///< train all's progress display (auto) or none
  bool explain = false;   ///< average the TFT's explanations (serving::BacktestJob::explain)
};

/// One refit.
struct Refit {
  int64_t fold = 0;         ///< 0-based
  int64_t train_begin = 0;  ///< first training bar (index in the file)
  int64_t train_end = 0;    ///< one past the last training bar
  int64_t train_first_timestamp = 0;
  int64_t train_last_timestamp = 0;
  int64_t score_begin = 0;               ///< first scored bar (index)
  int64_t score_end = 0;                 ///< one past the last scored bar
  int64_t first_timestamp = 0;           ///< first scored bar
  int64_t last_timestamp = 0;            ///< last scored bar
  double seconds = 0;                    ///< training time (0 when reused)
  bool reused = false;                   ///< the fold's ensemble was already trained
  std::string dir;                       ///< WORK/fold-KKK
  nlohmann::json training;               ///< per model: its evaluation after training
  nlohmann::json rule_fit;               ///< the fold's decision rule fit
  std::map<std::string, double> sharpe;  ///< per strategy: Sharpe on this fold's bars
  std::map<std::string, double> psr;     ///< per strategy: PSR (against 0) on this fold's bars
  /// The ensemble's Deflated Sharpe Ratio on this fold's bars against the search its fold's fit
  /// recorded; unset for a rule without one (a --rule file).
  std::optional<double> dsr;
};

/// The stitched run and its refits.
struct WalkForwardRun {
  std::vector<Refit> refits;  ///< in time order
  serving::BacktestRun run;   ///< every fold's scored bars, scored as one run
  bool interrupted = false;   ///< stopped by Ctrl-C; rerun the same command to resume
  int64_t every = 0;          ///< N
  int64_t rolling = 0;        ///< W (0: expanding)
  /// The stitched ensemble's PSR and DSR (also the run's strategies.ensemble.psr and .dsr). The
  /// stitched DSR deflates for every fold's search: N = the sum of the folds' trials, V = the
  /// largest of their variances; unset when a fold's rule recorded no search.
  double stitched_psr = 0;
  std::optional<double> stitched_dsr;  ///< see stitched_psr

  /// {walk_forward: {every, rolling, window, folds, interrupted, stitched_psr, stitched_dsr},
  /// refits: [... each with sharpe, psr and dsr], ...the run's JSON}.
  nlohmann::json to_json() const;
  /// The refits' table, then the run's table.
  std::string table() const;
  /// The refits' part of table(): one line per fold (dates, training time, the Sharpe of the
  /// ensemble, buy-and-hold and each model; the ensemble's PSR and DSR), then the stitched run.
  std::string refits_table() const;
};

/// Runs the job. InputError for a series too short for one fold, a panel CSV, bad sizes.
WalkForwardRun run_walk_forward(const WalkForwardJob& job, std::ostream& log);

}  // namespace foxhunt::jobs
