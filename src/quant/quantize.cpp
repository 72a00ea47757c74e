#include "foxhunt/quant/quantize.h"

#include <algorithm>
#include <cmath>

#include "foxhunt/core/error.h"
#include "foxhunt/core/fields.h"

namespace foxhunt::quant {

namespace {
constexpr const char* kQuantizeComponent = "quant";

void check_finite(const torch::Tensor& x, const char* what) {
  FOXHUNT_CHECK(x.defined() && x.is_floating_point(), kQuantizeComponent, what,
                ": expected a floating tensor");
  FOXHUNT_CHECK(x.numel() == 0 || torch::isfinite(x).all().item<bool>(), kQuantizeComponent, what,
                ": expected finite values (got NaN or Inf)");
}

Range with_zero(Range r) {
  if (r.empty()) return {0.0f, 0.0f};
  return {std::min(r.min, 0.0f), std::max(r.max, 0.0f)};
}

Range minmax_of(const torch::Tensor& x) {
  if (x.numel() == 0) return {};
  const auto mm = torch::aminmax(x.detach().to(torch::kFloat));
  return {std::get<0>(mm).item<float>(), std::get<1>(mm).item<float>()};
}
}  // namespace

QParams symmetric_qparams(const Range& range) {
  const Range r = with_zero(range);
  QParams q;
  q.scale = std::max(std::max(-r.min, r.max) / static_cast<float>(kQMax), kMinScale);
  return q;
}

QParams affine_qparams(const Range& range) {
  const Range r = with_zero(range);
  QParams q;
  q.qmin = 0;
  q.qmax = 255;
  q.scale = std::max((r.max - r.min) / 255.0f, kMinScale);
  q.zero_point = std::clamp<int64_t>(std::llround(-r.min / q.scale), 0, 255);
  return q;
}

// ---- observers --------------------------------------------------------------------------------

void MinMaxObserver::observe(const torch::Tensor& x) {
  check_finite(x, "observer input");
  const Range b = minmax_of(x);
  if (b.empty()) return;
  range_.min = std::min(range_.min, b.min);
  range_.max = std::max(range_.max, b.max);
}

MovingAverageMinMaxObserver::MovingAverageMinMaxObserver(double momentum) : momentum_(momentum) {
  FOXHUNT_CHECK(momentum > 0 && momentum <= 1, kQuantizeComponent,
                "moving-average momentum: expected a value in (0, 1], got ", momentum);
}

void MovingAverageMinMaxObserver::observe(const torch::Tensor& x) {
  check_finite(x, "observer input");
  const Range b = minmax_of(x);
  if (b.empty()) return;
  if (range_.empty()) {
    range_ = b;
    return;
  }
  const auto m = static_cast<float>(momentum_);
  range_.min += m * (b.min - range_.min);
  range_.max += m * (b.max - range_.max);
}

void PerChannelMinMaxObserver::observe(const torch::Tensor& w) {
  check_finite(w, "per-channel observer input");
  FOXHUNT_CHECK(w.dim() >= 1 && w.size(0) > 0, kQuantizeComponent,
                "per-channel observer: expected at least one channel along dimension 0");
  const auto flat = w.detach().to(torch::kFloat).reshape({w.size(0), -1});
  const auto mm = torch::aminmax(flat, 1);
  auto lo = std::get<0>(mm), hi = std::get<1>(mm);
  if (!min_.defined()) {
    min_ = lo.clone();
    max_ = hi.clone();
    return;
  }
  FOXHUNT_CHECK(lo.size(0) == min_.size(0), kQuantizeComponent, "per-channel observer: expected ",
                min_.size(0), " channels, got ", lo.size(0));
  min_ = torch::minimum(min_, lo);
  max_ = torch::maximum(max_, hi);
}

torch::Tensor PerChannelMinMaxObserver::symmetric_scales() const {
  FOXHUNT_CHECK(min_.defined(), kQuantizeComponent, "per-channel observer: nothing observed yet");
  return (torch::maximum(min_.neg(), max_).clamp_min(0) / static_cast<float>(kQMax))
      .clamp_min(kMinScale);
}

HistogramObserver::HistogramObserver(int64_t bins) : bins_(bins) {
  FOXHUNT_CHECK(bins >= 16, kQuantizeComponent, "histogram observer: expected >= 16 bins, got ",
                bins);
  counts_.assign(static_cast<size_t>(bins), 0.0);
}

void HistogramObserver::grow(float new_max) {
  // Double the histogram's range until it covers new_max, merging pairs of bins each time.
  if (edge_ <= 0) {
    edge_ = new_max;
    return;
  }
  while (edge_ < new_max) {
    std::vector<double> merged(counts_.size(), 0.0);
    for (size_t i = 0; i < counts_.size(); ++i) merged[i / 2] += counts_[i];
    counts_ = std::move(merged);
    edge_ *= 2;
  }
}

void HistogramObserver::observe(const torch::Tensor& x) {
  check_finite(x, "histogram observer input");
  if (x.numel() == 0) return;
  const auto a = x.detach().to(torch::kFloat).abs().reshape({-1});
  const float m = a.max().item<float>();
  max_abs_ = std::max(max_abs_, m);
  if (m > edge_) grow(m);
  count_ += a.numel();
  if (edge_ <= 0) {
    counts_[0] += static_cast<double>(a.numel());
    return;
  }
  const auto h = torch::histc(a, bins_, 0.0, edge_).to(torch::kDouble).contiguous();
  const double* p = h.data_ptr<double>();
  for (int64_t i = 0; i < bins_; ++i) counts_[static_cast<size_t>(i)] += p[i];
}

double HistogramObserver::expected_squared_error(float c) const {
  if (count_ == 0 || edge_ <= 0) return 0.0;
  const double width = edge_ / static_cast<double>(bins_);
  const double step = c / static_cast<double>(kQMax);
  double err = 0.0;
  for (int64_t i = 0; i < bins_; ++i) {
    const double n = counts_[static_cast<size_t>(i)];
    if (n == 0) continue;
    const double center = std::min((static_cast<double>(i) + 0.5) * width, double{max_abs_});
    err += center <= c ? n * step * step / 12.0 : n * (center - c) * (center - c);
  }
  return err / static_cast<double>(count_);
}

float HistogramObserver::l2_optimal_threshold() const {
  if (count_ == 0 || max_abs_ <= 0) return kMinScale * kQMax;
  // Candidates: the upper edge of every 4th bin below the largest value, and that value.
  float best = max_abs_;
  double best_err = expected_squared_error(max_abs_);
  const double width = edge_ / static_cast<double>(bins_);
  for (int64_t i = 3; i < bins_; i += 4) {
    const auto c = static_cast<float>((static_cast<double>(i) + 1.0) * width);
    if (c >= max_abs_) break;
    const double e = expected_squared_error(c);
    if (e < best_err) {
      best_err = e;
      best = c;
    }
  }
  return best;
}

float HistogramObserver::percentile(double p) const {
  FOXHUNT_CHECK(p > 0 && p <= 100, kQuantizeComponent, "percentile: expected p in (0, 100], got ",
                p);
  if (count_ == 0) return 0.0f;
  const double target = p / 100.0 * static_cast<double>(count_);
  const double width = edge_ / static_cast<double>(bins_);
  double cum = 0.0;
  for (int64_t i = 0; i < bins_; ++i) {
    const double n = counts_[static_cast<size_t>(i)];
    if (cum + n >= target && n > 0)
      return std::min(max_abs_,
                      static_cast<float>((static_cast<double>(i) + (target - cum) / n) * width));
    cum += n;
  }
  return max_abs_;
}

// ---- quantize / dequantize --------------------------------------------------------------------

torch::Tensor quantize_symmetric(const torch::Tensor& x, float scale) {
  FOXHUNT_CHECK(scale > 0 && std::isfinite(scale), kQuantizeComponent,
                "quantize: expected a positive finite scale, got ", scale);
  return (x.to(torch::kFloat) / scale).round_().clamp_(-kQMax, kQMax).to(torch::kChar);
}

torch::Tensor dequantize_symmetric(const torch::Tensor& q, float scale) {
  return q.to(torch::kFloat) * scale;
}

namespace {
torch::Tensor channel_view(const torch::Tensor& scales, int64_t dim) {
  std::vector<int64_t> shape(static_cast<size_t>(dim), 1);
  shape[0] = scales.size(0);
  return scales.to(torch::kFloat).view(shape);
}
}  // namespace

torch::Tensor quantize_per_channel(const torch::Tensor& w, const torch::Tensor& scales) {
  FOXHUNT_CHECK(w.dim() >= 1 && scales.dim() == 1 && scales.size(0) == w.size(0),
                kQuantizeComponent, "quantize per channel: expected ", w.dim() >= 1 ? w.size(0) : 0,
                " scales, got shape ", scales.sizes());
  const auto s = channel_view(scales.clamp_min(kMinScale), w.dim());
  return (w.to(torch::kFloat) / s).round_().clamp_(-kQMax, kQMax).to(torch::kChar);
}

torch::Tensor dequantize_per_channel(const torch::Tensor& q, const torch::Tensor& scales) {
  return q.to(torch::kFloat) * channel_view(scales, q.dim());
}

namespace {
// Small inputs (a few rows: streaming, batch 1) in two scalar passes (row max, then codes):
// ATen's six ops (abs, amax, div, round, clamp, cast) cost ~1 us of dispatch each there. Large
// ones keep ATen's vectorized kernels, which win beyond ~4k elements (quant_bench).
constexpr int64_t kScalarPathElements = 4096;

RowQuantized quantize_rows_small(const torch::Tensor& xf) {
  const int64_t rows = xf.size(0), cols = xf.size(1);
  auto codes = torch::empty({rows, cols}, torch::kChar);
  auto scales = torch::empty({rows}, torch::kFloat);
  const float* in = xf.data_ptr<float>();
  int8_t* out = codes.data_ptr<int8_t>();
  float* sc = scales.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * cols;
    float m = 0.0f;
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, std::fabs(row[c]));
    const float scale = std::max(m / static_cast<float>(kQMax), kMinScale);
    sc[r] = scale;
    int8_t* o = out + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      // Divide (not multiply by the inverse) and round ties to even, exactly as the ATen path.
      const float q = std::nearbyint(row[c] / scale);
      o[c] = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
  }
  return {codes, scales};
}
}  // namespace

