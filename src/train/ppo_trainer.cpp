#include "foxhunt/train/ppo_trainer.h"
#include <fmt/format.h>

#include "foxhunt/train/fused_adam.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <cstring>

#include "foxhunt/core/error.h"
#include "foxhunt/models/checkpoint.h"
#include "foxhunt/models/options_io.h"
#include "foxhunt/train/checkpointing.h"
#include "foxhunt/train/loop.h"
#include "foxhunt/train/state_io.h"

namespace foxhunt::train {

// ---- options ----------------------------------------------------------------------------------

// The one field list of PpoTrainerOptions: its JSON writer, reader and known keys.
FOXHUNT_OPTIONS_JSON(PpoTrainerOptions, "ppo_trainer", ppo_trainer_options_from_json, total_steps,
                     n_envs, n_steps, batch_size, n_epochs, learning_rate, linear_lr, gamma,
                     gae_lambda, clip_range, linear_clip, ent_coef, vf_coef, max_grad_norm,
                     normalize_advantage, adam_eps, hidden, eval_interval, eval_episodes, keep_best,
                     seed, device)

namespace {
void check_options(const PpoTrainerOptions& o) {
  const char* c = "ppo_trainer";
  FOXHUNT_CHECK(o.total_steps() > 0, c, "expected total_steps > 0, got ", o.total_steps());
  FOXHUNT_CHECK(o.n_envs() > 0 && o.n_steps() > 0, c, "expected n_envs > 0 and n_steps > 0, got ",
                o.n_envs(), " and ", o.n_steps());
  FOXHUNT_CHECK(o.batch_size() > 0, c, "expected batch_size > 0, got ", o.batch_size());
  FOXHUNT_CHECK(o.n_epochs() > 0, c, "expected n_epochs > 0, got ", o.n_epochs());
  FOXHUNT_CHECK(o.learning_rate() > 0, c, "expected learning_rate > 0, got ", o.learning_rate());
  FOXHUNT_CHECK(o.gamma() >= 0 && o.gamma() <= 1 && o.gae_lambda() >= 0 && o.gae_lambda() <= 1, c,
                "expected gamma and gae_lambda in [0, 1], got ", o.gamma(), " and ",
                o.gae_lambda());
  FOXHUNT_CHECK(o.clip_range() > 0, c, "expected clip_range > 0, got ", o.clip_range());
  FOXHUNT_CHECK(o.eval_interval() >= 0 && o.eval_episodes() > 0, c,
                "expected eval_interval >= 0 and eval_episodes > 0, got ", o.eval_interval(),
                " and ", o.eval_episodes());
}
}  // namespace

// ---- GAE --------------------------------------------------------------------------------------

GaeResult compute_gae(const torch::Tensor& rewards, const torch::Tensor& values,
                      const torch::Tensor& ended, const torch::Tensor& last_values, double gamma,
                      double lambda) {
  FOXHUNT_CHECK(
      rewards.dim() == 2 && values.sizes() == rewards.sizes() && ended.sizes() == rewards.sizes() &&
          last_values.dim() == 1 && last_values.size(0) == rewards.size(1),
      "gae", "expected rewards, values, ended [T, N] and last_values [N], got ",
      models::shape_str(rewards.sizes().vec()), ", ", models::shape_str(values.sizes().vec()), ", ",
      models::shape_str(ended.sizes().vec()), ", ", models::shape_str(last_values.sizes().vec()));
  const int64_t T = rewards.size(0), N = rewards.size(1);
  auto r = rewards.to(torch::kCPU, torch::kDouble).contiguous();
  auto v = values.to(torch::kCPU, torch::kDouble).contiguous();
  auto d = ended.to(torch::kCPU, torch::kDouble).contiguous();
  auto lv = last_values.to(torch::kCPU, torch::kDouble).contiguous();
  auto adv = torch::zeros({T, N}, torch::kDouble);
  auto ra = r.accessor<double, 2>();
  auto va = v.accessor<double, 2>();
  auto da = d.accessor<double, 2>();
  auto la = lv.accessor<double, 1>();
  auto aa = adv.accessor<double, 2>();
  for (int64_t n = 0; n < N; ++n) {
    double next_adv = 0.0;
    for (int64_t t = T - 1; t >= 0; --t) {
      const double next_value = t == T - 1 ? la[n] : va[t + 1][n];
      const double keep = 1.0 - da[t][n];
      const double delta = ra[t][n] + gamma * keep * next_value - va[t][n];
      next_adv = delta + gamma * lambda * keep * next_adv;
      aa[t][n] = next_adv;
    }
  }
  auto out_adv = adv.to(rewards.scalar_type());
  return {out_adv, (adv + v).to(rewards.scalar_type())};
}

// ---- trainer ----------------------------------------------------------------------------------

struct PpoTrainer::UpdateStats {
  double loss = 0, approx_kl = 0, clip_fraction = 0, entropy = 0;
  int64_t batches = 0;
};

struct PpoTrainer::Pending {
  models::PolicyOutput out;
  torch::Tensor actions, log_probs, loss;
  double clip = 0;
};

PpoTrainer::PpoTrainer(PpoTrainerOptions options, EnvFactory make_env, const std::string& model)
    : o_(std::move(options)), rng_(derive_seed(o_.seed(), SeedStream::kTrainerRng)) {
  check_options(o_);
  FOXHUNT_CHECK(static_cast<bool>(make_env), "ppo_trainer", "expected an environment factory");
  for (int64_t i = 0; i < o_.n_envs(); ++i) {
    envs_.push_back(make_env(i));
    FOXHUNT_CHECK(envs_.back() != nullptr, "ppo_trainer", "the environment factory returned null");
    FOXHUNT_CHECK(envs_.back()->observation_size() == envs_[0]->observation_size() &&
                      envs_.back()->action_count() == envs_[0]->action_count(),
                  "ppo_trainer", "environment ", i, " has obs ", envs_.back()->observation_size(),
                  " / actions ", envs_.back()->action_count(), ", environment 0 has ",
                  envs_[0]->observation_size(), " / ", envs_[0]->action_count());
  }
  build_model(models::TrainerKind::kPpo, model,
              {envs_[0]->observation_size(), o_.hidden(), envs_[0]->action_count()}, o_.seed(),
              o_.device(), "ppo_trainer");
  net_ = model_->as_actor_critic();
  FOXHUNT_CHECK(net_ != nullptr, "ppo_trainer", "model '", model_->name(),
                "': expected an actor-critic (Model::as_actor_critic), got a model without "
                "policy logits and value");
  // FusedAdam (fused_adam.h): CartPole 100k steps in 6.1 s instead of 6.8-7.0 s (the DQN uses it
  // too; see ARCHITECTURE.md, Performance).
  optimizer_ =
      std::make_unique<FusedAdam>(model_->module().parameters(),
                                  torch::optim::AdamOptions(o_.learning_rate()).eps(o_.adam_eps()));
  if (o_.eval_interval() > 0) {
    eval_env_ = make_env(kEvalEnvIndex);
    FOXHUNT_CHECK(eval_env_ && eval_env_->observation_size() == envs_[0]->observation_size() &&
                      eval_env_->action_count() == envs_[0]->action_count(),
                  "ppo_trainer", "the evaluation environment does not match the training ones");
  }
  std::uint64_t env_bytes = eval_env_ ? eval_env_->host_bytes() : 0;
  for (const auto& e : envs_) env_bytes += e->host_bytes();
  envs_reservation_ = memory::ExternalReservation("ppo/envs", env_bytes);
  obs_.resize(static_cast<size_t>(o_.n_envs()));
  episode_return_.assign(static_cast<size_t>(o_.n_envs()), 0.0);
  episode_length_.assign(static_cast<size_t>(o_.n_envs()), 0);
}

PpoTrainer::~PpoTrainer() = default;

void PpoTrainer::set_data_parallel(std::shared_ptr<dist::Communicator> comm) {
  const auto seed = attach_data_parallel(std::move(comm), {&model_->module()},
                                         model_->module().parameters(), o_.seed());
  if (!seed) return;  // rank 0 keeps its streams
  // This rank's own environments and action sampling.
  rng_ = Rng(derive_seed(*seed, SeedStream::kTrainerRng));
  if (started_) {
    for (size_t i = 0; i < envs_.size(); ++i) {
      obs_[i] = envs_[i]->reset(derive_seed(*seed, SeedStream::kParallelEnvs, i));
      episode_return_[i] = 0.0;
      episode_length_[i] = 0;
    }
  }
}

double PpoTrainer::current_lr() const {
  if (!o_.linear_lr()) return o_.learning_rate();
  const double remaining = 1.0 - static_cast<double>(step_) / static_cast<double>(o_.total_steps());
  return o_.learning_rate() * std::max(0.0, remaining);
}

torch::Tensor PpoTrainer::obs_batch() const {
  const int64_t n = static_cast<int64_t>(obs_.size());
  const int64_t d = envs_[0]->observation_size();
  auto t = torch::empty({n, d}, torch::kFloat);
  float* p = t.data_ptr<float>();
  for (int64_t i = 0; i < n; ++i)
    std::memcpy(p + i * d, obs_[static_cast<size_t>(i)].data(),
                static_cast<size_t>(d) * sizeof(float));
  return t.to(o_.device());
}

int64_t PpoTrainer::greedy_action(const std::vector<float>& obs) {
  torch::NoGradGuard no_grad;
  auto t = torch::empty({1, static_cast<int64_t>(obs.size())}, torch::kFloat);
  std::memcpy(t.data_ptr<float>(), obs.data(), obs.size() * sizeof(float));
  return net_->policy_and_value(t.to(o_.device())).logits.argmax(1).item<int64_t>();
}

PpoTrainer::Rollout PpoTrainer::synthetic_rollout(int64_t rows, uint64_t seed) const {
  FOXHUNT_CHECK(rows > 0, "ppo_trainer", "synthetic rollout: expected rows > 0, got ", rows);
  const int64_t D = envs_[0]->observation_size();
  const int64_t A = envs_[0]->action_count();
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const auto dev = o_.device();
  Rollout r;
  r.obs = torch::rand({rows, D}, gen).to(dev);
  r.actions = torch::randint(0, A, {rows}, gen, torch::kLong).to(dev);
  r.log_probs = (-std::log(static_cast<double>(A)) + 0.1 * torch::randn({rows}, gen)).to(dev);
  r.advantages = torch::randn({rows}, gen).to(dev);
  r.returns = torch::randn({rows}, gen).to(dev);
  return r;
}

void PpoTrainer::prepare_minibatch(const Rollout& rollout, const torch::Tensor& indices,
                                   double clip) {
  FOXHUNT_CHECK(indices.dim() == 1 && indices.size(0) > 0, "ppo_trainer",
                "minibatch: expected a non-empty 1-d index tensor, got shape ",
                models::shape_str(indices.sizes().vec()));
  auto idx = indices.to(o_.device());
  auto p = std::make_unique<Pending>();
  auto mb_obs = rollout.obs.index_select(0, idx);
  p->actions = rollout.actions.index_select(0, idx);
  p->log_probs = rollout.log_probs.index_select(0, idx);
  auto mb_adv = rollout.advantages.index_select(0, idx);
  auto mb_ret = rollout.returns.index_select(0, idx);
  if (o_.normalize_advantage() && mb_adv.size(0) > 1)
    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8);
  p->out = net_->policy_and_value(mb_obs);
  p->loss = models::ppo_loss(p->out, p->actions, p->log_probs, mb_adv, mb_ret, clip, o_.vf_coef(),
                             o_.ent_coef());
  optimizer_->zero_grad();
  if (dp_) dp_->begin(1.0);  // equal minibatches on every rank
  p->loss.backward();
  if (dp_) dp_->finish();
  if (o_.max_grad_norm() > 0)
    torch::nn::utils::clip_grad_norm_(model_->module().parameters(), o_.max_grad_norm());
  p->clip = clip;
  pending_ = std::move(p);
}

