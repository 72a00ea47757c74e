#include "foxhunt/models/model.h"

#include <atomic>
#include <map>
#include <sstream>

#include "foxhunt/models/catalog.h"
#include "foxhunt/models/fused_kernels.h"
#include "foxhunt/models/lean.h"
#include "foxhunt/models/options_io.h"
#include "foxhunt/models/quantile_loss.h"
#include "foxhunt/models/streaming.h"

namespace foxhunt::models {

std::unique_ptr<Model> make_model(const std::string& name, const nlohmann::json& options) {
  const auto& entry = catalog_entry(name, "models");
  return entry.make(options.is_null() ? nlohmann::json::object() : options);
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& e : catalog()) names.push_back(e.name);
  return names;
}

Batch policy_example_batch(
    const IoSpec& spec, int64_t batch, const torch::Device& device, uint64_t seed,
    const std::function<std::vector<torch::Tensor>(at::Generator&, int64_t)>& more) {
  auto gen = at::detail::createCPUGenerator(seed);
  Batch b;
  b.inputs.push_back(torch::randn(spec.inputs.at(0).shape(batch), gen).to(device));
  std::vector<torch::Tensor> target = {
      torch::randint(0, spec.actions, {batch, 1}, gen, torch::kLong).to(torch::kFloat)};
  for (auto& t : more(gen, batch)) target.push_back(std::move(t));
  b.target = torch::cat(target, 1).to(device);
  return b;
}

void check_policy_sizes(const std::string& component, int64_t state_dim, int64_t actions) {
  FOXHUNT_CHECK(state_dim > 0 && actions > 1, component,
                "expected state_dim > 0 and actions > 1, got state_dim=", state_dim,
                " actions=", actions);
}

std::vector<std::vector<int64_t>> forecaster_output_shapes(const IoSpec& spec, int64_t batch) {
  return {{batch, spec.horizon, static_cast<int64_t>(spec.quantiles.size())}};
}

torch::Tensor forecaster_loss(const std::string& component, const IoSpec& spec,
                              const torch::Tensor& pred, const torch::Tensor& target) {
  check_float_input(component, "target", target, {pred.size(0), pred.size(1)}, pred.device());
  return quantile_loss(pred, target, spec.quantiles);
}

void check_input_count(const std::string& component, const IoSpec& spec, const Batch& batch) {
  if (batch.inputs.size() == spec.inputs.size()) return;
  std::string names;
  for (const auto& i : spec.inputs) names += (names.empty() ? "" : ", ") + i.name;
  throw InputError(component, detail::cat("expected ", spec.inputs.size(), " input(s) (", names,
                                          "), got ", batch.inputs.size()));
}

torch::Tensor ServingModel::encode_rows(const torch::Tensor&, const torch::Tensor&) {
  throw InputError(name(), "encode_rows: this model has no cached per-bar stage (cached_width 0)");
}

std::unique_ptr<ModelStream> ServingModel::make_stream(int64_t) {
  return nullptr;
}

torch::Tensor ServingModel::forward_cached(const Batch&) {
  throw InputError(name(), "forward_cached: this model has no cached per-bar stage");
}

int64_t ServingModel::parameter_count() {
  int64_t n = 0;
  for (const auto& p : module().parameters()) n += p.numel();
  return n;
}

int64_t ServingModel::parameter_bytes() {
  int64_t n = 0;
  for (const auto& p : module().parameters())
    n += p.numel() * static_cast<int64_t>(p.element_size());
  return n;
}

int64_t ServingModel::buffer_bytes() {
  int64_t n = 0;
  for (const auto& b : module().buffers()) n += b.numel() * static_cast<int64_t>(b.element_size());
  return n;
}

std::string shape_str(const std::vector<int64_t>& sizes) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) os << ", ";
    if (sizes[i] < 0)
      os << "*";
    else
      os << sizes[i];
  }
  os << "]";
  return os.str();
}

namespace {

void check_common(const std::string& component, const std::string& name, const torch::Tensor& t,
                  const std::vector<int64_t>& expected, const torch::Device& device) {
  FOXHUNT_CHECK(t.defined(), component, name, ": expected a tensor of shape ", shape_str(expected),
                ", got an undefined tensor");
  const auto got = t.sizes().vec();
  FOXHUNT_CHECK(t.dim() == static_cast<int64_t>(expected.size()), component, name,
                ": expected rank ", expected.size(), " with shape ", shape_str(expected),
                ", got rank ", t.dim(), " with shape ", shape_str(got));
  for (size_t i = 0; i < expected.size(); ++i) {
    FOXHUNT_CHECK(expected[i] < 0 || expected[i] == got[i], component, name, ": expected shape ",
                  shape_str(expected), ", got ", shape_str(got), " (dimension ", i, ")");
  }
  FOXHUNT_CHECK(t.device() == device, component, name, ": expected device ", device.str(), ", got ",
                t.device().str());
}

}  // namespace