RowQuantized quantize_rows(const torch::Tensor& x) {
  FOXHUNT_CHECK(x.dim() == 2 && x.is_floating_point(), kQuantizeComponent,
                "quantize rows: expected a floating [rows, cols] tensor, got rank ", x.dim());
  if (x.device().is_cpu() && x.numel() <= kScalarPathElements)
    return quantize_rows_small(x.to(torch::kFloat).contiguous());
  const auto xf = x.to(torch::kFloat);
  auto scales = xf.abs().amax(1).div_(static_cast<float>(kQMax)).clamp_min_(kMinScale);
  auto codes = (xf / scales.unsqueeze(1)).round_().clamp_(-kQMax, kQMax).to(torch::kChar);
  return {codes, scales};
}

torch::Tensor fake_quantize_symmetric(const torch::Tensor& x, float scale) {
  FOXHUNT_CHECK(scale > 0 && std::isfinite(scale), kQuantizeComponent,
                "fake quantize: expected a positive finite scale, got ", scale);
  return torch::fake_quantize_per_tensor_affine(x, scale, 0, -kQMax, kQMax);
}

torch::Tensor fake_quantize_per_channel(const torch::Tensor& x, const torch::Tensor& scales) {
  FOXHUNT_CHECK(x.dim() >= 1 && scales.dim() == 1 && scales.size(0) == x.size(0),
                kQuantizeComponent, "fake quantize per channel: expected ",
                x.dim() >= 1 ? x.size(0) : 0, " scales, got shape ", scales.sizes());
  const auto s = scales.to(torch::kFloat).clamp_min(kMinScale).to(x.device()).contiguous();
  const auto zp =
      torch::zeros({x.size(0)}, torch::TensorOptions().dtype(torch::kInt).device(x.device()));
  return torch::fake_quantize_per_channel_affine(x, s, zp, 0, -kQMax, kQMax);
}

void to_json(nlohmann::json& j, const LayerError& e) {
  j = nlohmann::json::object();
  FOXHUNT_JSON_FIELDS(j, e, layer, snr_db, rel_error);
}

}  // namespace foxhunt::quant
