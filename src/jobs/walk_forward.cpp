#include "foxhunt/jobs/walk_forward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/jobs/train_job.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/rule_fit.h"
#include "foxhunt/serving/serving.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::jobs {
namespace {

constexpr const char* kWalkForwardComponent = "walk-forward";
constexpr int64_t kMaxWarmupBars = 1000;  // served before a fold's first scored bar
constexpr const char* kRecordFile = "walk_forward.json";

data::BarSeries slice(const data::BarSeries& s, int64_t begin, int64_t end) {
  data::BarSeries out;
  out.close_only = s.close_only;
  out.source = s.source;
  out.bars.assign(s.bars.begin() + begin, s.bars.begin() + end);
  if (s.has_flow()) out.flow.assign(s.flow.begin() + begin, s.flow.begin() + end);
  return out;
}

// What makes a fold's training reusable: the same bars and the same settings.
nlohmann::json fold_record(const WalkForwardJob& job, const data::BarSeries& train) {
  const auto f = serving::fingerprint(train);
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, f, rows, first_timestamp, last_timestamp, hash);
  FOXHUNT_JSON_FIELDS(j, job, steps, epochs, seed, cost_bps);
  j["costs"] = data::to_json(job.costs);  // the folds train and fit under the scored costs
  return j;
}

bool reusable(const std::string& dir, const nlohmann::json& record) {
  const auto path = (std::filesystem::path(dir) / kRecordFile).string();
  if (!std::filesystem::exists(path) || !serving::BundleDirectory(dir).complete()) return false;
  try {
    return nlohmann::json::parse(read_file(path)) == record;
  } catch (const std::exception&) {
    return false;
  }
}

std::string day(int64_t t) {
  return data::format_timestamp(t).substr(0, 10);
}

// The stitched ensemble's DSR (walk_forward.h): N = every fold's trials, V = the largest of the
// folds' variances; nullopt when a fold's rule recorded no search.
std::optional<double> stitched_dsr(const std::vector<serving::BacktestRun>& parts,
                                   const std::vector<double>& returns) {
  int64_t trials = 0;
  double variance = 0.0;
  for (const auto& p : parts) {
    const auto& f = p.rule.fit;
    if (!serving::fitted_rule_dsr(p.rule, returns)) return std::nullopt;
    trials += f.at("trials").get<int64_t>();
    variance = std::max(variance, f.at("dsr_variance").get<double>());
  }
  serving::DecisionRule all;
  all.fit = {{"trials", trials}, {"dsr_variance", variance}};
  return serving::fitted_rule_dsr(all, returns);
}

}  // namespace

