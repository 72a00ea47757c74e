#include "foxhunt/train/batches.h"

#include <algorithm>

#include "foxhunt/core/error.h"

namespace foxhunt::train {

namespace {
constexpr const char* kBatchesComponent = "batches";
}

torch::Tensor to_tensor(const data::Matrix& m, const torch::Device& device) {
  FOXHUNT_CHECK(static_cast<int64_t>(m.data.size()) == m.rows * m.cols, kBatchesComponent,
                "matrix ", m.rows, "x", m.cols, " holds ", m.data.size(), " values");
  auto t = torch::empty({m.rows, m.cols}, torch::kFloat32);
  std::copy(m.data.begin(), m.data.end(), t.data_ptr<float>());
  return t.to(device);
}

data::Matrix from_tensor(const torch::Tensor& t) {
  FOXHUNT_CHECK(t.dim() == 2 && t.is_floating_point(), kBatchesComponent,
                "expected a 2-D floating tensor, got rank ", t.dim(), " dtype ", t.scalar_type());
  const auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  data::Matrix m(c.size(0), c.size(1));
  std::copy(c.data_ptr<float>(), c.data_ptr<float>() + c.numel(), m.data.begin());
  return m;
}

torch::Tensor states_tensor(const std::vector<std::vector<float>>& states,
                            const torch::Device& device) {
  FOXHUNT_CHECK(!states.empty(), kBatchesComponent, "states_tensor: no states");
  const auto dim = static_cast<int64_t>(states.front().size());
  auto t = torch::empty({static_cast<int64_t>(states.size()), dim}, torch::kFloat32);
  for (size_t i = 0; i < states.size(); ++i) {
    FOXHUNT_CHECK(static_cast<int64_t>(states[i].size()) == dim, kBatchesComponent, "state ", i,
                  " has ", states[i].size(), " values, expected ", dim);
    std::copy(states[i].begin(), states[i].end(), t.data_ptr<float>() + i * dim);
  }
  return t.to(device);
}

data::WindowSpec window_of(const models::IoSpec& spec) {
  FOXHUNT_CHECK(spec.is_forecaster(), kBatchesComponent,
                "expected a forecaster (window and horizon > 0), got window ", spec.window,
                ", horizon ", spec.horizon);
  return {spec.window, spec.horizon};
}

void check_market_spec(const std::string& model, const models::IoSpec& spec, bool flow) {
  window_of(spec);
  for (const auto& in : spec.inputs) {
    if (in.role == models::InputRole::kStaticId) continue;
    FOXHUNT_CHECK(in.role != models::InputRole::kState, kBatchesComponent, "model '", model,
                  "' input '", in.name,
                  "': a state input is fed by an environment, not by market windows");
    const auto& fs = data::feature_set(in.feature_set, flow);
    FOXHUNT_CHECK(fs.width == in.features, kBatchesComponent, "model '", model, "' input '",
                  in.name, "': the feature set '", fs.name, "' gives ", fs.width, " values per bar",
                  flow ? " (with the tape's flow columns)" : "", ", the model expects ",
                  in.features);
    const int64_t steps = in.role == models::InputRole::kPastFeatures ? spec.window : spec.horizon;
    FOXHUNT_CHECK(in.steps == steps, kBatchesComponent, "model '", model, "' input '", in.name,
                  "': expected ", steps, " steps, the spec says ", in.steps);
  }
}

models::Batch market_batch(const data::MarketDataset& ds, const models::IoSpec& spec,
                           const std::vector<int64_t>& anchors, const torch::Device& device) {
  std::vector<data::WindowRef> refs;
  refs.reserve(anchors.size());
  for (int64_t a : anchors) refs.push_back({0, a});
  return market_batch(std::vector<const data::MarketDataset*>{&ds}, spec, refs, device);
}

models::Batch market_batch(const std::vector<const data::MarketDataset*>& panel,
                           const models::IoSpec& spec, const std::vector<data::WindowRef>& refs,
                           const torch::Device& device) {
  FOXHUNT_CHECK(!refs.empty(), kBatchesComponent, "market batch: no anchors");
  for (const auto& r : refs)
    FOXHUNT_CHECK(r.instrument >= 0 && r.instrument < static_cast<int64_t>(panel.size()) &&
                      panel[static_cast<size_t>(r.instrument)] != nullptr,
                  kBatchesComponent, "market batch: instrument ", r.instrument,
                  " outside the panel of ", panel.size());
  const auto ds = [&](int64_t i) -> const data::MarketDataset& {
    return *panel[static_cast<size_t>(refs[static_cast<size_t>(i)].instrument)];
  };
  const auto anchor = [&](int64_t i) { return refs[static_cast<size_t>(i)].anchor; };
  const data::WindowSpec w = window_of(spec);
  const auto b = static_cast<int64_t>(refs.size());
  // Every dataset of a batch has the same market bank (all with the flow columns, or none).
  const bool flow = ds(0).has_flow();
  for (int64_t i = 1; i < b; ++i)
    FOXHUNT_CHECK(ds(i).has_flow() == flow, kBatchesComponent,
                  "market batch: expected every instrument with flow features or none, got '",
                  ds(0).series().source, "' ", flow ? "with" : "without", " and '",
                  ds(i).series().source, "' ", flow ? "without" : "with");
  models::Batch batch;
  for (const auto& in : spec.inputs) {
    torch::Tensor t;
    switch (in.role) {
      case models::InputRole::kPastFeatures: {
        const auto& fs = data::feature_set(in.feature_set, flow);
        t = torch::empty({b, w.past, fs.width}, torch::kFloat32);
        for (int64_t i = 0; i < b; ++i)
          ds(i).fill_past(anchor(i), w, fs.columns, t.data_ptr<float>() + i * w.past * fs.width);
        break;
      }
      case models::InputRole::kKnownFuture:
        t = torch::empty({b, w.horizon, data::kKnownFutureFeatures}, torch::kFloat32);
        for (int64_t i = 0; i < b; ++i)
          ds(i).fill_future_calendar(
              anchor(i), w, t.data_ptr<float>() + i * w.horizon * data::kKnownFutureFeatures);
        break;
      case models::InputRole::kStaticId: {
        t = torch::empty({b}, torch::kInt64);
        for (int64_t i = 0; i < b; ++i) t.data_ptr<int64_t>()[i] = ds(i).options().instrument_id;
        break;
      }
      case models::InputRole::kState:
        FOXHUNT_FAIL(kBatchesComponent, "input '", in.name,
                     "': a state input has no market window");
    }
    batch.inputs.push_back(t.to(device));
  }
  auto y = torch::empty({b, w.horizon}, torch::kFloat32);
  for (int64_t i = 0; i < b; ++i)
    ds(i).fill_target(anchor(i), w, y.data_ptr<float>() + i * w.horizon);
  batch.target = y.to(device);
  return batch;
}

}  // namespace foxhunt::train
