// Crash consistency beyond checkpoints (issue 49): `train all`, `quantize`, `data bars`,
// `backtest --report` and `backtest --walk-forward` are killed with SIGKILL at seeded moments
// spread over an unkilled run's duration. After every kill each file under a final name is whole
// (a bundle loads with the library's loader and equals the unkilled run's, rule.json and the
// reports parse, a CSV is the unkilled run's to the byte) and a temp file never has a final name;
// then a rerun finishes and writes what the unkilled run wrote (bit for bit, timings aside: the
// runs are seeded, on one thread), leaving no temp file. Half of the kills hit a rerun over a
// finished directory (the outputs are being replaced), half a first run.
//
// Every run is also traced with inotify: a final name must appear by a rename (write_file_atomic)
// and never be created or written in place. A kill lands inside a short write only by luck; the
// trace sees every write, so a direct write is red on every run, killed or not.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "foxhunt/core/container.h"
#include "foxhunt/core/file_io.h"
#include "foxhunt/data/bars.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"
#include "test_util.h"

extern char** environ;

// Its own namespace: the test sources compile in unity batches, where names of other files'
// anonymous namespaces in namespace foxhunt would collide with these.
namespace foxhunt::crash_consistency {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// write_file_atomic's temp files: PATH.tmp.PID.N.
bool is_temp(const std::string& name) {
  return name.find(".tmp.") != std::string::npos;
}

// Written line by line as the run goes, by design (train/infra.h MetricsLog): a killed run may
// leave a partial last line, which the next run drops or replaces.
bool is_log(const std::string& name) {
  return name == "metrics.jsonl";
}

// ---- the inotify trace ------------------------------------------------------------------------

/// Watches a directory tree while a command runs: files under final names that were created or
/// written in place (IN_CREATE, IN_MODIFY, IN_CLOSE_WRITE) rather than renamed there (IN_MOVED_TO).
class WriteTrace {
 public:
  explicit WriteTrace(const fs::path& root) : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ >= 0) watch_tree(root, false);
  }
  ~WriteTrace() {
    if (fd_ >= 0) ::close(fd_);
  }
  WriteTrace(const WriteTrace&) = delete;
  WriteTrace& operator=(const WriteTrace&) = delete;

  int fd() const { return fd_; }

  /// Reads every queued event.
  void drain() {
    std::vector<char> buf(64 * 1024);  // operator new's alignment suits inotify_event
    for (;;) {
      const ssize_t n = ::read(fd_, buf.data(), buf.size());
      if (n <= 0) return;  // EAGAIN: the queue is empty
      for (ssize_t off = 0; off < n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(buf.data() + off);
        off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
        if (e->mask & IN_Q_OVERFLOW) overflowed = true;
        const auto dir = dirs_.find(e->wd);
        if (e->len == 0 || dir == dirs_.end()) continue;
        const fs::path path = dir->second / e->name;
        if (e->mask & IN_ISDIR) {
          if (e->mask & (IN_CREATE | IN_MOVED_TO)) watch_tree(path, true);
          continue;
        }
        const std::string name = e->name;
        if (!is_temp(name) && !is_log(name) && (e->mask & (IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE)))
          in_place.insert(path.string());
      }
    }
  }

  std::set<std::string> in_place;  ///< final names created or written in place
  /// Files already in a directory when it was first seen (not pre-created by the test): how they
  /// were written is unknown.
  std::set<std::string> unobserved;
  bool overflowed = false;  ///< the kernel dropped events

 private:
  void watch_tree(const fs::path& dir, bool appeared) {
    const int wd = ::inotify_add_watch(
        fd_, dir.c_str(), IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_MOVED_TO | IN_ONLYDIR);
    if (wd < 0) return;
    dirs_[wd] = dir;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_directory())
        watch_tree(e.path(), appeared);
      else if (appeared && !is_temp(e.path().filename().string()))
        unobserved.insert(e.path().string());
    }
  }

  int fd_;
  std::map<int, fs::path> dirs_;
};

