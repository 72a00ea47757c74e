#pragma once
/// \file market_sources.h
/// Glue between the market-data layer (data/) and the trainers: the TradingEnv adapter to the
/// Env interface, and a BatchSource that builds Mamba-2 / TFT batches from a MarketDataset on
/// demand (windows are never all materialised: a TFT epoch would need gigabytes).

#include <torch/torch.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "foxhunt/core/random.h"
#include "foxhunt/data/dataset.h"
#include "foxhunt/data/trading_env.h"
#include "foxhunt/models/model.h"
#include "foxhunt/train/env.h"
#include "foxhunt/train/forecast_trainer.h"

namespace foxhunt::train {

/// data::TradingEnv behind the Env interface. An episode ends when its window of bars does: that
/// is a time limit (the market goes on), so it is reported as truncated, never terminated, and
/// the trainers bootstrap through it. The environment has no state serialisation, so a resumed
/// run restarts its episodes (the network, optimizer, replay buffer and counters are exact).
class TradingEnvAdapter final : public Env {
 public:
  /// Wraps `env`.
  explicit TradingEnvAdapter(data::TradingEnv env) : env_(std::move(env)) {}
  std::string name() const override { return "trading"; }
  int64_t observation_size() const override { return env_.observation_dim(); }
  int64_t action_count() const override { return data::TradingEnv::kActions; }
  std::vector<float> reset(uint64_t seed) override { return env_.reset(seed); }
  std::vector<float> reset() override { return env_.reset(); }
  EnvStep step(int64_t action) override;
  std::uint64_t host_bytes() const override { return env_.host_bytes(); }
  /// The wrapped environment (positions, equity, buy-and-hold comparison).
  data::TradingEnv& env() { return env_; }

 private:
  data::TradingEnv env_;
};

/// Trading environments over one split of a shared dataset; every environment gets `options`
/// (its start stream is reseeded by the trainer's reset(seed)). The evaluation environment
/// (index kEvalEnvIndex) runs sequential windows over the validation split instead.
EnvFactory trading_env_factory(std::shared_ptr<const data::MarketDataset> dataset,
                               data::Split split, data::TradingEnvOptions options = {});

/// Trading across the instruments of a panel (one dataset per instrument, one shared policy):
/// each episode runs on one instrument's split. Training episodes draw the instrument uniformly
/// from a stream seeded by reset(seed) (every instrument as likely, whatever its history length),
/// then the start from that instrument's own stream. Sequential mode (evaluation) interleaves
/// the instruments: episode k is window k / N of instrument k mod N, so a few episodes already
/// cover every instrument.
class PanelTradingEnv final : public Env {
 public:
  /// One TradingEnv per dataset over `split`, all with `options`. InputError for an empty panel
  /// or datasets whose observations differ in width.
  PanelTradingEnv(const std::vector<std::shared_ptr<const data::MarketDataset>>& panel,
                  data::Split split, data::TradingEnvOptions options);
  std::string name() const override { return "trading"; }
  int64_t observation_size() const override { return envs_.front().observation_dim(); }
  int64_t action_count() const override { return data::TradingEnv::kActions; }
  std::vector<float> reset(uint64_t seed) override;
  std::vector<float> reset() override;
  EnvStep step(int64_t action) override;
  std::uint64_t host_bytes() const override;
  /// Sequential windows over all instruments (the sum of theirs).
  int64_t sequential_episodes() const;
  /// The instrument of the current episode (index into the panel).
  int64_t instrument() const { return current_; }

 private:
  std::vector<data::TradingEnv> envs_;
  bool sequential_;
  Rng rng_;
  int64_t current_ = 0;
  int64_t next_episode_ = 0;  // sequential mode
  std::vector<bool> fresh_;   // an instrument's episode started by reset(seed), not yet used
};

/// trading_env_factory over a panel: PanelTradingEnv on `split`, the evaluation environment on
/// the validation split in sequential mode. One dataset: the same as trading_env_factory.
EnvFactory trading_env_factory(std::vector<std::shared_ptr<const data::MarketDataset>> panel,
                               data::Split split, data::TradingEnvOptions options = {});

/// Batches of a MarketDataset for a forecasting model: the layout follows the model's I/O spec
/// (train/batches.h); training windows are reshuffled each
/// epoch by a permutation seeded with (seed, epoch); validation and test keep time order.
class MarketBatchSource final : public ShardedBatchSource {
 public:
  /// Checks that `model`'s spec can be assembled from the dataset (check_market_spec).
  MarketBatchSource(std::shared_ptr<const data::MarketDataset> dataset, const models::Model& model,
                    int64_t batch_size, uint64_t seed,
                    torch::Device device = torch::Device(torch::kCPU));
  /// Batches over every instrument of a panel (one dataset each, their own normalisers, ids and
  /// target scales): an epoch shuffles the training windows of all instruments together;
  /// validation and test windows run instrument by instrument, each in time order.
  MarketBatchSource(std::vector<std::shared_ptr<const data::MarketDataset>> panel,
                    const models::Model& model, int64_t batch_size, uint64_t seed,
                    torch::Device device = torch::Device(torch::kCPU));
  int64_t train_samples() const override { return static_cast<int64_t>(train_refs_.size()); }
  models::Batch train_batch(int64_t epoch, int64_t index) override;
  int64_t validation_batches() const override;
  models::Batch validation_batch(int64_t index) override;
  /// Held-out test batches (time order; not sharded, like the validation batches).
  int64_t test_batches() const;
  /// The `index`-th test batch.
  models::Batch test_batch(int64_t index);
  /// Windows per split (over every instrument).
  int64_t windows(data::Split split) const;
  /// The windows of the `index`-th test batch (instrument and anchor of each row, in order).
  const std::vector<data::WindowRef>& test_refs(int64_t index) const;
  /// The window geometry in use.
  const data::WindowSpec& spec() const { return spec_; }

 private:
  models::Batch build(const std::vector<data::WindowRef>& refs) const;

  std::vector<std::shared_ptr<const data::MarketDataset>> panel_;
  std::vector<const data::MarketDataset*> raw_panel_;
  models::IoSpec io_;
  data::WindowSpec spec_;
  uint64_t seed_;
  torch::Device device_;
  std::vector<data::WindowRef> train_refs_;
  std::vector<std::vector<data::WindowRef>> validation_, test_;
  int64_t order_epoch_ = -1;    // the epoch order_ was drawn for
  std::vector<int64_t> order_;  // that epoch's order: indices into train_refs_
};

}  // namespace foxhunt::train
