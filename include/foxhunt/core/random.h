#pragma once
/// \file random.h
/// The one seeded random stream of the project (data generation, shuffles, environment resets,
/// exploration, replay sampling) and the named seed streams derived from a run's seed.
/// std::mt19937_64 is specified bit-exactly by the standard; the std distributions are not
/// (libstdc++ and libc++ give different numbers), so the transforms here are our own.

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace foxhunt {

/// Seeded random stream with platform-independent uniform, normal and integer draws.
class Rng {
 public:
  /// Starts the stream from `seed`.
  explicit Rng(uint64_t seed = 0) : engine_(seed) {}

  /// Restarts the stream from `seed`.
  void seed(uint64_t seed) {
    engine_.seed(seed);
    has_spare_ = false;
  }

  /// Uniform double in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }

  /// Uniform double in (0, 1]: safe to take the log of.
  double uniform_open0() { return 1.0 - uniform(); }

  /// Standard normal draw (Box-Muller, the second value of each pair is cached).
  double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform_open0();
    const double u2 = uniform();
    const double radius = std::sqrt(-2.0 * std::log(u1));
    const double angle = 6.283185307179586 * u2;
    spare_ = radius * std::sin(angle);
    has_spare_ = true;
    return radius * std::cos(angle);
  }

  /// Uniform integer in [0, n) without modulo bias (rejection sampling). `n` must be > 0.
  uint64_t uniform_int(uint64_t n) {
    if (n == 0) n = 1;  // defined result instead of a division by zero (callers pass n > 0)
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // values >= limit would bias low numbers
    uint64_t x;
    do {
      x = engine_();
    } while (x >= limit);
    return x % n;
  }

  /// A uniformly random permutation of 0..n-1 (Fisher-Yates from the top).
  std::vector<int64_t> permutation(int64_t n);

  /// Raw 64-bit draw.
  uint64_t next() { return engine_(); }

  /// Serialised state (text): the engine, plus the cached normal draw when there is one.
  std::string state() const;
  /// Restores a state from state(); throws InputError when unreadable.
  void set_state(const std::string& s);

  /// Shuffles `v` in place (Fisher-Yates with uniform_int).
  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      const size_t j = static_cast<size_t>(uniform_int(i));
      std::swap(v[i - 1], v[j]);
    }
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

/// Derives an independent seed from a base seed and a stream index (SplitMix64 mixing).
uint64_t derive_seed(uint64_t base, uint64_t stream);

/// The named seed streams of a run: each consumer of a run's seed draws from its own stream
/// `derive_seed(seed, stream + offset)`, so adding a consumer never shifts another's numbers.
enum class SeedStream : uint64_t {
  kTrainerRng = 1,       ///< exploration, replay and action sampling, minibatch order
  kFirstReset = 2,       ///< the first environment reset of a run
  kBestEval = 7,         ///< periodic evaluation that keeps the best weights
  kParallelEnvs = 100,   ///< + env index: PPO's environments
  kFinalEval = 999,      ///< greedy evaluation after training
  kEpisodeReset = 1000,  ///< + step: DQN's reset after an episode ends
};

/// derive_seed(base, stream + offset).
inline uint64_t derive_seed(uint64_t base, SeedStream stream, uint64_t offset = 0) {
  return derive_seed(base, static_cast<uint64_t>(stream) + offset);
}

}  // namespace foxhunt