// ---- running the binary -----------------------------------------------------------------------

struct Attempt {
  bool killed = false;  ///< SIGKILL ended it
  int exit_code = -1;   ///< when it exited by itself
  double seconds = 0;
};

/// Runs `foxhunt ARGS` (FOXHUNT_THREADS=1: a seeded run then writes the same weights) with its
/// stdout and stderr in `log`, draining `trace` as it goes; SIGKILL after `kill_after` seconds
/// (negative: never). A run past 300 s is killed too (and reported as killed).
Attempt run_foxhunt(std::vector<std::string> args, WriteTrace& trace, double kill_after,
                    const std::string& log) {
  std::vector<char*> argv{const_cast<char*>(FOXHUNT_CLI_PATH)};
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The environment is built before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> env_text{"FOXHUNT_THREADS=1"};
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "FOXHUNT_THREADS=", 16) != 0) env_text.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  envp.push_back(nullptr);

  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    ::execve(FOXHUNT_CLI_PATH, argv.data(), envp.data());
    ::_exit(127);
  }
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  Attempt a;
  int status = 0;
  for (;;) {
    pollfd p{trace.fd(), POLLIN, 0};
    ::poll(&p, 1, 2);  // 2 ms: the resolution of the kill times
    trace.drain();
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    const double t = elapsed();
    if ((kill_after >= 0 && t >= kill_after) || t > 300) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      break;
    }
  }
  a.seconds = elapsed();
  trace.drain();
  if (WIFEXITED(status)) a.exit_code = WEXITSTATUS(status);
  a.killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
  return a;
}

// ---- what a directory holds -------------------------------------------------------------------

/// The fields in which two runs of one seeded job differ: timings, and whether a walk-forward
/// fold was reused.
const std::set<std::string>& volatile_keys() {
  static const std::set<std::string> keys = {"seconds", "elapsed_s", "samples_per_s",
                                             "samples_per_s_all_ranks", "reused"};
  return keys;
}

