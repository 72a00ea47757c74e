#include "foxhunt/core/log.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <mutex>
#include <utility>

#include "foxhunt/core/strings.h"

namespace foxhunt {

namespace {

// The installed sinks. A caller of log() copies the shared_ptr under the mutex (a reference
// count, no allocation) and calls the sink after unlocking, so that a sink may log or install
// another sink without deadlocking, and a sink replaced meanwhile lives until its last call
// returns.
struct Sinks {
  std::mutex mutex;
  std::shared_ptr<const LogSink> log;            // null: default_log_sink
  std::shared_ptr<const ProgressSink> progress;  // null: default_progress_sink
};

// Never destroyed: messages may come from static destructors (an allocator's deleter at exit).
Sinks& sinks() {
  static Sinks* s = new Sinks;
  return *s;
}

// True when `sink` is `fallback` itself (e.g. a previous sink handed back to be restored): it is
// stored as null, so that progress_is_terminal still sees the default.
template <typename Sink, typename Fn>
bool is_default(const Sink& sink, Fn* fallback) {
  Fn* const* target = sink.template target<Fn*>();
  return target != nullptr && *target == fallback;
}

}  // namespace

const char* to_string(LogLevel level) {
  return enum_name(level, {"info", "warning", "error"});
}

namespace {

// Installs `sink` in `slot` (the default when empty or the default itself); returns the previous
// one (the default when none was installed).
template <typename Sink, typename Fn>
Sink exchange_sink(std::shared_ptr<const Sink> Sinks::*slot, Sink sink, Fn* fallback) {
  auto next =
      sink && !is_default(sink, fallback) ? std::make_shared<const Sink>(std::move(sink)) : nullptr;
  std::shared_ptr<const Sink> previous;
  {
    std::lock_guard<std::mutex> lock(sinks().mutex);
    previous = std::exchange(sinks().*slot, std::move(next));
  }
  return previous ? *previous : Sink(fallback);
}

}  // namespace

LogSink set_log_sink(LogSink sink) {
  return exchange_sink(&Sinks::log, std::move(sink), &default_log_sink);
}

void default_log_sink(LogLevel level, std::string_view component, std::string_view message) {
  try {
    // One fwrite of the whole line; the buffer's inline storage holds lines under 500 bytes.
    fmt::memory_buffer line;
    fmt::format_to(std::back_inserter(line), "foxhunt: [{}] {}\n", component, message);
    std::fwrite(line.data(), 1, line.size(), stderr);
  } catch (...) {
    // Out of memory for a long line: nothing else to report it through.
  }
}

void log(LogLevel level, std::string_view component, std::string_view message) noexcept {
  std::shared_ptr<const LogSink> sink;
  {
    std::lock_guard<std::mutex> lock(sinks().mutex);
    sink = sinks().log;
  }
  if (!sink) return default_log_sink(level, component, message);
  try {
    (*sink)(level, component, message);
  } catch (...) {
    default_log_sink(level, component, message);
  }
}

ProgressSink set_progress_sink(ProgressSink sink) {
  return exchange_sink(&Sinks::progress, std::move(sink), &default_progress_sink);
}

void default_progress_sink(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

void write_progress(std::string_view text) noexcept {
  std::shared_ptr<const ProgressSink> sink;
  {
    std::lock_guard<std::mutex> lock(sinks().mutex);
    sink = sinks().progress;
  }
  if (!sink) return default_progress_sink(text);
  try {
    (*sink)(text);
  } catch (...) {
    // A display is not worth failing a run for.
  }
}

bool progress_is_terminal() {
  {
    std::lock_guard<std::mutex> lock(sinks().mutex);
    if (sinks().progress) return false;
  }
  return ::isatty(STDERR_FILENO) != 0;
}

}  // namespace foxhunt
