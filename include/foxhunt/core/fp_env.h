#pragma once
/// \file fp_env.h
/// The calling thread's floating-point mode for hot numeric loops.

#include "foxhunt/core/no_copy.h"

namespace foxhunt {

/// Flushes denormal floats to zero on the calling thread (x86-64: the MXCSR flush-to-zero and
/// denormals-are-zero bits) for the guard's lifetime, then restores the previous mode. Training
/// runs under it: Adam's second moments and the gradients of saturated units decay into the
/// denormal range, where every operation on them takes a slow path (MKL's vector sqrt took 7% of
/// a CartPole DQN run on its "rare" branch). Values below 1.2e-38 become 0; nothing the models
/// compute depends on them. Elsewhere than x86-64 the guard does nothing.
class FlushDenormalsGuard {
 public:
  FlushDenormalsGuard();
  ~FlushDenormalsGuard();
  FOXHUNT_NO_COPY(FlushDenormalsGuard);

  /// True when the calling thread flushes denormals now.
  static bool active();

 private:
  unsigned saved_ = 0;
};

}  // namespace foxhunt
