#include "foxhunt/plan/footprint.h"

#include "foxhunt/core/fields.h"
#include "foxhunt/models/precisions.h"

#include <torch/torch.h>

#include <algorithm>

#include "foxhunt/core/error.h"
#include "foxhunt/memory/device_memory.h"
#include "foxhunt/memory/ledger.h"
#include "foxhunt/memory/tags.h"
#include "foxhunt/models/model.h"
#include "probe_step.h"

namespace foxhunt::plan {

// The ledger, scopes and device counters this area measures with.
using memory::cuda_memory_available;
using memory::cuda_stats_backend;
using memory::current_scope;
using memory::device_live_bytes;
using memory::device_peak_bytes;
using memory::device_reset_peak;
using memory::external_bytes;
using memory::MemoryDevice;
using memory::MemoryScope;
using memory::scope_stats;
using memory::Tag;
using memory::tag_scope;

using detail::effective_seq_len;
using detail::tensor_bytes;

// ---- optimizer kinds -------------------------------------------------------------------------

std::string to_string(StepKind kind) {
  return kind == StepKind::kTrainer ? "trainer" : "synthetic";
}

StepKind parse_step_kind(const std::string& name) {
  if (name == "trainer") return StepKind::kTrainer;
  if (name == "synthetic") return StepKind::kSynthetic;
  throw InputError("footprint", "step: expected one of trainer, synthetic, got '" + name + "'");
}

std::string to_string(OptimizerKind kind) {
  static constexpr const char* kNames[] = {"adam", "adamw", "sgd", "sgd-momentum"};
  const auto i = static_cast<size_t>(kind);
  FOXHUNT_INTERNAL_ASSERT(i < std::size(kNames), "unknown OptimizerKind ", i);
  return kNames[i];
}

OptimizerKind parse_optimizer(const std::string& name) {
  for (auto k : {OptimizerKind::kAdam, OptimizerKind::kAdamW, OptimizerKind::kSgd,
                 OptimizerKind::kSgdMomentum})
    if (to_string(k) == name) return k;
  throw InputError("footprint",
                   "optimizer: expected one of adam, adamw, sgd, sgd-momentum, got '" + name + "'");
}

std::uint64_t optimizer_state_bytes(OptimizerKind kind, std::uint64_t trainable_bytes) {
  switch (kind) {
    case OptimizerKind::kAdam:
    case OptimizerKind::kAdamW:
      return 2 * trainable_bytes;
    case OptimizerKind::kSgdMomentum:
      return trainable_bytes;
    case OptimizerKind::kSgd:
      return 0;
  }
  return 0;
}

nlohmann::json to_json(const TrainConfig& c) {
  nlohmann::json j = {{"step", to_string(c.step)},
                      {"custom_env", static_cast<bool>(c.env)},
                      {"optimizer", to_string(c.optimizer)}};
  FOXHUNT_JSON_FIELDS(j, c, trainer_options, device, seq_len, batch, lr, seed, world_size,
                      bucket_mib);
  return j;
}

// ---- TrainingFootprint -----------------------------------------------------------------------

bool TrainingFootprint::matches_closed_form() const {
  return construction_live_bytes == parameter_bytes + buffer_bytes + expected_trainer_state_bytes &&
         trainer_state_bytes == expected_trainer_state_bytes &&
         gradient_bytes == expected_gradient_bytes && optimizer_bytes == expected_optimizer_bytes &&
         comm_bucket_bytes == expected_comm_bucket_bytes;
}

std::vector<TagBytes> TrainingFootprint::tags() const {
  return {{tag_scope(model, Tag::kParameters), parameter_bytes},
          {model + "/buffers", buffer_bytes},
          {model + "/trainer_state", trainer_state_bytes},
          {tag_scope(model, Tag::kGradients), gradient_bytes},
          {tag_scope(model, Tag::kOptimizer), optimizer_bytes},
          {tag_scope(model, Tag::kCommBuckets), comm_bucket_bytes},
          {model + "/external", external_bytes},
          {tag_scope(model, Tag::kActivations), activation_bytes}};
}

nlohmann::json TrainingFootprint::to_json() const {
  nlohmann::json tag_json = nlohmann::json::object();
  for (const auto& t : tags()) tag_json[t.tag] = t.bytes;
  nlohmann::json j = {{"config", plan::to_json(config)},
                      {"matches_closed_form", matches_closed_form()},
                      {"tags", tag_json}};
  FOXHUNT_JSON_FIELDS(
      j, *this, model, seq_len, parameter_bytes, trainable_parameter_bytes, buffer_bytes, step,
      construction_live_bytes, derived_bytes, trainer_state_bytes, expected_trainer_state_bytes,
      host_bytes, external_bytes, device, gradient_bytes, expected_gradient_bytes, optimizer_bytes,
      expected_optimizer_bytes, comm_bucket_bytes, expected_comm_bucket_bytes, fixed_bytes,
      activation_bytes, step_bytes, peak_bytes, input_bytes, leaked_bytes);
  return j;
}

// ---- TrainingProbe ---------------------------------------------------------------------------

namespace {

// Live bytes of a scope (by full path) right now.
std::uint64_t scope_live(const std::string& full_name) {
  return scope_stats(full_name).live_bytes;
}

void check_config(const TrainConfig& c) {
  FOXHUNT_CHECK(c.seq_len >= 0, "footprint", "seq_len: expected >= 0 (0 = model default), got ",
                c.seq_len);
  FOXHUNT_CHECK(c.batch >= 1, "footprint", "batch: expected >= 1, got ", c.batch);
  FOXHUNT_CHECK(c.lr > 0, "footprint", "lr: expected > 0, got ", c.lr);
  FOXHUNT_CHECK(c.world_size >= 1, "footprint", "world_size: expected >= 1, got ", c.world_size);
  FOXHUNT_CHECK(c.bucket_mib > 0, "footprint", "bucket_mib: expected > 0, got ", c.bucket_mib);
}

}  // namespace

struct TrainingProbe::Impl {
  std::string name;
  TrainConfig config;
  std::unique_ptr<train::TrainerStep> step;
  std::string scope_root;  // full path prefix of this model's scopes (caller's scope + name)
  TrainingFootprint fp;
  std::uint64_t construction_peak = 0;
  std::int64_t input_elements = 0;
  std::uint64_t fixed_live = 0;          // process live bytes with exactly the fixed tags resident
  std::uint64_t sample_input_bytes = 0;  // input bytes of one sample
  MemoryDevice dev;                      // where the step runs and is measured
  std::unique_ptr<dist::GradientSync> buckets;  // world_size > 1: what a rank adds

