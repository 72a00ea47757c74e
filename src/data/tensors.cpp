#include "foxhunt/data/tensors.h"

#include <algorithm>

#include "foxhunt/core/error.h"

namespace foxhunt::data {

namespace {
constexpr const char* kComponent = "dataset";
}

torch::Tensor to_tensor(const Matrix& m, const torch::Device& device) {
  FOXHUNT_CHECK(static_cast<int64_t>(m.data.size()) == m.rows * m.cols, kComponent, "matrix ",
                m.rows, "x", m.cols, " holds ", m.data.size(), " values");
  auto t = torch::empty({m.rows, m.cols}, torch::kFloat32);
  std::copy(m.data.begin(), m.data.end(), t.data_ptr<float>());
  return t.to(device);
}

Matrix from_tensor(const torch::Tensor& t) {
  FOXHUNT_CHECK(t.dim() == 2 && t.is_floating_point(), kComponent,
                "expected a 2-D floating tensor, got rank ", t.dim(), " dtype ", t.scalar_type());
  const auto c = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  Matrix m(c.size(0), c.size(1));
  std::copy(c.data_ptr<float>(), c.data_ptr<float>() + c.numel(), m.data.begin());
  return m;
}

models::Batch mamba2_batch(const MarketDataset& ds, const std::vector<int64_t>& anchors,
                           const WindowSpec& spec, const torch::Device& device) {
  FOXHUNT_CHECK(!anchors.empty(), kComponent, "mamba2 batch: no anchors");
  const auto b = static_cast<int64_t>(anchors.size());
  auto x = torch::empty({b, spec.past, kMamba2Features}, torch::kFloat32);
  auto y = torch::empty({b, spec.horizon}, torch::kFloat32);
  float* xp = x.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  for (int64_t i = 0; i < b; ++i)
    ds.fill_mamba2(anchors[i], spec, xp + i * spec.past * kMamba2Features, yp + i * spec.horizon);
  models::Batch batch;
  batch.inputs = {x.to(device)};
  batch.target = y.to(device);
  return batch;
}

models::Batch tft_batch(const MarketDataset& ds, const std::vector<int64_t>& anchors,
                        const WindowSpec& spec, const torch::Device& device) {
  FOXHUNT_CHECK(!anchors.empty(), kComponent, "tft batch: no anchors");
  const auto b = static_cast<int64_t>(anchors.size());
  auto past = torch::empty({b, spec.past, kTftPastFeatures}, torch::kFloat32);
  auto future = torch::empty({b, spec.horizon, kKnownFutureFeatures}, torch::kFloat32);
  auto y = torch::empty({b, spec.horizon}, torch::kFloat32);
  auto sid = torch::full({b}, ds.options().instrument_id, torch::kInt64);
  for (int64_t i = 0; i < b; ++i)
    ds.fill_tft(anchors[i], spec, past.data_ptr<float>() + i * spec.past * kTftPastFeatures,
                future.data_ptr<float>() + i * spec.horizon * kKnownFutureFeatures,
                y.data_ptr<float>() + i * spec.horizon);
  models::Batch batch;
  batch.inputs = {past.to(device), future.to(device), sid.to(device)};
  batch.target = y.to(device);
  return batch;
}

torch::Tensor states_tensor(const std::vector<std::vector<float>>& states,
                            const torch::Device& device) {
  FOXHUNT_CHECK(!states.empty(), kComponent, "states_tensor: no states");
  const auto dim = static_cast<int64_t>(states.front().size());
  auto t = torch::empty({static_cast<int64_t>(states.size()), dim}, torch::kFloat32);
  for (size_t i = 0; i < states.size(); ++i) {
    FOXHUNT_CHECK(static_cast<int64_t>(states[i].size()) == dim, kComponent, "state ", i, " has ",
                  states[i].size(), " values, expected ", dim);
    std::copy(states[i].begin(), states[i].end(), t.data_ptr<float>() + i * dim);
  }
  return t.to(device);
}

}  // namespace foxhunt::data