nlohmann::json without_volatile(nlohmann::json j) {
  if (j.is_object()) {
    for (const auto& k : volatile_keys()) j.erase(k);
    for (auto& [k, v] : j.items()) v = without_volatile(std::move(v));
  } else if (j.is_array()) {
    for (auto& v : j) v = without_volatile(std::move(v));
  }
  return j;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

/// A file reduced to what two runs of the job must agree on, after checking that it is whole (a
/// partial file throws): a bundle loads with the library's loader, a checkpoint passes its CRC,
/// JSON parses (rule.json as a decision rule), a CSV reads as bars and ends with its last line,
/// HTML ends with </html>. `root` (the run's directory) is replaced by ROOT; `unstable` text
/// (tables of timings) is checked whole but not compared; a log may end with a partial line
/// unless `finished`.
std::string normalized(const fs::path& p, const std::string& root, bool unstable, bool finished) {
  const std::string name = p.filename().string(), ext = p.extension().string();
  const std::string bytes = read_file(p.string());
  auto unrooted = [&](const std::string& s) { return replace_all(s, root, "ROOT"); };
  if (ext == ".fhb" || ext == ".ckpt") {
    const Container c = read_container(p.string());  // magic, lengths and CRC: a whole file
    if (ext == ".fhb") (void)serving::load_bundle(p.string(), torch::kCPU);
    std::string out = unrooted(without_volatile(c.header).dump());
    for (const auto& [blob, data] : c.blobs) {
      // A bundle's weights to the bit. A checkpoint's blobs by size (its replay buffer is
      // 200 MB; its weights are the bundle's): LibTorch archives an optimizer's per-parameter
      // state in an order of its own, so two equal runs differ in that blob's bytes and size.
      if (ext == ".ckpt" && blob == "optimizer") continue;
      out += ext == ".fhb"
                 ? fmt::format("\n{} {} {:08x}", blob, data.size(), crc32(data.data(), data.size()))
                 : fmt::format("\n{} {}", blob, data.size());
    }
    return out;
  }
  if (is_log(name)) {
    std::string steps;
    size_t pos = 0;
    for (size_t nl; (nl = bytes.find('\n', pos)) != std::string::npos; pos = nl + 1) {
      const auto line = nlohmann::json::parse(bytes.substr(pos, nl - pos));
      steps += (line.contains("step") ? line["step"].dump() : "-") + " ";
    }
    if (finished && pos != bytes.size())
      throw std::runtime_error("a partial last line after a finished run");
    return steps;
  }
  if (ext == ".json") {
    const auto j = nlohmann::json::parse(bytes);
    if (name == "rule.json") (void)serving::load_decision_rule(p.string());
    return unrooted(without_volatile(j).dump());
  }
  if (ext == ".csv") {
    if (!ends_with(bytes, "\n")) throw std::runtime_error("no end of line after the last row");
    (void)data::load_bars_csv(p.string());
  }
  if (ext == ".html" && !ends_with(bytes, "</html>\n"))
    throw std::runtime_error("does not end with </html>");
  if (ext == ".md" && !ends_with(bytes, "\n")) throw std::runtime_error("does not end with a line");
  return unstable ? "whole" : unrooted(bytes);
}

struct Tree {
  std::map<std::string, std::string> files;  ///< relative path -> normalized content
  std::vector<std::string> temps;            ///< temp files (relative paths)
  std::vector<std::string> broken;           ///< "path: why it is not whole"
};

/// normalized() as {text, ""} or {"", why the file is not whole}.
using Checked = std::pair<std::string, std::string>;

Checked checked(const fs::path& p, const std::string& root, bool unstable, bool finished) {
  try {
    return {normalized(p, root, unstable, finished), ""};
  } catch (const std::exception& e) {
    return {"", e.what()};
  }
}

/// checked() of a bundle or checkpoint read once per version (a checkpoint is 200 MB): a file
/// that write_file_atomic replaced is a new inode.
Checked checked_once(const fs::path& p, const std::string& root) {
  static std::map<std::string, Checked> seen;
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return checked(p, root, false, true);
  const std::string key = fmt::format("{}|{}|{}|{}.{}", p.string(), st.st_ino, st.st_size,
                                      st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  auto it = seen.find(key);
  if (it == seen.end()) it = seen.emplace(key, checked(p, root, false, true)).first;
  return it->second;
}

Tree snapshot(const fs::path& root, const std::set<std::string>& unstable, bool finished) {
  Tree t;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), root).string();
    if (is_temp(e.path().filename().string())) {
      t.temps.push_back(rel);
      continue;
    }
    const std::string ext = e.path().extension().string();
    const auto [text, error] =
        ext == ".fhb" || ext == ".ckpt"
            ? checked_once(e.path(), root.string())
            : checked(e.path(), root.string(), unstable.count(rel) > 0, finished);
    if (error.empty())
      t.files[rel] = text;
    else
      t.broken.push_back(rel + ": " + error);
  }
  return t;
}

std::string joined(const std::vector<std::string>& v) {
  return fmt::format("{}", fmt::join(v, "\n  "));
}
std::string joined(const std::set<std::string>& v) {
  return fmt::format("{}", fmt::join(v, "\n  "));
}

// ---- one command under kills ------------------------------------------------------------------

struct Scenario {
  std::string name;
  /// The command line; an argument "{root}/x" names x under the run's root directory.
  std::vector<std::string> args{};
  /// Directories the command writes into, created before each run so that they are watched
  /// from its start (relative to the root).
  std::vector<std::string> dirs{};
  std::set<std::string> unstable{};  ///< files whose text holds timings (checked whole only)
  /// {marker, dir}: when the marker survives a kill, the run that wrote it finished the
  /// directory: every file the unkilled run writes under `dir` is there.
  std::vector<std::pair<std::string, std::string>> markers{};
  std::set<int> exit_codes = {0};  ///< of a finished run
  int kills = 4;
  uint64_t seed = 0;
};

