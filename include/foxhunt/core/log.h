#pragma once
/// \file log.h
/// Where the library's messages go. The library never writes to stderr itself: it reports
/// through the sink installed here (in the manner of LibTorch's c10::WarningHandler and spdlog's
/// sinks), and a caller that wants the messages elsewhere (a log file, a GUI, Python's logging, a
/// test) installs its own. Two channels:
///
/// - messages: a level, the component that speaks ("dist", "memory", "train all") and one line
///   of text. The default sink writes "foxhunt: [component] message\n" to stderr.
/// - progress: raw text of a progress display, written as it comes ("\r" to redraw a live bar,
///   ANSI erase codes, "\n" to end a line). The default sink writes it to stderr and flushes.
///
/// Example:
///
///   std::vector<std::string> seen;
///   foxhunt::LogSink previous = foxhunt::set_log_sink(
///       [&](foxhunt::LogLevel, std::string_view component, std::string_view message) {
///         seen.push_back(std::string(component) + ": " + std::string(message));
///       });
///   ...                                     // library calls that report
///   foxhunt::set_log_sink(std::move(previous));
///
/// Installing and calling are thread-safe; a sink may be called from several threads at once
/// (it guards its own state) and may itself call set_log_sink or log. Torch-free.

#include <functional>
#include <string_view>

namespace foxhunt {

/// How much a message matters.
enum class LogLevel {
  kInfo,     ///< what a run is doing (e.g. which model `train all` trains next)
  kWarning,  ///< something went wrong but the run goes on (e.g. a rank killed after a failure)
  kError,    ///< a failure the caller cannot recover from (e.g. a corrupt allocator block)
};

/// "info", "warning" or "error".
const char* to_string(LogLevel level);

/// Receives one message: its level, the component that reports it and the text (one line, no
/// trailing newline). Both views are valid only during the call.
using LogSink =
    std::function<void(LogLevel level, std::string_view component, std::string_view message)>;

/// Installs `sink` for every later message (an empty sink restores default_log_sink) and returns
/// the sink installed before (default_log_sink, wrapped, when none was installed), so that
/// `set_log_sink(std::move(previous))` restores it. Thread-safe.
LogSink set_log_sink(LogSink sink);

/// The sink used when none is installed: writes "foxhunt: [component] message\n" to stderr in
/// one write (lines from several threads do not interleave). Does not throw.
void default_log_sink(LogLevel level, std::string_view component, std::string_view message);

/// Reports `message` from `component` to the installed sink. Never throws: a sink that throws
/// has the message written by default_log_sink instead. Allocates nothing itself (the default
/// sink only for lines over 500 bytes), so that failure paths such as an allocator's deleter may
/// report through it.
void log(LogLevel level, std::string_view component, std::string_view message) noexcept;

/// Receives raw progress text ("\r" redraws, ANSI erase codes and "\n" included); the view is
/// valid only during the call.
using ProgressSink = std::function<void(std::string_view text)>;

/// Installs `sink` for progress text (an empty sink restores default_progress_sink) and returns
/// the one installed before (default_progress_sink, wrapped, when none was). Thread-safe.
ProgressSink set_progress_sink(ProgressSink sink);

/// The progress sink used when none is installed: writes `text` to stderr and flushes.
void default_progress_sink(std::string_view text);

/// Writes `text` to the installed progress sink. Never throws (a throwing sink drops the text).
void write_progress(std::string_view text) noexcept;

/// True when progress text goes to default_progress_sink and stderr is a terminal: a live bar
/// can redraw its line there. False once a progress sink is installed.
bool progress_is_terminal();

}  // namespace foxhunt
