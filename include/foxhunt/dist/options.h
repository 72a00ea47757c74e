#pragma once
/// \file options.h
/// The options of a data-parallel run (one field list, shared by the CLI, train jobs and the
/// communicator). Needs only <torch/arg.h>, not the rest of LibTorch.

#include <torch/arg.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace foxhunt::dist {

/// Where this process sits in a data-parallel run and how it reaches the others.
/// Example: `DistOptions().world_size(2).rank(1).master("10.0.0.5:29500")`.
struct DistOptions {
  /// Number of processes (ranks) in the run; 1 = not distributed.
  TORCH_ARG(int64_t, world_size) = 1;
  /// This process's rank in [0, world_size); rank 0 hosts the rendezvous store.
  TORCH_ARG(int64_t, rank) = 0;
  /// HOST:PORT of rank 0's TCPStore (every rank gives the same value).
  TORCH_ARG(std::string, master) = "127.0.0.1:29500";
  /// "auto" (Gloo on CPU, NCCL on CUDA), "gloo" or "nccl".
  TORCH_ARG(std::string, backend) = "auto";
  /// Seconds a rendezvous or collective may wait for the other ranks before failing.
  TORCH_ARG(double, timeout_s) = 120.0;
  /// Target size of one gradient all-reduce bucket in MiB (DDP's default is 25).
  TORCH_ARG(double, bucket_mib) = 25.0;
  /// Optimizer steps between cross-rank weight checksum comparisons (0 = only at the end).
  TORCH_ARG(int64_t, check_interval) = 100;
};

/// Throws InputError unless the options are usable (rank in range, HOST:PORT whose host resolves,
/// backend name, positive timeout and bucket size). Touches no socket besides the name lookup.
void validate(const DistOptions& o);
/// The options as JSON (for summaries and checkpoints).
nlohmann::json to_json(const DistOptions& o);
/// Splits "HOST:PORT" (IPv4, a hostname, or [IPv6]); throws InputError naming `flag` otherwise.
std::pair<std::string, int> parse_host_port(const std::string& text, const std::string& flag);
}  // namespace foxhunt::dist