void expect_only_renames(const WriteTrace& t, const std::string& what) {
  EXPECT_TRUE(t.in_place.empty()) << what << ": final names written in place, not renamed:\n  "
                                  << joined(t.in_place);
  EXPECT_TRUE(t.unobserved.empty())
      << what << ": files in a directory the test did not "
      << "pre-create (how they were written is unknown):\n  " << joined(t.unobserved);
  EXPECT_FALSE(t.overflowed) << what << ": the inotify queue overflowed";
}

void expect_same(const Tree& got, const Tree& want, const std::string& what) {
  EXPECT_TRUE(got.broken.empty()) << what << ":\n  " << joined(got.broken);
  EXPECT_TRUE(got.temps.empty()) << what << ": temp files left:\n  " << joined(got.temps);
  std::vector<std::string> missing, extra;
  for (const auto& [rel, text] : want.files)
    if (!got.files.count(rel)) missing.push_back(rel);
  for (const auto& [rel, text] : got.files) {
    const auto it = want.files.find(rel);
    if (it == want.files.end()) {
      extra.push_back(rel);
      continue;
    }
    EXPECT_EQ(text, it->second) << what << ": " << rel << " differs from the unkilled run's";
  }
  EXPECT_TRUE(missing.empty()) << what << ": missing:\n  " << joined(missing);
  EXPECT_TRUE(extra.empty()) << what << ": not written by the unkilled run:\n  " << joined(extra);
}

/// What a kill left: every file under a final name whole and the unkilled run's (a log: whole
/// lines), no name the unkilled run does not write, a finished directory behind each marker.
void expect_consistent(const Tree& left, const Tree& want, const Scenario& s,
                       const std::string& what) {
  EXPECT_TRUE(left.broken.empty())
      << what << ": half-written files under final names:\n  " << joined(left.broken);
  for (const auto& [rel, text] : left.files) {
    const auto it = want.files.find(rel);
    if (it == want.files.end()) {
      ADD_FAILURE() << what << ": " << rel << " is not a file the unkilled run writes";
      continue;
    }
    if (!is_log(fs::path(rel).filename().string())) {
      EXPECT_EQ(text, it->second) << what << ": " << rel << " differs from the unkilled run's";
    }
  }
  for (const auto& [marker, dir] : s.markers) {
    if (!left.files.count(marker)) continue;
    for (const auto& [rel, text] : want.files) {
      if (rel.rfind(dir + "/", 0) == 0) {
        EXPECT_TRUE(left.files.count(rel))
            << what << ": " << marker << " says finished, but " << rel << " is missing";
      }
    }
  }
}