WalkForwardRun run_walk_forward(const WalkForwardJob& job, std::ostream& log) {
  FOXHUNT_CHECK(!job.data.empty(), kWalkForwardComponent, "data: expected a bars CSV");
  FOXHUNT_CHECK(job.every >= 20, kWalkForwardComponent,
                "every (bars per fold): expected at least 20, got ", job.every);
  FOXHUNT_CHECK(job.rolling >= 0 && job.initial >= 0, kWalkForwardComponent,
                "rolling/initial: expected >= 0, got ", job.rolling, " and ", job.initial);
  FOXHUNT_CHECK(job.cost_bps >= 0, kWalkForwardComponent, "cost_bps: expected >= 0, got ",
                job.cost_bps);
  const auto series = data::load_bars_csv(job.data);
  const auto n = static_cast<int64_t>(series.size());
  const int64_t initial = job.initial > 0 ? job.initial : n * 6 / 10;
  FOXHUNT_CHECK(initial < n, kWalkForwardComponent, "initial ", initial,
                ": expected fewer bars than the ", n, " in '", job.data, "' (the rest is scored)");
  FOXHUNT_CHECK(job.rolling == 0 || job.rolling <= initial, kWalkForwardComponent, "rolling ",
                job.rolling, ": expected at most the first training window (", initial, " bars)");
  const int64_t folds = (n - initial + job.every - 1) / job.every;
  const std::string work = job.work_dir.empty() ? "out/walk-forward" : job.work_dir;
  std::filesystem::create_directories(work);

  WalkForwardRun out;
  out.every = job.every;
  out.rolling = job.rolling;
  serving::BacktestJob bt;
  bt.data = job.data;
  bt.cost_bps = job.cost_bps;
  bt.costs = job.costs;
  bt.device = job.device;
  bt.seed = job.seed;
  bt.explain = job.explain;
  const auto device = models::to_torch(job.device);
  std::vector<serving::BacktestRun> parts;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t k = 0; k < folds; ++k) {
    Refit r;
    r.fold = k;
    r.score_begin = initial + k * job.every;
    r.score_end = std::min(n, r.score_begin + job.every);
    r.train_end = r.score_begin;
    r.train_begin = job.rolling > 0 ? r.train_end - job.rolling : 0;
    r.dir = (std::filesystem::path(work) / fmt::format("fold-{:03}", k)).string();
    const auto train = slice(series, r.train_begin, r.train_end);
    r.train_first_timestamp = train.bars.front().timestamp;
    r.train_last_timestamp = train.bars.back().timestamp;
    const auto record = fold_record(job, train);

    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log << fmt::format(
        "[walk-forward] fold {}/{}: train on bars {}..{} ({} .. {}), score "
        "{}..{}; {:.0f} s so far\n",
        k + 1, folds, r.train_begin, r.train_end - 1, day(r.train_first_timestamp),
        day(r.train_last_timestamp), r.score_begin, r.score_end - 1, elapsed);
    log.flush();
    if (reusable(r.dir, record)) {
      r.reused = true;
      log << "[walk-forward]   reused the ensemble already trained in " << r.dir << "\n";
      const auto summary = nlohmann::json::parse(
          read_file((std::filesystem::path(r.dir) / "summary.json").string()));
      for (const auto& [m, s] : summary.at("models").items())
        r.training[m] = s.value("eval", nlohmann::json());
      r.rule_fit = summary.value("rule_fit", nlohmann::json());
    } else {
      std::filesystem::remove((std::filesystem::path(r.dir) / kRecordFile).string());
      const auto csv = (std::filesystem::path(r.dir) / "train.csv").string();
      std::filesystem::create_directories(r.dir);
      data::write_bars_csv(csv, train);
      TrainJob tj;
      tj.model = "all";
      tj.data = csv;
      FOXHUNT_COPY_FIELDS(tj, job, steps, epochs, seed, device);
      // Each fold's policies train, and its rule is fitted, under the costs that score it.
      tj.trading_env.cost_bps = job.cost_bps;
      tj.trading_env.costs = job.costs;
      tj.out_dir = r.dir;
      tj.progress = job.progress ? train::ProgressMode::kAuto : train::ProgressMode::kOff;
      const auto started = std::chrono::steady_clock::now();
      const auto all = run_train_all(tj);
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
      if (all.interrupted || train::stop_requested()) {
        out.interrupted = true;
        log << "[walk-forward] interrupted in fold " << k + 1
            << "; the finished folds are kept: rerun the same command to resume\n";
        break;
      }
      FOXHUNT_CHECK(all.complete, kWalkForwardComponent, "fold ", k + 1,
                    ": train all did not write every "
                    "bundle into ",
                    r.dir);
      for (const auto& [m, s] : all.models)
        r.training[m] = to_json(s).value("eval", nlohmann::json());
      r.rule_fit = all.rule_fit;
      write_file_atomic((std::filesystem::path(r.dir) / kRecordFile).string(),
                        record.dump(2) + "\n");
    }

    // Serve the fold: warm up on the bars before it, score its own.
    const auto bundles = serving::load_ensemble_bundles(r.dir, device);
    bt.rule = serving::ensemble_rule(r.dir, job.rule);
    bt.from = std::to_string(series.bars[static_cast<size_t>(r.score_begin)].timestamp);
    bt.to = std::to_string(series.bars[static_cast<size_t>(r.score_end - 1)].timestamp);
    const int64_t warm_begin = std::max<int64_t>(0, r.score_begin - kMaxWarmupBars);
    std::ostringstream quiet;  // its warm-up bars are the training bars, by construction
    auto part =
        serving::stream_backtest(bundles, slice(series, warm_begin, r.score_end), bt, quiet);
    r.first_timestamp = part.timestamps.front();
    r.last_timestamp = part.timestamps.back();
    auto scored = part;  // the fold alone, for its refit line
    serving::score_backtest(scored, bt);
    for (const auto& [s, res] : scored.results) {
      r.sharpe[s] = res.sharpe;
      r.psr[s] = res.psr;
    }
    if (auto e = scored.results.find("ensemble"); e != scored.results.end()) r.dsr = e->second.dsr;
    parts.push_back(std::move(part));
    out.refits.push_back(std::move(r));
  }
  FOXHUNT_CHECK(!parts.empty(), kWalkForwardComponent,
                "interrupted before the first fold finished");

  // One run of every fold's scored bars, in order; scored once.
  auto& run = out.run;
  run = parts.front();
  for (size_t k = 1; k < parts.size(); ++k) {
    const auto& p = parts[k];
    run.timestamps.insert(run.timestamps.end(), p.timestamps.begin(), p.timestamps.end());
    run.closes.insert(run.closes.end(), p.closes.begin(), p.closes.end());
    run.volumes.insert(run.volumes.end(), p.volumes.begin(), p.volumes.end());
    for (const auto& [s, pos] : p.positions)
      run.positions[s].insert(run.positions[s].end(), pos.begin(), pos.end());
    for (const auto& [m, v] : p.max_abs_signal)
      run.max_abs_signal[m] = std::max(run.max_abs_signal[m], v);
    for (const auto& [m, f] : p.forecasts)
      run.forecasts[m].quantiles.insert(run.forecasts[m].quantiles.end(), f.quantiles.begin(),
                                        f.quantiles.end());
    run.skipped_training_bars += p.skipped_training_bars;
    run.warmup_bars += p.warmup_bars;
    for (const auto& [m, sum] : p.explanation_sums) {
      // The fold's sums carry its bar count: add them as one "bar", then the rest of the count.
      serving::add_explanation(run, m, sum);
      run.explained_bars[m] += p.explained_bars.at(m) - 1;
    }
  }
  run.data = job.data;
  run.bars_in_file = n;
  run.training_end = out.refits.front().train_last_timestamp;
  serving::score_backtest(run, bt);
  // The stitched ensemble was chosen by every fold's search, not the first fold's alone.
  if (auto e = run.results.find("ensemble"); e != run.results.end()) {
    e->second.dsr = stitched_dsr(parts, e->second.returns);
    out.stitched_psr = e->second.psr;
    out.stitched_dsr = e->second.dsr;
  }
  return out;
}

