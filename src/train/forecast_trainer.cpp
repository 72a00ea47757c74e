#include "foxhunt/train/forecast_trainer.h"

#include <cmath>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/options_io.h"
#include "foxhunt/train/checkpointing.h"
#include "foxhunt/train/data_parallel.h"
#include "foxhunt/train/loop.h"
#include "foxhunt/train/state_io.h"

namespace foxhunt::train {

// ---- TensorBatchSource ------------------------------------------------------------------------

namespace {
void check_split(const models::Batch& b, const char* split) {
  FOXHUNT_CHECK(!b.inputs.empty(), "forecast_trainer", split,
                ": expected at least one input tensor");
  const int64_t n = b.inputs.front().size(0);
  FOXHUNT_CHECK(n > 0, "forecast_trainer", split, ": expected at least one sample, got 0");
  for (size_t i = 0; i < b.inputs.size(); ++i)
    FOXHUNT_CHECK(b.inputs[i].defined() && b.inputs[i].dim() >= 1 && b.inputs[i].size(0) == n,
                  "forecast_trainer", split, ": input ", i, " must have ", n,
                  " samples along dimension 0, got ",
                  b.inputs[i].defined() ? models::shape_str(b.inputs[i].sizes().vec()) : "none");
  FOXHUNT_CHECK(b.target.defined() && b.target.dim() >= 1 && b.target.size(0) == n,
                "forecast_trainer", split, ": target must have ", n,
                " samples along dimension 0, got ",
                b.target.defined() ? models::shape_str(b.target.sizes().vec()) : "none");
}
}  // namespace

TensorBatchSource::TensorBatchSource(models::Batch train, models::Batch validation,
                                     int64_t batch_size, uint64_t seed, bool shuffle,
                                     torch::Device device)
    : ShardedBatchSource("forecast_trainer", batch_size),
      train_(std::move(train)),
      validation_(std::move(validation)),
      seed_(seed),
      shuffle_(shuffle),
      device_(device) {
  check_split(train_, "train");
  check_split(validation_, "validation");
  FOXHUNT_CHECK(train_.inputs.size() == validation_.inputs.size(), "forecast_trainer", "train has ",
                train_.inputs.size(), " inputs, validation has ", validation_.inputs.size());
}

std::pair<int64_t, int64_t> shard_range(int64_t size, int64_t rank, int64_t world) {
  return {rank * size / world, (rank + 1) * size / world};
}

ShardedBatchSource::ShardedBatchSource(const char* component, int64_t batch_size)
    : component_(component), batch_size_(batch_size) {
  FOXHUNT_CHECK(batch_size > 0, component_, "expected batch size > 0, got ", batch_size);
}

void ShardedBatchSource::set_shard(int64_t rank, int64_t world) {
  FOXHUNT_CHECK(world >= 1 && rank >= 0 && rank < world, component_,
                "shard: expected 0 <= rank < world, got rank ", rank, " of ", world);
  rank_ = rank;
  world_ = world;
}

int64_t ShardedBatchSource::train_batches() const {
  const int64_t global = batch_size_ * world_;
  return (train_samples() + global - 1) / global;
}

void ShardedBatchSource::start_epoch_at(int64_t epoch, int64_t offset) {
  FOXHUNT_CHECK(epoch >= 0 && offset >= 0 && offset <= train_samples(), component_,
                "resume: expected epoch >= 0 and a sample offset in [0, ", train_samples(),
                "], got epoch ", epoch, ", offset ", offset);
  start_epoch_ = offset > 0 ? epoch : -1;
  start_offset_ = offset;
}

int64_t ShardedBatchSource::epoch_batches(int64_t epoch) const {
  const int64_t global = batch_size_ * world_;
  return (train_samples() - epoch_start(epoch) + global - 1) / global;
}

int64_t ShardedBatchSource::samples_before(int64_t epoch, int64_t index) const {
  return std::min(train_samples(), epoch_start(epoch) + index * batch_size_ * world_);
}

std::pair<int64_t, int64_t> ShardedBatchSource::global_batch(int64_t epoch, int64_t index) const {
  FOXHUNT_CHECK(index >= 0 && index < epoch_batches(epoch), component_, "train batch index ", index,
                " out of range [0, ", epoch_batches(epoch), ") in epoch ", epoch);
  const int64_t begin = samples_before(epoch, index);
  return {begin, std::min(train_samples(), begin + batch_size_ * world_)};
}

int64_t TensorBatchSource::validation_batches() const {
  return (validation_.size() + batch_size() - 1) / batch_size();
}

models::Batch TensorBatchSource::slice(const models::Batch& all, const torch::Tensor& idx) const {
  models::Batch b;
  for (const auto& t : all.inputs)
    b.inputs.push_back(t.index_select(0, idx.to(t.device())).to(device_));
  b.target = all.target.index_select(0, idx.to(all.target.device())).to(device_);
  return b;
}

models::Batch TensorBatchSource::train_batch(int64_t epoch, int64_t index) {
  const auto [start, end] = global_batch(epoch, index);
  const int64_t n = train_.size();
  if (perm_epoch_ != epoch) {
    if (shuffle_) {
      Rng rng(derive_seed(seed_, static_cast<uint64_t>(epoch)));
      perm_ = torch::tensor(rng.permutation(n), torch::kLong);
    } else {
      perm_ = torch::arange(n, torch::kLong);
    }
    perm_epoch_ = epoch;
  }
  const auto [lo, hi] = share(end - start);
  if (hi == lo) return {};
  return slice(train_, perm_.slice(0, start + lo, start + hi));
}

models::Batch TensorBatchSource::validation_batch(int64_t index) {
  FOXHUNT_CHECK(index >= 0 && index < validation_batches(), "forecast_trainer",
                "validation batch index ", index, " out of range [0, ", validation_batches(), ")");
  const int64_t start = index * batch_size();
  return slice(validation_, torch::arange(start, std::min(validation_.size(), start + batch_size()),
                                          torch::kLong));
}

// ---- options ----------------------------------------------------------------------------------

// The one field list of ForecastTrainerOptions: its JSON writer, reader and known keys.
FOXHUNT_OPTIONS_JSON(ForecastTrainerOptions, "forecast_trainer", forecast_trainer_options_from_json,
                     epochs, learning_rate, weight_decay, max_grad_norm, patience, min_delta,
                     restore_best, validate_initial, seed)

// ---- trainer ----------------------------------------------------------------------------------

ForecastTrainer::ForecastTrainer(models::Model& model, BatchSource& data,
                                 ForecastTrainerOptions options)
    : model_(model),
      data_(data),
      sharded_(dynamic_cast<ShardedBatchSource*>(&data)),
      o_(std::move(options)) {
  const char* c = "forecast_trainer";
  FOXHUNT_CHECK(o_.epochs() > 0, c, "expected epochs > 0, got ", o_.epochs());
  FOXHUNT_CHECK(o_.learning_rate() > 0, c, "expected learning_rate > 0, got ", o_.learning_rate());
  FOXHUNT_CHECK(o_.patience() >= 0, c, "expected patience >= 0, got ", o_.patience());
  FOXHUNT_CHECK(data_.train_batches() > 0 && data_.validation_batches() > 0, c,
                "expected training and validation batches, got ", data_.train_batches(), " and ",
                data_.validation_batches());
  torch::manual_seed(o_.seed());
  optimizer_ = std::make_unique<torch::optim::Adam>(
      model_.module().parameters(),
      torch::optim::AdamOptions(o_.learning_rate()).weight_decay(o_.weight_decay()));
}

ForecastTrainer::~ForecastTrainer() = default;

void ForecastTrainer::set_data_parallel(std::shared_ptr<dist::Communicator> comm) {
  dp_ = std::make_unique<DataParallel>(std::move(comm),
                                       std::vector<torch::nn::Module*>{&model_.module()},
                                       model_.module().parameters());
  if (dp_->rank() > 0) torch::manual_seed(rank_seed(o_.seed(), dp_->rank()));
}

namespace {
models::Batch to_device(models::Batch b, const torch::Device& device) {
  for (auto& t : b.inputs) t = t.to(device);
  if (b.target.defined()) b.target = b.target.to(device);
  return b;
}
}  // namespace

double mean_batch_loss(models::Model& model, int64_t count,
                       const std::function<models::Batch(int64_t)>& batch) {
  torch::NoGradGuard no_grad;
  const bool was_training = model.module().is_training();
  model.module().eval();
  const auto device = models::module_device(model.module());
  double sum = 0.0;
  int64_t n = 0;
  for (int64_t i = 0; i < count; ++i) {
    auto b = to_device(batch(i), device);
    sum += model.loss(b).item<double>() * static_cast<double>(b.size());
    n += b.size();
  }
  model.module().train(was_training);
  return n > 0 ? sum / static_cast<double>(n) : NAN;
}

double ForecastTrainer::validation_loss() {
  return mean_batch_loss(model_, data_.validation_batches(),
                         [this](int64_t i) { return data_.validation_batch(i); });
}

nlohmann::json ForecastTrainer::metrics_line(double elapsed, double rate) const {
  return {{"algo", "forecast"},
          {"model", model_.name()},
          {"step", step_},
          {"epoch", epoch_},
          {"loss", window_loss_count_ > 0
                       ? json_number(window_loss_sum_ / static_cast<double>(window_loss_count_))
                       : nlohmann::json(nullptr)},
          {"lr", o_.learning_rate()},
          {"best_val_loss", json_number(best_val_)},
          {"best_epoch", best_epoch_},
          {"samples_per_s", rate},
          {"elapsed_s", elapsed}};
}

void ForecastTrainer::prepare_step(models::Batch b) {
  // A data-parallel rank may get no share of a short final batch: it still takes part in the
  // gradient all-reduce (with weight 0) so every rank steps the same way.
  const bool empty = b.inputs.empty();
  const int64_t n = empty ? 0 : b.size();
  optimizer_->zero_grad();
  if (dp_) dp_->begin(static_cast<double>(n));
  torch::Tensor loss;
  if (!empty) {
    b = to_device(std::move(b), models::module_device(model_.module()));
    loss = model_.loss(b);
    FOXHUNT_CHECK(loss.dim() == 0, "forecast_trainer", "model '", model_.name(),
                  "': loss() must return a scalar, got shape ",
                  models::shape_str(loss.sizes().vec()));
    loss.backward();
  } else {
    FOXHUNT_INTERNAL_ASSERT(dp_ != nullptr, "empty training batch without data parallelism");
  }
  if (dp_) dp_->finish();
  if (o_.max_grad_norm() > 0)
    torch::nn::utils::clip_grad_norm_(model_.module().parameters(), o_.max_grad_norm());
  // The batch stays alive until the optimizer step is over, as it did in the loop.
  pending_batch_ = std::move(b);
  pending_loss_ = loss.defined() ? loss.detach() : torch::Tensor();
  pending_size_ = n;
}

double ForecastTrainer::apply_step() {
  FOXHUNT_INTERNAL_ASSERT(pending_size_ >= 0, "apply_step without prepare_step");
  optimizer_->step();
  const int64_t n = pending_size_;
  const double l = n > 0 ? pending_loss_.item<double>() : NAN;
  pending_batch_ = models::Batch();
  pending_loss_ = torch::Tensor();
  pending_size_ = -1;
  if (n > 0)
    FOXHUNT_ENSURE(std::isfinite(l), "forecast_trainer", "model '", model_.name(),
                   "': non-finite training loss at step ", step_, " (epoch ", epoch_,
                   "); lower the learning rate");
  return l;
}

TrainResult ForecastTrainer::train(const RunConfig& run) {
  // The step total is for progress only: a resumed epoch that starts late has fewer batches.
  RunSession session(run, "forecast", model_.name(), o_.epochs() * data_.train_batches(), step_);
  // A collective costs ~0.7 ms on loopback here: ranks agree on stopping every 16 steps.
  if (dp_) session.set_stop_agreement([this](bool s) { return dp_->agree_stop(s); }, 16);
  const int64_t samples_before = samples_;
  auto samples_rate = [&] {
    const double t = session.elapsed();
    return t > 0 ? static_cast<double>(samples_ - samples_before) / t : 0.0;
  };
  auto checkpoint = [&] { session.checkpoint([&](const auto& p) { save_checkpoint(p); }); };

  // A run that stopped early stays stopped; one that ran out of epochs continues when resumed
  // with more of them.
  if (o_.validate_initial() && epoch_ == 0 && batch_ == 0 && std::isnan(best_val_)) {
    // The starting point is a candidate too (best_epoch -1); a resumed run has it in its state.
    initial_val_ = validation_loss();
    best_val_ = initial_val_;
    best_weights_ = models::module_to_bytes(model_.module());
    auto line = metrics_line(session.elapsed(), 0.0);
    line["event"] = "initial";
    line["val_loss"] = json_number(initial_val_);
    session.log(line, step_, fmt::format("initial weights  val {:.5g}", initial_val_));
  }
  while (!stopped_early_ && epoch_ < o_.epochs()) {
    model_.module().train();
    const int64_t per_epoch = data_.epoch_batches(epoch_);
    while (batch_ < per_epoch) {
      if (session.should_stop(step_)) break;
      {
        prepare_step(data_.train_batch(epoch_, batch_));
        const int64_t n = pending_size_;
        const double l = apply_step();
        if (n > 0) {
          epoch_loss_sum_ += l;
          ++epoch_loss_count_;
          window_loss_sum_ += l;
          ++window_loss_count_;
          samples_ += n;
        }
      }
      ++step_;
      ++batch_;
      if (dp_) dp_->after_step(step_);
      if (session.log_due(step_ - 1, step_)) {
        auto line = metrics_line(session.elapsed(), samples_rate());
        const std::string extra =
            fmt::format("epoch {}  loss {:.5g}", epoch_,
                        line["loss"].is_null() ? NAN : line["loss"].get<double>());
        session.log(line, step_, extra);
        window_loss_sum_ = 0.0;
        window_loss_count_ = 0;
      }
      if (session.checkpoint_due(step_ - 1, step_)) checkpoint();
      session.update(step_);
    }
    if (session.halted()) break;
    // End of epoch: validate, track the best weights, decide on early stopping.
    {
      const double val = validation_loss();
      val_history_.push_back(val);
      const double train_loss =
          epoch_loss_sum_ / static_cast<double>(std::max<int64_t>(epoch_loss_count_, 1));
      const bool improved = std::isnan(best_val_) || val < best_val_ - o_.min_delta();
      if (improved) {
        best_val_ = val;
        best_epoch_ = epoch_;
        bad_epochs_ = 0;
        best_weights_ = models::module_to_bytes(model_.module());
      } else {
        ++bad_epochs_;
      }
      auto line = metrics_line(session.elapsed(), samples_rate());
      line["event"] = "epoch";
      line["train_loss"] = json_number(train_loss);
      line["val_loss"] = json_number(val);
      line["improved"] = improved;
      session.log(line, step_,
                  fmt::format("epoch {}  train {:.5g}  val {:.5g}  best {:.5g}", epoch_, train_loss,
                              val, best_val_));
      ++epoch_;
      batch_ = 0;
      epoch_loss_sum_ = 0.0;
      epoch_loss_count_ = 0;
      if (o_.patience() > 0 && bad_epochs_ >= o_.patience()) stopped_early_ = true;
      if (stopped_early_) break;
    }
  }
  const bool completed = !session.halted();
  if (dp_) dp_->check_now(step_);
  if (completed && o_.restore_best() && !best_weights_.empty())
    models::module_from_bytes(model_.module(), best_weights_, "best weights");
  checkpoint();
  auto metrics = metrics_line(session.elapsed(), samples_rate());
  metrics["epochs"] = epoch_;
  metrics["stopped_early"] = stopped_early_;
  metrics["val_history"] = val_history_;
  metrics["initial_val_loss"] = json_number(initial_val_);
  metrics["final_val_loss"] =
      val_history_.empty() ? nlohmann::json(nullptr) : json_number(val_history_.back());
  if (dp_) metrics["distributed"] = dp_->summary();
  return session.finish(step_, epoch_, completed, std::move(metrics));
}

// The resumable state, listed once: the checkpoint writes and reads exactly these fields.
template <typename F>
void ForecastTrainer::visit_state(F&& f) {
  visit_fields(f, "step", step_, "epoch", epoch_, "batch", batch_, "epoch_loss_sum",
               epoch_loss_sum_, "epoch_loss_count", epoch_loss_count_, "window_loss_sum",
               window_loss_sum_, "window_loss_count", window_loss_count_, "samples", samples_,
               "best_val", best_val_, "best_epoch", best_epoch_, "bad_epochs", bad_epochs_,
               "stopped_early", stopped_early_, "val_history", val_history_);
}

void ForecastTrainer::save_checkpoint(const std::string& path) {
  nlohmann::json t = {
      {"options", to_json(o_)}, {"train_batches", data_.train_batches()}, {"extra", extra_}};
  visit_state(StateWriter(t));
  // Where the epoch stands at any world size: what an elastic resume re-cuts the epoch from.
  if (sharded_)
    t["position"] = {{"world", sharded_->world()},
                     {"batch_size", sharded_->batch_size()},
                     {"train_samples", sharded_->train_samples()},
                     {"epoch_start", sharded_->epoch_start(epoch_)}};
  Container c = trainer_container(model_, "forecast", t);
  c.blobs["optimizer"] = optimizer_to_bytes(*optimizer_);
  c.blobs["torch_rng"] = torch_rng_state();
  if (!best_weights_.empty()) c.blobs["best_module"] = best_weights_;
  write_container(path, c);
}

void ForecastTrainer::load_checkpoint(const std::string& path) {
  load_checkpoint(read_trainer_checkpoint(path, "forecast"), path);
}

void ForecastTrainer::load_checkpoint(const Container& c, const std::string& path) {
  check_trainer_container(c, path, "forecast");
  const auto& h = c.header;
  FOXHUNT_CHECK(h.value("model", "") == model_.name(), "checkpoint", "'", path, "': expected a '",
                model_.name(), "' checkpoint, got '", h.value("model", "?"), "'");
  FOXHUNT_CHECK(h.contains("options") && h["options"] == model_.options_json(), "checkpoint", "'",
                path, "': model options differ: checkpoint ",
                h.value("options", nlohmann::json()).dump(), ", model ",
                model_.options_json().dump());
  const auto& t = h["trainer"];
  try {
    const bool positioned = sharded_ != nullptr && t.contains("position");
    if (!positioned)
      FOXHUNT_CHECK(t.at("train_batches").get<int64_t>() == data_.train_batches(), "checkpoint",
                    "'", path, "': trained with ", t.at("train_batches").get<int64_t>(),
                    " batches per epoch, the data source gives ", data_.train_batches());
    models::module_from_bytes(model_.module(), require_blob(c, "module", path), path);
    optimizer_from_bytes(*optimizer_, require_blob(c, "optimizer", path), path);
    set_torch_rng_state(require_blob(c, "torch_rng", path), path);
    auto it = c.blobs.find("best_module");
    best_weights_ = it == c.blobs.end() ? std::string() : it->second;
    visit_state(StateReader(t));
    extra_ = t.value("extra", nlohmann::json::object());
    if (positioned) resume_position(t.at("position"), path);
  } catch (const nlohmann::json::exception& e) {
    throw InputError("checkpoint", "'" + path + "': bad trainer state (" + e.what() + ")");
  }
}

// The checkpoint's place in its epoch, re-cut for this source's world size when it differs.
void ForecastTrainer::resume_position(const nlohmann::json& p, const std::string& path) {
  const int64_t world = p.at("world").get<int64_t>(), batch = p.at("batch_size").get<int64_t>();
  const int64_t samples = p.at("train_samples").get<int64_t>();
  const int64_t start = p.at("epoch_start").get<int64_t>();
  FOXHUNT_CHECK(samples == sharded_->train_samples(), "checkpoint", "'", path, "': trained on ",
                samples, " training samples per epoch, the data source gives ",
                sharded_->train_samples());
  FOXHUNT_CHECK(batch == sharded_->batch_size(), "checkpoint", "'", path, "': trained with ", batch,
                " samples per rank and batch, the data source gives ", sharded_->batch_size());
  FOXHUNT_CHECK(world >= 1 && start >= 0 && start <= samples && batch_ >= 0, "checkpoint", "'",
                path, "': bad position (world ", world, ", epoch start ", start, ", batch ", batch_,
                ")");
  if (world == sharded_->world()) {
    sharded_->start_epoch_at(epoch_, start);
    return;
  }
  // Another world size: the samples the old global batches covered are done; the rest of the
  // epoch's order is cut into this world's global batches.
  sharded_->start_epoch_at(epoch_, std::min(samples, start + batch_ * batch * world));
  batch_ = 0;
  resharded_from_ = world;
}

}  // namespace foxhunt::train