std::string text_of(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// `args` with each leading "{root}" replaced by `root`.
std::vector<std::string> args_under(std::vector<std::string> args, const fs::path& root) {
  constexpr std::string_view kRoot = "{root}";
  for (auto& a : args)
    if (a.compare(0, kRoot.size(), kRoot) == 0) a = root.string() + a.substr(kRoot.size());
  return args;
}

void run_scenario(const Scenario& s) {
  TempDir tmp;
  const fs::path ref = tmp.path() / "ref", run = tmp.path() / "run", logs = tmp.path() / "logs";
  for (const auto& d : {ref, run, logs}) fs::create_directories(d);
  auto prepare = [&](const fs::path& root) {
    for (const auto& d : s.dirs) fs::create_directories(root / d);
  };
  int tries = 0;
  auto attempt = [&](const fs::path& root, double kill_after) {
    prepare(root);
    WriteTrace trace(root);
    if (trace.fd() < 0) throw std::runtime_error(std::string("inotify: ") + std::strerror(errno));
    const std::string log = (logs / fmt::format("{}.txt", tries++)).string();
    const Attempt a = run_foxhunt(args_under(s.args, root), trace, kill_after, log);
    const std::string what =
        fmt::format("{}, run {} ({} at {:.3f} s)", s.name, tries - 1,
                    a.killed ? "killed" : "finished", a.killed ? kill_after : a.seconds);
    expect_only_renames(trace, what);
    if (!a.killed) {
      EXPECT_TRUE(s.exit_codes.count(a.exit_code)) << what << ": exit " << a.exit_code << "\n"
                                                   << text_of(log);
    }
    return std::make_pair(a, what);
  };

  // The unkilled run: the outputs every run must write, and the time the kills spread over.
  const auto [first, first_what] = attempt(ref, -1);
  ASSERT_FALSE(first.killed) << first_what;
  const Tree want = snapshot(ref, s.unstable, true);
  ASSERT_TRUE(want.broken.empty()) << joined(want.broken);
  ASSERT_TRUE(want.temps.empty()) << joined(want.temps);
  ASSERT_FALSE(want.files.empty()) << s.name << " wrote nothing";

  // Two rounds: the first from an empty directory, the second over the finished one (the
  // outputs are being replaced). Kill i of a round falls in the i-th of its equal slices of a
  // finished run's duration (seeded): the unkilled run's, then the last finished rerun's.
  std::mt19937_64 rng(s.seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int kills = 0, finished_early = 0;
  size_t temps_left = 0;
  double span = first.seconds;
  const int per_round = std::max(1, s.kills / 2);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < per_round; ++i) {
      const double at = (i + u(rng)) / per_round * span;
      const auto [a, what] = attempt(run, at);
      if (!a.killed) {  // it finished before its kill: a rerun to completion
        ++finished_early;
        expect_same(snapshot(run, s.unstable, true), want, what);
        span = std::min(span, a.seconds);  // the first run paid for a cold start
        continue;
      }
      ++kills;
      const Tree left = snapshot(run, s.unstable, false);
      temps_left += left.temps.size();
      expect_consistent(left, want, s, what);
    }
    // The rerun that finishes: the unkilled run's outputs, no temp file left.
    const auto [done, what] = attempt(run, -1);
    ASSERT_FALSE(done.killed) << what;
    expect_same(snapshot(run, s.unstable, true), want, what + ", the rerun after the kills");
    span = done.seconds;  // a rerun over finished outputs may reuse them (walk-forward)
  }
  const std::string summary = fmt::format(
      "{}: {} kills, {} runs finished before their kill, {} temp files left by the kills; "
      "unkilled run {:.2f} s",
      s.name, kills, finished_early, temps_left, first.seconds);
  fmt::print("[crash consistency] {}\n", summary);
  ::testing::Test::RecordProperty("kills", kills);
  EXPECT_GE(kills, s.kills / 2) << summary;  // most kills land in a run, not after it
}

// ---- inputs -----------------------------------------------------------------------------------

/// The shared inputs, written once per process: 1,200 synthetic bars (the first 900 for
/// training), a tape of 200,000 prints, a trained ensemble and a trained tft bundle.
class CrashConsistencyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    auto series = data::generate_synthetic({.bars = 1200, .seed = 7});
    data::write_bars_csv(long_csv(), series);
    series.bars.resize(900);
    data::write_bars_csv(train_csv(), series);
    write_tape(tape_csv(), 200000);
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string train_csv() { return file("train.csv"); }
  static std::string long_csv() { return file("long.csv"); }
  static std::string tape_csv() { return file("tape.csv"); }

  /// `train all` on train.csv into DIR/ens (once).
  static std::string ensemble() {
    const auto out = file("ens");
    if (!fs::exists(fs::path(out) / "summary.json")) {
      const auto r = testing::run_cli("train all --data " + train_csv() +
                                      " --steps 64 --epochs 1 --eval-episodes 0 --seed 3 "
                                      "--progress off --out " +
                                      out);
      EXPECT_EQ(r.exit_code, 0) << r.err;
    }
    return out;
  }

  /// A tape of `prints` trade prints (epoch nanoseconds), one every 1..400 ms, seeded.
  static void write_tape(const std::string& path, int prints) {
    std::mt19937_64 rng(11);
    std::normal_distribution<double> z(0.0, 1.0);
    fmt::memory_buffer out;
    fmt::format_to(std::back_inserter(out), "timestamp,price,size\n");
    int64_t t = (int64_t{1704153600} + 14 * 3600 + 1800) * 1'000'000'000;
    double price = 100.0;
    for (int i = 0; i < prints; ++i) {
      t += static_cast<int64_t>(1 + rng() % 400) * 1'000'000;
      price = std::round(price * std::exp(5e-4 * z(rng)) * 100.0) / 100.0;
      fmt::format_to(std::back_inserter(out), "{},{:.2f},{}\n", t, price, 1 + rng() % 9);
    }
    write_file_atomic(path, fmt::to_string(out));
  }

  static const TempDir* dir_;
};

