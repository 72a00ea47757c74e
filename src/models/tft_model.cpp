// The TFT's registry adapter: its I/O spec, example batches and the Model it registers.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <numbers>

#include "foxhunt/models/adapter.h"
#include "foxhunt/models/model.h"
#include "foxhunt/models/tft.h"

namespace foxhunt::models {

IoSpec io_spec(const TftOptions& o) {
  return forecaster_spec(
      {{"past", InputRole::kPastFeatures, "past225", o.window(), o.past_features()},
       {"future", InputRole::kKnownFuture, "calendar", o.horizon(), o.future_features()},
       {"static_id", InputRole::kStaticId, "", 0, 0, true}},
      o.window(), o.horizon(), o.quantiles());
}

Batch example_batch_of(const TftOptions& o, int64_t batch, int64_t seq_len,
                       const torch::Device& device, uint64_t seed) {
  const int64_t t = seq_len > 0 ? seq_len : o.window(), k = o.horizon();
  FOXHUNT_CHECK(batch >= 1, "tft", "example_batch: expected batch >= 1, got ", batch);
  auto gen = at::detail::createCPUGenerator(seed);
  Batch b;
  b.inputs.push_back(torch::randn({batch, t, o.past_features()}, gen).to(device));
  // Calendar-like known-future inputs: sin/cos pairs of the bar index with periods 5, 20, 80...
  auto start = torch::randint(0, 1000, {batch, 1}, gen, torch::kLong).to(torch::kFloat);
  auto pos = start + t + torch::arange(k, torch::kFloat).unsqueeze(0);  // [B, K]
  std::vector<torch::Tensor> feats;
  for (int64_t f = 0; f < o.future_features(); ++f) {
    const double period = 5.0 * std::pow(4.0, static_cast<double>(f / 2));
    auto angle = pos * (2.0 * std::numbers::pi / period);
    feats.push_back(f % 2 == 0 ? torch::sin(angle) : torch::cos(angle));
  }
  b.inputs.push_back(torch::stack(feats, -1).to(device));
  b.inputs.push_back(
      torch::randint(0, o.static_categories(), {batch}, gen, torch::kLong).to(device));
  b.target = torch::randn({batch, k}, gen).to(device);
  return b;
}

namespace {

class TftModel final : public ForecasterAdapter<TftNet> {
 public:
  explicit TftModel(TftOptions o) : ForecasterAdapter("tft", TftNet(o), io_spec(o)) {}

  std::vector<torch::Tensor> forward(const Batch& b) override {
    check_inputs(b);
    return {net_->forward(b.inputs[0], b.inputs[1], b.inputs[2])};
  }
  std::unique_ptr<ModelStream> make_stream(int64_t window) override {
    // The stream reads the known-future rows and the instrument id of each bar.
    return adapt_stream<TftStream>(
        [](TftStream& s, const StreamBar& bar, ChunkRunner* runner) {
          return s.push(bar.past, bar.future, bar.static_id, runner);
        },
        net_, window);
  }
  torch::nn::Linear quantile_head() override { return net_->output; }
  int64_t cached_width() const override { return net_->options.hidden(); }
  torch::Tensor encode_rows(const torch::Tensor& rows, const torch::Tensor& id) override {
    return net_->encode_past_rows(rows, id);
  }
  torch::Tensor forward_cached(const Batch& b) override {
    check_inputs(b);
    return net_->forward_cached(b.inputs[0], b.inputs[1], b.inputs[2]);
  }
  std::optional<Explanation> explain(const Batch& b) override {
    check_inputs(b);
    const auto d = net_->forward_with_details(
        b.inputs[0].narrow(0, 0, 1), b.inputs[1].narrow(0, 0, 1), b.inputs[2].narrow(0, 0, 1));
    auto vec = [](const torch::Tensor& t) {
      const auto c = t.to(torch::kCPU, torch::kDouble).contiguous();
      return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
    };
    const int64_t window = b.inputs[0].size(1);
    Explanation e;
    e.past_weights = vec(d.past_weights[0].mean(0));
    e.future_weights = vec(d.future_weights[0].mean(0));
    e.attention = vec(d.attention[0][0].narrow(0, 0, window));
    return e;
  }
};

}  // namespace

std::unique_ptr<Model> make_tft_model(const nlohmann::json& options) {
  return std::make_unique<TftModel>(tft_options_from_json(options));
}

}  // namespace foxhunt::models
