#include "foxhunt/train/market.h"

#include "foxhunt/core/error.h"
#include "foxhunt/data/features.h"
#include "foxhunt/train/batches.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::train {

EnvStep TradingEnvAdapter::step(int64_t action) {
  data::StepResult s = env_.step(action);
  EnvStep r;
  r.obs = std::move(s.obs);
  r.reward = s.reward;
  r.terminated = false;
  r.truncated = s.done;
  return r;
}

EnvFactory trading_env_factory(std::shared_ptr<const data::MarketDataset> dataset,
                               data::Split split, data::TradingEnvOptions options) {
  FOXHUNT_CHECK(dataset != nullptr, "train", "trading env: expected a dataset");
  return [dataset, split, options](int64_t index) -> std::unique_ptr<Env> {
    if (index == kEvalEnvIndex) {
      data::TradingEnvOptions eval = options;
      eval.random_start = false;  // windows tile the validation split in order
      return std::make_unique<TradingEnvAdapter>(
          data::TradingEnv(*dataset, data::Split::kValidation, eval));
    }
    return std::make_unique<TradingEnvAdapter>(data::TradingEnv(*dataset, split, options));
  };
}

MarketBatchSource::MarketBatchSource(std::shared_ptr<const data::MarketDataset> dataset,
                                     const models::Model& model, int64_t batch_size, uint64_t seed,
                                     torch::Device device)
    : ShardedBatchSource("train"),
      ds_(std::move(dataset)),
      io_(model.spec()),
      batch_size_(batch_size),
      seed_(seed),
      device_(device) {
  const char* c = "train";
  FOXHUNT_CHECK(ds_ != nullptr, c, "market batches: expected a dataset");
  FOXHUNT_CHECK(batch_size > 0, c, "expected batch size > 0, got ", batch_size);
  check_market_spec(model.name(), io_);
  spec_ = window_of(io_);
  train_anchors_ = ds_->anchors(data::Split::kTrain, spec_);
  validation_ =
      data::make_batches(ds_->anchors(data::Split::kValidation, spec_), batch_size, false, 0);
  test_ = data::make_batches(ds_->anchors(data::Split::kTest, spec_), batch_size, false, 0);
  FOXHUNT_CHECK(!train_anchors_.empty() && !validation_.empty(), c,
                "the data has no training or validation windows of ", spec_.past, "+",
                spec_.horizon, " bars; use a longer series");
}

int64_t MarketBatchSource::windows(data::Split split) const {
  return static_cast<int64_t>(ds_->anchors(split, spec_).size());
}

models::Batch MarketBatchSource::build(const std::vector<int64_t>& anchors) const {
  return market_batch(*ds_, io_, anchors, device_);
}

int64_t MarketBatchSource::train_batches() const {
  return global_batches(static_cast<int64_t>(train_anchors_.size()), batch_size_);
}

models::Batch MarketBatchSource::train_batch(int64_t epoch, int64_t index) {
  if (epoch != epoch_cached_ || world() != world_cached_) {
    epoch_batches_ = data::make_batches(train_anchors_, batch_size_ * world(), true,
                                        derive_seed(seed_, static_cast<uint64_t>(epoch)));
    epoch_cached_ = epoch;
    world_cached_ = world();
  }
  FOXHUNT_CHECK(index >= 0 && index < static_cast<int64_t>(epoch_batches_.size()), "train",
                "train batch index ", index, " out of range [0, ", epoch_batches_.size(), ")");
  const auto& global = epoch_batches_[static_cast<size_t>(index)];
  if (world() == 1) return build(global);
  const auto [lo, hi] = share(static_cast<int64_t>(global.size()));
  if (hi == lo) return {};
  return build(std::vector<int64_t>(global.begin() + lo, global.begin() + hi));
}

int64_t MarketBatchSource::validation_batches() const {
  return static_cast<int64_t>(validation_.size());
}

models::Batch MarketBatchSource::validation_batch(int64_t index) {
  FOXHUNT_CHECK(index >= 0 && index < validation_batches(), "train", "validation batch index ",
                index, " out of range");
  return build(validation_[static_cast<size_t>(index)]);
}

int64_t MarketBatchSource::test_batches() const {
  return static_cast<int64_t>(test_.size());
}

models::Batch MarketBatchSource::test_batch(int64_t index) {
  FOXHUNT_CHECK(index >= 0 && index < test_batches(), "train", "test batch index ", index,
                " out of range");
  return build(test_[static_cast<size_t>(index)]);
}

}  // namespace foxhunt::train