const TempDir* CrashConsistencyTest::dir_ = nullptr;

/// The model directories of one ensemble under `prefix`.
std::vector<std::string> model_dirs(const std::string& prefix) {
  std::vector<std::string> out{prefix};
  for (const auto& m : models::model_names()) out.push_back(prefix + "/" + m);
  return out;
}

TEST_F(CrashConsistencyTest, DataBarsNeverShowsAPartialCsv_SLOW) {
  run_scenario({.name = "data bars",
                .args = {"data", "bars", "--ticks", tape_csv(), "--bar", "tick:20", "--out",
                         "{root}/bars.csv"},
                .kills = 8,
                .seed = 4901});
}

TEST_F(CrashConsistencyTest, TrainAllLeavesWholeBundlesAndARerunWritesTheSameOnes_SLOW) {
  run_scenario(
      {.name = "train all",
       .args = {"train", "all", "--data", train_csv(), "--steps", "64", "--epochs", "1",
                "--eval-episodes", "0", "--seed", "3", "--progress", "off", "--out", "{root}/ens"},
       .dirs = model_dirs("ens"),
       .markers = {{"ens/summary.json", "ens"}},  // written last, removed first
       .kills = 4,
       .seed = 4902});
}

TEST_F(CrashConsistencyTest, QuantizeNeverShowsAPartialBundle_SLOW) {
  const auto tft = file("tft");
  if (!fs::exists(fs::path(tft) / "bundle.fhb")) {
    const auto r = testing::run_cli("train tft --data " + train_csv() +
                                    " --epochs 1 --seed 3 --progress off --out " + tft);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  run_scenario({.name = "quantize",
                .args = {"quantize", "tft", "--bundle", tft, "--out", "{root}/int8.fhb", "--seed",
                         "3", "--progress", "off"},
                .exit_codes = {0, 1},  // 1: over the accuracy bound, the bundle written either way
                .kills = 4,
                .seed = 4903});
}

TEST_F(CrashConsistencyTest, BacktestReportFilesAreEachWhole_SLOW) {
  run_scenario({.name = "backtest --report",
                .args = {"backtest", "--bundles", ensemble(), "--data", long_csv(), "--report",
                         "{root}/report", "--gate", "none", "--seed", "3"},
                .dirs = {"report"},
                .kills = 4,
                .seed = 4904});
}

TEST_F(CrashConsistencyTest, WalkForwardResumesFromWholeFoldsOnly_SLOW) {
  Scenario s;
  s.name = "backtest --walk-forward";
  s.args = {"backtest",
            "--data",
            train_csv(),
            "--walk-forward",
            "100",
            "--initial",
            "700",
            "--steps",
            "64",
            "--epochs",
            "1",
            "--work",
            "{root}/work",
            "--report",
            "{root}/report",
            "--gate",
            "none",
            "--seed",
            "3"};
  s.dirs = {"report"};
  for (const auto& fold : {"work/fold-000", "work/fold-001"}) {
    for (const auto& d : model_dirs(fold)) s.dirs.push_back(d);
    s.markers.push_back({std::string(fold) + "/walk_forward.json", fold});  // written last
  }
  // The refits table shows each fold's training seconds (or "reused").
  s.unstable = {"report/report.html", "report/report.md"};
  s.kills = 4;
  s.seed = 4905;
  run_scenario(s);
}

}  // namespace
}  // namespace foxhunt::crash_consistency