void PpoTrainer::apply_minibatch() {
  FOXHUNT_INTERNAL_ASSERT(pending_ != nullptr, "apply_minibatch without prepare_minibatch");
  optimizer_->step();
  ++minibatch_steps_;
  if (dp_) dp_->after_step(minibatch_steps_);
  const auto p = std::move(pending_);
  if (!stats_) return;  // a step outside update() (the planner): no diagnostics kept
  torch::NoGradGuard no_grad;
  auto& stats = *stats_;
  auto lp_all = torch::log_softmax(p->out.logits.detach(), -1);
  auto lp = lp_all.gather(1, p->actions.view({-1, 1})).squeeze(1);
  auto log_ratio = lp - p->log_probs;
  auto ratio = log_ratio.exp();
  stats.approx_kl += ((ratio - 1) - log_ratio).mean().item<double>();
  stats.clip_fraction += ((ratio - 1).abs() > p->clip).to(torch::kFloat).mean().item<double>();
  stats.entropy += (-(lp_all.exp() * lp_all).sum(-1)).mean().item<double>();
  stats.loss += p->loss.item<double>();
  ++stats.batches;
}

PpoTrainer::UpdateStats PpoTrainer::update(const Rollout& rollout, double clip) {
  const int64_t total = rollout.size();
  stats_ = std::make_unique<UpdateStats>();
  for (int64_t epoch = 0; epoch < o_.n_epochs(); ++epoch) {
    const auto perm = rng_.permutation(total);
    for (int64_t start = 0; start < total; start += o_.batch_size()) {
      const int64_t end = std::min(total, start + o_.batch_size());
      auto idx =
          torch::from_blob(const_cast<int64_t*>(perm.data()) + start, {end - start}, torch::kLong)
              .clone();
      prepare_minibatch(rollout, idx, clip);
      apply_minibatch();
    }
  }
  UpdateStats stats = *stats_;
  stats_.reset();
  const double b = static_cast<double>(std::max<int64_t>(stats.batches, 1));
  stats.loss /= b;
  stats.approx_kl /= b;
  stats.clip_fraction /= b;
  stats.entropy /= b;
  ++updates_;
  return stats;
}

