#pragma once
/// \file forecast_trainer.h
/// Supervised trainer for the forecasting models (Mamba-2, TFT; any models::Model whose loss() is
/// the quantile loss over its horizon): Adam, gradient clipping, validation every epoch, early
/// stopping on the validation loss with patience, and restoring the best weights at the end.
/// Batches come from a BatchSource; checkpoints carry everything needed for an exact resume.

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/container.h"
#include "foxhunt/models/model.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::dist {
class Communicator;
}

namespace foxhunt::train {

class DataParallel;

/// Where training and validation batches come from. Implementations must be deterministic:
/// the same (epoch, index) always gives the same batch, which is what makes resume exact.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  /// Training batches per epoch.
  virtual int64_t train_batches() const = 0;
  /// Training batches of `epoch`: train_batches(), unless the epoch was resumed part-way at
  /// another world size (ShardedBatchSource::start_epoch_at).
  virtual int64_t epoch_batches(int64_t epoch) const { return train_batches(); }
  /// The `index`-th training batch of `epoch` (inputs and target).
  virtual models::Batch train_batch(int64_t epoch, int64_t index) = 0;
  /// Validation batches.
  virtual int64_t validation_batches() const = 0;
  /// The `index`-th validation batch.
  virtual models::Batch validation_batch(int64_t index) = 0;
};

/// Rank `rank`'s contiguous share [begin, end) of a global batch of `size` samples over `world`
/// ranks: rank * size / world .. (rank + 1) * size / world.
std::pair<int64_t, int64_t> shard_range(int64_t size, int64_t rank, int64_t world);

/// A BatchSource whose training batches can be sharded for data parallelism (set_shard); it
/// starts as rank 0 of 1 (no sharding). An epoch's training samples are one order (a
/// permutation seeded with (seed, epoch), the same at every world size) cut into global batches
/// of batch_size x world samples; that is what lets a run resume at another world size.
class ShardedBatchSource : public BatchSource {
 public:
  /// Data-parallel sharding: the epoch's batches become global batches of batch_size x world
  /// samples (the batches of one process at that batch size), of which this source returns
  /// rank `rank`'s contiguous share (rank * G / world .. (rank + 1) * G / world); a share can be
  /// empty (a Batch without inputs) when a final global batch has fewer samples than ranks.
  /// Validation batches are not sharded (every rank sees all of them).
  void set_shard(int64_t rank, int64_t world);
  /// This source's rank.
  int64_t rank() const { return rank_; }
  /// The number of ranks sharing the training batches.
  int64_t world() const { return world_; }
  /// Samples per rank in a training batch.
  int64_t batch_size() const { return batch_size_; }
  /// Training samples per epoch (over every rank).
  virtual int64_t train_samples() const = 0;
  /// Global training batches per epoch.
  int64_t train_batches() const final;
  /// Elastic resume: `epoch`'s global batches cut its order from sample `offset` on (the
  /// samples before it were trained on before the world size changed); other epochs are
  /// unchanged. One epoch at a time: a later call replaces the earlier one.
  void start_epoch_at(int64_t epoch, int64_t offset);
  /// Where `epoch`'s first global batch starts in its order (0 unless start_epoch_at).
  int64_t epoch_start(int64_t epoch) const { return epoch == start_epoch_ ? start_offset_ : 0; }
  /// Global training batches of `epoch` (fewer than train_batches() when it starts late).
  int64_t epoch_batches(int64_t epoch) const final;
  /// Samples of `epoch`'s order before its global batch `index`: how far a checkpoint taken
  /// there got, at any world size.
  int64_t samples_before(int64_t epoch, int64_t index) const;

 protected:
  /// `component` names the source in errors; `batch_size` is per rank (> 0).
  ShardedBatchSource(const char* component, int64_t batch_size);
  /// The samples [begin, end) of `epoch`'s order in its global batch `index` (checked).
  std::pair<int64_t, int64_t> global_batch(int64_t epoch, int64_t index) const;
  /// This rank's share [begin, end) of a global batch of `size` samples (shard_range).
  std::pair<int64_t, int64_t> share(int64_t size) const { return shard_range(size, rank_, world_); }

 private:
  const char* component_;
  int64_t batch_size_;
  int64_t rank_ = 0, world_ = 1;
  int64_t start_epoch_ = -1, start_offset_ = 0;
};

