#include "foxhunt/dist/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "foxhunt/core/error.h"
#include "foxhunt/core/log.h"

namespace foxhunt::dist {

int free_local_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) FOXHUNT_FAIL("dist", "socket(): ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    FOXHUNT_FAIL("dist", "cannot find a free port on 127.0.0.1: ", err);
  }
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

LaunchResult launch_local(const std::string& exe, const RankArgs& args_of, int64_t nproc,
                          std::string master, double grace_s) {
  FOXHUNT_CHECK(nproc >= 1, "dist", "processes: expected >= 1, got ", nproc);
  if (master.empty()) master = "127.0.0.1:" + std::to_string(free_local_port());
  LaunchResult result;
  result.master = master;
  std::vector<pid_t> pids;
  for (int64_t r = 0; r < nproc; ++r) {
    std::vector<std::string> argv_s = {exe};
    for (auto& a : args_of(r, nproc, master)) argv_s.push_back(std::move(a));
    std::vector<char*> argv;
    for (auto& s : argv_s) argv.push_back(s.data());
    argv.push_back(nullptr);
    // The child reports a failed exec through a close-on-exec pipe and the parent logs it: the
    // child of a threaded process may only make async-signal-safe calls (no log sink, no stdio).
    int exec_errno_pipe[2];
    if (::pipe(exec_errno_pipe) != 0) {
      for (pid_t p : pids) ::kill(p, SIGKILL);
      FOXHUNT_FAIL("dist", "pipe() for rank ", r, ": ", std::strerror(errno));
    }
    for (const int fd : exec_errno_pipe) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int fork_errno = errno;
      ::close(exec_errno_pipe[0]);
      ::close(exec_errno_pipe[1]);
      for (pid_t p : pids) ::kill(p, SIGKILL);
      FOXHUNT_FAIL("dist", "fork() for rank ", r, ": ", std::strerror(fork_errno));
    }
    if (pid == 0) {
      ::execv(exe.c_str(), argv.data());
      const int exec_errno = errno;
      [[maybe_unused]] const auto n = ::write(exec_errno_pipe[1], &exec_errno, sizeof(exec_errno));
      ::_exit(127);
    }
    ::close(exec_errno_pipe[1]);
    int exec_errno = 0;
    ssize_t got = 0;
    do {
      got = ::read(exec_errno_pipe[0], &exec_errno, sizeof(exec_errno));
    } while (got < 0 && errno == EINTR);
    ::close(exec_errno_pipe[0]);
    if (got == static_cast<ssize_t>(sizeof(exec_errno)))  // 0 bytes: the exec succeeded
      foxhunt::log(LogLevel::kError, "dist",
                   fmt::format("rank {}: cannot run '{}': {}", r, exe, std::strerror(exec_errno)));
    pids.push_back(pid);
    result.ranks.push_back({r, 0, false});
  }
  // Ctrl-C reaches every rank (same process group); they agree to stop and rank 0 checkpoints.
  // The launcher itself keeps waiting for them.
  struct sigaction ignore {
  }, old_int{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGINT, &ignore, &old_int);

  size_t running = pids.size();
  std::vector<char> done(pids.size(), 0);
  int first_failure = 0;
  bool have_deadline = false;
  auto deadline = std::chrono::steady_clock::now();
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] != pid || done[i]) continue;
        done[i] = 1;
        --running;
        const int code = WIFEXITED(status)     ? WEXITSTATUS(status)
                         : WIFSIGNALED(status) ? 128 + WTERMSIG(status)
                                               : 1;
        result.ranks[i].exit_code = code;
        if (code != 0 && !result.ranks[i].killed) {
          if (first_failure == 0) first_failure = code;
          if (!have_deadline) {
            have_deadline = true;
            deadline = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
          }
        }
      }
      continue;
    }
    if (pid < 0 && errno != EINTR) break;
    if (have_deadline && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (!done[i] && !result.ranks[i].killed) {
          foxhunt::log(LogLevel::kWarning, "dist",
                       fmt::format("rank {} still running {:.0f} s after another rank failed; "
                                   "killing it",
                                   i, grace_s));
          result.ranks[i].killed = true;
          ::kill(pids[i], SIGKILL);
        }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  result.exit_code = first_failure != 0 ? first_failure : result.ranks.front().exit_code;
  return result;
}

}  // namespace foxhunt::dist
