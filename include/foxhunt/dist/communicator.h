#pragma once
/// \file communicator.h
/// Data-parallel communication on PyTorch's own distributed engine (c10d): a TCPStore
/// rendezvous and a Gloo (CPU) or NCCL (CUDA) process group, behind a small interface that keeps
/// the c10d headers out of every other file. Nothing here is home-made transport: collectives
/// are c10d's, rendezvous is c10d's TCPStore.
///
/// Failures are typed: a peer that dies, stops answering for longer than the timeout, or cannot
/// be reached at the rendezvous raises CommunicationError (exit 1) naming the rank, the
/// operation and the timeout, so no rank ever hangs past `timeout_s`.
///
/// Example (two processes, ranks 0 and 1):
///   auto comm = dist::Communicator::connect(
///       dist::DistOptions().world_size(2).rank(r).master("127.0.0.1:29500"), torch::kCPU);
///   auto t = torch::ones({4});
///   comm->allreduce_sum_(t);  // t == 2 on both ranks

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/error.h"
#include "foxhunt/core/no_copy.h"
#include "foxhunt/dist/options.h"

namespace foxhunt::dist {

/// A collective or the rendezvous failed: a peer died, timed out or could not be reached. Exit 1.
class CommunicationError : public Error {
 public:
  using Error::Error;
};

/// The backend "auto" resolves to on `device`: "gloo" for CPU, "nccl" for CUDA.
std::string resolve_backend(const std::string& backend, const torch::Device& device);

/// An all-reduce in flight; `wait()` blocks until it completed (or throws CommunicationError).
class PendingWork {
 public:
  PendingWork() = default;
  /// Wraps the wait of a launched collective.
  explicit PendingWork(std::function<void()> wait) : wait_(std::move(wait)) {}
  /// Blocks until the collective finished; a no-op for a default-constructed handle.
  void wait();
  /// True while a collective is attached and not yet waited for.
  bool pending() const { return static_cast<bool>(wait_); }

 private:
  std::function<void()> wait_;
};

/// A connected process group (one per process and run).
class Communicator {
 public:
  /// Rendezvous at `o.master` (rank 0 serves the TCPStore and waits for every rank) and creates
  /// the process group for tensors on `device`. Throws InputError for bad options and
  /// CommunicationError when the rendezvous does not complete within `o.timeout_s`.
  static std::shared_ptr<Communicator> connect(const DistOptions& o, const torch::Device& device);
  ~Communicator();
  FOXHUNT_NO_COPY(Communicator);

  /// This process's rank.
  int64_t rank() const { return o_.rank(); }
  /// Number of ranks.
  int64_t world_size() const { return o_.world_size(); }
  /// The options it connected with.
  const DistOptions& options() const { return o_; }
  /// "gloo" or "nccl".
  const std::string& backend() const { return backend_; }

  /// Sums `t` (contiguous, on the group's device) over all ranks in place.
  void allreduce_sum_(torch::Tensor& t);
  /// Launches the same sum without waiting; the tensor must stay alive until `wait()`.
  PendingWork allreduce_sum_async(torch::Tensor& t);
  /// Copies rank `root`'s tensors into every rank's (same shapes and dtypes everywhere).
  void broadcast_(std::vector<torch::Tensor>& tensors, int64_t root = 0);
  /// Blocks until every rank reached it.
  void barrier();
  /// Every rank's `value`, indexed by rank (one all-reduce of a one-hot int64 vector).
  std::vector<int64_t> allgather(int64_t value);
  /// Every rank's `values` (same length on every rank), row r = rank r.
  std::vector<std::vector<double>> allgather(const std::vector<double>& values);

  /// Collectives issued so far and the seconds spent waiting for them.
  int64_t collectives() const { return collectives_; }
  /// Seconds spent in wait() of collectives (communication not hidden behind compute).
  double wait_seconds() const { return wait_seconds_; }
  /// Bytes all-reduced so far (payload, per rank).
  int64_t allreduced_bytes() const { return allreduced_bytes_; }

 private:
  struct Impl;
  Communicator(DistOptions o, std::string backend, std::unique_ptr<Impl> impl);
  /// Runs `f` and turns c10d's exceptions into CommunicationError naming `what`.
  void guarded(const char* what, const std::function<void()>& f);

  DistOptions o_;
  std::string backend_;
  std::unique_ptr<Impl> impl_;
  int64_t collectives_ = 0, allreduced_bytes_ = 0;
  double wait_seconds_ = 0.0;
};

/// A 64-bit FNV-1a hash of the bytes of `tensors` (in order; CUDA tensors are copied to the CPU):
/// equal on two ranks iff their weights are bit-identical.
uint64_t weight_checksum(const std::vector<torch::Tensor>& tensors);

/// Result of comparing the weights of every rank.
struct ChecksumComparison {
  int64_t step = -1;           ///< optimizer step of the comparison
  uint64_t checksum = 0;       ///< this rank's weight_checksum
  bool identical = false;      ///< every rank's checksum is equal
  std::vector<int64_t> ranks;  ///< the checksum of every rank (as int64 bit patterns)
  /// JSON: step, weight_checksum (hex), identical, ranks (hex strings).
  nlohmann::json to_json() const;
};

/// Compares the checksums of `tensors` across ranks at `step`; throws CheckFailure naming the
/// ranks whose weights differ from rank 0's (data parallelism must keep them identical).
ChecksumComparison compare_weights(Communicator& comm, const std::vector<torch::Tensor>& tensors,
                                   int64_t step);

/// Copies rank 0's values of `tensors` (parameters and buffers) to every rank, under no-grad.
void broadcast_from_rank0(Communicator& comm, std::vector<torch::Tensor> tensors);

/// Hex form of a checksum ("0x" + 16 digits).
std::string checksum_hex(uint64_t v);

}  // namespace foxhunt::dist
