#pragma once
// Private to serving/: what one served model needs per instrument (its input history) and how a
// batch of instruments becomes one forward and one signal per instrument. ServedModel (one
// instrument, serving.cpp) and Desk (many instruments, desk.cpp) share it, so that a bar is
// turned into model inputs and an output into a signal in one place.

#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "foxhunt/data/dataset.h"
#include "foxhunt/data/feature_table.h"
#include "foxhunt/data/streaming_features.h"
#include "foxhunt/models/model.h"
#include "foxhunt/serving/bundle.h"
#include "foxhunt/serving/serving.h"

namespace foxhunt::serving::detail {

// The last `window` rows of one feature set, oldest first, in a fixed ring (no allocation per
// bar; its bytes are fixed at construction).
class RowRing {
 public:
  RowRing(int64_t window, int64_t width);
  void push(const float* row);
  int64_t size() const { return count_ < window_ ? count_ : window_; }
  bool full() const { return count_ >= window_; }
  const float* latest() const;
  // Writes the rows oldest first (size() x width floats).
  float* copy_to(float* dst) const;
  size_t heap_bytes() const { return buf_.capacity() * sizeof(float); }

 private:
  int64_t window_, width_;
  int64_t count_ = 0;
  std::vector<float> buf_;
};

// What a served model reads and writes, derived once from its bundle (shared by instruments).
struct ModelPlan {
  // `use_cache`: keep the model's cached per-bar stage per instrument (ServingModel::cached_width;
  // the desk) instead of raw feature rows, when it has one.
  explicit ModelPlan(const Bundle& bundle, bool use_cache = false);
  std::string name;
  models::IoSpec spec;
  const Bundle* bundle = nullptr;
  bool flow = false;  // the bundle's flow_features: feature sets are their flow variants
  std::vector<const data::FeatureSet*> sets;  // per past-feature input, in input order
  std::vector<int64_t> past_width;            // per past input: the ring's row width
  bool cached = false;  // the past ring holds the model's cached stage (one past input)
  size_t q10 = 0, q50 = 0, q90 = 0;  // forecasters: quantile indices
  bool q_values = false;             // policies: outputs are Q-values (not logits)
  int64_t vol_column = -1;           // bank column of the target volatility (-1: none)
  data::TargetVol absret;            // absret_* target volatility
  int64_t absret_window = 0;
  int64_t ret_column = -1;
};

// One instrument's history for one model, with the instrument's calibration (its normaliser,
// target scale and static id: the bundle's own, or its instrument's for a panel bundle).
struct ModelHistory {
  ModelHistory(const ModelPlan& plan, Calibration calibration);
  Calibration cal;
  std::vector<RowRing> past;   // per past-feature input
  std::vector<float> returns;  // absret: the last returns, oldest first
  std::vector<float> pending;  // cached plans: the newest raw past row, not yet encoded
  int64_t streamed = 0;        // bars pushed into a per-instrument stream (ServedModel)
  size_t bytes() const;
};

// Records the accepted bar: the returns of an absret target (every bar) and, past the feature
// warm-up, the normalised feature-set rows (for a cached plan the raw row goes to `pending`,
// for encode_pending). Returns features.ready(). `scratch` is reused.
bool push_bar(const ModelPlan& plan, ModelHistory& h, const data::StreamingFeatures& features,
              std::vector<float>& scratch);
// Cached plans: runs the model's cached stage on the pending rows of `histories` (one batch,
// static ids `ids`) and pushes each output row into its history's ring.
void encode_pending(const ModelPlan& plan, const std::vector<ModelHistory*>& histories,
                    const std::vector<int64_t>& ids);
// True when every past input holds a full window.
bool history_full(const ModelPlan& plan, const ModelHistory& h);

// One instrument's row of a batched forward.
struct InstrumentRow {
  const ModelHistory* history = nullptr;
  const data::StreamingFeatures* features = nullptr;
  double position = 0.0;
  double unrealized_pnl = 0.0;
  const std::vector<int64_t>* next_timestamps = nullptr;
  int64_t static_id = 0;
};

// Writes the known-future input `in` of one instrument (its calendar rows for the next in.steps
// bars) at `p`; returns the end. The one definition the batch and the stream paths share.
float* fill_known_future(const ModelPlan& plan, const models::InputSpec& in,
                         const std::vector<int64_t>& next_timestamps, float* p);
// The inputs of `rows` as one batch (CPU tensors, batch = rows.size()).
models::Batch build_batch(const ModelPlan& plan, const std::vector<InstrumentRow>& rows);
// Runs the model on `batch` (moving it to the model's device; host finite-scan first) and
// returns the first output on the CPU, contiguous float.
torch::Tensor forward_rows(const ModelPlan& plan, models::Batch batch);
// Fills out.raw, forecast, signal and ready from one output row `v`.
void fill_signal(const ModelPlan& plan, const float* v, const ModelHistory& h,
                 const data::StreamingFeatures& features, const DecisionRule& rule,
                 ModelSignal& out);
// A forecaster's raw quantiles (target units) as log-return quantiles.
std::vector<double> forecast_returns(const ModelPlan& plan, const std::vector<float>& raw,
                                     const ModelHistory& h,
                                     const data::StreamingFeatures& features);
// The expected times of the next `horizon` bars after `last` (the last spacing `last - prev`, or
// 60 s; daily and longer bars skip weekends).
std::vector<int64_t> next_timestamps(int64_t last, int64_t prev, int64_t horizon);

double micros_since(std::chrono::steady_clock::time_point t0);

// The models' dispatch order from their times on the previous bar or timestamp: costliest first
// (the caller runs it at once; longest task first), ties in the given order.
std::vector<size_t> longest_first(const std::vector<double>& cost_us);

}  // namespace foxhunt::serving::detail
