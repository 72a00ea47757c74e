#include "foxhunt/train/dqn_trainer.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "foxhunt/core/error.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/options_io.h"
#include "foxhunt/train/checkpointing.h"
#include "foxhunt/train/fused_adam.h"
#include "foxhunt/train/loop.h"
#include "foxhunt/train/state_io.h"

namespace foxhunt::train {

// ---- options ----------------------------------------------------------------------------------

// The one field list of DqnTrainerOptions: its JSON writer, reader and known keys.
FOXHUNT_OPTIONS_JSON(DqnTrainerOptions, "dqn_trainer", dqn_trainer_options_from_json, total_steps,
                     learning_rate, batch_size, buffer_size, learning_starts, gamma,
                     target_update_interval, tau, train_freq, gradient_steps, exploration_fraction,
                     exploration_initial_eps, exploration_final_eps, max_grad_norm, huber_delta,
                     hidden, double_dqn, eval_interval, eval_episodes, keep_best, seed, device)

namespace {
void check_options(const DqnTrainerOptions& o) {
  const char* c = "dqn_trainer";
  FOXHUNT_CHECK(o.total_steps() > 0, c, "expected total_steps > 0, got ", o.total_steps());
  FOXHUNT_CHECK(o.learning_rate() > 0, c, "expected learning_rate > 0, got ", o.learning_rate());
  FOXHUNT_CHECK(o.batch_size() > 0, c, "expected batch_size > 0, got ", o.batch_size());
  FOXHUNT_CHECK(o.buffer_size() >= o.batch_size(), c, "expected buffer_size >= batch_size (",
                o.batch_size(), "), got ", o.buffer_size());
  FOXHUNT_CHECK(o.learning_starts() >= 0, c, "expected learning_starts >= 0, got ",
                o.learning_starts());
  FOXHUNT_CHECK(o.gamma() >= 0 && o.gamma() <= 1, c, "expected gamma in [0, 1], got ", o.gamma());
  FOXHUNT_CHECK(o.target_update_interval() > 0, c, "expected target_update_interval > 0, got ",
                o.target_update_interval());
  FOXHUNT_CHECK(o.tau() > 0 && o.tau() <= 1, c, "expected tau in (0, 1], got ", o.tau());
  FOXHUNT_CHECK(o.train_freq() > 0 && o.gradient_steps() > 0, c,
                "expected train_freq > 0 and gradient_steps > 0, got ", o.train_freq(), " and ",
                o.gradient_steps());
  FOXHUNT_CHECK(o.exploration_fraction() >= 0 && o.exploration_fraction() <= 1, c,
                "expected exploration_fraction in [0, 1], got ", o.exploration_fraction());
  FOXHUNT_CHECK(o.huber_delta() > 0, c, "expected huber_delta > 0, got ", o.huber_delta());
  FOXHUNT_CHECK(o.eval_interval() >= 0 && o.eval_episodes() > 0, c,
                "expected eval_interval >= 0 and eval_episodes > 0, got ", o.eval_interval(),
                " and ", o.eval_episodes());
}
}  // namespace

// ---- math -------------------------------------------------------------------------------------

double linear_epsilon(int64_t step, int64_t total, double fraction, double start, double end) {
  const double span = fraction * static_cast<double>(total);
  if (span <= 0) return end;
  const double progress = std::min(1.0, static_cast<double>(step) / span);
  return start + progress * (end - start);
}

torch::Tensor dqn_targets(const torch::Tensor& rewards, const torch::Tensor& terminated,
                          const torch::Tensor& q_next_online, const torch::Tensor& q_next_target,
                          double gamma, bool double_dqn) {
  FOXHUNT_CHECK(
      q_next_target.dim() == 2 && rewards.dim() == 1 && terminated.dim() == 1 &&
          rewards.size(0) == q_next_target.size(0) && terminated.size(0) == q_next_target.size(0),
      "dqn_trainer", "targets: expected rewards/terminated [batch] and q [batch, actions], got ",
      models::shape_str(rewards.sizes().vec()), ", ", models::shape_str(terminated.sizes().vec()),
      ", ", models::shape_str(q_next_target.sizes().vec()));
  torch::Tensor best;
  if (double_dqn) {
    FOXHUNT_CHECK(q_next_online.defined() && q_next_online.sizes() == q_next_target.sizes(),
                  "dqn_trainer", "targets: Double DQN needs q_next_online of shape ",
                  models::shape_str(q_next_target.sizes().vec()));
    // Select with the online network, evaluate with the target network.
    auto a_star = q_next_online.argmax(1, /*keepdim=*/true);
    best = q_next_target.gather(1, a_star).squeeze(1);
  } else {
    best = std::get<0>(q_next_target.max(1));
  }
  return rewards + gamma * (1.0 - terminated) * best;
}

// ---- replay buffer ----------------------------------------------------------------------------

std::uint64_t ReplayBuffer::storage_bytes(int64_t capacity, int64_t obs_size) {
  const auto n = static_cast<std::uint64_t>(capacity);
  return n * (2 * static_cast<std::uint64_t>(obs_size) * sizeof(float) + 2 * sizeof(float) +
              sizeof(int64_t));
}

namespace {
int64_t checked_capacity(int64_t capacity, int64_t obs_size) {
  FOXHUNT_CHECK(capacity > 0 && obs_size > 0, "replay",
                "expected capacity > 0 and obs_size > 0, got ", capacity, " and ", obs_size);
  return capacity;
}
}  // namespace

ReplayBuffer::ReplayBuffer(int64_t capacity, int64_t obs_size)
    : reservation_("dqn/replay_buffer",
                   storage_bytes(checked_capacity(capacity, obs_size), obs_size)),
      capacity_(capacity),
      obs_size_(obs_size) {
  const auto n = static_cast<size_t>(capacity);
  obs_.resize(n * static_cast<size_t>(obs_size));
  next_obs_.resize(n * static_cast<size_t>(obs_size));
  rewards_.resize(n);
  terminated_.resize(n);
  actions_.resize(n);
}

void ReplayBuffer::add(const std::vector<float>& obs, int64_t action, double reward,
                       const std::vector<float>& next_obs, bool terminated) {
  FOXHUNT_CHECK(static_cast<int64_t>(obs.size()) == obs_size_ &&
                    static_cast<int64_t>(next_obs.size()) == obs_size_,
                "replay", "expected observations of size ", obs_size_, ", got ", obs.size(),
                " and ", next_obs.size());
  const auto i = static_cast<size_t>(pos_);
  const auto w = static_cast<size_t>(obs_size_);
  std::copy(obs.begin(), obs.end(), obs_.begin() + static_cast<std::ptrdiff_t>(i * w));
  std::copy(next_obs.begin(), next_obs.end(),
            next_obs_.begin() + static_cast<std::ptrdiff_t>(i * w));
  actions_[i] = action;
  rewards_[i] = static_cast<float>(reward);
  terminated_[i] = terminated ? 1.0f : 0.0f;
  pos_ = (pos_ + 1) % capacity_;
  size_ = std::min(size_ + 1, capacity_);
}

ReplayBuffer::Sample ReplayBuffer::sample(int64_t batch, Rng& rng,
                                          const torch::Device& device) const {
  FOXHUNT_CHECK(size_ > 0, "replay", "cannot sample from an empty buffer");
  const auto w = static_cast<size_t>(obs_size_);
  auto obs = torch::empty({batch, obs_size_}, torch::kFloat);
  auto next = torch::empty({batch, obs_size_}, torch::kFloat);
  auto act = torch::empty({batch}, torch::kLong);
  auto rew = torch::empty({batch}, torch::kFloat);
  auto term = torch::empty({batch}, torch::kFloat);
  float* po = obs.data_ptr<float>();
  float* pn = next.data_ptr<float>();
  int64_t* pa = act.data_ptr<int64_t>();
  float* pr = rew.data_ptr<float>();
  float* pt = term.data_ptr<float>();
  for (int64_t b = 0; b < batch; ++b) {
    const auto i = static_cast<size_t>(rng.uniform_int(static_cast<uint64_t>(size_)));
    std::memcpy(po + b * obs_size_, obs_.data() + i * w, w * sizeof(float));
    std::memcpy(pn + b * obs_size_, next_obs_.data() + i * w, w * sizeof(float));
    pa[b] = actions_[i];
    pr[b] = rewards_[i];
    pt[b] = terminated_[i];
  }
  return {obs.to(device), act.to(device), rew.to(device), next.to(device), term.to(device)};
}

namespace {
// The first `rows` rows (of `width` elements each) of `v`.
template <typename T>
void append_rows(std::string& out, const std::vector<T>& v, size_t rows, size_t width) {
  out.append(reinterpret_cast<const char*>(v.data()), rows * width * sizeof(T));
}
template <typename T>
void read_rows(const std::string& in, size_t& off, std::vector<T>& v, size_t rows, size_t width) {
  std::memcpy(v.data(), in.data() + off, rows * width * sizeof(T));
  off += rows * width * sizeof(T);
}
}  // namespace

// Only the filled slots [0, size) are written, in slot order: a buffer that has not wrapped has
// filled exactly these (pos == size), and a wrapped one is full, so it is written whole and with
// its write position. Slot order is what sample() indexes, so the restored buffer draws the same
// transitions. A 100k-slot buffer after 64 steps is then 64 rows, not 100k.
std::string ReplayBuffer::to_bytes() const {
  std::string out;
  const int64_t head[4] = {capacity_, obs_size_, size_, pos_};
  const auto rows = static_cast<size_t>(size_), w = static_cast<size_t>(obs_size_);
  out.reserve(sizeof(head) + storage_bytes(size_, obs_size_));
  out.append(reinterpret_cast<const char*>(head), sizeof(head));
  append_rows(out, obs_, rows, w);
  append_rows(out, next_obs_, rows, w);
  append_rows(out, rewards_, rows, 1);
  append_rows(out, terminated_, rows, 1);
  append_rows(out, actions_, rows, 1);
  return out;
}

void ReplayBuffer::from_bytes(const std::string& bytes, const std::string& source) {
  int64_t head[4];
  FOXHUNT_CHECK(bytes.size() >= sizeof(head), "checkpoint", "'", source,
                "': replay buffer blob is truncated");
  std::memcpy(head, bytes.data(), sizeof(head));
  FOXHUNT_CHECK(head[0] == capacity_ && head[1] == obs_size_, "checkpoint", "'", source,
                "': replay buffer of capacity ", head[0], " x obs ", head[1], ", expected ",
                capacity_, " x ", obs_size_);
  // A ring that has not wrapped writes next at its size.
  FOXHUNT_CHECK(head[2] >= 0 && head[2] <= capacity_ && head[3] >= 0 && head[3] < capacity_ &&
                    (head[2] == capacity_ || head[3] == head[2]),
                "checkpoint", "'", source, "': replay buffer counters out of range (size ", head[2],
                ", position ", head[3], ", capacity ", capacity_, ")");
  // The filled slots (to_bytes), or every slot: checkpoints written before the buffer stored
  // only its filled part hold the whole capacity, and still resume.
  const std::uint64_t filled = sizeof(head) + storage_bytes(head[2], obs_size_);
  const std::uint64_t whole = sizeof(head) + storage_bytes(capacity_, obs_size_);
  FOXHUNT_CHECK(bytes.size() == filled || bytes.size() == whole, "checkpoint", "'", source,
                "': replay buffer blob has ", bytes.size(), " bytes, expected ", filled, " (its ",
                head[2], " transitions) or ", whole, " (all ", capacity_, " slots)");
  size_ = head[2];
  pos_ = head[3];
  const auto rows = static_cast<size_t>(bytes.size() == filled ? size_ : capacity_);
  const auto w = static_cast<size_t>(obs_size_);
  // Slots past the stored rows keep what they held: sample() never reads at or past size_, and
  // add() overwrites them before size_ reaches them.
  size_t off = sizeof(head);
  read_rows(bytes, off, obs_, rows, w);
  read_rows(bytes, off, next_obs_, rows, w);
  read_rows(bytes, off, rewards_, rows, 1);
  read_rows(bytes, off, terminated_, rows, 1);
  read_rows(bytes, off, actions_, rows, 1);
}

// ---- trainer ----------------------------------------------------------------------------------

namespace {
std::unique_ptr<Env> make_checked_env(const EnvFactory& f) {
  FOXHUNT_CHECK(static_cast<bool>(f), "dqn_trainer", "expected an environment factory");
  auto env = f(0);
  FOXHUNT_CHECK(env != nullptr, "dqn_trainer", "the environment factory returned null");
  return env;
}

torch::Tensor obs_tensor(const std::vector<float>& obs, const torch::Device& device) {
  auto t = torch::empty({1, static_cast<int64_t>(obs.size())}, torch::kFloat);
  std::memcpy(t.data_ptr<float>(), obs.data(), obs.size() * sizeof(float));
  return t.to(device);
}
}  // namespace

DqnTrainer::DqnTrainer(DqnTrainerOptions options, EnvFactory make_env, const std::string& model)
    : o_(std::move(options)),
      make_env_(make_env),
      env_(make_checked_env(make_env)),
      buffer_((check_options(o_), o_.buffer_size()), env_->observation_size()),
      rng_(derive_seed(o_.seed(), SeedStream::kTrainerRng)) {
  build_model(models::TrainerKind::kDqn, model,
              {env_->observation_size(), o_.hidden(), env_->action_count()}, o_.seed(), o_.device(),
              "dqn_trainer");
  online_ = model_->as_value_policy();
  FOXHUNT_CHECK(online_ != nullptr, "dqn_trainer", "model '", model_->name(),
                "': expected a model with action values (Model::as_value_policy), got one "
                "without");
  // The target network: a clone, drawing from LibTorch's generator as Cloneable::clone does.
  target_model_ = online_->clone_model(o_.device());
  target_ = target_model_->as_value_policy();
  FOXHUNT_INTERNAL_ASSERT(target_ != nullptr, "the clone of '", model_->name(),
                          "' has no action values");
  for (auto& p : target_model_->module().parameters()) p.set_requires_grad(false);
  target_model_->module().eval();
  optimizer_ = std::make_unique<FusedAdam>(model_->module().parameters(),
                                           torch::optim::AdamOptions(o_.learning_rate()));
  if (o_.eval_interval() > 0) {
    eval_env_ = make_env_(kEvalEnvIndex);
    FOXHUNT_CHECK(eval_env_ && eval_env_->observation_size() == env_->observation_size() &&
                      eval_env_->action_count() == env_->action_count(),
                  "dqn_trainer", "the evaluation environment does not match the training one");
  }
  envs_reservation_ = memory::ExternalReservation(
      "dqn/envs", env_->host_bytes() + (eval_env_ ? eval_env_->host_bytes() : 0));
}

DqnTrainer::~DqnTrainer() = default;

void DqnTrainer::set_data_parallel(std::shared_ptr<dist::Communicator> comm) {
  const auto seed =
      attach_data_parallel(std::move(comm), {&model_->module(), &target_model_->module()},
                           model_->module().parameters(), o_.seed());
  if (!seed) return;  // rank 0 keeps its streams
  // This rank's own experience: exploration, replay sampling and episodes from its seed.
  rng_ = Rng(derive_seed(*seed, SeedStream::kTrainerRng));
  if (started_) {
    obs_ = env_->reset(derive_seed(*seed, SeedStream::kEpisodeReset, static_cast<uint64_t>(step_)));
    episode_return_ = 0.0;
    episode_length_ = 0;
  }
}

double DqnTrainer::epsilon() const {
  return linear_epsilon(step_, o_.total_steps(), o_.exploration_fraction(),
                        o_.exploration_initial_eps(), o_.exploration_final_eps());
}

int64_t DqnTrainer::greedy_action(const std::vector<float>& obs) {
  torch::NoGradGuard no_grad;
  return online_->action_values(obs_tensor(obs, o_.device())).argmax(1).item<int64_t>();
}

void DqnTrainer::update_target(double tau) {
  torch::NoGradGuard no_grad;
  auto src = model_->module().parameters();
  auto dst = target_model_->module().parameters();
  for (size_t i = 0; i < src.size(); ++i) {
    if (tau >= 1.0)
      dst[i].copy_(src[i]);
    else
      dst[i].mul_(1.0 - tau).add_(src[i], tau);
  }
}

double DqnTrainer::train_step() {
  prepare_update(o_.batch_size());
  return apply_update();
}

void DqnTrainer::prepare_update(int64_t batch) {
  FOXHUNT_CHECK(batch > 0, "dqn_trainer", "update batch: expected > 0, got ", batch);
  auto s = buffer_.sample(batch, rng_, o_.device());
  torch::Tensor y;
  {
    torch::NoGradGuard no_grad;
    auto q_next_target = target_->action_values(s.next_obs);
    auto q_next_online = o_.double_dqn() ? online_->action_values(s.next_obs) : torch::Tensor();
    y = dqn_targets(s.rewards, s.terminated, q_next_online, q_next_target, o_.gamma(),
                    o_.double_dqn());
  }
  auto q = online_->action_values(s.obs).gather(1, s.actions.unsqueeze(1)).squeeze(1);
  auto loss = torch::nn::functional::huber_loss(
      q, y, torch::nn::functional::HuberLossFuncOptions().delta(o_.huber_delta()));
  optimizer_->zero_grad();
  if (dp_) dp_->begin(1.0);  // every rank's batch has batch_size transitions
  loss.backward();
  if (dp_) dp_->finish();
  if (o_.max_grad_norm() > 0)
    torch::nn::utils::clip_grad_norm_(model_->module().parameters(), o_.max_grad_norm());
  pending_loss_ = loss.detach();
}

double DqnTrainer::apply_update() {
  FOXHUNT_INTERNAL_ASSERT(pending_loss_.defined(), "apply_update without prepare_update");
  optimizer_->step();
  ++updates_;
  if (dp_) dp_->after_step(updates_);
  const double l = pending_loss_.item<double>();
  pending_loss_ = torch::Tensor();
  return l;
}

nlohmann::json DqnTrainer::metrics_line(double elapsed, double rate) const {
  nlohmann::json j = {
      {"algo", algo()},
      {"step", step_},
      {"total_steps", o_.total_steps()},
      {"episodes", episodes_},
      {"return_mean", json_number(returns_.mean())},
      {"episode_length_mean", json_number(lengths_.mean())},
      {"loss", loss_count_ > 0 ? json_number(loss_sum_ / static_cast<double>(loss_count_))
                               : json_number(last_loss_)},
      {"epsilon", epsilon()},
      {"lr", o_.learning_rate()},
      {"updates", updates_},
      {"buffer", buffer_.size()},
      {"samples_per_s", rate},
      {"elapsed_s", elapsed}};
  add_evaluation_metrics(j);
  return j;
}

TrainResult DqnTrainer::train(const RunConfig& run) {
  RunSession session(run, algo(), algo(), o_.total_steps(), step_);
  // Environment steps are cheap: ranks agree on stopping every 64 of them.
  if (dp_) session.set_stop_agreement([this](bool s) { return dp_->agree_stop(s); }, 64);
  model_->module().train();

  if (!started_) {
    obs_ = env_->reset(derive_seed(stream_seed(o_.seed()), SeedStream::kFirstReset));
    started_ = true;
  }
  const auto n_actions = static_cast<uint64_t>(env_->action_count());
  auto write_log = [&] {
    auto line = metrics_line(session.elapsed(), session.rate(step_));
    const std::string extra =
        fmt::format("return {:.1f}  loss {:.4g}  eps {:.3f}", returns_.mean(),
                    line["loss"].is_null() ? NAN : line["loss"].get<double>(), epsilon());
    session.log(line, step_, extra);
    if (loss_count_ > 0) last_loss_ = loss_sum_ / static_cast<double>(loss_count_);
    loss_sum_ = 0.0;
    loss_count_ = 0;
  };
  auto checkpoint = [&] { session.checkpoint([&](const auto& p) { save_checkpoint(p); }); };

  while (step_ < o_.total_steps() && !session.should_stop(step_)) {
    int64_t action;
    if (step_ < o_.learning_starts()) {
      action = static_cast<int64_t>(rng_.uniform_int(n_actions));
    } else if (rng_.uniform() < epsilon()) {
      action = static_cast<int64_t>(rng_.uniform_int(n_actions));
    } else {
      action = greedy_action(obs_);
    }
    EnvStep s = env_->step(action);
    // Truncated episodes keep bootstrapping: only `terminated` cuts the TD target.
    buffer_.add(obs_, action, s.reward, s.obs, s.terminated);
    episode_return_ += s.reward;
    ++episode_length_;
    if (s.done()) {
      returns_.add(episode_return_);
      lengths_.add(static_cast<double>(episode_length_));
      ++episodes_;
      episode_return_ = 0.0;
      episode_length_ = 0;
      obs_ = env_->reset();
    } else {
      obs_ = std::move(s.obs);
    }
    ++step_;

    if (step_ % o_.target_update_interval() == 0) update_target(o_.tau());
    if (step_ % o_.train_freq() == 0 && step_ > o_.learning_starts()) {
      for (int64_t g = 0; g < o_.gradient_steps(); ++g) {
        loss_sum_ += train_step();
        ++loss_count_;
      }
    }
    evaluate_when_due(step_ - 1, o_, eval_env_.get(), model_->module());
    if (session.log_due(step_ - 1, step_)) write_log();
    if (session.checkpoint_due(step_ - 1, step_)) checkpoint();
    session.update(step_);
  }
  if (session.logging() && step_ % run.log_interval != 0) write_log();
  const bool completed = step_ >= o_.total_steps();
  if (dp_) dp_->check_now(updates_);
  // The final weights are the best evaluated ones (the checkpoint then holds them too).
  if (completed && o_.keep_best() && best_.restore(model_->module())) update_target(1.0);
  checkpoint();
  auto metrics = metrics_line(session.elapsed(), session.rate(step_));
  metrics["loss"] = json_number(last_loss_);
  return finish_run(session, completed, std::move(metrics));
}

// The resumable state, listed once: the checkpoint writes and reads exactly these fields.
template <typename F>
void DqnTrainer::visit_state(F&& f) {
  visit_fields(f, "step", step_, "episodes", episodes_, "updates", updates_, "started", started_,
               "obs", obs_, "episode_return", episode_return_, "episode_length", episode_length_,
               "returns", returns_, "lengths", lengths_, "loss_sum", loss_sum_, "loss_count",
               loss_count_, "last_loss", last_loss_, "rng", rng_);
}

void DqnTrainer::save_checkpoint(const std::string& path) {
  nlohmann::json t = checkpoint_header(to_json(o_), *env_);
  visit_state(StateWriter(t));
  auto env_state = env_->save_state();
  t["env_state"] = env_state ? nlohmann::json(*env_state) : nlohmann::json(nullptr);
  Container c = checkpoint_container(t, *optimizer_);
  c.blobs["target"] = models::module_to_bytes(target_model_->module());
  c.blobs["replay"] = buffer_.to_bytes();
  write_container(path, c);
}

void DqnTrainer::load_checkpoint(const Container& c, const std::string& path) {
  try {
    const auto& t = restore_common(c, path, *env_, *optimizer_);
    models::module_from_bytes(model_->module(), require_blob(c, "module", path), path);
    models::module_from_bytes(target_model_->module(), require_blob(c, "target", path), path);
    buffer_.from_bytes(require_blob(c, "replay", path), path);
    visit_state(StateReader(t));
    if (started_ && !t.at("env_state").is_null()) {
      env_->load_state(t.at("env_state").get<std::string>());
    } else if (started_) {
      // The environment cannot restore its state: restart the episode from a derived seed.
      obs_ = env_->reset(
          derive_seed(o_.seed(), SeedStream::kEpisodeReset, static_cast<uint64_t>(step_)));
      episode_return_ = 0.0;
      episode_length_ = 0;
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError("checkpoint", "'" + path + "': bad trainer state (" + e.what() + ")");
  }
}

}  // namespace foxhunt::train
