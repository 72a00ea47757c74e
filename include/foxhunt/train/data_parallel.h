#pragma once
/// \file data_parallel.h
/// What a trainer needs to train data-parallel over a dist::Communicator, written once for the
/// three trainers: rank 0's initial weights broadcast to every rank, bucketed gradient
/// averaging around backward (dist::GradientSync), agreement on stopping (so Ctrl-C on any rank
/// stops all of them at the same step), and the cross-rank weight checksum every
/// `check_interval` optimizer steps and at the end.
///
/// In a trainer step:
///   dp->begin(local_samples);          // before backward (also on a rank with no samples)
///   loss.backward();
///   dp->finish();                      // gradients now averaged over all ranks
///   clip; optimizer.step();
///   dp->after_step(step);              // checksum every check_interval steps

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "foxhunt/dist/communicator.h"
#include "foxhunt/dist/gradient_sync.h"

namespace foxhunt::train {

/// Data-parallel state of one trainer.
class DataParallel {
 public:
  /// Broadcasts the parameters and buffers of `modules` from rank 0, then builds gradient buckets
  /// over `params` (the optimizer's trainable parameters) of `comm->options().bucket_mib()`.
  DataParallel(std::shared_ptr<dist::Communicator> comm,
               const std::vector<torch::nn::Module*>& modules, std::vector<torch::Tensor> params);

  /// This process's rank.
  int64_t rank() const { return comm_->rank(); }
  /// Number of ranks.
  int64_t world_size() const { return comm_->world_size(); }
  /// Arms gradient averaging for one step with this rank's weight (its samples, or 1).
  void begin(double weight) { sync_.begin(weight); }
  /// Waits for the averaged gradients and writes them into `.grad`.
  void finish() { sync_.finish(); }
  /// After optimizer step `step`: compares weights across ranks when `step` is a multiple of
  /// check_interval (throws CheckFailure on a mismatch).
  void after_step(int64_t step);
  /// Compares weights across ranks now (the end of a run).
  void check_now(int64_t step);
  /// True on every rank when any rank asks to stop (one tiny all-reduce).
  bool agree_stop(bool local);
  /// world_size, rank, backend, buckets and their bytes, collectives, all-reduced bytes, seconds
  /// waiting, buckets launched during backward, and the last checksum comparison.
  nlohmann::json summary() const;
  /// The communicator.
  dist::Communicator& communicator() { return *comm_; }

 private:
  std::shared_ptr<dist::Communicator> comm_;
  std::vector<torch::Tensor> params_;
  dist::GradientSync sync_;
  dist::ChecksumComparison last_;
  int64_t comparisons_ = 0;
};

/// Seed stream of a rank's own random draws (environments, exploration, dropout).
inline constexpr uint64_t kRankSeedStream = 7000000;
/// The seed rank `rank` uses for its own streams: `seed` itself on rank 0 (a run with one rank
/// is the run without distribution), derive_seed(seed, kRankSeedStream + rank) elsewhere.
uint64_t rank_seed(uint64_t seed, int64_t rank);

/// Every parameter and buffer of `modules` (what rank 0 broadcasts and the checksum covers).
std::vector<torch::Tensor> state_tensors(const std::vector<torch::nn::Module*>& modules);

}  // namespace foxhunt::train
