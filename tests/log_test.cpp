// core/log.h: the library reports through the sink its caller installs (never straight to
// stderr); set_log_sink hands back the sink it replaced; progress text has its own sink.
#include "foxhunt/core/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "foxhunt/dist/launcher.h"
#include "foxhunt/train/infra.h"

namespace foxhunt {
namespace {

struct CapturedLogEntry {
  LogLevel level;
  std::string component;
  std::string message;
};

// Installs a sink that keeps every message, and puts the previous sink back on destruction.
class CapturedLog {
 public:
  CapturedLog() {
    previous_ =
        set_log_sink([this](LogLevel level, std::string_view component, std::string_view message) {
          std::lock_guard<std::mutex> lock(mutex_);
          entries_.push_back({level, std::string(component), std::string(message)});
        });
  }
  ~CapturedLog() { set_log_sink(std::move(previous_)); }
  std::vector<CapturedLogEntry> entries() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return entries_;
  }
  const LogSink& previous() const { return previous_; }

 private:
  mutable std::mutex mutex_;
  std::vector<CapturedLogEntry> entries_;
  LogSink previous_;
};

using DefaultLogSinkFn = void (*)(LogLevel, std::string_view, std::string_view);

TEST(LogTest, SetLogSinkReturnsThePreviousSink) {
  std::vector<std::string> first, second;
  LogSink original = set_log_sink(
      [&](LogLevel, std::string_view, std::string_view message) { first.emplace_back(message); });
  // Nothing was installed before: the previous sink is the default one.
  ASSERT_TRUE(original);
  ASSERT_NE(original.target<DefaultLogSinkFn>(), nullptr);
  EXPECT_EQ(*original.target<DefaultLogSinkFn>(), &default_log_sink);

  LogSink previous = set_log_sink(
      [&](LogLevel, std::string_view, std::string_view message) { second.emplace_back(message); });
  log(LogLevel::kInfo, "demo", "to the second sink");
  ASSERT_TRUE(previous);
  previous(LogLevel::kInfo, "demo", "through the returned sink");
  EXPECT_EQ(second, std::vector<std::string>{"to the second sink"});
  EXPECT_EQ(first, std::vector<std::string>{"through the returned sink"});

  // Restoring: each call hands back the sink it replaces.
  LogSink replaced = set_log_sink(std::move(previous));
  replaced(LogLevel::kInfo, "demo", "the second sink again");
  EXPECT_EQ(second.size(), 2u);
  LogSink last = set_log_sink(std::move(original));
  last(LogLevel::kInfo, "demo", "the first sink again");
  EXPECT_EQ(first.size(), 2u);
  EXPECT_EQ(second.size(), 2u);
  // An empty sink restores the default, and is what set_log_sink reports as the default.
  LogSink none = set_log_sink({});
  ASSERT_NE(none.target<DefaultLogSinkFn>(), nullptr);
  EXPECT_EQ(*none.target<DefaultLogSinkFn>(), &default_log_sink);
}

TEST(LogTest, LogReachesTheInstalledSinkWithLevelComponentAndMessage) {
  CapturedLog captured;
  log(LogLevel::kWarning, "demo", "expected 3 bars, got 2");
  const auto entries = captured.entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].level, LogLevel::kWarning);
  EXPECT_EQ(entries[0].component, "demo");
  EXPECT_EQ(entries[0].message, "expected 3 bars, got 2");
  EXPECT_STREQ(to_string(LogLevel::kInfo), "info");
  EXPECT_STREQ(to_string(LogLevel::kWarning), "warning");
  EXPECT_STREQ(to_string(LogLevel::kError), "error");
}

TEST(LogTest, LauncherReportsAProgramItCannotRunThroughTheSink) {
  // The rank's exec fails in the child; the parent (not the child) logs why.
  const std::string missing = "/nonexistent/foxhunt-no-such-program";
  CapturedLog captured;
  const auto no_args = [](int64_t, int64_t, const std::string&) {
    return std::vector<std::string>{};
  };
  const auto result = dist::launch_local(missing, no_args, 1, "127.0.0.1:1", 1.0);
  EXPECT_EQ(result.exit_code, 127);
  const auto entries = captured.entries();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].level, LogLevel::kError);
  EXPECT_EQ(entries[0].component, "dist");
  EXPECT_EQ(entries[0].message, "rank 0: cannot run '" + missing + "': No such file or directory");
}

TEST(LogTest, DefaultSinkWritesComponentPrefixedLinesToStderr) {
  ::testing::internal::CaptureStderr();
  log(LogLevel::kInfo, "train all", "dqn -> out/ensemble/dqn");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "foxhunt: [train all] dqn -> out/ensemble/dqn\n");
}

TEST(LogTest, AThrowingSinkFallsBackToTheDefaultAndLogDoesNotThrow) {
  LogSink previous = set_log_sink([](LogLevel, std::string_view, std::string_view) {
    throw std::runtime_error("sink failed");
  });
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(log(LogLevel::kError, "memory", "bad block"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "foxhunt: [memory] bad block\n");
  set_log_sink(std::move(previous));
}

TEST(LogTest, ConcurrentMessagesAllReachTheSink) {
  std::atomic<int> count{0};
  LogSink previous =
      set_log_sink([&](LogLevel, std::string_view, std::string_view) { count.fetch_add(1); });
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([] {
      for (int i = 0; i < 1000; ++i) log(LogLevel::kInfo, "demo", "tick");
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(count.load(), 4000);
  set_log_sink(std::move(previous));
}

TEST(LogTest, ProgressTextGoesToTheProgressSinkOrTheGivenOutput) {
  std::string sunk;
  ProgressSink previous = set_progress_sink([&](std::string_view text) { sunk += text; });
  EXPECT_FALSE(progress_is_terminal());  // an installed sink is not a terminal
  {
    train::Progress p("dqn", 1000, 0, train::ProgressMode::kLines);
    p.log(500, "loss 0.1");
    p.finish();
  }
  EXPECT_NE(sunk.find("dqn step 500/1000 (50.0%)"), std::string::npos) << sunk;
  EXPECT_NE(sunk.find("loss 0.1"), std::string::npos) << sunk;
  EXPECT_EQ(sunk.back(), '\n');

  // A Progress given its own output writes there only; kAuto then draws lines, not the bar.
  std::string own;
  const std::string before = sunk;
  {
    train::Progress p("ppo", 10, 0, train::ProgressMode::kAuto,
                      [&](std::string_view text) { own += text; });
    p.update(5);  // lines mode: nothing
    p.log(5);
    p.finish();
  }
  EXPECT_EQ(sunk, before);
  EXPECT_NE(own.find("ppo step 5/10"), std::string::npos) << own;
  EXPECT_EQ(own.find('\r'), std::string::npos) << own;

  // The bar's raw text (redraw and erase codes) reaches the sink as drawn.
  sunk.clear();
  {
    train::Progress p("tft", 4, 0, train::ProgressMode::kBar);
    p.log(2);
    p.finish();
  }
  EXPECT_EQ(sunk.rfind("\rtft [", 0), 0u) << sunk;
  EXPECT_NE(sunk.find("\x1b[K"), std::string::npos);
  EXPECT_EQ(sunk.back(), '\n');

  // Handing back the previous (default) sink restores the terminal check.
  set_progress_sink(std::move(previous));
  EXPECT_EQ(progress_is_terminal(), ::isatty(STDERR_FILENO) != 0);
}

}  // namespace
}  // namespace foxhunt
