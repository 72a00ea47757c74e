#include "foxhunt/train/loop.h"

namespace foxhunt::train {

RunSession::RunSession(const RunConfig& run, std::string algo, std::string label,
                       int64_t total_steps, int64_t start_step)
    : run_(run),
      // A run from step 0 starts its log anew (a rerun after a crash must not append to the
      // killed run's lines); a resumed run appends.
      log_(run.metrics_path, start_step > 0 ? MetricsStart::kAppend : MetricsStart::kFresh),
      progress_(std::move(label), total_steps, start_step, run.progress, run.progress_output) {
  clear_stop();
  result_.algo = std::move(algo);
  result_.total_steps = total_steps;
}

bool RunSession::should_stop(int64_t step) {
  if (halted_) return true;
  bool stop = run_.stop_at_step >= 0 && step >= run_.stop_at_step;  // the same on every rank
  if (agree_stop_) {
    // Data-parallel ranks stop together: a Ctrl-C on any rank is acted on by every rank at the
    // next agreement step (never by one rank alone, which would leave the others waiting).
    if (step % agree_every_ == 0 && agree_stop_(stop_requested())) {
      result_.interrupted = true;
      stop = true;
    }
  } else if (stop_requested()) {
    result_.interrupted = true;
    stop = true;
  }
  if (stop) halted_ = true;
  return halted_;
}

void RunSession::emit(const nlohmann::json& line) {
  log_.write(line);
  if (run_.on_log) run_.on_log(line);
}

void RunSession::log(const nlohmann::json& line, int64_t step, const std::string& extra) {
  emit(line);
  progress_.log(step, extra);
}

void RunSession::checkpoint(const std::function<void(const std::string&)>& save) {
  if (run_.checkpoint_path.empty()) return;
  save(run_.checkpoint_path);
  result_.checkpoint_path = run_.checkpoint_path;
}

TrainResult RunSession::finish(int64_t steps, int64_t episodes, bool completed,
                               nlohmann::json metrics) {
  progress_.finish();
  result_.steps = steps;
  result_.episodes = episodes;
  result_.completed = completed;
  result_.seconds = progress_.elapsed();
  result_.metrics = std::move(metrics);
  return result_;
}

}  // namespace foxhunt::train
