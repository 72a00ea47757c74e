// The BF16 forms of the TFT and Mamba-2 (bf16.h): the CPU check, the closed-form bytes, the
// wrapper that serves a converted network and the quantize hook that casts a trained one.
#include "foxhunt/models/bf16.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__clang__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <string>

#include "foxhunt/core/checked_math.h"
#include "foxhunt/core/error.h"
#include "foxhunt/models/adapter.h"
#include "foxhunt/models/catalog.h"
#include "foxhunt/models/mamba2.h"
#include "foxhunt/models/tft.h"

namespace foxhunt::models {
namespace {

constexpr const char* kBf16Component = "bf16";
constexpr const char* kNoBf16Env = "FOXHUNT_ASSUME_NO_BF16";

// AVX512-BF16 (vdpbf16ps) or AMX-BF16 (tdpbf16ps), with the OS saving the registers they use.
bool cpu_flags_have_bf16() {
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) && !defined(__clang__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
#elif (defined(__x86_64__) || defined(__i386__)) && defined(__clang__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(1, 0, &a, &b, &c, &d) || !(c & (1u << 27))) return false;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  const bool avx512_state = (lo & 0xE6u) == 0xE6u;  // XMM, YMM, opmask, ZMM state
  const bool amx_state = (lo & (3u << 17)) == (3u << 17);
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool amx_bf16 = (d & (1u << 22)) != 0;
  const bool avx512f = (b & (1u << 16)) != 0;
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return amx_bf16 && amx_state;
  const bool avx512_bf16 = (a & (1u << 5)) != 0;
  return (avx512f && avx512_bf16 && avx512_state) || (amx_bf16 && amx_state);
#else
  return false;  // other architectures: no BF16 path is known to be fast
#endif
}

bool assume_no_bf16() {
  const char* v = std::getenv(kNoBf16Env);
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

// ---- closed-form bytes -------------------------------------------------------------------------

int64_t linear_count(int64_t in, int64_t out, bool bias) {
  return in * out + (bias ? out : 0);
}

// `total` parameters of which `bf16_params` are BF16 (both counted in closed form, the projections
// a part of the checked total, so only the byte products can overflow).
nlohmann::json bytes_table(int64_t total, int64_t bf16_params) {
  const int64_t fp32_params = total - bf16_params;
  const int64_t fp32_total = checked_mul(4, total, kBf16Component, "parameter bytes");
  const int64_t bytes = 2 * bf16_params + 4 * fp32_params;  // <= fp32_total
  return {{"fp32", {{"parameter_bytes", fp32_total}}},
          {"bf16",
           {{"parameter_bytes", bytes},
            {"bf16_bytes", 2 * bf16_params},
            {"fp32_bytes", 4 * fp32_params},
            {"ratio_to_fp32", static_cast<double>(bytes) / static_cast<double>(fp32_total)}}}};
}

// A VSN's BF16 parameters (bf16.h): its per-variable embeddings and GRNs, and its selection GRN's
// fc2 and skip (the two layers that read the flattened embeddings).
int64_t vsn_bf16_params(int64_t v, int64_t e, int64_t h) {
  const int64_t hi = std::min(e, h);
  int64_t n = 2 * v * e                   // embedding weight [V, 1, E], bias [V, E]
              + v * (e * hi + hi)         // fc2
              + v * (hi * hi + hi)        // fc1
              + v * (hi * 2 * h + 2 * h)  // GLU
              + 2 * v * h;                // LayerNorm
  if (e != h) n += v * (e * h + h);       // skip projection
  if (v > 1) {
    n += linear_count(v * e, h, true);                  // selection fc2
    if (v * e != v) n += linear_count(v * e, v, true);  // selection skip
  }
  return n;
}

// The TFT's BF16 parameters: both VSNs'.
int64_t tft_bf16_params(const TftOptions& o) {
  return vsn_bf16_params(o.past_features(), o.real_embedding(), o.hidden()) +
         vsn_bf16_params(o.future_features(), o.real_embedding(), o.hidden());
}

// Mamba-2's projections (they turn BF16): embed, head, and each block's in_proj and out_proj.
int64_t mamba2_projection_params(const Mamba2Options& o) {
  const int64_t dm = o.d_model(), di = o.d_inner();
  const int64_t gn = o.ngroups() * o.d_state(), q = static_cast<int64_t>(o.quantiles().size());
  const int64_t per_block =
      linear_count(dm, 2 * di + 2 * gn + o.nheads(), false) + linear_count(di, dm, false);
  return linear_count(o.input_dim(), dm, true) + linear_count(dm, o.horizon() * q, true) +
         o.n_layers() * per_block;
}

// ---- conversions -------------------------------------------------------------------------------

// What bf16.h says is BF16: in place, on the module's device.
void tft_to_bf16(torch::nn::Module& m) {
  auto* net = m.as<TftNetImpl>();
  FOXHUNT_INTERNAL_ASSERT(net != nullptr, "the bf16 tft converts a TftNet");
  torch::NoGradGuard no_grad;
  for (auto* vsn : {net->past_vsn.get(), net->future_vsn.get()}) {
    for (auto* t : {&vsn->emb_weight, &vsn->emb_bias, &vsn->fc2_weight, &vsn->fc2_bias,
                    &vsn->fc1_weight, &vsn->fc1_bias, &vsn->glu_weight, &vsn->glu_bias,
                    &vsn->norm_weight, &vsn->norm_bias, &vsn->skip_weight, &vsn->skip_bias})
      if (t->defined()) t->set_data(t->to(torch::kBFloat16));  // the registered parameter too
    if (vsn->selection.is_empty()) continue;
    vsn->selection->fc2->to(torch::kBFloat16);
    if (!vsn->selection->skip.is_empty()) vsn->selection->skip->to(torch::kBFloat16);
  }
}

void mamba2_to_bf16(torch::nn::Module& m) {
  auto* net = m.as<Mamba2NetImpl>();
  FOXHUNT_INTERNAL_ASSERT(net != nullptr, "the bf16 mamba2 converts a Mamba2Net");
  net->embed->to(torch::kBFloat16);
  net->head->to(torch::kBFloat16);
  for (size_t i = 0; i < net->blocks->size(); ++i) {
    auto& mixer = *net->blocks->ptr(i)->as<Mamba2BlockImpl>()->mixer;
    mixer.in_proj->to(torch::kBFloat16);
    mixer.out_proj->to(torch::kBFloat16);
  }
}

// A catalog model whose network was converted to BF16: the FP32 model's adapter (its spec,
// options, example batches, explanation) around the converted module; forecasts returned FP32.
// Where `streams`, its stream and cached per-bar stage are the network's own (a batched desk
// then runs the VSN once per bar, as at FP32); otherwise forward() on each window.
class Bf16Model final : public Model {
 public:
  // `streams`: the network's own stream and cached per-bar stage serve the converted weights
  // (the TFT's: its VSNs run the BF16 kernel); otherwise neither (Mamba-2's stream folds weights
  // of one dtype).
  Bf16Model(std::unique_ptr<Model> converted, bool streams)
      : inner_(std::move(converted)), streams_(streams) {}

  std::string name() const override { return inner_->name(); }
  Precision precision() const override { return Precision::kBf16; }
  torch::nn::Module& module() override { return inner_->module(); }
  std::shared_ptr<torch::nn::Module> module_ptr() override { return inner_->module_ptr(); }
  nlohmann::json options_json() const override { return inner_->options_json(); }
  IoSpec spec() const override { return inner_->spec(); }
  std::vector<std::vector<int64_t>> output_shapes(int64_t batch, int64_t seq_len) const override {
    return inner_->output_shapes(batch, seq_len);
  }
  std::vector<torch::Tensor> forward(const Batch& b) override {
    check_bf16_device(module_device(module()), kBf16Component);
    auto out = inner_->forward(b);
    for (auto& t : out)
      if (t.is_floating_point() && t.scalar_type() != torch::kFloat) t = t.to(torch::kFloat);
    return out;
  }
  std::optional<Explanation> explain(const Batch& b) override {
    check_bf16_device(module_device(module()), kBf16Component);
    return inner_->explain(b);
  }
  Batch example_batch(int64_t batch, int64_t seq_len, const torch::Device& device,
                      uint64_t seed) const override {
    return inner_->example_batch(batch, seq_len, device, seed);
  }
  int64_t cached_width() const override { return streams_ ? inner_->cached_width() : 0; }
  torch::Tensor encode_rows(const torch::Tensor& rows, const torch::Tensor& static_id) override {
    if (!streams_) return Model::encode_rows(rows, static_id);  // the "none" InputError
    check_bf16_device(module_device(module()), kBf16Component);
    return inner_->encode_rows(rows, static_id);
  }
  torch::Tensor forward_cached(const Batch& b) override {
    if (!streams_) return Model::forward_cached(b);
    check_bf16_device(module_device(module()), kBf16Component);
    auto y = inner_->forward_cached(b);
    return y.scalar_type() == torch::kFloat ? y : y.to(torch::kFloat);
  }
  // The network's own stream over the converted weights; its forecasts returned FP32.
  std::unique_ptr<ModelStream> make_stream(int64_t window) override {
    if (!streams_) return nullptr;
    check_bf16_device(module_device(module()), kBf16Component);
    auto inner = inner_->make_stream(window);
    if (!inner) return nullptr;
    return adapt_stream<std::unique_ptr<ModelStream>>(
        [](std::unique_ptr<ModelStream>& s, const StreamBar& bar, ChunkRunner* runner) {
          s->set_chunk_runner(runner);
          auto out = s->push(bar);
          return out.scalar_type() == torch::kFloat ? out : out.to(torch::kFloat);
        },
        std::move(inner));
  }
  // The pinball loss of the FP32 forecasts (nothing trains a BF16 form).
  torch::Tensor loss(const Batch& b) override {
    return forecaster_loss(name(), spec(), forward(b)[0], b.target);
  }

 private:
  std::unique_ptr<Model> inner_;
  bool streams_ = false;
};

using MakeFp32 = std::unique_ptr<Model> (*)(const nlohmann::json&);
using Convert = void (*)(torch::nn::Module&);

std::unique_ptr<Model> make_bf16(MakeFp32 make, Convert convert, bool streams,
                                 const nlohmann::json& options) {
  auto inner = make(options);
  convert(inner->module());
  return std::make_unique<Bf16Model>(std::move(inner), streams);
}

QuantizeResult quantize_bf16(Model& fp32, const QuantizeRequest& request, const char* model,
                             MakeFp32 make, Convert convert, bool streams) {
  FOXHUNT_CHECK(fp32.name() == model && fp32.precision() == Precision::kFp32, kBf16Component,
                "quantize: expected an fp32 '", model, "' model, got a ", fp32.precision(), " '",
                fp32.name(), "'");
  FOXHUNT_CHECK(request.method == QuantizeMethod::kPtq, kBf16Component,
                "quantize: a bf16 form is a cast of the trained weights; expected ptq (no "
                "calibration, no fine-tuning), got ",
                to_string(request.method));
  const auto device = module_device(fp32.module());
  check_bf16_device(device, kBf16Component);
  fp32.module().eval();
  auto out = make_bf16(make, convert, streams, fp32.options_json());
  auto& dst = out->module();
  dst.to(device);
  {
    // Same network, same names: copy_ rounds each FP32 value to the nearest BF16 one.
    torch::NoGradGuard no_grad;
    const auto src_params = fp32.module().named_parameters();
    for (auto& p : dst.named_parameters()) p.value().copy_(src_params[p.key()]);
    const auto src_buffers = fp32.module().named_buffers();
    for (auto& b : dst.named_buffers()) b.value().copy_(src_buffers[b.key()]);
  }
  dst.eval();
  QuantizeResult r;
  r.model = std::move(out);
  return r;
}

}  // namespace

bool cpu_has_bf16() {
  static const bool flags = cpu_flags_have_bf16();
  return flags && !assume_no_bf16();
}

void check_bf16_device(const torch::Device& device, const char* component) {
  if (!device.is_cpu() || cpu_has_bf16()) return;
  throw InputError(component,
                   std::string("bf16 on the cpu: expected a CPU with avx512_bf16 or amx_bf16 "
                               "(BF16 dot products), ") +
                       (assume_no_bf16() ? std::string(kNoBf16Env) + " is set"
                                         : std::string("this one has neither")) +
                       "; serve this model at fp32 instead");
}

nlohmann::json bf16_tft_bytes(const nlohmann::json& options) {
  const auto o = tft_options_from_json(options);
  const int64_t total = parameter_count(o);
  return bytes_table(total, tft_bf16_params(o));  // checked first: the VSNs are a part of it
}

nlohmann::json bf16_mamba2_bytes(const nlohmann::json& options) {
  const auto o = mamba2_options_from_json(options);
  const int64_t total = parameter_count(o);  // checked first: the projections are a part of it
  return bytes_table(total, mamba2_projection_params(o));
}

std::unique_ptr<Model> make_bf16_tft_model(const nlohmann::json& options) {
  return make_bf16(&make_tft_model, &tft_to_bf16, /*streams=*/true, options);
}

std::unique_ptr<Model> make_bf16_mamba2_model(const nlohmann::json& options) {
  return make_bf16(&make_mamba2_model, &mamba2_to_bf16, /*streams=*/false, options);
}

QuantizeResult quantize_bf16_tft(Model& fp32, const QuantizeRequest& request) {
  return quantize_bf16(fp32, request, "tft", &make_tft_model, &tft_to_bf16, /*streams=*/true);
}

QuantizeResult quantize_bf16_mamba2(Model& fp32, const QuantizeRequest& request) {
  return quantize_bf16(fp32, request, "mamba2", &make_mamba2_model, &mamba2_to_bf16,
                       /*streams=*/false);
}

}  // namespace foxhunt::models
