#include "foxhunt/train/data_parallel.h"

#include <cmath>

#include "foxhunt/core/random.h"

namespace foxhunt::train {

uint64_t rank_seed(uint64_t seed, int64_t rank) {
  return rank == 0 ? seed : derive_seed(seed, kRankSeedStream + static_cast<uint64_t>(rank));
}

std::vector<torch::Tensor> state_tensors(const std::vector<torch::nn::Module*>& modules) {
  std::vector<torch::Tensor> out;
  for (auto* m : modules) {
    for (auto& p : m->parameters()) out.push_back(p);
    for (auto& b : m->buffers()) out.push_back(b);
  }
  return out;
}

namespace {
const std::shared_ptr<dist::Communicator>& checked(const std::shared_ptr<dist::Communicator>& c) {
  FOXHUNT_INTERNAL_ASSERT(c != nullptr, "DataParallel without a communicator");
  return c;
}
}  // namespace

DataParallel::DataParallel(std::shared_ptr<dist::Communicator> comm,
                           const std::vector<torch::nn::Module*>& modules,
                           std::vector<torch::Tensor> params)
    : comm_(checked(comm)),
      params_(state_tensors(modules)),
      sync_((dist::broadcast_from_rank0(*comm_, params_), std::move(params)), comm_,
            dist::bucket_bytes(comm_->options().bucket_mib())) {}

void DataParallel::after_step(int64_t step) {
  const int64_t k = comm_->options().check_interval();
  if (k > 0 && step % k == 0) check_now(step);
}

void DataParallel::check_now(int64_t step) {
  if (last_.step == step && comparisons_ > 0) return;
  last_ = dist::compare_weights(*comm_, params_, step);
  ++comparisons_;
}

bool DataParallel::agree_stop(bool local) {
  return comm_->allgather(local ? 1 : 0) !=
         std::vector<int64_t>(static_cast<size_t>(world_size()), 0);
}

nlohmann::json DataParallel::summary() const {
  return {{"world_size", comm_->world_size()},
          {"rank", comm_->rank()},
          {"backend", comm_->backend()},
          {"buckets", sync_.bucket_count()},
          {"bucket_bytes", sync_.resident_bytes()},
          {"steps_synchronized", sync_.steps()},
          {"buckets_launched_during_backward", sync_.launched_during_backward()},
          {"collectives", comm_->collectives()},
          {"allreduced_bytes", comm_->allreduced_bytes()},
          {"communication_wait_s", comm_->wait_seconds()},
          {"gradient_sync_s", sync_.finish_seconds()},
          {"weight_checks", comparisons_},
          {"last_weight_check", comparisons_ > 0 ? last_.to_json() : nlohmann::json(nullptr)}};
}

}  // namespace foxhunt::train
