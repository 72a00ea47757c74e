#include "foxhunt/train/infra.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <sstream>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"

namespace foxhunt::train {

// ---- results and JSON -------------------------------------------------------------------------

nlohmann::json json_number(double v) {
  if (!std::isfinite(v)) return nullptr;
  return v;
}

nlohmann::json to_json(const TrainResult& r) {
  nlohmann::json j;
  FOXHUNT_JSON_FIELDS(j, r, algo, steps, total_steps, episodes, completed, interrupted, seconds,
                      metrics);
  j["checkpoint"] = r.checkpoint_path;
  return j;
}

// ---- MetricsLog -------------------------------------------------------------------------------

namespace {

// Cuts a partial last line (a process killed mid-write) off the end of the file at `path`, so that
// every line of the log parses once the next run appends. No file yet: nothing to do.
void drop_partial_last_line(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return;  // absent (fopen creates it) or unreadable (fopen reports why)
  struct stat st {};
  const off_t end = ::fstat(fd, &st) == 0 ? st.st_size : 0;
  off_t keep = end;
  std::array<char, 4096> buf{};
  while (keep > 0) {
    const off_t from = std::max<off_t>(0, keep - static_cast<off_t>(buf.size()));
    const auto want = static_cast<size_t>(keep - from);
    if (::pread(fd, buf.data(), want, from) != static_cast<ssize_t>(want)) {
      keep = end;  // unreadable: leave it as it is
      break;
    }
    if (const void* nl = ::memrchr(buf.data(), '\n', want)) {
      keep = from + (static_cast<const char*>(nl) - buf.data()) + 1;
      break;
    }
    keep = from;
  }
  const bool ok = keep == end || ::ftruncate(fd, keep) == 0;
  const int e = errno;
  ::close(fd);
  if (!ok)
    FOXHUNT_FAIL("train", "cannot drop the partial last line of metrics file '", path,
                 "': ", std::strerror(e));
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, MetricsStart start) : path_(path) {
  if (path.empty()) return;
  if (start == MetricsStart::kAppend) drop_partial_last_line(path);
  file_ = std::fopen(path.c_str(), start == MetricsStart::kFresh ? "w" : "a");
  if (!file_)
    FOXHUNT_FAIL("train", "cannot open metrics file '", path, "': ", std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (file_) std::fclose(file_);
}

void MetricsLog::write(const nlohmann::json& line) {
  lines_.push_back(line);
  if (!file_) return;
  const std::string s = line.dump() + "\n";
  if (std::fwrite(s.data(), 1, s.size(), file_) != s.size() || std::fflush(file_) != 0)
    FOXHUNT_FAIL("train", "cannot write metrics file '", path_, "': ", std::strerror(errno));
}

// ---- Progress ---------------------------------------------------------------------------------

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<int64_t>(seconds + 0.5);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m{:02}s", s / 3600, s / 60 % 60, s % 60);
}

Progress::Progress(std::string label, int64_t total, int64_t start_step, ProgressMode mode,
                   ProgressSink out)
    : label_(std::move(label)),
      total_(total),
      start_(start_step),
      t0_(std::chrono::steady_clock::now()),
      last_draw_(t0_),
      out_(std::move(out)) {
  if (mode == ProgressMode::kAuto)
    mode = !out_ && progress_is_terminal() ? ProgressMode::kBar : ProgressMode::kLines;
  bar_ = mode == ProgressMode::kBar;
  lines_ = mode == ProgressMode::kLines;
}

double Progress::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

double Progress::rate(int64_t step) const {
  const double t = elapsed();
  return t > 0 ? static_cast<double>(step - start_) / t : 0.0;
}

void Progress::draw(int64_t step, const std::string& extra, bool newline) {
  const double r = rate(step);
  const double frac = total_ > 0 ? std::min(1.0, static_cast<double>(step) / total_) : 0.0;
  const double eta = r > 0 ? static_cast<double>(std::max<int64_t>(total_ - step, 0)) / r : NAN;
  std::string line;
  if (bar_) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(frac * kWidth);
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    line = fmt::format("\r{} [{}] {:>5.1f}% {}/{} {:.0f}/s ETA {}", label_, bar, 100.0 * frac, step,
                       total_, r, format_duration(eta));
  } else {
    line = fmt::format("{} step {}/{} ({:.1f}%) {:.0f}/s elapsed {} ETA {}", label_, step, total_,
                       100.0 * frac, r, format_duration(elapsed()), format_duration(eta));
  }
  if (!extra.empty()) line += "  " + extra;
  if (bar_) line += "\x1b[K";  // clear the rest of the terminal line
  if (newline) line += "\n";
  write(line);
  drawn_ = true;
}

void Progress::write(std::string_view text) const {
  if (out_)
    out_(text);
  else
    write_progress(text);
}

void Progress::update(int64_t step, const std::string& extra) {
  if (!bar_) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  draw(step, extra, false);
}

void Progress::log(int64_t step, const std::string& extra) {
  if (lines_) draw(step, extra, true);
  if (bar_) {
    last_draw_ = std::chrono::steady_clock::now();
    draw(step, extra, false);
  }
}

void Progress::finish() {
  if (bar_ && drawn_) write("\n");
  drawn_ = false;
}

// ---- RollingMean ------------------------------------------------------------------------------

void RollingMean::add(double v) {
  values_.push_back(v);
  while (values_.size() > capacity_) values_.pop_front();
}

double RollingMean::mean() const {
  if (values_.empty()) return NAN;
  double s = 0;
  for (double v : values_) s += v;
  return s / static_cast<double>(values_.size());
}

nlohmann::json RollingMean::to_json() const {
  return std::vector<double>(values_.begin(), values_.end());
}

void RollingMean::from_json(const nlohmann::json& j) {
  values_.clear();
  for (const auto& v : j) add(v.get<double>());
}

// ---- stop flag and SIGINT ---------------------------------------------------------------------

namespace {
// Set by the SIGINT handler, read and cleared by trainers on any thread (data-parallel ranks
// in one process train on threads): a lock-free atomic is both async-signal-safe and
// race-free, which volatile sig_atomic_t is not across threads (found by ThreadSanitizer).
std::atomic<int> g_stop{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_sigint(int) {
  if (g_stop.load() != 0) {
    // Second Ctrl-C: give up on the clean stop and die the default way.
    std::signal(SIGINT, SIG_DFL);
    std::raise(SIGINT);
    return;
  }
  g_stop.store(1);
}
}  // namespace

bool stop_requested() {
  return g_stop.load() != 0;
}
void clear_stop() {
  g_stop.store(0);
}

struct ScopedSigintHandler::Saved {
  struct sigaction old {};
};

ScopedSigintHandler::ScopedSigintHandler() : saved_(new Saved) {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: a blocking read returns so the trainer sees the flag
  if (::sigaction(SIGINT, &sa, &saved_->old) != 0) {
    delete saved_;
    FOXHUNT_FAIL("train", "cannot install the SIGINT handler: ", std::strerror(errno));
  }
}

ScopedSigintHandler::~ScopedSigintHandler() {
  ::sigaction(SIGINT, &saved_->old, nullptr);
  delete saved_;
}

}  // namespace foxhunt::train
