#include "model_inputs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>

#include "foxhunt/core/error.h"
#include "foxhunt/data/trading_env.h"
#include "foxhunt/models/catalog.h"

namespace foxhunt::serving::detail {

namespace {

constexpr const char* kModelInputsComponent = "serving";

// Index of the quantile level nearest to `q`.
size_t nearest_quantile(const std::vector<double>& levels, double q) {
  size_t best = 0;
  for (size_t i = 1; i < levels.size(); ++i)
    if (std::abs(levels[i] - q) < std::abs(levels[best] - q)) best = i;
  return best;
}

std::vector<float> softmax(const float* x, int64_t n, double temperature) {
  std::vector<float> p(static_cast<size_t>(n));
  if (temperature == 0.0) {
    // Greedy: all mass on the best action (the policy a DQN was evaluated with); a tie with the
    // middle action (hold) goes to it, otherwise to the first.
    int64_t best = 0;
    for (int64_t i = 1; i < n; ++i)
      if (x[i] > x[best] || (x[i] == x[best] && i == n / 2)) best = i;
    p[static_cast<size_t>(best)] = 1.0f;
    return p;
  }
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]) / temperature);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(x[i]) / temperature - mx);
  for (int64_t i = 0; i < n; ++i)
    p[static_cast<size_t>(i)] =
        static_cast<float>(std::exp(static_cast<double>(x[i]) / temperature - mx) / sum);
  return p;
}

}  // namespace

double micros_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<size_t> longest_first(const std::vector<double>& cost_us) {
  std::vector<size_t> order(cost_us.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return cost_us[a] > cost_us[b]; });
  return order;
}

// ---- row ring -----------------------------------------------------------------------------------

RowRing::RowRing(int64_t window, int64_t width)
    : window_(window), width_(width), buf_(static_cast<size_t>(window * width)) {}

void RowRing::push(const float* row) {
  std::copy(row, row + width_, buf_.data() + (count_ % window_) * width_);
  ++count_;
}

const float* RowRing::latest() const {
  return buf_.data() + ((count_ - 1) % window_) * width_;
}

float* RowRing::copy_to(float* dst) const {
  const int64_t n = size();
  const int64_t first = count_ - n;
  for (int64_t b = first; b < count_; ++b) {
    const float* src = buf_.data() + (b % window_) * width_;
    dst = std::copy(src, src + width_, dst);
  }
  return dst;
}

// ---- plan and history ---------------------------------------------------------------------------

ModelPlan::ModelPlan(const Bundle& b, bool use_cache)
    : name(b.name()), spec(b.model->spec()), bundle(&b), flow(b.flow_features) {
  const auto vol = data::parse_target_vol(b.target_vol_feature, "bundle target_vol_feature");
  vol_column = vol.column;
  absret = vol;
  absret_window = vol.column >= 0 ? 0 : vol.window;
  if (absret_window > 0) ret_column = data::bank_column("ret_lag_0", "absret volatility");
  for (const auto& in : spec.inputs) {
    if (in.role != models::InputRole::kPastFeatures) continue;
    sets.push_back(&data::feature_set(in.feature_set, flow));
    FOXHUNT_CHECK(sets.back()->width == in.features, kModelInputsComponent, "model '", name,
                  "' input '", in.name, "': feature set '", in.feature_set, "' gives ",
                  sets.back()->width, " values, the model expects ", in.features);
  }
  const int64_t width = use_cache ? b.model->cached_width() : 0;
  cached = width > 0 && sets.size() == 1;
  for (const auto* set : sets) past_width.push_back(cached ? width : set->width);
  if (spec.is_forecaster()) {
    FOXHUNT_CHECK(!spec.quantiles.empty(), kModelInputsComponent, "model '", name,
                  "': a forecaster without quantile levels cannot be served");
    q10 = nearest_quantile(spec.quantiles, 0.1);
    q50 = nearest_quantile(spec.quantiles, 0.5);
    q90 = nearest_quantile(spec.quantiles, 0.9);
  } else {
    FOXHUNT_CHECK(spec.actions == 3, kModelInputsComponent, "model '", name,
                  "': expected a policy over 3 actions (sell, hold, buy), got ", spec.actions);
    q_values = !spec.outputs.empty() && spec.outputs[0] == "q";
  }
}

ModelHistory::ModelHistory(const ModelPlan& plan, Calibration calibration) : cal(calibration) {
  FOXHUNT_INTERNAL_ASSERT(cal.normalizer != nullptr, "a history without a normaliser");
  for (const int64_t w : plan.past_width) past.emplace_back(plan.spec.window, w);
  if (plan.cached) pending.resize(static_cast<size_t>(plan.sets.at(0)->width));
  returns.reserve(static_cast<size_t>(plan.absret_window));
}

