#pragma once
/// \file launcher.h
/// Local multi-process launch (the CLI's `train MODEL --nproc N`): runs N copies of a command on
/// this machine, each with the command line the caller makes for its rank, world size and
/// meeting point (127.0.0.1:PORT), and waits for all of them, the way torchrun does for one node. A
/// rank that fails gives the others `grace_s` seconds to notice (their collectives fail at once
/// when a peer's socket closes) before they are killed, so the launcher never hangs. Torch-free
/// (POSIX fork/exec).

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace foxhunt::dist {

/// How one rank ended.
struct RankExit {
  int64_t rank = 0;     ///< the rank
  int exit_code = 0;    ///< its exit status (128 + signal when killed by a signal)
  bool killed = false;  ///< the launcher killed it after another rank failed
};

/// Outcome of launch_local.
struct LaunchResult {
  int exit_code = 0;            ///< rank 0's code if every rank agreed, else the first failure's
  std::vector<RankExit> ranks;  ///< per rank, in rank order
  std::string master;           ///< the HOST:PORT the ranks met at
};

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and released).
int free_local_port();

/// The arguments (after the program name) of rank `rank` of `world_size`, meeting at `master`
/// (HOST:PORT): the caller's own command line for one rank.
using RankArgs = std::function<std::vector<std::string>(int64_t rank, int64_t world_size,
                                                        const std::string& master)>;

/// Runs `exe` with `args_of(rank, nproc, master)` for ranks 0..nproc-1 (`master` = "" picks
/// 127.0.0.1 with a free port) and waits for all; `grace_s` seconds after a rank fails, the others
/// are killed. Throws foxhunt::InputError for nproc < 1 and foxhunt::Error when a process cannot
/// be started. A rank whose `exe` cannot be run exits with 127; that, and each rank killed after
/// a failure, is reported through core's log sink (core/log.h, component "dist").
LaunchResult launch_local(const std::string& exe, const RankArgs& args_of, int64_t nproc,
                          std::string master, double grace_s);

}  // namespace foxhunt::dist
