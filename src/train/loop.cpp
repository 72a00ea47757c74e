#include "foxhunt/train/loop.h"

namespace foxhunt::train {

RunSession::RunSession(const RunConfig& run, std::string algo, std::string label,
                       int64_t total_steps, int64_t start_step)
    : run_(run),
      log_(run.metrics_path),
      progress_(std::move(label), total_steps, start_step, run.progress) {
  clear_stop();
  result_.algo = std::move(algo);
  result_.total_steps = total_steps;
}

bool RunSession::should_stop(int64_t step) {
  if (stop_requested() || (run_.stop_at_step >= 0 && step >= run_.stop_at_step)) {
    result_.interrupted = stop_requested();
    halted_ = true;
  }
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
