#include "foxhunt/models/mamba2.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "foxhunt/core/checked_math.h"
#include "foxhunt/models/adapter.h"
#include "foxhunt/models/options_io.h"
#include "foxhunt/models/quantile_loss.h"
#include "fused_path.h"
#include "mamba2_internal.h"
#include "mamba2_kernels.h"

namespace foxhunt::models {

namespace F = torch::nn::functional;
using torch::indexing::None;
using torch::indexing::Slice;

// ---- options ------------------------------------------------------------------------------

// The one field list of Mamba2Options: its JSON writer, reader and known keys.
FOXHUNT_OPTIONS_JSON(Mamba2Options, "mamba2", mamba2_options_from_json, input_dim, d_model, d_state,
                     n_layers, expand, headdim, ngroups, d_conv, chunk_size, window, horizon,
                     quantiles)

void validate(const Mamba2Options& o) {
  const std::pair<const char*, int64_t> sizes[] = {
      {"input_dim", o.input_dim()}, {"d_model", o.d_model()}, {"d_state", o.d_state()},
      {"n_layers", o.n_layers()},   {"expand", o.expand()},   {"headdim", o.headdim()},
      {"ngroups", o.ngroups()},     {"d_conv", o.d_conv()},   {"chunk_size", o.chunk_size()},
      {"window", o.window()},       {"horizon", o.horizon()}};
  for (const auto& [key, v] : sizes)
    FOXHUNT_CHECK(v > 0, "mamba2", "option '", key, "': expected > 0, got ", v);
  // The derived sizes (d_inner, conv_dim) must fit before anything multiplies them.
  const int64_t d_inner = checked_mul(o.expand(), o.d_model(), "mamba2", "d_inner");
  (void)checked_add(d_inner,
                    checked_mul(2, checked_mul(o.ngroups(), o.d_state(), "mamba2", "conv_dim"),
                                "mamba2", "conv_dim"),
                    "mamba2", "conv_dim");
  FOXHUNT_CHECK(o.d_inner() % o.headdim() == 0, "mamba2",
                "expected d_inner (expand*d_model = ", o.d_inner(), ") divisible by headdim ",
                o.headdim());
  FOXHUNT_CHECK(o.nheads() % o.ngroups() == 0, "mamba2", "expected heads (", o.nheads(),
                ") divisible by ngroups ", o.ngroups());
  FOXHUNT_CHECK(!o.quantiles().empty(), "mamba2", "expected at least one quantile, got none");
  for (double q : o.quantiles())
    FOXHUNT_CHECK(q > 0.0 && q < 1.0, "mamba2", "expected quantiles in (0, 1), got ", q);
  for (size_t k = 1; k < o.quantiles().size(); ++k)
    FOXHUNT_CHECK(o.quantiles()[k] > o.quantiles()[k - 1], "mamba2",
                  "option 'quantiles': expected levels strictly increasing, got ",
                  o.quantiles()[k - 1], " then ", o.quantiles()[k]);
}

int64_t parameter_count(const Mamba2Options& o) {
  // Checked: the sizes may come from a file's options (a bundle header).
  auto mul = [](int64_t a, int64_t b) { return checked_mul(a, b, "mamba2", "parameter count"); };
  auto add = [](std::initializer_list<int64_t> terms) {
    int64_t n = 0;
    for (int64_t t : terms) n = checked_add(n, t, "mamba2", "parameter count");
    return n;
  };
  const int64_t D = o.d_model(), di = o.d_inner(), H = o.nheads();
  const int64_t GN = mul(o.ngroups(), o.d_state()), conv_dim = o.conv_dim();
  const int64_t Q = static_cast<int64_t>(o.quantiles().size());
  const int64_t mixer = add({mul(D, add({mul(2, di), mul(2, GN), H})),  // in_proj (no bias)
                             mul(conv_dim, o.d_conv()), conv_dim,       // depthwise conv + bias
                             mul(3, H),                                 // dt_bias, A_log, D
                             di,                                        // gated norm weight
                             mul(di, D)});                              // out_proj (no bias)
  const int64_t block = add({D, mixer});                                // pre-norm weight + mixer
  const int64_t head = mul(o.horizon(), Q);
  return add({mul(o.input_dim(), D), D,     // embedding
              mul(o.n_layers(), block), D,  // blocks + final norm
              mul(D, head), head});         // head
}

// ---- SSD ----------------------------------------------------------------------------------

torch::Tensor segsum(const torch::Tensor& a) {
  const int64_t T = a.size(-1);
  auto opts = torch::TensorOptions().dtype(torch::kBool).device(a.device());
  // x[..., i, j] = a[..., i]; keep only i > j, then a cumsum down the rows gives
  // sum_{k=j+1..i} a_k without subtracting two large prefix sums.
  auto sizes = a.sizes().vec();
  sizes.push_back(T);
  auto x = a.unsqueeze(-1).expand(sizes).contiguous();
  x = x.masked_fill(torch::ones({T, T}, opts).tril(-1).logical_not(), 0.0);
  auto s = x.cumsum(-2);
  return s.masked_fill(torch::ones({T, T}, opts).tril(0).logical_not(),
                       -std::numeric_limits<double>::infinity());
}

namespace {

struct SsdShapes {
  int64_t b, L, H, P, G, N;
};

SsdShapes check_ssd_inputs(const char* component, const torch::Tensor& X, const torch::Tensor& A,
                           const torch::Tensor& B, const torch::Tensor& C,
                           const torch::Tensor& s0) {
  FOXHUNT_CHECK(X.defined() && X.dim() == 4, component, "X: expected rank 4 [b, L, H, P], got ",
                X.defined() ? shape_str(X.sizes().vec()) : std::string("undefined"));
  SsdShapes s{X.size(0), X.size(1), X.size(2), X.size(3), 0, 0};
  FOXHUNT_CHECK(B.defined() && B.dim() == 4, component, "B: expected rank 4 [b, L, G, N], got ",
                B.defined() ? shape_str(B.sizes().vec()) : std::string("undefined"));
  s.G = B.size(2);
  s.N = B.size(3);
  FOXHUNT_CHECK(A.defined() && A.sizes().vec() == std::vector<int64_t>({s.b, s.L, s.H}), component,
                "A: expected shape ", shape_str({s.b, s.L, s.H}), ", got ",
                A.defined() ? shape_str(A.sizes().vec()) : std::string("undefined"));
  FOXHUNT_CHECK(B.size(0) == s.b && B.size(1) == s.L, component, "B: expected shape ",
                shape_str({s.b, s.L, -1, -1}), ", got ", shape_str(B.sizes().vec()));
  FOXHUNT_CHECK(C.defined() && C.sizes() == B.sizes(), component, "C: expected shape ",
                shape_str(B.sizes().vec()), " (same as B), got ",
                C.defined() ? shape_str(C.sizes().vec()) : std::string("undefined"));
  FOXHUNT_CHECK(s.G > 0 && s.H % s.G == 0, component, "expected heads (", s.H,
                ") divisible by groups (", s.G, ")");
  FOXHUNT_CHECK(X.is_floating_point(), component, "X: expected a floating dtype, got ",
                c10::toString(X.scalar_type()));
  for (const auto* t : {&A, &B, &C})
    FOXHUNT_CHECK(t->scalar_type() == X.scalar_type(), component,
                  "expected every input in X's dtype ", c10::toString(X.scalar_type()), ", got ",
                  c10::toString(t->scalar_type()));
  if (s0.defined()) {
    FOXHUNT_CHECK(s0.sizes().vec() == std::vector<int64_t>({s.b, s.H, s.P, s.N}), component,
                  "initial_state: expected shape ", shape_str({s.b, s.H, s.P, s.N}), ", got ",
                  shape_str(s0.sizes().vec()));
    FOXHUNT_CHECK(s0.scalar_type() == X.scalar_type(), component, "initial_state: expected dtype ",
                  c10::toString(X.scalar_type()), ", got ", c10::toString(s0.scalar_type()));
  }
  return s;
}

// [b, L, G, N] -> [b, L, H, N]: head h reads group h / (H / G).
torch::Tensor heads_from_groups(const torch::Tensor& t, int64_t H) {
  const int64_t G = t.size(-2);
  return G == H ? t : t.repeat_interleave(H / G, /*dim=*/-2);
}

}  // namespace

SsdResult ssd_chunked(const torch::Tensor& X_in, const torch::Tensor& A_in,
                      const torch::Tensor& B_in, const torch::Tensor& C_in, int64_t chunk_size,
                      const torch::Tensor& initial_state) {
  const auto s = check_ssd_inputs("ssd", X_in, A_in, B_in, C_in, initial_state);
  FOXHUNT_CHECK(chunk_size > 0, "ssd", "expected chunk_size > 0, got ", chunk_size);
  // A chunk longer than the sequence is one chunk of the sequence (the padding would only add
  // zeros): no overflow and no padding allocation for any chunk_size an options file holds.
  const int64_t Q = std::min(chunk_size, std::max<int64_t>(s.L, 1));
  const int64_t nc = (s.L + Q - 1) / Q;
  const int64_t pad = nc * Q - s.L;

  auto X = X_in, A = A_in;
  auto B = heads_from_groups(B_in, s.H), C = heads_from_groups(C_in, s.H);
  if (pad > 0) {
    // Zero tail: exponent 0 (decay 1) and zero input keep the state; outputs are sliced off.
    X = F::pad(X, F::PadFuncOptions({0, 0, 0, 0, 0, pad}));
    A = F::pad(A, F::PadFuncOptions({0, 0, 0, pad}));
    B = F::pad(B, F::PadFuncOptions({0, 0, 0, 0, 0, pad}));
    C = F::pad(C, F::PadFuncOptions({0, 0, 0, 0, 0, pad}));
  }
  X = X.reshape({s.b, nc, Q, s.H, s.P});
  B = B.reshape({s.b, nc, Q, s.H, s.N});
  C = C.reshape({s.b, nc, Q, s.H, s.N});
  A = A.reshape({s.b, nc, Q, s.H}).permute({0, 3, 1, 2});  // [b, H, c, Q]
  auto A_cum = A.cumsum(-1);

  // Every contraction below is a batched matmul over (b, c, h) on head-major views; the
  // equivalent einsums cost several times more on these small sizes.
  const auto Ch = C.permute({0, 1, 3, 2, 4});  // [b, c, H, l, N]
  const auto Bh = B.permute({0, 1, 3, 2, 4});  // [b, c, H, s, N]
  const auto Xh = X.permute({0, 1, 3, 2, 4});  // [b, c, H, s, P]

  // 1. Within-chunk (diagonal blocks): Y_diag[l] = sum_{s<=l} (C_l . B_s) exp(sum A_{s+1..l}) X_s.
  auto Lmat = torch::exp(segsum(A)).permute({0, 2, 1, 3, 4});  // [b, c, H, l, s]
  auto CB = torch::matmul(Ch, Bh.transpose(-1, -2));           // [b, c, H, l, s]
  auto Y_diag = torch::matmul(CB * Lmat, Xh);                  // [b, c, H, l, P]

  // 2. State at the end of each chunk from its own inputs only.
  auto decay_states = torch::exp(A_cum.narrow(-1, Q - 1, 1) - A_cum);  // [b, H, c, Q]
  auto Xd = Xh * decay_states.permute({0, 2, 1, 3}).unsqueeze(-1);     // [b, c, H, s, P]
  auto states = torch::matmul(Xd.transpose(-1, -2), Bh);               // [b, c, H, P, N]

  // 3. Carry states across chunks (prepend the initial state; decay by whole-chunk sums).
  auto s0 = initial_state.defined() ? initial_state.unsqueeze(1)
                                    : torch::zeros({s.b, 1, s.H, s.P, s.N}, X.options());
  states = torch::cat({s0, states}, 1);  // [b, c+1, H, P, N]
  auto chunk_sums = F::pad(A_cum.select(-1, Q - 1), F::PadFuncOptions({1, 0}));  // [b, H, c+1]
  auto decay_chunk = torch::exp(segsum(chunk_sums));                             // [b, H, z, c]
  // new_states[z] = sum_c decay_chunk[z, c] states[c], per (b, H) over the flattened P x N.
  auto flat = states.permute({0, 2, 1, 3, 4}).reshape({s.b, s.H, nc + 1, s.P * s.N});
  auto new_states = torch::matmul(decay_chunk, flat)
                        .view({s.b, s.H, nc + 1, s.P, s.N})
                        .permute({0, 2, 1, 3, 4});  // [b, z, H, P, N]
  auto final_state = new_states.select(1, nc);
  states = new_states.narrow(1, 0, nc);  // state entering each chunk

  // 4. Contribution of the incoming state to each position of its chunk.
  auto Y_off = torch::matmul(Ch, states.transpose(-1, -2)) *
               torch::exp(A_cum).permute({0, 2, 1, 3}).unsqueeze(-1);  // [b, c, H, l, P]
  // [b, c, H, l, P] -> [b, c, l, H, P] -> [b, c * l, H, P]
  auto Y = (Y_diag + Y_off).permute({0, 1, 3, 2, 4}).reshape({s.b, nc * Q, s.H, s.P});
  if (pad > 0) Y = Y.narrow(1, 0, s.L);
  return {Y, final_state};
}

namespace {

// Windows up to this length take the single-chunk form when no state is asked for.
constexpr int64_t kSingleChunkMaxLen = 64;

// The SSD outputs with a zero initial state and no final state, as one chunk spanning the whole
// sequence (the quadratic form): Y = ((C B^T) o exp(segsum(A))) X per head. Exact algebra, the
// same sums as ssd_chunked with chunk_size = L; on a 32-bar window it is 2 batched products
// instead of the chunked form's 5 plus the state passing. C B^T is per group (heads share it).
torch::Tensor ssd_single_chunk(const torch::Tensor& X, const torch::Tensor& A,
                               const torch::Tensor& B, const torch::Tensor& C) {
  const int64_t b = X.size(0), L = X.size(1), H = X.size(2), P = X.size(3), G = B.size(2);
  const auto Bg = B.permute({0, 2, 1, 3});                     // [b, G, L, N]
  const auto Cg = C.permute({0, 2, 1, 3});                     // [b, G, L, N]
  const auto CB = torch::matmul(Cg, Bg.transpose(-1, -2));     // [b, G, l, s]
  const auto Lmat = torch::exp(segsum(A.permute({0, 2, 1})));  // [b, H, l, s]
  const auto M = (CB.unsqueeze(2) * Lmat.view({b, G, H / G, L, L})).view({b, H, L, L});
  const auto Y = torch::matmul(M, X.permute({0, 2, 1, 3}));  // [b, H, l, P]
  return Y.permute({0, 2, 1, 3}).reshape({b, L, H, P});
}

}  // namespace

SsdResult ssd_sequential(const torch::Tensor& X, const torch::Tensor& A, const torch::Tensor& B_in,
                         const torch::Tensor& C_in, const torch::Tensor& initial_state) {
  const auto s = check_ssd_inputs("ssd", X, A, B_in, C_in, initial_state);
  auto B = heads_from_groups(B_in, s.H), C = heads_from_groups(C_in, s.H);
  auto h =
      initial_state.defined() ? initial_state : torch::zeros({s.b, s.H, s.P, s.N}, X.options());
  std::vector<torch::Tensor> ys;
  ys.reserve(static_cast<size_t>(s.L));
  for (int64_t t = 0; t < s.L; ++t) {
    auto decay = torch::exp(A.select(1, t)).unsqueeze(-1).unsqueeze(-1);    // [b, H, 1, 1]
    auto xb = X.select(1, t).unsqueeze(-1) * B.select(1, t).unsqueeze(-2);  // [b, H, P, N]
    h = decay * h + xb;
    ys.push_back((h * C.select(1, t).unsqueeze(-2)).sum(-1));  // [b, H, P]
  }
  auto Y = s.L > 0 ? torch::stack(ys, 1) : torch::zeros({s.b, 0, s.H, s.P}, X.options());
  return {Y, h};
}

// ---- modules ------------------------------------------------------------------------------

namespace mamba2_detail {

// RMS normalisation over the last dimension, computed in at least fp32.
torch::Tensor rms_normalize(const torch::Tensor& x, double eps) {
  const bool low = x.scalar_type() == torch::kHalf || x.scalar_type() == torch::kBFloat16;
  auto xf = low ? x.to(torch::kFloat) : x;
  auto out = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return low ? out.to(x.scalar_type()) : out;
}

// Whether the mixer's weights between its projections can feed the fused kernel with `like`'s
// device and dtype, and those weights as raw arrays.
bool core_weights_fit(const Mamba2MixerImpl& m, const torch::Tensor& like) {
  if (!fused_cpu_float(like)) return false;
  for (const auto* t :
       {&m.conv1d->weight, &m.conv1d->bias, &m.dt_bias, &m.A_log, &m.D, &m.norm_weight})
    if (!fused_cpu_float(*t)) return false;
  return true;
}

kernels::Mamba2CoreWeights core_weights(const Mamba2MixerImpl& m) {
  const auto& o = m.options;
  kernels::Mamba2CoreWeights w;
  w.d_inner = o.d_inner();
  w.nheads = o.nheads();
  w.headdim = o.headdim();
  w.ngroups = o.ngroups();
  w.d_state = o.d_state();
  w.d_conv = o.d_conv();
  w.conv_weight = m.conv1d->weight.data_ptr<float>();
  w.conv_bias = m.conv1d->bias.data_ptr<float>();
  w.dt_bias = m.dt_bias.data_ptr<float>();
  w.A_log = m.A_log.data_ptr<float>();
  w.D = m.D.data_ptr<float>();
  w.norm_weight = m.norm_weight.data_ptr<float>();
  return w;
}

}  // namespace mamba2_detail

namespace {

// The dtype the module's activations run in: its first parameter outside a projection (the BF16
// form, bf16.h, holds its projections in BF16 around FP32 activations; FP32 models have one dtype).
torch::ScalarType param_dtype(const torch::nn::Module& m) {
  for (const auto& p : m.parameters(/*recurse=*/false)) return p.scalar_type();
  for (const auto& sub : m.modules(/*include_self=*/false)) {
    if (sub->as<torch::nn::LinearImpl>() != nullptr) continue;
    for (const auto& p : sub->parameters(/*recurse=*/false)) return p.scalar_type();
  }
  return torch::kFloat;
}

// `l` on `x`, in `l`'s dtype: the BF16 form's projections take BF16 operands (FP32
// accumulation) and hand back the activations' dtype; an FP32 model runs the Linear as is.
torch::Tensor project(torch::nn::Linear& l, const torch::Tensor& x) {
  const auto wt = l->weight.scalar_type();
  if (x.scalar_type() == wt) return l->forward(x);
  return l->forward(x.to(wt)).to(x.scalar_type());
}

// Shared boundary check: sizes, device, finite, float dtype equal to the module's.
void check_module_input(const char* component, const char* name, const torch::Tensor& x,
                        const std::vector<int64_t>& sizes, const torch::nn::Module& m) {
  check_float_input(component, name, x, sizes, module_device(m));
  const auto dt = param_dtype(m);
  FOXHUNT_CHECK(x.scalar_type() == dt, component, name, ": expected dtype ", c10::toString(dt),
                " (the module's), got ", c10::toString(x.scalar_type()), " with shape ",
                shape_str(x.sizes().vec()));
}

// The boundary check of a mixer's or a block's input `u`: [b, seq_len >= 1, d_model].
void check_sequence_input(const char* name, const torch::Tensor& u, int64_t d_model,
                          const torch::nn::Module& m) {
  check_module_input("mamba2", name, u, {-1, -1, d_model}, m);
  FOXHUNT_CHECK(u.size(1) >= 1, "mamba2", name, ": expected seq_len >= 1, got shape ",
                shape_str(u.sizes().vec()));
}

// The mixer between in_proj and out_proj for a zero initial state (gated-norm rows [b, L,
// d_inner]), through the fused kernel; undefined when it does not apply.
torch::Tensor fused_core(Mamba2MixerImpl& m, const torch::Tensor& zxbcdt) {
  if (!mamba2_detail::core_weights_fit(m, zxbcdt)) return {};
  const int64_t b = zxbcdt.size(0), L = zxbcdt.size(1);
  auto out = torch::empty({b, L, m.options.d_inner()}, zxbcdt.options());
  kernels::mamba2_mixer_core(mamba2_detail::core_weights(m), zxbcdt.data_ptr<float>(), b, L,
                             out.data_ptr<float>());
  return out;
}

}  // namespace

Mamba2RMSNormImpl::Mamba2RMSNormImpl(int64_t dim_, double eps_) : dim(dim_), eps(eps_) {
  reset();
}

void Mamba2RMSNormImpl::reset() {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor Mamba2RMSNormImpl::forward(const torch::Tensor& x) {
  if (fused_cpu_float(x) && fused_cpu_float(weight) && x.dim() >= 1 &&
      x.size(-1) == weight.numel()) {
    auto out = torch::empty_like(x);
    const int64_t d = x.size(-1);
    kernels::rms_norm_rows(x.data_ptr<float>(), weight.data_ptr<float>(), d > 0 ? x.numel() / d : 0,
                           d, static_cast<float>(eps), out.data_ptr<float>());
    return out;
  }
  return mamba2_detail::rms_normalize(x, eps) * weight;
}

Mamba2MixerImpl::Mamba2MixerImpl(Mamba2Options options_) : options(std::move(options_)) {
  reset();
}

void Mamba2MixerImpl::reset() {
  validate(options);
  const int64_t dm = options.d_model(), di = options.d_inner(), H = options.nheads();
  const int64_t GN = options.ngroups() * options.d_state(), conv_dim = options.conv_dim();
  in_proj = register_module(
      "in_proj", torch::nn::Linear(torch::nn::LinearOptions(dm, 2 * di + 2 * GN + H).bias(false)));
  conv1d = register_module(
      "conv1d", torch::nn::Conv1d(torch::nn::Conv1dOptions(conv_dim, conv_dim, options.d_conv())
                                      .groups(conv_dim)
                                      .padding(options.d_conv() - 1)
                                      .bias(true)));
  torch::NoGradGuard ng;
  // dt ~ exp(U[ln 1e-3, ln 1e-1]) floored at 1e-4; dt_bias = softplus^{-1}(dt).
  auto dt = torch::exp(torch::rand({H}) * (std::log(1e-1) - std::log(1e-3)) + std::log(1e-3))
                .clamp_min(1e-4);
  dt_bias = register_parameter("dt_bias", dt + torch::log(-torch::expm1(-dt)));
  A_log = register_parameter("A_log", torch::log(torch::empty({H}).uniform_(1.0, 16.0)));
  D = register_parameter("D", torch::ones({H}));
  norm_weight = register_parameter("norm_weight", torch::ones({di}));
  out_proj =
      register_module("out_proj", torch::nn::Linear(torch::nn::LinearOptions(di, dm).bias(false)));
}

torch::Tensor Mamba2MixerImpl::gated_norm(const torch::Tensor& y, const torch::Tensor& z) const {
  // Gate first, then RMS-normalise per group of d_inner / ngroups channels (one group by default).
  auto g = y * F::silu(z);
  const auto lead = g.sizes().vec();
  auto grouped = g.unflatten(-1, {options.ngroups(), options.d_inner() / options.ngroups()});
  return mamba2_detail::rms_normalize(grouped, 1e-5).reshape(lead) * norm_weight;
}

torch::Tensor Mamba2MixerImpl::forward(const torch::Tensor& u) {
  check_sequence_input("mixer input", u, options.d_model(), *this);
  return apply(u);
}

torch::Tensor Mamba2MixerImpl::apply(const torch::Tensor& u, Mamba2LayerState* state_out) {
  const int64_t b = u.size(0), L = u.size(1);
  const int64_t di = options.d_inner(), H = options.nheads(), P = options.headdim();
  const int64_t G = options.ngroups(), N = options.d_state(), K = options.d_conv();
  const int64_t conv_dim = options.conv_dim();

  auto zxbcdt = project(in_proj, u);  // [b, L, 2 di + 2 GN + H]
  if (state_out == nullptr && L <= kSingleChunkMaxLen) {
    auto g = fused_core(*this, zxbcdt);
    if (g.defined()) return project(out_proj, g);
  }
  auto z = zxbcdt.narrow(-1, 0, di);
  auto xBC_pre = zxbcdt.narrow(-1, di, conv_dim);
  auto dt = zxbcdt.narrow(-1, di + conv_dim, H);

  // Causal depthwise conv (what conv1d with K-1 padding computes on its first L outputs), as K
  // shifted multiply-adds in the [b, L, channels] layout: out[t] = bias + sum_k w[k] x[t+k-K+1].
  // On these sizes (160 channels, 32 bars) the convolution kernel cost 5-10x more.
  const auto xp = F::pad(xBC_pre, F::PadFuncOptions({0, 0, K - 1, 0}));  // [b, L+K-1, conv_dim]
  const auto taps = conv1d->weight.view({conv_dim, K}).t();              // [K, conv_dim]
  auto conv = torch::addcmul(conv1d->bias, xp.narrow(1, 0, L), taps[0]);
  for (int64_t k = 1; k < K; ++k) conv = torch::addcmul(conv, xp.narrow(1, k, L), taps[k]);
  auto xBC = F::silu(conv);
  auto x = xBC.narrow(-1, 0, di).reshape({b, L, H, P});
  auto B = xBC.narrow(-1, di, G * N).reshape({b, L, G, N});
  auto C = xBC.narrow(-1, di + G * N, G * N).reshape({b, L, G, N});

  auto delta = F::softplus(dt + dt_bias);  // [b, L, H]
  auto A = -torch::exp(A_log);             // [H]
  const auto xdt = x * delta.unsqueeze(-1);
  SsdResult ssd;
  if (state_out == nullptr && L <= kSingleChunkMaxLen)
    ssd.y = ssd_single_chunk(xdt, A * delta, B, C);
  else
    ssd = ssd_chunked(xdt, A * delta, B, C, options.chunk_size());
  auto y = ssd.y + x * D.view({H, 1});
  auto out = project(out_proj, gated_norm(y.reshape({b, L, di}), z));

  if (state_out) {
    // The last K pre-conv rows (zeros before the start), oldest first.
    auto rows = xBC_pre.transpose(1, 2);  // [b, conv_dim, L]
    if (L < K) rows = F::pad(rows, F::PadFuncOptions({K - L, 0}));
    state_out->conv_state = rows.narrow(-1, rows.size(-1) - K, K).contiguous();
    state_out->ssm_state = ssd.final_state;
  }
  return out;
}

torch::Tensor Mamba2MixerImpl::apply_step(const torch::Tensor& u_t, Mamba2LayerState& state) {
  const int64_t b = u_t.size(0);
  const int64_t di = options.d_inner(), H = options.nheads(), P = options.headdim();
  const int64_t G = options.ngroups(), N = options.d_state();
  const int64_t conv_dim = options.conv_dim();

  auto zxbcdt = project(in_proj, u_t);  // [b, ...]
  auto z = zxbcdt.narrow(-1, 0, di);
  auto xBC_t = zxbcdt.narrow(-1, di, conv_dim);
  auto dt = zxbcdt.narrow(-1, di + conv_dim, H);

  // Shift the window left by one and append the new pre-conv row.
  state.conv_state =
      torch::cat({state.conv_state.narrow(-1, 1, options.d_conv() - 1), xBC_t.unsqueeze(-1)}, -1);
  auto w = conv1d->weight.squeeze(1);  // [conv_dim, K]; tap K-1 multiplies the newest row
  auto xBC = F::silu((state.conv_state * w).sum(-1) + conv1d->bias);
  auto x = xBC.narrow(-1, 0, di).reshape({b, H, P});
  auto B = heads_from_groups(xBC.narrow(-1, di, G * N).reshape({b, G, N}), H);
  auto C = heads_from_groups(xBC.narrow(-1, di + G * N, G * N).reshape({b, G, N}), H);

  auto delta = F::softplus(dt + dt_bias);                                // [b, H]
  auto dA = torch::exp(delta * (-torch::exp(A_log)));                    // [b, H]
  auto dBx = (delta.unsqueeze(-1) * x).unsqueeze(-1) * B.unsqueeze(-2);  // [b, H, P, N]
  state.ssm_state = state.ssm_state * dA.unsqueeze(-1).unsqueeze(-1) + dBx;
  auto y = (state.ssm_state * C.unsqueeze(-2)).sum(-1) + x * D.view({H, 1});  // [b, H, P]
  return project(out_proj, gated_norm(y.reshape({b, di}), z));
}

Mamba2LayerState Mamba2MixerImpl::zero_state(int64_t batch) const {
  auto opts = norm_weight.options().requires_grad(false);  // FP32 in the BF16 form too
  return {torch::zeros({batch, options.conv_dim(), options.d_conv()}, opts),
          torch::zeros({batch, options.nheads(), options.headdim(), options.d_state()}, opts)};
}

Mamba2BlockImpl::Mamba2BlockImpl(Mamba2Options options_) : options(std::move(options_)) {
  reset();
}

void Mamba2BlockImpl::reset() {
  norm = register_module("norm", Mamba2RMSNorm(options.d_model()));
  mixer = register_module("mixer", Mamba2Mixer(options));
}

torch::Tensor Mamba2BlockImpl::forward(const torch::Tensor& u) {
  check_sequence_input("block input", u, options.d_model(), *this);
  return apply(u);
}

torch::Tensor Mamba2BlockImpl::apply(const torch::Tensor& u, Mamba2LayerState* state_out) {
  return u + mixer->apply(norm->forward(u), state_out);
}

torch::Tensor Mamba2BlockImpl::apply_step(const torch::Tensor& u_t, Mamba2LayerState& state) {
  return u_t + mixer->apply_step(norm->forward(u_t), state);
}

Mamba2NetImpl::Mamba2NetImpl(Mamba2Options options_) : options(std::move(options_)) {
  reset();
}

void Mamba2NetImpl::reset() {
  validate(options);
  embed = register_module("embed", torch::nn::Linear(options.input_dim(), options.d_model()));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < options.n_layers(); ++i) blocks->push_back(Mamba2Block(options));
  norm_f = register_module("norm_f", Mamba2RMSNorm(options.d_model()));
  const auto q = static_cast<int64_t>(options.quantiles().size());
  head = register_module("head", torch::nn::Linear(options.d_model(), options.horizon() * q));
}

void Mamba2NetImpl::check_x(const char* name, const torch::Tensor& x,
                            std::vector<int64_t> sizes) const {
  check_module_input("mamba2", name, x, sizes, *this);
  if (x.dim() == 3)
    FOXHUNT_CHECK(x.size(1) >= 1, "mamba2", name, ": expected shape ", shape_str(sizes),
                  " with seq_len >= 1, got ", shape_str(x.sizes().vec()));
}

Mamba2BlockImpl& Mamba2NetImpl::block(size_t i) const {
  // Looked up through the list on every use: cloning replaces the list's elements, so cached
  // handles would point at modules outside the clone.
  return *blocks->ptr(i)->as<Mamba2BlockImpl>();
}

torch::Tensor Mamba2NetImpl::hidden(const torch::Tensor& x, Mamba2State* state_out) {
  auto h = project(embed, x);
  if (state_out) state_out->layers.assign(blocks->size(), {});
  for (size_t i = 0; i < blocks->size(); ++i)
    h = block(i).apply(h, state_out ? &state_out->layers[i] : nullptr);
  return norm_f->forward(h);
}

torch::Tensor Mamba2NetImpl::head_out(const torch::Tensor& h) {
  // [..., d_model] -> [..., horizon, Q]
  auto out = project(head, h);
  return out.unflatten(-1, {options.horizon(), static_cast<int64_t>(options.quantiles().size())});
}

torch::Tensor Mamba2NetImpl::forward(const torch::Tensor& x) {
  check_x("x", x, {-1, -1, options.input_dim()});
  // The final norm is per position: normalise the last one only.
  auto h = project(embed, x);
  for (size_t i = 0; i < blocks->size(); ++i) h = block(i).apply(h, nullptr);
  return head_out(norm_f->forward(h.select(1, h.size(1) - 1).contiguous()));
}

torch::Tensor Mamba2NetImpl::forward_sequence(const torch::Tensor& x) {
  check_x("x", x, {-1, -1, options.input_dim()});
  return head_out(hidden(x, nullptr));
}

std::pair<torch::Tensor, Mamba2State> Mamba2NetImpl::prefill(const torch::Tensor& x) {
  check_x("x", x, {-1, -1, options.input_dim()});
  Mamba2State state;
  auto h = hidden(x, &state);
  return {head_out(h.select(1, h.size(1) - 1)), std::move(state)};
}

torch::Tensor Mamba2NetImpl::step(Mamba2State& state, const torch::Tensor& x_t) {
  check_x("x_t", x_t, {-1, options.input_dim()});
  const int64_t b = x_t.size(0);
  FOXHUNT_CHECK(state.layers.size() == blocks->size(), "mamba2", "state: expected ", blocks->size(),
                " layers, got ", state.layers.size());
  const auto dt = param_dtype(*this);
  const auto dev = module_device(*this);
  const std::vector<int64_t> conv_shape{b, options.conv_dim(), options.d_conv()};
  const std::vector<int64_t> ssm_shape{b, options.nheads(), options.headdim(), options.d_state()};
  for (size_t i = 0; i < state.layers.size(); ++i) {
    const auto& ls = state.layers[i];
    for (const auto& [t, shape, what] : {std::tuple{&ls.conv_state, &conv_shape, "conv_state"},
                                         std::tuple{&ls.ssm_state, &ssm_shape, "ssm_state"}}) {
      FOXHUNT_CHECK(t->defined() && t->sizes().vec() == *shape && t->scalar_type() == dt &&
                        t->device() == dev,
                    "mamba2", "state layer ", i, " ", what, ": expected shape ", shape_str(*shape),
                    " ", c10::toString(dt), " on ", dev.str(), ", got ",
                    t->defined() ? shape_str(t->sizes().vec()) + " " +
                                       c10::toString(t->scalar_type()) + " on " + t->device().str()
                                 : std::string("undefined"));
    }
  }
  auto h = project(embed, x_t);
  for (size_t i = 0; i < blocks->size(); ++i) h = block(i).apply_step(h, state.layers[i]);
  return head_out(norm_f->forward(h));
}

Mamba2State Mamba2NetImpl::zero_state(int64_t batch) const {
  FOXHUNT_CHECK(batch > 0, "mamba2", "zero_state: expected batch > 0, got ", batch);
  Mamba2State s;
  for (size_t i = 0; i < blocks->size(); ++i) s.layers.push_back(block(i).mixer->zero_state(batch));
  return s;
}

std::vector<torch::Tensor> Mamba2NetImpl::no_weight_decay_parameters() {
  std::vector<torch::Tensor> out;
  for (size_t i = 0; i < blocks->size(); ++i) {
    auto& mixer = *block(i).mixer;
    for (auto* p : {&mixer.A_log, &mixer.D, &mixer.dt_bias}) out.push_back(*p);
  }
  return out;
}

// ---- registry adapter ---------------------------------------------------------------------

IoSpec io_spec(const Mamba2Options& o) {
  return forecaster_spec({{"x", InputRole::kPastFeatures, "compact32", o.window(), o.input_dim()}},
                         o.window(), o.horizon(), o.quantiles());
}

Batch example_batch_of(const Mamba2Options& o, int64_t batch, int64_t seq_len,
                       const torch::Device& device, uint64_t seed) {
  const int64_t L = seq_len > 0 ? seq_len : o.window();
  auto gen = at::detail::createCPUGenerator(seed);
  Batch b;
  b.inputs.push_back(torch::randn({batch, L, o.input_dim()}, gen).to(device));
  b.target = torch::randn({batch, o.horizon()}, gen).to(device);
  return b;
}

namespace {

class Mamba2Model final : public ForecasterAdapter<Mamba2Net> {
 public:
  explicit Mamba2Model(Mamba2Options o) : ForecasterAdapter("mamba2", Mamba2Net(o), io_spec(o)) {}

  std::vector<torch::Tensor> forward(const Batch& b) override {
    check_inputs(b);
    return {net_->forward(b.inputs[0])};
  }
  torch::nn::Linear quantile_head() override { return net_->head; }
  std::unique_ptr<ModelStream> make_stream(int64_t window) override {
    // The recurrent step reads the bar's past row alone (no future rows, no instrument id).
    return adapt_stream<Mamba2Stream>(
        [](Mamba2Stream& s, const StreamBar& bar, ChunkRunner*) { return s.push(bar.past); }, net_,
        window);
  }
};

}  // namespace

std::unique_ptr<Model> make_mamba2_model(const nlohmann::json& options) {
  return std::make_unique<Mamba2Model>(mamba2_options_from_json(options));
}

}  // namespace foxhunt::models
