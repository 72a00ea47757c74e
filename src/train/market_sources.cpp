#include "foxhunt/train/market_sources.h"

#include "foxhunt/core/error.h"
#include "foxhunt/data/features.h"
#include "foxhunt/train/batches.h"
#include "foxhunt/train/infra.h"

namespace foxhunt::train {

namespace {

// A trading step as an Env step: the end of an episode's window is a time limit (truncated).
EnvStep env_step(data::StepResult s) {
  EnvStep r;
  r.obs = std::move(s.obs);
  r.reward = s.reward;
  r.terminated = false;
  r.truncated = s.done;
  return r;
}

}  // namespace

EnvStep TradingEnvAdapter::step(int64_t action) {
  return env_step(env_.step(action));
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

PanelTradingEnv::PanelTradingEnv(
    const std::vector<std::shared_ptr<const data::MarketDataset>>& panel, data::Split split,
    data::TradingEnvOptions options)
    : sequential_(!options.random_start), rng_(options.seed) {
  FOXHUNT_CHECK(!panel.empty(), "train", "trading env: expected at least one instrument");
  for (const auto& ds : panel) {
    FOXHUNT_CHECK(ds != nullptr, "train", "trading env: a null dataset");
    envs_.emplace_back(*ds, split, options);
    FOXHUNT_CHECK(envs_.back().observation_dim() == envs_.front().observation_dim(), "train",
                  "trading env: instrument '", ds->series().source, "' observes ",
                  envs_.back().observation_dim(), " values, the first one ",
                  envs_.front().observation_dim());
  }
}

std::vector<float> PanelTradingEnv::reset(uint64_t seed) {
  rng_.seed(seed);
  next_episode_ = 0;
  // Each instrument's start stream from its own seed. reset(seed) also starts an episode there
  // (the first window in sequential mode): its first use below takes that one.
  fresh_.assign(envs_.size(), true);
  for (size_t i = 0; i < envs_.size(); ++i)
    envs_[i].reset(derive_seed(seed, static_cast<uint64_t>(i) + 1));
  return reset();
}

std::vector<float> PanelTradingEnv::reset() {
  const auto n = static_cast<int64_t>(envs_.size());
  if (!sequential_) {
    current_ = static_cast<int64_t>(rng_.uniform_int(static_cast<uint64_t>(n)));
  } else {
    // Episode k: instrument k mod N, its next window (one with fewer windows wraps around).
    current_ = next_episode_ % n;
    ++next_episode_;
  }
  const auto k = static_cast<size_t>(current_);
  if (k < fresh_.size() && fresh_[k]) {
    fresh_[k] = false;
    return envs_[k].observation();
  }
  return envs_[k].reset();
}

EnvStep PanelTradingEnv::step(int64_t action) {
  return env_step(envs_[static_cast<size_t>(current_)].step(action));
}

std::uint64_t PanelTradingEnv::host_bytes() const {
  std::uint64_t n = 0;
  for (const auto& e : envs_) n += e.host_bytes();
  return n;
}

int64_t PanelTradingEnv::sequential_episodes() const {
  int64_t n = 0;
  for (const auto& e : envs_) n += e.sequential_episodes();
  return n;
}

EnvFactory trading_env_factory(std::vector<std::shared_ptr<const data::MarketDataset>> panel,
                               data::Split split, data::TradingEnvOptions options) {
  FOXHUNT_CHECK(!panel.empty(), "train", "trading env: expected at least one instrument");
  if (panel.size() == 1) return trading_env_factory(panel.front(), split, options);
  return [panel, split, options](int64_t index) -> std::unique_ptr<Env> {
    if (index == kEvalEnvIndex) {
      data::TradingEnvOptions eval = options;
      eval.random_start = false;
      return std::make_unique<PanelTradingEnv>(panel, data::Split::kValidation, eval);
    }
    return std::make_unique<PanelTradingEnv>(panel, split, options);
  };
}

MarketBatchSource::MarketBatchSource(std::shared_ptr<const data::MarketDataset> dataset,
                                     const models::Model& model, int64_t batch_size, uint64_t seed,
                                     torch::Device device)
    : MarketBatchSource(std::vector<std::shared_ptr<const data::MarketDataset>>{std::move(dataset)},
                        model, batch_size, seed, device) {}

MarketBatchSource::MarketBatchSource(std::vector<std::shared_ptr<const data::MarketDataset>> panel,
                                     const models::Model& model, int64_t batch_size, uint64_t seed,
                                     torch::Device device)
    : ShardedBatchSource("train", batch_size),
      panel_(std::move(panel)),
      io_(model.spec()),
      seed_(seed),
      device_(device) {
  const char* c = "train";
  FOXHUNT_CHECK(!panel_.empty(), c, "market batches: expected a dataset");
  for (const auto& ds : panel_) {
    FOXHUNT_CHECK(ds != nullptr, c, "market batches: expected a dataset");
    raw_panel_.push_back(ds.get());
  }
  check_market_spec(model.name(), io_, panel_.front()->has_flow());
  spec_ = window_of(io_);
  // Validation and test batches never mix instruments' time orders: instrument by instrument.
  const auto batches_of = [&](data::Split split) {
    std::vector<std::vector<data::WindowRef>> out;
    for (size_t i = 0; i < panel_.size(); ++i)
      for (const auto& b :
           data::make_batches(panel_[i]->anchors(split, spec_), batch_size, false, 0)) {
        std::vector<data::WindowRef> refs;
        for (int64_t a : b) refs.push_back({static_cast<int64_t>(i), a});
        out.push_back(std::move(refs));
      }
    return out;
  };
  for (size_t i = 0; i < panel_.size(); ++i)
    for (int64_t a : panel_[i]->anchors(data::Split::kTrain, spec_))
      train_refs_.push_back({static_cast<int64_t>(i), a});
  validation_ = batches_of(data::Split::kValidation);
  test_ = batches_of(data::Split::kTest);
  FOXHUNT_CHECK(!train_refs_.empty() && !validation_.empty(), c,
                "the data has no training or validation windows of ", spec_.past, "+",
                spec_.horizon, " bars; use a longer series");
}

int64_t MarketBatchSource::windows(data::Split split) const {
  int64_t n = 0;
  for (const auto& ds : panel_) n += static_cast<int64_t>(ds->anchors(split, spec_).size());
  return n;
}

const std::vector<data::WindowRef>& MarketBatchSource::test_refs(int64_t index) const {
  FOXHUNT_CHECK(index >= 0 && index < static_cast<int64_t>(test_.size()), "train",
                "test batch index ", index, " out of range [0, ", test_.size(), ")");
  return test_[static_cast<size_t>(index)];
}

models::Batch MarketBatchSource::build(const std::vector<data::WindowRef>& refs) const {
  return market_batch(raw_panel_, io_, refs, device_);
}

models::Batch MarketBatchSource::train_batch(int64_t epoch, int64_t index) {
  const auto [start, end] = global_batch(epoch, index);
  if (epoch != order_epoch_) {
    // One batch of every training window: the epoch's order (make_batches shuffles, then cuts).
    std::vector<int64_t> all(train_refs_.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    order_ = std::move(data::make_batches(all, static_cast<int64_t>(all.size()), true,
                                          derive_seed(seed_, static_cast<uint64_t>(epoch)))
                           .front());
    order_epoch_ = epoch;
  }
  const auto [lo, hi] = share(end - start);
  if (hi == lo) return {};
  std::vector<data::WindowRef> refs;
  refs.reserve(static_cast<size_t>(hi - lo));
  for (int64_t k = lo; k < hi; ++k)
    refs.push_back(train_refs_[static_cast<size_t>(order_[static_cast<size_t>(start + k)])]);
  return build(refs);
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
