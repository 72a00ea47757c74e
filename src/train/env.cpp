#include "foxhunt/train/env.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "foxhunt/core/error.h"

namespace foxhunt::train {

void Env::load_state(const std::string&) {
  FOXHUNT_FAIL("env", "environment '", name(), "' does not support save/load of its state");
}

CartPole::CartPole(CartPoleOptions options) : o_(options), rng_(0) {
  FOXHUNT_CHECK(o_.max_steps > 0, "cartpole", "expected max_steps > 0, got ", o_.max_steps);
  FOXHUNT_CHECK(o_.tau > 0 && o_.half_length > 0 && o_.cart_mass > 0 && o_.pole_mass > 0,
                "cartpole", "expected positive tau, half_length and masses");
}

std::vector<float> CartPole::observation() const {
  // The reference computes in double and hands out float32 observations.
  return {static_cast<float>(s_.x), static_cast<float>(s_.x_dot), static_cast<float>(s_.theta),
          static_cast<float>(s_.theta_dot)};
}

std::vector<float> CartPole::reset(uint64_t seed) {
  rng_.seed(seed);
  return reset();
}

std::vector<float> CartPole::reset() {
  // U(-b, b) from the project's portable stream: identical on every platform.
  auto u = [&] { return -o_.reset_bound + 2.0 * o_.reset_bound * rng_.uniform(); };
  s_.x = u();
  s_.x_dot = u();
  s_.theta = u();
  s_.theta_dot = u();
  steps_ = 0;
  done_ = false;
  return observation();
}

void CartPole::set_state(const CartPoleState& s) {
  s_ = s;
  steps_ = 0;
  done_ = false;
}

EnvStep CartPole::step(int64_t action) {
  FOXHUNT_CHECK(action == 0 || action == 1, "cartpole", "expected action 0 or 1, got ", action);
  FOXHUNT_CHECK(!done_, "cartpole", "step() called after the episode ended; call reset() first");
  const double total_mass = o_.cart_mass + o_.pole_mass;
  const double pole_ml = o_.pole_mass * o_.half_length;
  const double f = action == 1 ? o_.force : -o_.force;
  const double cos_t = std::cos(s_.theta);
  const double sin_t = std::sin(s_.theta);
  const double temp = (f + pole_ml * s_.theta_dot * s_.theta_dot * sin_t) / total_mass;
  const double theta_acc =
      (o_.gravity * sin_t - cos_t * temp) /
      (o_.half_length * (4.0 / 3.0 - o_.pole_mass * cos_t * cos_t / total_mass));
  const double x_acc = temp - pole_ml * theta_acc * cos_t / total_mass;
  // Explicit Euler: positions advance with the old velocities.
  s_.x += o_.tau * s_.x_dot;
  s_.x_dot += o_.tau * x_acc;
  s_.theta += o_.tau * s_.theta_dot;
  s_.theta_dot += o_.tau * theta_acc;
  ++steps_;

  EnvStep r;
  r.obs = observation();
  r.reward = 1.0;
  r.terminated = s_.x < -o_.x_threshold || s_.x > o_.x_threshold ||
                 s_.theta < -o_.theta_threshold || s_.theta > o_.theta_threshold;
  r.truncated = steps_ >= o_.max_steps;
  done_ = r.done();
  return r;
}

std::optional<std::string> CartPole::save_state() const {
  nlohmann::json j = {
      {"x", s_.x},       {"x_dot", s_.x_dot}, {"theta", s_.theta},  {"theta_dot", s_.theta_dot},
      {"steps", steps_}, {"done", done_},     {"rng", rng_.state()}};
  return j.dump();
}

void CartPole::load_state(const std::string& state) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(state);
    s_.x = j.at("x").get<double>();
    s_.x_dot = j.at("x_dot").get<double>();
    s_.theta = j.at("theta").get<double>();
    s_.theta_dot = j.at("theta_dot").get<double>();
    steps_ = j.at("steps").get<int64_t>();
    done_ = j.at("done").get<bool>();
    rng_.set_state(j.at("rng").get<std::string>());
  } catch (const nlohmann::json::exception& e) {
    throw InputError("cartpole", std::string("state: ") + e.what());
  }
}

// ---- SyntheticEnv -------------------------------------------------------------------------

SyntheticEnv::SyntheticEnv(int64_t observation_size, int64_t action_count, uint64_t seed,
                           int64_t episode_length)
    : obs_(observation_size), actions_(action_count), episode_length_(episode_length), rng_(seed) {
  FOXHUNT_CHECK(observation_size >= 1 && action_count >= 1 && episode_length >= 1, "env",
                "synthetic env: expected observation_size, action_count and episode_length >= 1, "
                "got ",
                observation_size, ", ", action_count, " and ", episode_length);
}

std::vector<float> SyntheticEnv::draw() {
  std::vector<float> o(static_cast<size_t>(obs_));
  for (auto& v : o) v = static_cast<float>(2.0 * rng_.uniform() - 1.0);
  return o;
}

std::vector<float> SyntheticEnv::reset(uint64_t seed) {
  rng_.seed(seed);
  return reset();
}

std::vector<float> SyntheticEnv::reset() {
  t_ = 0;
  done_ = false;
  return draw();
}

EnvStep SyntheticEnv::step(int64_t action) {
  FOXHUNT_CHECK(action >= 0 && action < actions_, "env", "synthetic env: action expected in [0, ",
                actions_, "), got ", action);
  FOXHUNT_CHECK(!done_, "env", "synthetic env: step after the episode ended; call reset()");
  EnvStep s;
  s.obs = draw();
  s.reward = rng_.uniform() - 0.5;
  ++t_;
  s.truncated = t_ >= episode_length_;
  done_ = s.truncated;
  return s;
}

EnvFactory env_factory(const std::string& name) {
  if (name == "cartpole")
    return [](int64_t) -> std::unique_ptr<Env> { return std::make_unique<CartPole>(); };
  throw InputError("env", "unknown environment '" + name + "'; expected one of: cartpole");
}

std::vector<double> evaluate_policy(Env& env, const Policy& policy, int64_t episodes,
                                    uint64_t seed) {
  FOXHUNT_CHECK(episodes > 0, "env", "expected episodes > 0, got ", episodes);
  std::vector<double> returns;
  returns.reserve(static_cast<size_t>(episodes));
  for (int64_t e = 0; e < episodes; ++e) {
    std::vector<float> obs = e == 0 ? env.reset(seed) : env.reset();
    double total = 0.0;
    for (;;) {
      EnvStep s = env.step(policy(obs));
      total += s.reward;
      if (s.done()) break;
      obs = std::move(s.obs);
    }
    returns.push_back(total);
  }
  return returns;
}

}  // namespace foxhunt::train