size_t ModelHistory::bytes() const {
  size_t n = sizeof(ModelHistory) + past.capacity() * sizeof(RowRing) +
             (returns.capacity() + pending.capacity()) * sizeof(float);
  for (const auto& r : past) n += r.heap_bytes();
  return n;
}

bool push_bar(const ModelPlan& plan, ModelHistory& h, const data::StreamingFeatures& features,
              std::vector<float>& scratch) {
  if (plan.absret_window > 0) {
    // Every bar, warm-up included: the first anchor needs the W returns before it.
    if (static_cast<int64_t>(h.returns.size()) == plan.absret_window)
      h.returns.erase(h.returns.begin());
    h.returns.push_back(features.row()[static_cast<size_t>(plan.ret_column)]);
  }
  // Rows before the feature warm-up use truncated windows; training never saw them.
  if (!features.ready()) return false;
  FOXHUNT_CHECK(features.has_flow() == plan.flow, kModelInputsComponent, "model '", plan.name,
                "': trained on ",
                plan.flow ? "bars built from a tape (flow features)" : "bars without flow features",
                ", fed bars ", features.has_flow() ? "with" : "without", " a flow");
  features.normalized_row(*h.cal.normalizer, scratch);
  std::vector<float> row;
  for (size_t k = 0; k < h.past.size(); ++k) {
    const auto& cols = plan.sets[k]->columns;
    auto& dst = plan.cached ? h.pending : row;
    dst.resize(cols.size());
    for (size_t j = 0; j < cols.size(); ++j) dst[j] = scratch[static_cast<size_t>(cols[j])];
    if (!plan.cached) h.past[k].push(row.data());
  }
  return true;
}

void encode_pending(const ModelPlan& plan, const std::vector<ModelHistory*>& histories,
                    const std::vector<int64_t>& ids) {
  if (histories.empty()) return;
  const auto n = static_cast<int64_t>(histories.size());
  const auto width = static_cast<int64_t>(histories[0]->pending.size());
  auto rows = torch::empty({n, width}, torch::kFloat32);
  float* p = rows.data_ptr<float>();
  for (const auto* h : histories) p = std::copy(h->pending.begin(), h->pending.end(), p);
  auto id = torch::from_blob(const_cast<int64_t*>(ids.data()), {n}, torch::kInt64);
  auto& model = *plan.bundle->model;
  const auto device = models::module_device(model.module());
  const auto y = model
                     .encode_rows(rows.to(device), id.to(device, /*non_blocking=*/false,
                                                         /*copy=*/true))
                     .to(torch::kCPU, torch::kFloat32)
                     .contiguous();
  const float* v = y.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    histories[static_cast<size_t>(i)]->past[0].push(v + i * y.size(1));
}

bool history_full(const ModelPlan& plan, const ModelHistory& h) {
  (void)plan;
  for (const auto& p : h.past)
    if (!p.full()) return false;
  return true;
}

// ---- batch in, signal out -----------------------------------------------------------------------

float* fill_known_future(const ModelPlan& plan, const models::InputSpec& in,
                         const std::vector<int64_t>& next_timestamps, float* p) {
  FOXHUNT_CHECK(static_cast<int64_t>(next_timestamps.size()) >= in.steps, kModelInputsComponent,
                "model '", plan.name, "': expected ", in.steps, " future timestamps, got ",
                next_timestamps.size());
  for (int64_t k = 0; k < in.steps; ++k) {
    const auto cal = data::calendar_features(next_timestamps[static_cast<size_t>(k)]);
    FOXHUNT_CHECK(static_cast<int64_t>(cal.size()) == in.features, kModelInputsComponent, "model '",
                  plan.name, "': input '", in.name, "' expects ", in.features,
                  " known-future values per bar, the calendar has ", cal.size());
    p = std::copy(cal.begin(), cal.end(), p);
  }
  return p;
}