  std::string full(memory::Tag tag) const { return memory::tag_scope(scope_root, tag); }
};

TrainingProbe::TrainingProbe(const std::string& model, const TrainConfig& config,
                             const nlohmann::json& model_options, std::int64_t warm_batch)
    : impl_(std::make_unique<Impl>()) {
  check_config(config);
  FOXHUNT_CHECK(warm_batch >= 1, "footprint", "warm batch: expected >= 1, got ", warm_batch);
  auto& s = *impl_;
  s.name = model;
  s.config = config;
  const std::string outer = current_scope();
  s.scope_root = outer.empty() ? model : outer + "/" + model;

  // On the CPU every tag is a ledger scope; on CUDA (no scopes) a difference of allocated bytes
  // between the phases, with the gradients counted from the .grad tensors.
  s.dev = config.device.resolved();
  const MemoryDevice& dev = s.dev;
  const auto tag_live = [&](Tag tag) {
    return dev.is_cuda() ? std::uint64_t{0} : scope_live(s.full(tag));
  };
  const std::uint64_t live0 = device_live_bytes(dev);
  const std::uint64_t external0 = external_bytes();
  const std::uint64_t params0 = tag_live(Tag::kParameters);
  const std::uint64_t grads0 = tag_live(Tag::kGradients);
  const std::uint64_t opt0 = tag_live(Tag::kOptimizer);
  device_reset_peak(dev);
  torch::manual_seed(config.seed);
  {
    // The trainer with its network (and, for the DQN, its target network and replay buffer).
    MemoryScope p(tag_scope(model, Tag::kParameters));
    s.step = detail::make_step(model, config, model_options);
  }
  s.construction_peak = detail::beyond(device_peak_bytes(dev), live0);
  models::Model& m = s.step->model();
  s.config.seq_len = effective_seq_len(m, config.seq_len);

  auto& fp = s.fp;
  fp.model = model;
  fp.config = config;
  fp.seq_len = s.config.seq_len;
  fp.step = s.step->describe();
  fp.device = dev;
  for (const auto& p : m.module().parameters()) {
    fp.parameter_bytes += tensor_bytes(p);
    if (p.requires_grad()) fp.trainable_parameter_bytes += tensor_bytes(p);
  }
  for (const auto& b : m.module().buffers()) fp.buffer_bytes += tensor_bytes(b);
  fp.construction_live_bytes = dev.is_cuda() ? detail::beyond(device_live_bytes(dev), live0)
                                             : detail::beyond(tag_live(Tag::kParameters), params0);
  const std::uint64_t own = fp.parameter_bytes + fp.buffer_bytes;
  fp.trainer_state_bytes = fp.construction_live_bytes > own ? fp.construction_live_bytes - own : 0;
  fp.expected_trainer_state_bytes = s.step->expected_state_bytes();
  fp.host_bytes = external_bytes() - external0;
  fp.external_bytes = dev.is_cuda() ? 0 : fp.host_bytes;  // host RAM is not the card's
  fp.expected_gradient_bytes = fp.trainable_parameter_bytes;
  fp.expected_optimizer_bytes =
      optimizer_state_bytes(config.optimizer, fp.trainable_parameter_bytes);
  const std::uint64_t buckets0 =
      dev.is_cuda() ? device_live_bytes(dev) : scope_live(s.full(Tag::kCommBuckets));
  s.buckets = detail::make_comm_buckets(m, config, model);
  fp.comm_bucket_bytes =
      (dev.is_cuda() ? device_live_bytes(dev) : scope_live(s.full(Tag::kCommBuckets))) - buckets0;
  // Closed form: one flat copy of the trainable parameters and the weight element (float32).
  fp.expected_comm_bucket_bytes = config.world_size > 1 ? fp.trainable_parameter_bytes + 4 : 0;
  const auto [sample_bytes, sample_elements] =
      detail::sample_inputs(m, s.config.seq_len, config.seed);
  s.input_elements = sample_elements;
  s.sample_input_bytes = sample_bytes;

  // The first real step: its backward creates the .grad tensors (tagged M/gradients) and its
  // optimizer.step() the optimizer state (M/optimizer).
  const detail::StepMeasure warm =
      detail::measured_step(*s.step, model, warm_batch, Tag::kGradients, dev);
  fp.input_bytes = sample_bytes * static_cast<std::uint64_t>(warm_batch);
  s.fixed_live = device_live_bytes(dev);
  fp.fixed_bytes = detail::beyond(s.fixed_live, live0);
  if (dev.is_cuda()) {
    fp.gradient_bytes = detail::gradient_tensor_bytes(m);
    const std::uint64_t before_opt =
        fp.construction_live_bytes + fp.comm_bucket_bytes + fp.gradient_bytes;
    fp.optimizer_bytes = fp.fixed_bytes > before_opt ? fp.fixed_bytes - before_opt : 0;
  } else {
    fp.gradient_bytes = detail::beyond(tag_live(Tag::kGradients), grads0);
    fp.optimizer_bytes = detail::beyond(tag_live(Tag::kOptimizer), opt0);
  }
  fp.activation_bytes = warm.forward_backward_peak;
  fp.step_bytes = warm.step_peak;
  fp.peak_bytes = fp.fixed_bytes + fp.external_bytes + std::max(fp.activation_bytes, fp.step_bytes);
  // Anything live beyond the fixed tags was left behind by the step (a cache, a leak).
  const std::uint64_t tagged =
      fp.construction_live_bytes + fp.gradient_bytes + fp.optimizer_bytes + fp.comm_bucket_bytes;
  fp.leaked_bytes = fp.fixed_bytes > tagged ? fp.fixed_bytes - tagged : 0;
}

TrainingProbe::~TrainingProbe() = default;

ProbeResult TrainingProbe::probe(std::int64_t batch) {
  FOXHUNT_CHECK(batch >= 1, "footprint", "probe batch: expected >= 1, got ", batch);
  auto& s = *impl_;
  const detail::StepMeasure m =
      detail::measured_step(*s.step, s.name, batch, Tag::kActivations, s.dev);
  ProbeResult r;
  r.batch = batch;
  r.activation_bytes = m.forward_backward_peak;
  r.step_bytes = m.step_peak;
  r.peak_bytes =
      s.fp.fixed_bytes + s.fp.external_bytes + std::max(r.activation_bytes, r.step_bytes);
  s.fp.input_bytes = s.sample_input_bytes * static_cast<std::uint64_t>(batch);
  const std::uint64_t now = device_live_bytes(s.dev);
  if (now > s.fixed_live) s.fp.leaked_bytes = std::max(s.fp.leaked_bytes, now - s.fixed_live);
  return r;
}

const TrainingFootprint& TrainingProbe::footprint() const {
  return impl_->fp;
}
std::uint64_t TrainingProbe::construction_peak_bytes() const {
  return impl_->construction_peak;
}
std::int64_t TrainingProbe::input_elements_per_sample() const {
  return impl_->input_elements;
}

TrainingFootprint measure_training_footprint(const std::string& model, const TrainConfig& config,
                                             const nlohmann::json& model_options) {
  TrainingProbe probe(model, config, model_options, config.batch);
  const ProbeResult r = probe.probe(config.batch);
  TrainingFootprint fp = probe.footprint();
  fp.activation_bytes = r.activation_bytes;
  fp.step_bytes = r.step_bytes;
  fp.peak_bytes = r.peak_bytes;
  return fp;
}

// ---- inference -------------------------------------------------------------------------------

std::uint64_t InferenceFootprint::peak_total_bytes() const {
  std::uint64_t m = 0;
  for (const auto& r : runs) m = std::max(m, r.total_bytes);
  return m;
}

nlohmann::json InferenceFootprint::to_json() const {
  nlohmann::json runs_json = nlohmann::json::array();
  for (const auto& r : runs) {
    nlohmann::json& row = runs_json.emplace_back();
    FOXHUNT_JSON_FIELDS(row, r, batch, input_bytes, activation_bytes, total_bytes);
  }
  nlohmann::json j = {{"runs", runs_json}, {"peak_total_bytes", peak_total_bytes()}};
  FOXHUNT_JSON_FIELDS(j, *this, model, device, seq_len, parameter_bytes, buffer_bytes,
                      construction_live_bytes, derived_bytes);
  return j;
}

std::unique_ptr<models::Model> make_model_at(const std::string& name, models::Precision precision,
                                             const nlohmann::json& model_options) {
  return models::make_model_at(name, precision, model_options, "footprint");
}

InferenceFootprint measure_inference_footprint(const std::string& model,
                                               const std::vector<std::int64_t>& batches,
                                               std::int64_t seq_len, std::uint64_t seed,
                                               const nlohmann::json& model_options,
                                               models::Precision precision, const Device& device) {
  FOXHUNT_CHECK(!batches.empty(), "footprint",
                "inference batches: expected at least one, got none");
  for (auto b : batches)
    FOXHUNT_CHECK(b >= 1, "footprint", "inference batch: expected >= 1, got ", b);
  FOXHUNT_CHECK(seq_len >= 0, "footprint", "seq_len: expected >= 0 (0 = model default), got ",
                seq_len);
  const MemoryDevice dev = device.resolved();
  FOXHUNT_CHECK(!dev.is_cuda() || precision == models::Precision::kFp32, "footprint", "precision '",
                precision, "' of '", model, "' on ", dev.str(),
                ": the INT8 TFT runs on the CPU only; expected fp32");
  FOXHUNT_CHECK(!dev.is_cuda() || cuda_memory_available(), "footprint", "device ", dev.str(),
                ": no CUDA device is available (", cuda_stats_backend(), ")");
  const torch::Device tdev = models::to_torch(dev);
  const std::string outer = current_scope();
  const std::string root = outer.empty() ? model : outer + "/" + model;
  const std::uint64_t params0 = scope_live(tag_scope(root, Tag::kParameters));

  InferenceFootprint fp;
  fp.model = model;
  fp.device = dev;
  torch::manual_seed(seed);
  std::unique_ptr<models::Model> m;
  const std::uint64_t dev0 = device_live_bytes(dev);
  {
    MemoryScope p(tag_scope(model, Tag::kParameters));
    m = make_model_at(model, precision, model_options);
    if (dev.is_cuda()) m->to(tdev);
  }
  fp.construction_live_bytes = dev.is_cuda()
                                   ? detail::beyond(device_live_bytes(dev), dev0)
                                   : scope_live(tag_scope(root, Tag::kParameters)) - params0;
  for (const auto& p : m->module().parameters()) fp.parameter_bytes += tensor_bytes(p);
  for (const auto& b : m->module().buffers()) fp.buffer_bytes += tensor_bytes(b);
  fp.seq_len = effective_seq_len(*m, seq_len);
  m->module().eval();

  c10::InferenceMode guard;
  if (dev.is_cuda()) {
    // The first forward on a thread makes cuBLAS/cuDNN allocate their per-handle workspaces
    // (32 MiB for cuBLAS on Hopper): a one-off of the thread, not the model's. Run it before the
    // baseline so the runs measure the model; the budget's concurrent serving view still counts
    // each serving thread's workspace, as the card really holds them.
    models::Batch warm = m->example_batch(1, fp.seq_len, tdev, seed);
    warm.target = torch::Tensor();
    (void)m->forward(warm);
  } else {
    // What the model derives from its weights and keeps for serving (made by the first forward
    // that needs it): a fixed cost of the served model, not an activation of one batch.
    const std::uint64_t live0 = device_live_bytes(dev);
    {
      MemoryScope p(tag_scope(model, Tag::kParameters));
      models::Batch warm = m->example_batch(*std::max_element(batches.begin(), batches.end()),
                                            fp.seq_len, tdev, seed);
      warm.target = torch::Tensor();
      (void)m->forward(warm);
    }
    fp.derived_bytes = detail::beyond(device_live_bytes(dev), live0);
  }
  for (auto batch : batches) {
    InferenceRun run;
    run.batch = batch;
    const std::uint64_t before = device_live_bytes(dev);
    {
      MemoryScope act(tag_scope(model, Tag::kActivations));
      models::Batch b = m->example_batch(batch, fp.seq_len, tdev, seed);
      b.target = torch::Tensor();  // serving has no target
      for (const auto& t : b.inputs) run.input_bytes += tensor_bytes(t);
      device_reset_peak(dev);  // the peak starts at live = model + inputs
      auto outs = m->forward(b);
      run.activation_bytes = detail::beyond(device_peak_bytes(dev), before);
    }
    run.total_bytes =
        fp.parameter_bytes + fp.buffer_bytes + fp.derived_bytes + run.activation_bytes;
    fp.runs.push_back(run);
  }
  return fp;
}

}  // namespace foxhunt::plan
