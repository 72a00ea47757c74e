// Mamba2Stream: the per-instrument recurrent stream of a Mamba-2 forecaster (mamba2.h).
#include <cmath>

#include "foxhunt/models/mamba2.h"
#include "mamba2_internal.h"
#include "mamba2_kernels.h"

namespace foxhunt::models {

namespace F = torch::nn::functional;

// ---- per-instrument streaming ----------------------------------------------------------------

namespace {

// One layer's values after its in-projection and convolution, over the rows of a window.
struct LayerRows {
  torch::Tensor sz;     // [m, d_inner] SiLU(z) (the last layer: the last position only)
  torch::Tensor xbc;    // [n, conv_dim] SiLU(conv(xBC))
  torch::Tensor delta;  // [n, H] softplus(dt + dt_bias)
};

Mamba2BlockImpl& block_of(const Mamba2Net& net, size_t i) {
  return *net->blocks->ptr(i)->as<Mamba2BlockImpl>();
}

// RMS normalisation divided by sqrt(dim): x * rsqrt(sum(x^2) + dim * eps) over the last
// dimension. The stream folds sqrt(dim) and the norm weight into the projection that follows;
// a sum and one scalar op are cheaper than mean() and two scalar ops on rows this small.
torch::Tensor rms_unit(const torch::Tensor& x, double eps) {
  const double dim = static_cast<double>(x.size(-1));
  if (x.scalar_type() != torch::kFloat && x.scalar_type() != torch::kDouble)
    return mamba2_detail::rms_normalize(x, eps) * (1.0 / std::sqrt(dim));
  return x * (x * x).sum(-1, /*keepdim=*/true).add_(dim * eps).rsqrt_();
}

// SiLU of the causal depthwise convolution of `pre` [n, C] with zeros before its first row (the
// window start): out[i] = b + sum_k taps[k] * pre[i - (K-1) + k], as K shifted multiply-adds
// (a depthwise conv1d call costs ~100 us on CPU at these sizes).
torch::Tensor conv_window(const torch::Tensor& pre, const std::vector<torch::Tensor>& taps,
                          const torch::Tensor& bias) {
  const int64_t n = pre.size(0), K = static_cast<int64_t>(taps.size());
  auto out = torch::addcmul(bias, pre, taps[K - 1]);
  for (int64_t k = 0; k + 1 < K; ++k) {
    const int64_t shift = K - 1 - k;
    if (shift < n) out.narrow(0, shift, n - shift).addcmul_(pre.narrow(0, 0, n - shift), taps[k]);
  }
  return torch::silu_(out);
}

// Gated RMSNorm rows without the weight and sqrt(group size) (folded into out_t): y [m, d_inner]
// times SiLU(z), normalised per group.
torch::Tensor gated_rows(const Mamba2Options& o, const torch::Tensor& y, const torch::Tensor& sz) {
  const int64_t rows = y.size(0), di = o.d_inner(), G = o.ngroups();
  auto g = y * sz;
  if (G == 1) return rms_unit(g, 1e-5);
  return rms_unit(g.view({rows, G, di / G}), 1e-5).view({rows, di});
}

// The mixer's gated-norm rows at every window position [n, d_inner] (before out_proj): the SSD
// scan from a zero state as one masked quadratic block (a single chunk of length n).
// `not_lower` [n, n] is true where i <= j, `upper` where i < j.
torch::Tensor scan_rows(const Mamba2Options& o, const torch::Tensor& A, const torch::Tensor& Dh,
                        const LayerRows& r, const torch::Tensor& not_lower,
                        const torch::Tensor& upper) {
  const int64_t n = r.xbc.size(0), di = o.d_inner(), H = o.nheads(), P = o.headdim();
  const int64_t G = o.ngroups(), N = o.d_state();
  auto x = r.xbc.narrow(1, 0, di).view({n, H, P});
  auto B = r.xbc.narrow(1, di, G * N).view({n, G, N});
  auto C = r.xbc.narrow(1, di + G * N, G * N).view({n, G, N});
  auto a = (r.delta * A).t();  // [H, n] log-decays
  // Stable segment sums (as in segsum) and their exponentials: Lm[h, i, j] = exp(sum a[j+1..i]).
  auto Lm = a.unsqueeze(-1).expand({H, n, n}).masked_fill(not_lower, 0.0).cumsum(1);
  Lm.masked_fill_(upper, -std::numeric_limits<double>::infinity()).exp_();
  auto CB = torch::bmm(C.transpose(0, 1), B.permute({1, 2, 0}));  // [G, n, n]
  Lm.view({G, H / G, n, n}).mul_(CB.unsqueeze(1));
  auto X = (x * r.delta.unsqueeze(-1)).transpose(0, 1);  // [H, n, P]
  auto Y = torch::bmm(Lm, X).transpose(0, 1);            // [n, H, P]
  auto y = torch::addcmul(Y, x, Dh).reshape({n, di});    // + D x
  return gated_rows(o, y, r.sz);
}

// The mixer's gated-norm row at the last window position only [1, d_inner]: the scan state
// there is sum_i exp(sum a[i+1..n-1]) delta_i x_i (x) B_i, read out with C at the last position.
// `strict_upper` [n, n] holds 1 where i < j (in the module's dtype).
torch::Tensor scan_last(const Mamba2Options& o, const torch::Tensor& A, const torch::Tensor& Dh,
                        const LayerRows& r, const torch::Tensor& strict_upper) {
  const int64_t n = r.xbc.size(0), di = o.d_inner(), H = o.nheads(), P = o.headdim();
  const int64_t G = o.ngroups(), N = o.d_state();
  auto x = r.xbc.narrow(1, 0, di).view({n, H, P});
  auto B = r.xbc.narrow(1, di, G * N).view({n, G, N});
  auto C_last = r.xbc.select(0, n - 1).narrow(0, di + G * N, G * N).view({G, N});
  auto a = r.delta * A;  // [n, H]
  // Suffix sums sum_{k > i} a_k as a product with a 0/1 matrix: no difference of prefix sums.
  auto w = torch::mm(strict_upper, a).exp_().mul_(r.delta);  // [n, H]
  auto CB = (B * C_last).sum(-1, /*keepdim=*/true);          // [n, G, 1]
  auto coef = w.view({n, G, H / G}).mul_(CB).view({n, H});   // [n, H]
  auto y = (x * coef.unsqueeze(-1)).sum(0);                  // [H, P]
  y = torch::addcmul(y, x.select(0, n - 1), Dh).view({1, di});
  return gated_rows(o, y, r.sz);
}

}  // namespace

Mamba2Stream::Mamba2Stream(Mamba2Net net, int64_t window) : net_(std::move(net)) {
  FOXHUNT_CHECK(!net_.is_empty(), "mamba2", "stream: expected a network, got an empty holder");
  FOXHUNT_CHECK(window >= 0, "mamba2",
                "stream: expected window >= 0 (0 = the options' window), got ", window);
  const auto& o = net_->options;
  window_ = window > 0 ? window : o.window();
  width_ = o.input_dim() + o.d_model() + o.d_inner() + o.conv_dim() + o.nheads();
  allocate();
}

void Mamba2Stream::allocate() {
  c10::InferenceMode guard;
  const auto opts = net_->embed->weight.options().requires_grad(false);
  const int64_t W = window_;
  buf_ = torch::zeros({2 * W, width_}, opts);
  auto ones = torch::ones({W, W}, opts.dtype(torch::kBool));
  not_lower_ = ones.tril(-1).logical_not();  // true where i <= j (zeroed before the cumsum)
  upper_ = ones.tril(0).logical_not();       // true where i < j (-inf after it)
  strict_upper_ = torch::ones({W, W}, opts).triu(1);
  bars_ = 0;
  prepare();
}

void Mamba2Stream::prepare() {
  // Transposed contiguous weights (mm reads them without a transpose flag), RMSNorm weights and
  // the sqrt(dim) of rms_unit folded into the projection that follows:
  // (u / rms(u) * w) W^T = (u / sqrt(sum u^2 + dim eps)) (sqrt(dim) W diag w)^T.
  stamp_ = ParameterStamp(*net_);
  const auto& o = net_->options;
  const double sqrt_d = std::sqrt(static_cast<double>(o.d_model()));
  const double sqrt_group = std::sqrt(static_cast<double>(o.d_inner() / o.ngroups()));
  embed_t_ = net_->embed->weight.t().contiguous();
  embed_b_ = net_->embed->bias;
  head_t_ = (net_->head->weight * net_->norm_f->weight * sqrt_d).t().contiguous();
  head_b_ = net_->head->bias;
  layers_.clear();
  for (size_t l = 0; l < net_->blocks->size(); ++l) {
    auto& b = block_of(net_, l);
    auto& m = *b.mixer;
    LayerWeights w;
    w.in_t = (m.in_proj->weight * b.norm->weight * sqrt_d).t().contiguous();
    auto taps = m.conv1d->weight.squeeze(1).t().contiguous();  // [K, C]
    for (int64_t k = 0; k < o.d_conv(); ++k) w.taps.push_back(taps[k]);
    w.conv_b = m.conv1d->bias;
    w.dt_bias = m.dt_bias;
    w.A = -torch::exp(m.A_log);
    w.D = m.D.view({o.nheads(), 1});
    w.out_t = (m.out_proj->weight * m.norm_weight * sqrt_group).t().contiguous();
    layers_.push_back(std::move(w));
  }
}

void Mamba2Stream::reset() {
  allocate();
}

// Cached rows of consecutive bars `x` [m, input_dim]: [raw x | u | z | pre-conv xBC | dt], all
// position-wise; [z | xBC | dt] is layer 1's in-projection row as the fused kernel reads it.
torch::Tensor Mamba2Stream::bar_rows(const torch::Tensor& x) {
  const auto& w = layers_.front();
  auto u = torch::addmm(embed_b_, x, embed_t_);
  auto p = torch::mm(rms_unit(u, block_of(net_, 0).norm->eps), w.in_t);
  return torch::cat({x, u, p}, 1);
}

void Mamba2Stream::rebuild_cache() {
  const int64_t n = filled(), W = window_;
  if (n == 0) return;
  const int64_t first = bars_ - n;
  auto rows = bar_rows(buf_.narrow(0, first % W, n).narrow(1, 0, net_->options.input_dim()));
  auto slots = torch::arange(first, bars_, buf_.options().dtype(torch::kLong)) % W;
  buf_.index_copy_(0, torch::cat({slots, slots + W}), torch::cat({rows, rows}));
}

torch::Tensor Mamba2Stream::push(const torch::Tensor& x_t) {
  FOXHUNT_CHECK(!net_->is_training(), "mamba2",
                "stream: expected the network in eval mode; call net->eval() first");
  c10::InferenceMode guard;
  const auto& wt = net_->embed->weight;
  if (stamp_.changed()) {  // new weights, device or dtype: re-derive, recompute the cache
    if (buf_.device() != wt.device() || buf_.scalar_type() != wt.scalar_type()) {
      auto old = buf_.to(wt.device(), wt.scalar_type());
      const int64_t bars = bars_;
      allocate();
      buf_.copy_(old);
      bars_ = bars;
    } else {
      prepare();
    }
    rebuild_cache();
  }
  const auto& o = net_->options;
  check_stream_input("mamba2", "stream bar", x_t, {o.input_dim()}, wt.device());
  FOXHUNT_CHECK(x_t.scalar_type() == wt.scalar_type(), "mamba2", "stream bar: expected dtype ",
                c10::toString(wt.scalar_type()), " (the module's), got ",
                c10::toString(x_t.scalar_type()));
  const int64_t W = window_, D = o.d_model(), di = o.d_inner(), C = o.conv_dim(), H = o.nheads();
  const int64_t I = o.input_dim(), off_u = I, off_sz = off_u + D, off_pre = off_sz + di;
  const int64_t off_delta = off_pre + C;

  const int64_t slot = bars_ % W;
  buf_.view({2, W, width_}).select(1, slot).copy_(bar_rows(x_t.view({1, I})).expand({2, width_}));
  ++bars_;

  const int64_t n = filled();
  auto win = buf_.narrow(0, (bars_ - n) % W, n);  // the window's rows, oldest first
  // The masks of an n-bar window are the top-left n x n blocks of the full window's.
  const auto block = [&](const torch::Tensor& m) {
    return n == W ? m : m.narrow(0, 0, n).narrow(1, 0, n);
  };
  auto u = win.narrow(1, off_u, D);  // residual stream entering layer 1
  const size_t L = layers_.size();
  torch::Tensor h;  // [1, D] residual stream after the last layer at the last position

  bool fused = true;  // CPU fp32 (any window length: the scan is one quadratic block either way)
  for (size_t l = 0; l < L && fused; ++l)
    fused = mamba2_detail::core_weights_fit(*block_of(net_, l).mixer, buf_);
  if (fused) {
    // The fused kernel from each layer's in-projection rows (layer 1's straight from the cache,
    // rows width_ apart); out_t has the gated norm's weight and sqrt(group) folded in, so the
    // kernel normalises without the weight and scales by 1 / sqrt(group) (rms_unit's form).
    const int64_t R = di + C + H, gs = di / o.ngroups();
    for (size_t l = 0; l < L; ++l) {
      const auto& w = layers_[l];
      const bool last = l + 1 == L;
      auto cw = mamba2_detail::core_weights(*block_of(net_, l).mixer);
      cw.norm_weight = nullptr;
      cw.norm_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(gs)));
      torch::Tensor p;
      const float* rows = win.data_ptr<float>() + off_sz;
      int64_t stride = width_;
      if (l > 0) {
        p = torch::mm(rms_unit(u, block_of(net_, l).norm->eps), w.in_t);
        rows = p.data_ptr<float>();
        stride = R;
      }
      auto g = torch::empty({last ? 1 : n, di}, buf_.options());
      kernels::mamba2_mixer_core(cw, rows, 1, n, g.data_ptr<float>(), stride, last);
      if (last)
        h = torch::addmm(u.narrow(0, n - 1, 1), g, w.out_t);
      else
        u = torch::addmm(u, g, w.out_t);
    }
    auto y = torch::addmm(head_b_, rms_unit(h, net_->norm_f->eps), head_t_);
    return y.view({o.horizon(), static_cast<int64_t>(o.quantiles().size())});
  }

  const auto not_lower = block(not_lower_), upper = block(upper_);
  const auto strict_upper = block(strict_upper_);
  for (size_t l = 0; l < L; ++l) {
    const auto& w = layers_[l];
    const bool last = l + 1 == L;
    LayerRows r;
    if (l == 0) {  // from the cache (the raw in-projection row)
      r.sz = win.narrow(1, off_sz, di);
      if (last) r.sz = r.sz.narrow(0, n - 1, 1);
      r.sz = F::silu(r.sz);
      r.xbc = conv_window(win.narrow(1, off_pre, C), w.taps, w.conv_b);
      r.delta = F::softplus(win.narrow(1, off_delta, H) + w.dt_bias);
    } else {
      auto nu = rms_unit(u, block_of(net_, l).norm->eps);
      torch::Tensor pd;  // [n, C + H]
      if (last) {        // z only at the last position
        pd = torch::mm(nu, w.in_t.narrow(1, di, C + H));
        r.sz = F::silu(torch::mm(nu.narrow(0, n - 1, 1), w.in_t.narrow(1, 0, di)));
      } else {
        auto p = torch::mm(nu, w.in_t);
        r.sz = F::silu(p.narrow(1, 0, di));
        pd = p.narrow(1, di, C + H);
      }
      r.xbc = conv_window(pd.narrow(1, 0, C), w.taps, w.conv_b);
      r.delta = F::softplus(pd.narrow(1, C, H) + w.dt_bias);
    }
    if (last) {
      h = torch::addmm(u.narrow(0, n - 1, 1), scan_last(o, w.A, w.D, r, strict_upper), w.out_t);
    } else {
      u = torch::addmm(u, scan_rows(o, w.A, w.D, r, not_lower, upper), w.out_t);
    }
  }
  auto y = torch::addmm(head_b_, rms_unit(h, net_->norm_f->eps), head_t_);
  return y.view({o.horizon(), static_cast<int64_t>(o.quantiles().size())});
}

}  // namespace foxhunt::models
