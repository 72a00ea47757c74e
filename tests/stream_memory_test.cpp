// Streams in bounded memory: `foxhunt predict --data -` holds memory proportional to its windows
// and instruments, not to its input. Generated bars are piped into the CLI's stdin for about a
// minute (as many as it takes in that time) while this process samples the child's resident set
// (/proc/PID/statm); after the warm-up, the least-squares slope of RSS against bars fed must be
// below a few bytes per bar: keeping anything per bar (a decision, a line of input) shows as tens
// of bytes per bar. Once for one series (the Ensemble), once for a panel of 64 instruments (the
// desk) and once for a tape of 20 million prints (`--ticks -`). Slow tests: ctest label "slow".
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "foxhunt/core/random.h"
#include "foxhunt/core/sanitizers.h"
#include "foxhunt/core/stats.h"
#include "foxhunt/data/bar_builder.h"
#include "foxhunt/data/tape.h"
#include "serving_test_fixture.h"
#include "test_util.h"

namespace foxhunt::serving {
namespace {

// What one streamed run measured.
struct RssRun {
  std::vector<double> bars;  // bars fed (instrument-bars) at each sample
  std::vector<double> rss;   // the child's resident bytes then
  int64_t fed = 0;           // bars fed in all
  int exit_code = -1;        // the child's
  std::string err;           // its stderr
  bool gave_up = false;      // stopped early: the child's RSS grew past kGiveUpGrowthBytes
};

constexpr double kGiveUpGrowthBytes = 1024.0 * 1024 * 1024;

int64_t resident_bytes(pid_t pid) {
  std::ifstream statm("/proc/" + std::to_string(pid) + "/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return false;  // the child is gone (EPIPE: SIGPIPE is ignored meanwhile)
    done += static_cast<size_t>(n);
  }
  return true;
}

// Runs `foxhunt predict --bundles DIR --data -` (or `input`, e.g. {"--ticks", "-"}), writes
// `header`, then `step(i)` (the lines of timestamp i, `bars_per_step` bars or prints) for
// `seconds` or until `max_fed` were fed, sampling the child's RSS every `sample_every` steps;
// then closes its stdin and waits for it.
RssRun stream_predict(const std::string& bundles, const std::string& header,
                      const std::function<std::string(int64_t)>& step, int64_t bars_per_step,
                      double seconds, int64_t sample_every, const std::string& err_file,
                      const std::vector<std::string>& input = {"--data", "-"},
                      int64_t max_fed = INT64_MAX) {
  RssRun run;
  std::vector<std::string> args = {FOXHUNT_CLI_PATH, "predict", "--bundles", bundles};
  args.insert(args.end(), input.begin(), input.end());
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int in[2];
  if (::pipe(in) != 0) return run;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::close(in[0]);
    ::close(in[1]);
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(err, 2);
    // ASan holds freed blocks in a quarantine (256 MiB) before reuse: resident memory would
    // climb for that long whatever the program keeps. A small one measures the program.
    if (kAddressSanitizer) {
      const char* old = std::getenv("ASAN_OPTIONS");
      const std::string opts = std::string(old ? old : "") + ":quarantine_size_mb=1";
      ::setenv("ASAN_OPTIONS", opts.c_str(), 1);
    }
    ::execv(FOXHUNT_CLI_PATH, argv.data());
    ::_exit(127);
  }
  ::close(in[0]);
  auto* const old_pipe = ::signal(SIGPIPE, SIG_IGN);
  const auto t0 = std::chrono::steady_clock::now();
  bool alive = write_all(in[1], header);
  for (int64_t i = 0; alive; ++i) {
    alive = write_all(in[1], step(i));
    run.fed += bars_per_step;
    if (i % sample_every == 0) {
      run.bars.push_back(static_cast<double>(run.fed));
      run.rss.push_back(static_cast<double>(resident_bytes(pid)));
      // A child that keeps its input would only grow (and then take as long again to serve
      // what it kept): the slope already fails, stop there.
      if (run.rss.back() > run.rss.front() + kGiveUpGrowthBytes) {
        run.gave_up = true;
        ::kill(pid, SIGKILL);
        break;
      }
    }
    if (run.fed >= max_fed ||
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > seconds)
      break;
  }
  ::close(in[1]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::signal(SIGPIPE, old_pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream e(err_file);
  run.err.assign(std::istreambuf_iterator<char>(e), {});
  return run;
}

// One bar line per instrument and minute: a random walk per instrument.
class BarLines {
 public:
  BarLines(int64_t instruments, uint64_t seed)
      : rng_(seed), close_(static_cast<size_t>(instruments), 100.0) {}
  // The lines of timestamp `i` ("timestamp,[symbol,]open,high,low,close,volume").
  std::string step(int64_t i) {
    std::string out;
    const int64_t t = 1704067200 + 60 * i;
    for (size_t k = 0; k < close_.size(); ++k) {
      const double open = close_[k];
      const double close = open * std::exp(0.001 * rng_.normal());
      const double high = std::max(open, close) * 1.0005, low = std::min(open, close) * 0.9995;
      close_[k] = close;
      const std::string symbol = close_.size() > 1 ? fmt::format("S{:02},", k) : std::string();
      out += fmt::format("{},{}{:.6f},{:.6f},{:.6f},{:.6f},{}\n", t, symbol, open, high, low, close,
                         1000 + static_cast<int>(rng_.uniform() * 1000));
    }
    return out;
  }

 private:
  Rng rng_;
  std::vector<double> close_;
};

// Bytes per bar fed after the warm-up (the first quarter of the samples, past every model's
// warm-up), and the figures for the record.
double rss_slope(const RssRun& run, const char* what) {
  const size_t skip = run.bars.size() / 4;
  const std::vector<double> x(run.bars.begin() + static_cast<std::ptrdiff_t>(skip), run.bars.end());
  const std::vector<double> y(run.rss.begin() + static_cast<std::ptrdiff_t>(skip), run.rss.end());
  const auto fit = least_squares(x, y);
  std::printf(
      "[ rss ] %s: %lld bars fed, %zu samples, RSS %.1f -> %.1f MiB, slope %.2f bytes/bar "
      "(%.1f KiB per 1k bars) after the warm-up%s\n",
      what, static_cast<long long>(run.fed), run.rss.size(), y.front() / 1048576.0,
      y.back() / 1048576.0, fit.slope, fit.slope * 1000 / 1024,
      run.gave_up ? " (stopped: RSS grew by 1 GiB)" : "");
  ::testing::Test::RecordProperty(std::string(what) + "_bars", std::to_string(run.fed));
  ::testing::Test::RecordProperty(std::string(what) + "_slope_bytes_per_bar",
                                  std::to_string(fit.slope));
  return fit.slope;
}

// Anything kept per bar is tens of bytes per bar (a BarDecision, an input line); a flat process
// stays within a few (the allocator's own drift).
constexpr double kMaxBytesPerBar = 16.0;
constexpr double kSeconds = 60.0;

// The run's verdict: enough RSS samples to fit, a slope under `max_slope` bytes per `what`, not
// stopped at +1 GiB, and predict's clean exit.
void expect_flat(const RssRun& run, const char* what, double max_slope) {
  ASSERT_GE(run.rss.size(), 12u) << "too few samples of " << what << " in " << kSeconds
                                 << " s: " << run.fed;
  EXPECT_LT(rss_slope(run, what), max_slope);
  EXPECT_FALSE(run.gave_up);
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

TEST(StreamMemoryTest, PredictOverStdinHoldsFlatMemory_SLOW) {
  TempDir tmp;
  const std::string dir = saved_fresh_bundles(tmp, 600);
  BarLines lines(1, 7);
  const auto run = stream_predict(
      dir, "timestamp,open,high,low,close,volume\n", [&](int64_t i) { return lines.step(i); }, 1,
      kSeconds, 500, tmp.file("err.txt"));
  expect_flat(run, "series", kMaxBytesPerBar);
}

// The panel is read line by line (serving::CsvPanelSource): one timestamp's rows and a few bytes
// per symbol, not the input (read whole, this grew 61.8 bytes per bar).
TEST(StreamMemoryTest, PredictOverAPanelOf64InstrumentsHoldsFlatMemory_SLOW) {
  TempDir tmp;
  const std::string dir = saved_fresh_bundles(tmp, 600);
  constexpr int64_t kInstruments = 64;
  BarLines lines(kInstruments, 8);
  const auto run = stream_predict(
      dir, "timestamp,symbol,open,high,low,close,volume\n",
      [&](int64_t i) { return lines.step(i); }, kInstruments, kSeconds, 20, tmp.file("err.txt"));
  expect_flat(run, "panel64", kMaxBytesPerBar);
}

// A tape piped to `predict --ticks -`: 20 million generated prints (or a minute's worth), tick
// bars of 2,000 prints. Keeping a print (its line, its time, price and size) would be tens of
// bytes per print; the builder holds only the open bar.
TEST(StreamMemoryTest, PredictOverATapeOf20MillionPrintsHoldsFlatMemory_SLOW) {
  TempDir tmp;
  auto bundles = fresh_bundles(data::MarketDataset(bars(600)));
  for (auto& b : bundles) b.bars = BarOrigin{data::parse_bar_spec("tick:2000"), "tape"};
  save_all(bundles, tmp.path() / "tb");
  constexpr int64_t kPrintsPerStep = 1000;
  Rng rng(11);
  double price = 4000.0;
  const int64_t t0 = int64_t{1704153600} * 1'000'000'000 + int64_t{14} * 3600 * 1'000'000'000;
  const auto run = stream_predict(
      (tmp.path() / "tb").string(), "timestamp,price,size\n",
      [&](int64_t i) {
        std::string out;
        for (int64_t k = 0; k < kPrintsPerStep; ++k) {
          // A print a millisecond, a quarter-point tick walk.
          price = std::max(1.0, price + 0.25 * std::round(rng.normal()));
          out += fmt::format("{},{:.2f},{}\n",
                             data::format_time_ns(t0 + (i * kPrintsPerStep + k) * 1'000'000), price,
                             1 + static_cast<int>(rng.uniform() * 9));
        }
        return out;
      },
      kPrintsPerStep, kSeconds, 200, tmp.file("err.txt"), {"--ticks", "-"}, 20'000'000);
  expect_flat(run, "tape prints", 1.0);
}

}  // namespace
}  // namespace foxhunt::serving
