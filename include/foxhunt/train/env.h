#pragma once
/// \file env.h
/// The discrete-action environment interface the RL trainers (DQN, PPO) run against, and
/// CartPole-v1 as the known-answer environment. Torch-free: observations are std::vector<float>.
///
/// Adapting another environment (e.g. data::TradingEnv) means implementing five members:
/// name, observation_size, action_count, reset(seed) / reset(), step. Exact resume of a run
/// mid-episode additionally needs save_state/load_state; without them a resumed trainer restarts
/// its episodes (documented in the trainers).

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "foxhunt/core/random.h"

namespace foxhunt::train {

/// What one environment step returns (Gymnasium semantics).
struct EnvStep {
  std::vector<float> obs;   ///< observation after the step (the final one when the episode ended)
  double reward = 0.0;      ///< reward for this step
  bool terminated = false;  ///< the MDP reached a terminal state (no bootstrapping past it)
  bool truncated = false;   ///< the episode was cut by a time limit (bootstrapping is valid)
  /// True when the episode is over for either reason.
  bool done() const { return terminated || truncated; }
};

/// A discrete-action environment.
class Env {
 public:
  virtual ~Env() = default;

  /// Short name for logs and checkpoints (e.g. "cartpole").
  virtual std::string name() const = 0;
  /// Observation width.
  virtual int64_t observation_size() const = 0;
  /// Number of discrete actions (actions are 0 .. action_count()-1).
  virtual int64_t action_count() const = 0;

  /// Reseeds the environment's random stream with `seed` and starts an episode.
  virtual std::vector<float> reset(uint64_t seed) = 0;
  /// Starts the next episode, continuing the random stream.
  virtual std::vector<float> reset() = 0;
  /// Applies `action`. Throws InputError for an action out of range or a step after the episode
  /// ended (call reset first).
  virtual EnvStep step(int64_t action) = 0;

  /// Complete state (including the random stream) for exact resume, or nullopt when the
  /// environment does not support it.
  virtual std::optional<std::string> save_state() const { return std::nullopt; }
  /// Restores a state produced by save_state of the same environment kind.
  virtual void load_state(const std::string& state);

  /// Host bytes this environment holds outside LibTorch's allocator (e.g. its copy of the market
  /// features); the trainers declare them to the ledger (memory::reserve_external). 0 by default.
  virtual std::uint64_t host_bytes() const { return 0; }
};

/// An environment of a given observation width and action count with random observations
/// (uniform in [-1, 1)) and rewards, and episodes of `episode_length` steps. What the planner
/// trains on when it measures an RL trainer's real step for a model without its market.
class SyntheticEnv final : public Env {
 public:
  /// `observation_size` and `action_count` >= 1, `episode_length` >= 1.
  SyntheticEnv(int64_t observation_size, int64_t action_count, uint64_t seed = 0,
               int64_t episode_length = 200);
  std::string name() const override { return "synthetic"; }
  int64_t observation_size() const override { return obs_; }
  int64_t action_count() const override { return actions_; }
  std::vector<float> reset(uint64_t seed) override;
  std::vector<float> reset() override;
  EnvStep step(int64_t action) override;

 private:
  std::vector<float> draw();
  int64_t obs_, actions_, episode_length_;
  Rng rng_;
  int64_t t_ = 0;
  bool done_ = true;
};

/// Index an EnvFactory is called with for the evaluation environment (e.g. the validation split
/// of a trading env instead of the training split).
inline constexpr int64_t kEvalEnvIndex = -1;

/// Builds the `index`-th environment of a run (index 0 for single-env trainers, 0..n-1 for PPO,
/// kEvalEnvIndex for periodic evaluation).
using EnvFactory = std::function<std::unique_ptr<Env>(int64_t index)>;

/// Physical constants and limits of CartPole-v1.
struct CartPoleOptions {
  double gravity = 9.8;      ///< g, m/s^2
  double cart_mass = 1.0;    ///< kg
  double pole_mass = 0.1;    ///< kg
  double half_length = 0.5;  ///< half the pole length, m
  double force = 10.0;       ///< push magnitude, N
  double tau = 0.02;         ///< Euler step, s
  double x_threshold = 2.4;  ///< |x| beyond this terminates, m
  double theta_threshold = 12.0 * 2.0 * 3.14159265358979323846 / 360.0;  ///< 12 degrees, rad
  int64_t max_steps = 500;    ///< truncation limit (TimeLimit)
  double reset_bound = 0.05;  ///< reset draws each state component from U(-b, b)
};

/// CartPole state (x, x_dot, theta, theta_dot), double precision like the reference.
struct CartPoleState {
  double x = 0, x_dot = 0, theta = 0, theta_dot = 0;
};

/// CartPole-v1 (Barto, Sutton & Anderson 1983 as in Gymnasium): Euler integration, reward 1 per
/// step including the terminating one, termination outside |x| <= 2.4 or |theta| <= 12 degrees,
/// truncation after 500 steps. Action 0 pushes left (-F), 1 pushes right (+F).
class CartPole final : public Env {
 public:
  explicit CartPole(CartPoleOptions options = {});

  std::string name() const override { return "cartpole"; }
  int64_t observation_size() const override { return 4; }
  int64_t action_count() const override { return 2; }
  std::vector<float> reset(uint64_t seed) override;
  std::vector<float> reset() override;
  EnvStep step(int64_t action) override;
  std::optional<std::string> save_state() const override;
  void load_state(const std::string& state) override;

  /// Sets the physical state directly (tests, known-answer checks); starts a fresh episode count.
  void set_state(const CartPoleState& s);
  /// Current physical state.
  const CartPoleState& state() const { return s_; }
  /// Steps taken in the current episode.
  int64_t steps() const { return steps_; }
  /// Options in use.
  const CartPoleOptions& options() const { return o_; }

 private:
  std::vector<float> observation() const;

  CartPoleOptions o_;
  CartPoleState s_;
  Rng rng_;
  int64_t steps_ = 0;
  bool done_ = true;
};

/// Builds environments by name ("cartpole"). Throws InputError naming the known ones otherwise.
EnvFactory env_factory(const std::string& name);

/// A deterministic policy: observation -> action.
using Policy = std::function<int64_t(const std::vector<float>& obs)>;

/// Runs `episodes` full episodes of `policy` in `env` (the first reset uses `seed`, later ones
/// continue the stream) and returns each episode's undiscounted return.
std::vector<double> evaluate_policy(Env& env, const Policy& policy, int64_t episodes,
                                    uint64_t seed);

}  // namespace foxhunt::train
