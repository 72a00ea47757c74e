#include "foxhunt/dist/gradient_sync.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include "foxhunt/memory/ledger.h"

namespace foxhunt::dist {

namespace {
constexpr size_t kNone = std::numeric_limits<size_t>::max();
}

int64_t bucket_bytes(double mib) {
  return std::max<int64_t>(1, static_cast<int64_t>(std::llround(mib * 1048576.0)));
}

std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& params,
                                              int64_t bucket_bytes) {
  std::vector<std::vector<size_t>> buckets;
  int64_t current = 0;
  torch::ScalarType dtype = torch::kFloat;
  torch::Device device = torch::kCPU;
  for (size_t k = params.size(); k-- > 0;) {
    const auto& p = params[k];
    if (!p.defined() || !p.requires_grad()) continue;
    const int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    const bool fresh = buckets.empty() || p.scalar_type() != dtype || p.device() != device ||
                       (current > 0 && current + bytes > bucket_bytes);
    if (fresh) {
      buckets.emplace_back();
      current = 0;
      dtype = p.scalar_type();
      device = p.device();
    }
    buckets.back().push_back(k);
    current += bytes;
  }
  return buckets;
}

GradientSync::GradientSync(std::vector<torch::Tensor> params, std::shared_ptr<Communicator> comm,
                           int64_t bucket_bytes)
    : params_(std::move(params)), comm_(std::move(comm)) {
  FOXHUNT_CHECK(bucket_bytes > 0, "dist", "bucket size: expected > 0 bytes, got ", bucket_bytes);
  bucket_of_.assign(params_.size(), kNone);
  slot_of_.assign(params_.size(), kNone);
  seen_.assign(params_.size(), 0);
  {
    memory::MemoryScope scope(kBucketScope);
    auto plan = plan_buckets(params_, bucket_bytes);
    for (size_t bi = 0; bi < plan.size(); ++bi) {
      const auto& idx = plan[bi];
      Bucket b;
      int64_t n = 0;
      for (size_t k : idx) {
        bucket_of_[k] = buckets_.size();
        slot_of_[k] = b.params.size();
        b.params.push_back(k);
        b.offsets.push_back(n);
        n += params_[k].numel();
      }
      const auto& first = params_[idx.front()];
      // The sample weight rides in one extra element of the last bucket (the last to launch):
      // one collective per step instead of two. Counts up to 2^24 are exact in float32.
      const bool carries_weight = bi + 1 == plan.size() && (first.scalar_type() == torch::kFloat ||
                                                            first.scalar_type() == torch::kDouble);
      b.flat =
          torch::zeros({n + (carries_weight ? 1 : 0)},
                       torch::TensorOptions().dtype(first.scalar_type()).device(first.device()));
      if (carries_weight) weight_slot_ = b.flat.narrow(0, n, 1);
      buckets_.push_back(std::move(b));
    }
    if (!weight_slot_.defined())
      weight_sum_ = torch::zeros({1}, torch::TensorOptions()
                                          .dtype(torch::kDouble)
                                          .device(params_.empty() ? torch::Device(torch::kCPU)
                                                                  : params_.front().device()));
  }
  // The hook sees the gradient backward computed for the parameter (the sum over all its uses)
  // before it is accumulated into .grad.
  for (size_t k = 0; k < params_.size(); ++k) {
    if (bucket_of_[k] == kNone) continue;
    hook_ids_.push_back(
        params_[k].register_hook([this, k](const torch::Tensor& grad) { on_gradient(k, grad); }));
  }
}

GradientSync::~GradientSync() {
  size_t h = 0;
  for (size_t k = 0; k < params_.size(); ++k)
    if (bucket_of_[k] != kNone) params_[k].remove_hook(hook_ids_[h++]);
}

int64_t GradientSync::bucket_bytes_total() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += b.flat.numel() * static_cast<int64_t>(b.flat.element_size());
  return n;
}

int64_t GradientSync::resident_bytes() const {
  return bucket_bytes_total() + (weight_sum_.defined() ? 8 : 0);
}

void GradientSync::begin(double weight) {
  FOXHUNT_CHECK(weight >= 0 && std::isfinite(weight), "dist",
                "gradient weight: expected a finite value >= 0, got ", weight);
  armed_ = true;
  weight_ = weight;
  next_launch_ = 0;
  std::fill(seen_.begin(), seen_.end(), 0);
  for (auto& b : buckets_) {
    b.filled = 0;
    b.launched = false;
  }
  if (weight_slot_.defined()) {
    weight_slot_.fill_(weight);
  } else {
    weight_sum_.fill_(weight);
    if (comm_) weight_work_ = comm_->allreduce_sum_async(weight_sum_);
  }
}

void GradientSync::on_gradient(size_t k, const torch::Tensor& grad) {
  if (!armed_ || seen_[k] || !grad.defined()) return;
  torch::NoGradGuard no_grad;
  auto& b = buckets_[bucket_of_[k]];
  const size_t s = slot_of_[k];
  auto dst = b.flat.narrow(0, b.offsets[s], params_[k].numel());
  dst.copy_(grad.reshape({-1}));
  if (weight_ != 1.0) dst.mul_(weight_);
  seen_[k] = 1;
  if (++b.filled == b.params.size()) launch_ready(true);
}

void GradientSync::launch(Bucket& b) {
  b.launched = true;
  if (comm_) b.work = comm_->allreduce_sum_async(b.flat);
}

void GradientSync::launch_ready(bool from_hook) {
  while (next_launch_ < buckets_.size() &&
         buckets_[next_launch_].filled == buckets_[next_launch_].params.size()) {
    launch(buckets_[next_launch_++]);
    if (from_hook) ++launched_early_;
  }
}

void GradientSync::finish() {
  FOXHUNT_INTERNAL_ASSERT(armed_, "GradientSync::finish without begin");
  const auto t0 = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  armed_ = false;
  // Parameters whose hook did not fire (no gradient this step, or no backward on this rank)
  // contribute what .grad holds, or zeros.
  for (auto& b : buckets_) {
    if (b.launched) continue;
    for (size_t s = 0; s < b.params.size(); ++s) {
      const size_t k = b.params[s];
      if (seen_[k]) continue;
      auto dst = b.flat.narrow(0, b.offsets[s], params_[k].numel());
      const auto& g = params_[k].grad();
      if (g.defined())
        dst.copy_(g.reshape({-1})).mul_(weight_);
      else
        dst.zero_();
      seen_[k] = 1;
      ++b.filled;
    }
  }
  launch_ready(false);
  weight_work_.wait();
  for (auto& b : buckets_) b.work.wait();
  const double total =
      weight_slot_.defined() ? weight_slot_.item<double>() : weight_sum_.item<double>();
  FOXHUNT_ENSURE(total > 0, "dist", "no rank had samples in this step (gradient weights sum to ",
                 total, ")");
  for (auto& b : buckets_) {
    for (size_t s = 0; s < b.params.size(); ++s) {
      auto& p = params_[b.params[s]];
      auto avg = b.flat.narrow(0, b.offsets[s], p.numel()).view(p.sizes());  // not the weight slot
      auto& g = p.mutable_grad();
      if (g.defined())
        g.copy_(avg).div_(total);
      else
        g = avg.div(total);
    }
  }
  ++steps_;
  finish_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace foxhunt::dist