nlohmann::json PpoTrainer::metrics_line(double elapsed, double rate) const {
  nlohmann::json j = {{"algo", algo()},
                      {"step", step_},
                      {"total_steps", o_.total_steps()},
                      {"episodes", episodes_},
                      {"return_mean", json_number(returns_.mean())},
                      {"episode_length_mean", json_number(lengths_.mean())},
                      {"lr", current_lr()},
                      {"updates", updates_},
                      {"samples_per_s", rate},
                      {"elapsed_s", elapsed}};
  for (auto it = last_stats_.begin(); it != last_stats_.end(); ++it) j[it.key()] = it.value();
  add_evaluation_metrics(j);
  return j;
}

TrainResult PpoTrainer::train(const RunConfig& run) {
  RunSession session(run, algo(), algo(), o_.total_steps(), step_);
  if (dp_) session.set_stop_agreement([this](bool s) { return dp_->agree_stop(s); });
  model_->module().train();

  const int64_t N = o_.n_envs(), T = o_.n_steps();
  const int64_t D = envs_[0]->observation_size();
  const int64_t A = envs_[0]->action_count();
  if (!started_) {
    for (int64_t i = 0; i < N; ++i)
      obs_[static_cast<size_t>(i)] = envs_[static_cast<size_t>(i)]->reset(
          derive_seed(stream_seed(o_.seed()), SeedStream::kParallelEnvs, static_cast<uint64_t>(i)));
    started_ = true;
  }
  auto write_log = [&] {
    const std::string extra = fmt::format("return {:.1f}  kl {:.4f}  lr {:.2e}", returns_.mean(),
                                          last_stats_.value("approx_kl", NAN), current_lr());
    session.log(metrics_line(session.elapsed(), session.rate(step_)), step_, extra);
  };
  auto checkpoint = [&] { session.checkpoint([&](const auto& p) { save_checkpoint(p); }); };

  while (step_ < o_.total_steps() && !session.should_stop(step_)) {
    const int64_t step_before = step_;
    auto obs_buf = torch::empty({T, N, D}, torch::kFloat);
    auto act_buf = torch::empty({T, N}, torch::kLong);
    auto logp_buf = torch::empty({T, N}, torch::kFloat);
    auto val_buf = torch::empty({T, N}, torch::kFloat);
    auto rew_buf = torch::zeros({T, N}, torch::kFloat);
    auto end_buf = torch::zeros({T, N}, torch::kFloat);
    auto act_a = act_buf.accessor<int64_t, 2>();
    auto logp_a = logp_buf.accessor<float, 2>();
    auto rew_a = rew_buf.accessor<float, 2>();
    auto end_a = end_buf.accessor<float, 2>();
    for (int64_t t = 0; t < T; ++t) {
      auto obs = obs_batch();
      models::PolicyOutput out;
      torch::Tensor logp_all;
      {
        torch::NoGradGuard no_grad;
        out = net_->policy_and_value(obs);
        logp_all = torch::log_softmax(out.logits, -1).to(torch::kCPU).contiguous();
      }
      obs_buf[t].copy_(obs.to(torch::kCPU));
      val_buf[t].copy_(out.value.to(torch::kCPU));
      const float* lp = logp_all.data_ptr<float>();
      std::vector<int64_t> truncated_envs;
      std::vector<std::vector<float>> final_obs;
      for (int64_t i = 0; i < N; ++i) {
        // Inverse-CDF sampling from our own stream keeps the run reproducible and resumable.
        const double u = rng_.uniform();
        double cum = 0.0;
        int64_t a = A - 1;
        for (int64_t k = 0; k < A; ++k) {
          cum += std::exp(static_cast<double>(lp[i * A + k]));
          if (u < cum) {
            a = k;
            break;
          }
        }
        act_a[t][i] = a;
        logp_a[t][i] = lp[i * A + a];
        auto& env = *envs_[static_cast<size_t>(i)];
        EnvStep s = env.step(a);
        rew_a[t][i] = static_cast<float>(s.reward);
        episode_return_[static_cast<size_t>(i)] += s.reward;
        ++episode_length_[static_cast<size_t>(i)];
        if (s.done()) {
          end_a[t][i] = 1.0f;
          if (s.truncated && !s.terminated) {
            truncated_envs.push_back(i);
            final_obs.push_back(s.obs);
          }
          returns_.add(episode_return_[static_cast<size_t>(i)]);
          lengths_.add(static_cast<double>(episode_length_[static_cast<size_t>(i)]));
          ++episodes_;
          episode_return_[static_cast<size_t>(i)] = 0.0;
          episode_length_[static_cast<size_t>(i)] = 0;
          obs_[static_cast<size_t>(i)] = env.reset();
        } else {
          obs_[static_cast<size_t>(i)] = std::move(s.obs);
        }
      }
      if (!truncated_envs.empty()) {
        // A time limit is not a terminal state: bootstrap with gamma V(final obs) in the reward.
        auto fo = torch::empty({static_cast<int64_t>(final_obs.size()), D}, torch::kFloat);
        for (size_t k = 0; k < final_obs.size(); ++k)
          std::memcpy(fo.data_ptr<float>() + static_cast<int64_t>(k) * D, final_obs[k].data(),
                      static_cast<size_t>(D) * sizeof(float));
        torch::NoGradGuard no_grad;
        auto v = net_->policy_and_value(fo.to(o_.device())).value.to(torch::kCPU).contiguous();
        for (size_t k = 0; k < truncated_envs.size(); ++k)
          rew_a[t][truncated_envs[k]] += static_cast<float>(o_.gamma()) * v.data_ptr<float>()[k];
      }
      step_ += N;
    }
    torch::Tensor last_values;
    {
      torch::NoGradGuard no_grad;
      last_values = net_->policy_and_value(obs_batch()).value.to(torch::kCPU);
    }
    auto gae = compute_gae(rew_buf, val_buf, end_buf, last_values, o_.gamma(), o_.gae_lambda());

    // Schedules use the progress after this rollout (as SB3 does).
    const double remaining =
        std::max(0.0, 1.0 - static_cast<double>(step_) / static_cast<double>(o_.total_steps()));
    const double lr = current_lr();
    const double clip = o_.linear_clip() ? o_.clip_range() * remaining : o_.clip_range();
    for (auto& group : optimizer_->param_groups()) group.options().set_lr(lr);
    auto dev = o_.device();
    auto stats = update({obs_buf.view({T * N, D}).to(dev), act_buf.view({T * N}).to(dev),
                         logp_buf.view({T * N}).to(dev), gae.advantages.view({T * N}).to(dev),
                         gae.returns.view({T * N}).to(dev)},
                        clip);
    const auto var_ret = gae.returns.var().item<double>();
    const double explained =
        var_ret > 0 ? 1.0 - (gae.returns - val_buf).var().item<double>() / var_ret : NAN;
    last_stats_ = {{"loss", json_number(stats.loss)},
                   {"approx_kl", json_number(stats.approx_kl)},
                   {"clip_fraction", json_number(stats.clip_fraction)},
                   {"entropy", json_number(stats.entropy)},
                   {"explained_variance", json_number(explained)},
                   {"clip_range", clip},
                   {"lr_used", lr}};

    evaluate_when_due(step_before, o_, eval_env_.get(), model_->module());
    if (session.log_due(step_before, step_)) write_log();
    if (session.checkpoint_due(step_before, step_)) checkpoint();
    session.update(step_);
  }
  const auto& lines = session.metrics_log().lines();
  if (session.logging() && (lines.empty() || lines.back()["step"] != step_)) write_log();
  const bool completed = step_ >= o_.total_steps();
  if (dp_) dp_->check_now(minibatch_steps_);
  // The final weights are the best evaluated ones (the checkpoint then holds them too).
  if (completed && o_.keep_best()) best_.restore(model_->module());
  checkpoint();
  return finish_run(session, completed, metrics_line(session.elapsed(), session.rate(step_)));
}

