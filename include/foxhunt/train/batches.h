#pragma once
/// \file batches.h
/// Batch assembly from market data, driven by the model's I/O spec (models/spec.h): each input
/// names a role and a feature set, so one function serves every forecaster and no layer matches
/// model names or option keys. Also the Matrix <-> tensor conversions.

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "foxhunt/data/dataset.h"
#include "foxhunt/data/features.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/spec.h"

namespace foxhunt::train {

/// Copies a matrix into a float tensor [rows, cols] on `device`.
torch::Tensor to_tensor(const data::Matrix& m, const torch::Device& device = torch::kCPU);

/// Copies a 2-D tensor (any floating dtype, any device) into a Matrix.
data::Matrix from_tensor(const torch::Tensor& t);

/// Stacks equally long observations (e.g. TradingEnv states) into [batch, dim].
torch::Tensor states_tensor(const std::vector<std::vector<float>>& states,
                            const torch::Device& device = torch::kCPU);

/// The window geometry of a forecaster's spec (past = window, horizon). Throws InputError for
/// a spec without a time axis.
data::WindowSpec window_of(const models::IoSpec& spec);

/// Checks that every input of `spec` can be assembled from market data: past-feature and
/// known-future inputs name a feature set whose width equals the input's feature count (the
/// set's flow variant with `flow`: data of bars built from a tape, data/flow_features.h), steps
/// match the window/horizon. Throws InputError naming the model, input and both widths.
void check_market_spec(const std::string& model, const models::IoSpec& spec, bool flow = false);

/// The batch of the windows anchored at `anchors`, laid out as `spec` says: past features
/// [batch, window, width] of bars anchor-window+1..anchor, known-future calendar rows
/// [batch, horizon, 4] of bars anchor+1..anchor+horizon, static ids [batch] (the dataset's
/// instrument id), target [batch, horizon] scaled returns. A dataset with flow columns
/// (MarketDataset::has_flow) fills the flow variants of the feature sets.
models::Batch market_batch(const data::MarketDataset& ds, const models::IoSpec& spec,
                           const std::vector<int64_t>& anchors,
                           const torch::Device& device = torch::kCPU);

/// market_batch over the windows of several instruments: row i is window `refs[i]` of dataset
/// `panel[refs[i].instrument]`, normalised with that instrument's normaliser, its static id the
/// dataset's instrument id and its target scaled by the dataset's scale.
models::Batch market_batch(const std::vector<const data::MarketDataset*>& panel,
                           const models::IoSpec& spec, const std::vector<data::WindowRef>& refs,
                           const torch::Device& device = torch::kCPU);

}  // namespace foxhunt::train