namespace {
thread_local bool t_host_validated = false;
std::atomic<bool> g_fused_cpu_kernels{true};

// The finite scan syncs with a CUDA device: skipped for device tensors a caller scanned on the
// host (HostValidatedInputs).
bool scan_values(const torch::Tensor& t) {
  return t.numel() > 0 && (t.device().is_cpu() || !t_host_validated);
}
}  // namespace

HostValidatedInputs::HostValidatedInputs() : previous_(t_host_validated) {
  t_host_validated = true;
}
HostValidatedInputs::~HostValidatedInputs() {
  t_host_validated = previous_;
}
bool HostValidatedInputs::active() {
  return t_host_validated;
}

bool fused_cpu_kernels() {
  return g_fused_cpu_kernels.load(std::memory_order_relaxed);
}

FusedCpuKernels::FusedCpuKernels(bool enabled) : previous_(fused_cpu_kernels()) {
  g_fused_cpu_kernels.store(enabled, std::memory_order_relaxed);
}

FusedCpuKernels::~FusedCpuKernels() {
  g_fused_cpu_kernels.store(previous_, std::memory_order_relaxed);
}

void check_input(const std::string& component, const std::string& name, const torch::Tensor& t,
                 const std::vector<int64_t>& expected, torch::ScalarType dtype,
                 const torch::Device& device) {
  check_common(component, name, t, expected, device);
  FOXHUNT_CHECK(t.scalar_type() == dtype, component, name, ": expected dtype ",
                c10::toString(dtype), ", got ", c10::toString(t.scalar_type()));
  if (t.is_floating_point() && scan_values(t)) {
    FOXHUNT_CHECK(tensor_all_finite(t), component, name,
                  ": expected finite values, got NaN or Inf (",
                  (~torch::isfinite(t)).sum().item<int64_t>(), " of ", t.numel(), " values)");
  }
}

void check_float_input(const std::string& component, const std::string& name,
                       const torch::Tensor& t, const std::vector<int64_t>& expected,
                       const torch::Device& device) {
  check_common(component, name, t, expected, device);
  FOXHUNT_CHECK(t.is_floating_point(), component, name,
                ": expected a floating dtype (float32 or float64), got ",
                c10::toString(t.scalar_type()));
  if (scan_values(t)) {
    FOXHUNT_CHECK(tensor_all_finite(t), component, name,
                  ": expected finite values, got NaN or Inf (",
                  (~torch::isfinite(t)).sum().item<int64_t>(), " of ", t.numel(), " values)");
  }
}

torch::Device module_device(const torch::nn::Module& m) {
  for (const auto& p : m.parameters()) return p.device();
  for (const auto& b : m.buffers()) return b.device();  // buffers-only modules (the INT8 TFT)
  return torch::kCPU;
}

torch::Device to_torch(const Device& d) {
  if (d.is_cpu()) return torch::kCPU;
  if (!torch::cuda::is_available()) {
    // Say what was found in one line, not LibTorch's multi-line CUDA text with its URL.
    std::string why = "LibTorch reports no CUDA device";
    try {
      (void)torch::empty({1}, torch::Device(torch::kCUDA));
    } catch (const c10::Error& e) {
      why = e.what_without_backtrace();
      why = why.substr(0, why.find('\n'));
      // Its first sentence: LibTorch goes on with URLs and hints that do not apply here.
      const auto stop = why.find(". ");
      if (stop != std::string::npos) why = why.substr(0, stop);
    }
    throw InputError("device", "device " + d.str() +
                                   ": expected a usable CUDA device, found none (" + why +
                                   "); use device cpu");
  }
  const auto count = static_cast<int>(torch::cuda::device_count());
  FOXHUNT_CHECK(d.index() < count, "device", "device ", d.str(),
                ": expected a CUDA device index below ", count, " (the devices visible here)");
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(d.index()));
}

void check_known_keys(const nlohmann::json& j, const char* component,
                      const std::vector<std::string>& allowed) {
  FOXHUNT_CHECK(j.is_object(), component, "options: expected a JSON object, got ", j.type_name());
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == it.key();
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      throw InputError(component, "unknown option '" + it.key() + "'; expected one of: " + list);
    }
  }
}

void read_device_option(const nlohmann::json& j, const char* component, const char* key,
                        torch::Device& device) {
  std::string text = device.str();
  json_get(j, component, key, text);
  try {
    device = torch::Device(text);
  } catch (const c10::Error&) {
    throw InputError(component, std::string("option '") + key +
                                    "': expected e.g. \"cpu\" or \"cuda:0\", got \"" + text + "\"");
  }
}

}  // namespace foxhunt::models