// The resumable state, listed once: the checkpoint writes and reads exactly these fields.
template <typename F>
void PpoTrainer::visit_state(F&& f) {
  visit_fields(f, "step", step_, "episodes", episodes_, "updates", updates_, "started", started_,
               "obs", obs_, "episode_return", episode_return_, "episode_length", episode_length_,
               "returns", returns_, "lengths", lengths_, "last_stats", last_stats_, "rng", rng_);
}

void PpoTrainer::save_checkpoint(const std::string& path) {
  nlohmann::json env_states = nlohmann::json::array();
  for (const auto& e : envs_) {
    auto s = e->save_state();
    env_states.push_back(s ? nlohmann::json(*s) : nlohmann::json(nullptr));
  }
  nlohmann::json t = checkpoint_header(to_json(o_), *envs_[0]);
  t["env_states"] = env_states;
  visit_state(StateWriter(t));
  write_container(path, checkpoint_container(t, *optimizer_));
}

void PpoTrainer::load_checkpoint(const Container& c, const std::string& path) {
  try {
    const auto& t = restore_common(c, path, *envs_[0], *optimizer_);
    const auto n_envs = t.at("options").at("n_envs").get<int64_t>();
    FOXHUNT_CHECK(n_envs == o_.n_envs(), "checkpoint", "'", path, "': trained with n_envs ", n_envs,
                  ", this trainer has ", o_.n_envs());
    models::module_from_bytes(model_->module(), require_blob(c, "module", path), path);
    visit_state(StateReader(t));
    const auto& env_states = t.at("env_states");
    for (size_t i = 0; i < envs_.size() && started_; ++i) {
      if (!env_states.at(i).is_null()) {
        envs_[i]->load_state(env_states.at(i).get<std::string>());
      } else {
        // The environment cannot restore its state: restart its episode from a derived seed.
        obs_[i] =
            envs_[i]->reset(derive_seed(o_.seed(), 1000003 * static_cast<uint64_t>(step_) + i));
        episode_return_[i] = 0.0;
        episode_length_[i] = 0;
      }
    }
    if (!started_) {
      obs_.assign(envs_.size(), {});
      episode_return_.assign(envs_.size(), 0.0);
      episode_length_.assign(envs_.size(), 0);
    }
  } catch (const nlohmann::json::exception& e) {
    throw InputError("checkpoint", "'" + path + "': bad trainer state (" + e.what() + ")");
  }
}

}  // namespace foxhunt::train