/// A BatchSource over in-memory tensors: every input tensor and the target are indexed along
/// dimension 0; training samples are reshuffled each epoch by a permutation derived from
/// (seed, epoch); the last batch of an epoch may be smaller.
class TensorBatchSource final : public ShardedBatchSource {
 public:
  /// `train` and `validation` hold all samples (inputs and target); batches go to `device`.
  TensorBatchSource(models::Batch train, models::Batch validation, int64_t batch_size,
                    uint64_t seed, bool shuffle = true,
                    torch::Device device = torch::Device(torch::kCPU));
  int64_t train_samples() const override { return train_.size(); }
  models::Batch train_batch(int64_t epoch, int64_t index) override;
  int64_t validation_batches() const override;
  models::Batch validation_batch(int64_t index) override;
  /// Samples in the training split.
  int64_t train_size() const { return train_.size(); }
  /// Samples in the validation split.
  int64_t validation_size() const { return validation_.size(); }

 private:
  models::Batch slice(const models::Batch& all, const torch::Tensor& idx) const;
  models::Batch train_, validation_;
  uint64_t seed_;
  bool shuffle_;
  torch::Device device_;
  int64_t perm_epoch_ = -1;
  torch::Tensor perm_;
};

/// Options of the forecasting trainer (defaults from the TFT references: Adam lr 1e-3,
/// gradient clipping, early-stopping patience 5).
/// Example: `ForecastTrainerOptions().epochs(30).patience(3)`.
struct ForecastTrainerOptions {
  /// Maximum number of epochs.
  TORCH_ARG(int64_t, epochs) = 20;
  /// Adam learning rate.
  TORCH_ARG(double, learning_rate) = 1e-3;
  /// Adam (L2) weight decay.
  TORCH_ARG(double, weight_decay) = 0.0;
  /// Gradient-norm clip (<= 0 disables).
  TORCH_ARG(double, max_grad_norm) = 1.0;
  /// Stop after this many epochs without a validation improvement (0 disables early stopping).
  TORCH_ARG(int64_t, patience) = 5;
  /// An improvement must lower the best validation loss by more than this.
  TORCH_ARG(double, min_delta) = 0.0;
  /// Load the weights of the best validation epoch at the end.
  TORCH_ARG(bool, restore_best) = true;
  /// Score the initial weights on the validation split before the first epoch: they are the
  /// best so far (best_epoch -1) until an epoch beats them, so with restore_best a run never
  /// ends worse on validation than it started. A forecaster whose head starts at the constant
  /// (volatility-scaled) quantile forecast (jobs/train_job) thus never leaves it for worse.
  TORCH_ARG(bool, validate_initial) = true;
  /// Seed of LibTorch's generator (dropout) at the start of training.
  TORCH_ARG(uint64_t, seed) = 0;
};

/// JSON form of the options.
nlohmann::json to_json(const ForecastTrainerOptions& o);
/// Options from JSON; missing keys keep defaults, unknown keys are an InputError.
ForecastTrainerOptions forecast_trainer_options_from_json(const nlohmann::json& j);

/// Trains `model` (held by reference; it must outlive the trainer) on `data`.
class ForecastTrainer {
 public:
  /// Builds Adam over the model's parameters. Seeds LibTorch's generator with options.seed().
  ForecastTrainer(models::Model& model, BatchSource& data, ForecastTrainerOptions options = {});
  ~ForecastTrainer();

  /// Trains until the epoch limit, early stopping, a stop request or run.stop_at_step (in
  /// optimizer steps). Metrics lines: one per log_interval optimizer steps and one per epoch
  /// (with "val_loss"). A final checkpoint is written when run.checkpoint_path is set. When the
  /// run completes, the best validation weights are loaded (restore_best) before that
  /// checkpoint; a completed run resumed with more epochs continues from those weights (the
  /// optimizer state is the last step's), while one that stopped early stays stopped.
  TrainResult train(const RunConfig& run = {});

  /// The first half of one training step, as train() runs it: zero_grad, the batch moved to
  /// the model's device, the model's loss, backward and the gradient clip. The planner measures
  /// this half and apply_step() apart (train/trainer_step.h). An empty batch (a data-parallel
  /// rank without a share) only takes part in the gradient all-reduce.
  void prepare_step(models::Batch batch);
  /// The second half: optimizer.step(); releases the batch and returns its loss (NaN for an
  /// empty batch). Throws CheckFailure on a non-finite loss.
  double apply_step();

  /// Mean loss over the validation batches (eval mode, no gradients), weighted by batch size.
  double validation_loss();