nlohmann::json WalkForwardRun::to_json() const {
  nlohmann::json j = run.to_json();
  nlohmann::json refit_rows = nlohmann::json::array();
  for (const auto& r : refits) {
    nlohmann::json& row = refit_rows.emplace_back();
    FOXHUNT_JSON_FIELDS(row, r, fold, train_begin, train_end, train_first_timestamp,
                        train_last_timestamp, score_begin, score_end, first_timestamp,
                        last_timestamp, seconds, reused, dir, training, rule_fit, sharpe, psr);
    row["dsr"] = json_or_null(r.dsr);
  }
  j["walk_forward"] = {{"every", every},
                       {"rolling", rolling},
                       {"window", rolling > 0 ? "rolling" : "expanding"},
                       {"folds", refits.size()},
                       {"interrupted", interrupted},
                       {"stitched_psr", stitched_psr},
                       {"stitched_dsr", json_or_null(stitched_dsr)}};
  j["refits"] = refit_rows;
  return j;
}

std::string WalkForwardRun::refits_table() const {
  std::ostringstream os;
  os << fmt::format("walk-forward: {} refits every {} bars ({} window)\n", refits.size(), every,
                    rolling > 0 ? fmt::format("rolling {}", rolling) : "expanding");
  // The ensemble, buy-and-hold, then each model of the catalog that the folds scored.
  std::vector<std::string> columns = {"ensemble", "buy_and_hold"};
  for (const auto& m : models::model_names())
    if (std::any_of(refits.begin(), refits.end(),
                    [&](const Refit& r) { return r.sharpe.count(m); }))
      columns.push_back(m);
  os << fmt::format("{:<5} {:<23} {:<23} {:>8}", "fold", "trained on", "scored", "train s");
  for (const auto& c : columns) os << fmt::format(" {:>9}", c == "buy_and_hold" ? "b&h" : c);
  os << fmt::format(" {:>7} {:>7}\n", "ens.psr", "ens.dsr");
  auto dsr_text = [](const std::optional<double>& d) {
    return d ? fmt::format("{:.2f}", *d) : std::string("-");
  };
  for (const auto& r : refits) {
    const std::string trained = day(r.train_first_timestamp) + ".." + day(r.train_last_timestamp);
    const std::string scored = day(r.first_timestamp) + ".." + day(r.last_timestamp);
    os << fmt::format("{:<5} {:<23} {:<23} {:>8}", r.fold + 1, trained, scored,
                      r.reused ? "reused" : std::to_string(static_cast<int64_t>(r.seconds)));
    for (const auto& c : columns) {
      const auto it = r.sharpe.find(c);
      os << fmt::format(" {:>9.2f}", it == r.sharpe.end() ? NAN : it->second);
    }
    const auto psr = r.psr.find("ensemble");
    os << fmt::format(" {:>7.2f} {:>7}\n", psr == r.psr.end() ? NAN : psr->second, dsr_text(r.dsr));
  }
  if (run.scored) {
    os << fmt::format("{:<5} {:<23} {:<23} {:>8}", "all", "stitched", "", "");
    for (const auto& c : columns) {
      const auto it = run.results.find(c);
      os << fmt::format(" {:>9.2f}", it == run.results.end() ? NAN : it->second.sharpe);
    }
    os << fmt::format(" {:>7.2f} {:>7}\n", stitched_psr, dsr_text(stitched_dsr));
  }
  if (interrupted) os << "interrupted: rerun the same command to resume from the finished folds\n";
  return os.str();
}

std::string WalkForwardRun::table() const {
  return refits_table() + run.table();
}

}  // namespace foxhunt::jobs
