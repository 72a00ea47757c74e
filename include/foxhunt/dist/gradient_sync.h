#pragma once
/// \file gradient_sync.h
/// Bucketed gradient averaging for data-parallel training, the part of PyTorch's
/// DistributedDataParallel that LibTorch's C++ API does not have.
///
/// Parameters are grouped into buckets of about `bucket_bytes` in reverse registration order
/// (the order backward produces their gradients), one flat buffer per bucket. A hook on every
/// parameter copies its gradient, scaled by this rank's sample weight, into its bucket slot as
/// soon as backward computes it; a bucket whose slots are all filled is all-reduced at once,
/// asynchronously, while backward goes on with the earlier layers. Buckets launch strictly in
/// index order, so every rank issues the same sequence of collectives whatever order its hooks
/// fire in. `finish()` launches what is left (slots of parameters that got no gradient are
/// zeros), waits, and writes
///
///     grad = sum_r (w_r * grad_r) / sum_r w_r
///
/// into every parameter's `.grad`. With w_r = the rank's samples in the step this is exactly the
/// gradient of the mean loss over the union of the ranks' batches, so N ranks at batch b equal
/// one process at batch N*b (and a rank with an empty shard contributes nothing). With w_r = 1
/// it is the plain average (RL: equal batches on every rank).
///
/// The sample weight w_r travels as one extra element of the last bucket (the last to launch),
/// so a step costs one collective per bucket and nothing more (a separate float64 all-reduce
/// only when that bucket is not float32/float64).
///
/// Memory: the buckets hold one copy of the trainable parameters' bytes plus the weight element,
/// allocated under the ledger scope "comm_buckets" when the object is built (`resident_bytes()`),
/// so the ledger and the planner see them. Without a communicator the object only fills and reads
/// its buckets (world size 1): the planner uses that to measure the bytes a rank adds.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "foxhunt/core/no_copy.h"
#include "foxhunt/dist/communicator.h"
#include "foxhunt/memory/tags.h"

namespace foxhunt::dist {

/// Ledger scope of the gradient buckets.
inline constexpr const char* kBucketScope = memory::tag_name(memory::Tag::kCommBuckets);

/// Bytes of a bucket of `mib` MiB (at least 1): the one conversion the trainer and the planner use.
int64_t bucket_bytes(double mib);

/// Parameter indices of each bucket: reverse order, a new bucket when the next parameter would
/// push the current one past `bucket_bytes` (a parameter larger than that gets a bucket alone)
/// or when dtype or device change. Parameters without requires_grad are left out.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& params,
                                              int64_t bucket_bytes);

/// Averages gradients across ranks (see the file comment).
class GradientSync {
 public:
  /// Buckets over `params` (the optimizer's parameters, same order on every rank); `comm` may be
  /// null (measurement only: no communication, the gradients stay local).
  GradientSync(std::vector<torch::Tensor> params, std::shared_ptr<Communicator> comm,
               int64_t bucket_bytes);
  ~GradientSync();
  FOXHUNT_NO_COPY(GradientSync);

  /// Arms the hooks for one backward pass with this rank's weight (samples, or 1) and launches
  /// the all-reduce of the weights. Call before `loss.backward()` (also on a rank with no
  /// samples, which then skips backward).
  void begin(double weight);
  /// Launches the remaining buckets, waits for all, and writes the averaged gradients.
  void finish();

  /// Number of buckets.
  size_t bucket_count() const { return buckets_.size(); }
  /// Bytes of all bucket buffers (the weight element included).
  int64_t bucket_bytes_total() const;
  /// Everything the object keeps allocated under "comm_buckets": the buckets (their weight
  /// element included) and, if the last bucket is not floating point, an 8-byte float64 counter.
  int64_t resident_bytes() const;
  /// Buckets launched from a gradient hook during backward (overlapped with compute), summed
  /// over all steps so far.
  int64_t launched_during_backward() const { return launched_early_; }
  /// Steps synchronized so far.
  int64_t steps() const { return steps_; }
  /// Seconds spent in finish() (waiting for communication and writing gradients).
  double finish_seconds() const { return finish_seconds_; }

 private:
  struct Bucket {
    std::vector<size_t> params;    // indices into params_
    std::vector<int64_t> offsets;  // element offset of each parameter in `flat`
    torch::Tensor flat;            // the buffer all-reduced
    size_t filled = 0;
    bool launched = false;
    PendingWork work;
  };
  void on_gradient(size_t param, const torch::Tensor& grad);
  void launch_ready(bool from_hook);
  void launch(Bucket& b);

  std::vector<torch::Tensor> params_;
  std::shared_ptr<Communicator> comm_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_, slot_of_;  // per parameter (npos when not trainable)
  std::vector<char> seen_;
  std::vector<unsigned> hook_ids_;
  size_t next_launch_ = 0;
  bool armed_ = false;
  double weight_ = 1.0;
  torch::Tensor weight_slot_;  // the weight element of the last bucket (a view), or undefined
  torch::Tensor weight_sum_;   // the float64 counter when there is no weight slot
  PendingWork weight_work_;
  int64_t launched_early_ = 0, steps_ = 0;
  double finish_seconds_ = 0.0;
};

}  // namespace foxhunt::dist