models::Batch build_batch(const ModelPlan& plan, const std::vector<InstrumentRow>& rows) {
  const auto n = static_cast<int64_t>(rows.size());
  models::Batch batch;
  size_t past_index = 0;
  std::vector<float> market;
  for (const auto& in : plan.spec.inputs) {
    switch (in.role) {
      case models::InputRole::kState: {
        auto t = torch::empty({n, in.features}, torch::kFloat32);
        float* p = t.data_ptr<float>();
        for (const auto& r : rows) {
          r.features->rl_market_row(*r.history->cal.normalizer, market);
          FOXHUNT_CHECK(static_cast<int64_t>(market.size()) + 2 == in.features,
                        kModelInputsComponent, "model '", plan.name, "': the RL state has ",
                        market.size() + 2, " values, the model expects ", in.features);
          p = std::copy(market.begin(), market.end(), p);
          // As the trading environment builds it: position, then scaled unrealised PnL.
          *p++ = static_cast<float>(r.position);
          // The PnL scale the policy trained with (the bundle records its environment).
          *p++ = static_cast<float>(r.unrealized_pnl * plan.bundle->trading_env.pnl_scale);
        }
        batch.inputs.push_back(t);
        break;
      }
      case models::InputRole::kPastFeatures: {
        auto t = torch::empty({n, in.steps, plan.past_width[past_index]}, torch::kFloat32);
        float* p = t.data_ptr<float>();
        for (const auto& r : rows) p = r.history->past[past_index].copy_to(p);
        ++past_index;
        batch.inputs.push_back(t);
        break;
      }
      case models::InputRole::kKnownFuture: {
        auto t = torch::empty({n, in.steps, in.features}, torch::kFloat32);
        float* p = t.data_ptr<float>();
        for (const auto& r : rows) p = fill_known_future(plan, in, *r.next_timestamps, p);
        batch.inputs.push_back(t);
        break;
      }
      case models::InputRole::kStaticId: {
        auto t = torch::empty({n}, torch::kInt64);
        int64_t* p = t.data_ptr<int64_t>();
        for (const auto& r : rows) *p++ = r.static_id;
        batch.inputs.push_back(t);
        break;
      }
    }
  }
  return batch;
}

torch::Tensor forward_rows(const ModelPlan& plan, models::Batch batch) {
  const auto device = models::module_device(plan.bundle->model->module());
  std::optional<models::HostValidatedInputs> host_checked;
  if (device != torch::kCPU) {
    // Scan on the host (cheap), then copy: the model's own check would wait for the device.
    for (const auto& t : batch.inputs)
      if (t.is_floating_point())
        FOXHUNT_CHECK(t.isfinite().all().item<bool>(), kModelInputsComponent, "model '", plan.name,
                      "': non-finite input values");
    for (auto& t : batch.inputs) t = t.to(device);
    host_checked.emplace();
  }
  const auto first = plan.cached ? plan.bundle->model->forward_cached(batch)
                                 : plan.bundle->model->forward(batch).at(0);
  return first.to(torch::kCPU, torch::kFloat32).contiguous();
}

std::vector<double> forecast_returns(const ModelPlan& plan, const std::vector<float>& raw,
                                     const ModelHistory& h,
                                     const data::StreamingFeatures& features) {
  double scale = 1.0 / h.cal.target_scale;
  if (plan.vol_column >= 0)
    scale *= std::max(static_cast<double>(features.row()[static_cast<size_t>(plan.vol_column)]),
                      data::kMinTargetVol);
  if (plan.absret_window > 0)
    scale *=
        data::absret_divisor(plan.absret, h.returns.data(), static_cast<int64_t>(h.returns.size()));
  std::vector<double> out(raw.size());
  for (size_t k = 0; k < raw.size(); ++k) out[k] = raw[k] * scale;
  return out;
}

void fill_signal(const ModelPlan& plan, const float* v, const ModelHistory& h,
                 const data::StreamingFeatures& features, const DecisionRule& rule,
                 ModelSignal& out) {
  if (plan.spec.is_forecaster()) {
    // The next bar's quantiles: the first horizon step.
    out.raw.assign(v, v + plan.spec.quantiles.size());
    out.forecast = forecast_returns(plan, out.raw, h, features);
    out.signal = rule.forecast_rule == ForecastRule::kMedian
                     ? forecast_signal(v[plan.q10], v[plan.q50], v[plan.q90], rule.forecast_gain)
                     : forecast_signal(plan.spec.quantiles, out.forecast, rule);
  } else {
    out.raw.assign(v, v + plan.spec.actions);
    const auto p = softmax(v, plan.spec.actions, plan.q_values ? rule.policy_temperature : 1.0);
    out.signal = policy_signal(p);
    if (!plan.q_values) out.raw = p;
  }
  out.ready = true;
}

std::vector<int64_t> next_timestamps(int64_t last, int64_t prev, int64_t horizon) {
  // The next bars are expected at the last spacing (daily bars skip weekends).
  const int64_t step = prev > 0 && last > prev ? last - prev : 60;
  std::vector<int64_t> out;
  int64_t t = last;
  while (static_cast<int64_t>(out.size()) < horizon) {
    t += step;
    if (step >= 86400) {
      const int64_t weekday = ((t / 86400) % 7 + 10) % 7;  // 1970-01-01 was a Thursday (3)
      if (weekday >= 5) continue;                          // Saturday, Sunday
    }
    out.push_back(t);
  }
  return out;
}

}  // namespace foxhunt::serving::detail