  /// Writes a checkpoint (atomically); it is also a model checkpoint of the current weights.
  void save_checkpoint(const std::string& path);
  /// Restores a checkpoint of the same model (name and options) and continues exactly. With a
  /// ShardedBatchSource sharded (set_shard) at another world size than the checkpoint's, the
  /// interrupted epoch continues from the first sample the checkpoint had not trained on, cut
  /// into this world's global batches: every sample of the epoch is still trained on once
  /// (elastic resume; the weights and optimizer state are the same on every rank).
  void load_checkpoint(const std::string& path);
  /// The same from a trainer checkpoint already read (e.g. by a job that also needs its
  /// options); `source` names it in errors.
  void load_checkpoint(const Container& c, const std::string& source);

  /// Extra JSON stored in checkpoints under header["trainer"]["extra"] (e.g. the data source and
  /// target scaling a forecast needs to be interpreted).
  void set_checkpoint_extra(nlohmann::json extra) { extra_ = std::move(extra); }
  /// The extra JSON (set, or loaded from a checkpoint).
  const nlohmann::json& checkpoint_extra() const { return extra_; }

  /// Trains data-parallel over `comm`: broadcasts rank 0's weights, averages gradients in
  /// buckets weighted by each rank's samples, agrees on stopping and compares weight checksums
  /// (train/data_parallel.h). The batch source must be sharded the same way on every rank
  /// (set_shard). Rank r > 0 draws its dropout from rank_seed(seed, r). Call after
  /// load_checkpoint when resuming.
  void set_data_parallel(std::shared_ptr<dist::Communicator> comm);
  /// The data-parallel state (null when training alone).
  const DataParallel* data_parallel() const { return dp_.get(); }

  /// Optimizer steps done.
  int64_t step() const { return step_; }
  /// Current epoch (0-based; equals the number of finished epochs).
  int64_t epoch() const { return epoch_; }
  /// Best validation loss so far (NaN before the first epoch ends).
  double best_validation_loss() const { return best_val_; }
  /// Epoch of the best validation loss (-1 before the first epoch ends, or when the initial
  /// weights scored best: validate_initial).
  int64_t best_epoch() const { return best_epoch_; }
  /// Validation loss of the initial weights (NaN unless validate_initial).
  double initial_validation_loss() const { return initial_val_; }
  /// Validation loss after each finished epoch.
  const std::vector<double>& validation_history() const { return val_history_; }
  /// True once early stopping ended training.
  bool stopped_early() const { return stopped_early_; }
  /// The checkpoint's world size when load_checkpoint re-cut an epoch for another one (elastic
  /// resume), else 0.
  int64_t resharded_from() const { return resharded_from_; }

 private:
  /// Calls f(key, field) for every resumable field (train/state_io.h).
  template <typename F>
  void visit_state(F&& f);
  void resume_position(const nlohmann::json& position, const std::string& path);
  nlohmann::json metrics_line(double elapsed, double rate) const;

  models::Model& model_;
  BatchSource& data_;
  ShardedBatchSource* sharded_ = nullptr;  // data_, when it can be sharded
  ForecastTrainerOptions o_;
  std::unique_ptr<torch::optim::Adam> optimizer_;
  int64_t step_ = 0, epoch_ = 0, batch_ = 0;
  double epoch_loss_sum_ = 0.0;
  int64_t epoch_loss_count_ = 0;
  double window_loss_sum_ = 0.0;
  int64_t window_loss_count_ = 0;
  int64_t samples_ = 0;
  double best_val_ = NAN;
  double initial_val_ = NAN;
  int64_t best_epoch_ = -1, bad_epochs_ = 0;
  bool stopped_early_ = false;
  int64_t resharded_from_ = 0;
  std::string best_weights_;
  std::vector<double> val_history_;
  nlohmann::json extra_ = nlohmann::json::object();
  std::unique_ptr<DataParallel> dp_;
  // Between prepare_step and apply_step.
  models::Batch pending_batch_;
  torch::Tensor pending_loss_;
  int64_t pending_size_ = -1;  // -1: nothing pending
};

/// Mean of `model.loss` over `count` batches from `batch(i)` (eval mode, no gradients), weighted
/// by batch size: the validation/test loss of a forecasting model.
double mean_batch_loss(models::Model& model, int64_t count,
                       const std::function<models::Batch(int64_t)>& batch);

}  // namespace foxhunt::train
