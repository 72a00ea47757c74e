#pragma once
/// \file streaming.h
/// One instrument's bar-by-bar forward (`ModelStream`, which a model hands out through
/// `ServingModel::make_stream`), and the support its implementations share (Mamba2Stream,
/// TftStream): a cheap fingerprint of a module's weights for caches that hold values computed
/// from them, and a per-bar input check without the tensor-op overhead of the batch validation.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "foxhunt/models/derived_cache.h"
#include "foxhunt/models/parallel.h"

namespace foxhunt::models {

/// One bar's inputs to a stream, each for this bar alone and on the model's device.
struct StreamBar {
  torch::Tensor past;     ///< the newest row of the model's past-features input [features]
  torch::Tensor future;   ///< its known-future rows for the next bars [steps, features];
                          ///< undefined for a model whose spec has no known-future input
  int64_t static_id = 0;  ///< the instrument's id (models with a static-id input)
};

/// A model's O(window)-per-bar forward over one instrument, equal to its full-window forward at
/// batch 1: the stream keeps its own state from bar to bar. Serving asks the model for one per
/// instrument (`ServingModel::make_stream`) and never needs to know which model it is.
class ModelStream {
 public:
  virtual ~ModelStream() = default;
  /// Appends one bar and returns the model's first output for the window ending at it (e.g. the
  /// forecast [horizon, Q]), over the last min(bars pushed, window) bars. Eval mode only.
  virtual torch::Tensor push(const StreamBar& bar) = 0;
  /// Lends the next pushes the threads of `runner` (null, the default: none). A stream that
  /// splits its push runs the chunks on it, with outputs bit for bit those of one thread; the
  /// others ignore it. Not owned: the caller keeps it alive while it is set (serving sets it
  /// before each push).
  void set_chunk_runner(ChunkRunner* runner) { runner_ = runner; }
  /// The runner set by set_chunk_runner (null: none).
  ChunkRunner* chunk_runner() const { return runner_; }

 private:
  ChunkRunner* runner_ = nullptr;
};

/// A ModelStream over a model's own stream object `S` (built from the constructor's arguments):
/// each push is `push(stream, bar, chunk_runner())`, which picks the bar's inputs the model reads.
/// How a model hands out its stream (ServingModel::make_stream) without a class of its own.
template <typename S, typename Push>
class AdaptedStream final : public ModelStream {
 public:
  /// The stream S(args...) pushed through `push`.
  template <typename... Args>
  explicit AdaptedStream(Push push, Args&&... args)
      : push_(std::move(push)), stream_(std::forward<Args>(args)...) {}
  torch::Tensor push(const StreamBar& bar) override { return push_(stream_, bar, chunk_runner()); }

 private:
  Push push_;
  S stream_;
};

/// std::make_unique of AdaptedStream<S, Push>.
template <typename S, typename Push, typename... Args>
std::unique_ptr<ModelStream> adapt_stream(Push push, Args&&... args) {
  return std::make_unique<AdaptedStream<S, Push>>(std::move(push), std::forward<Args>(args)...);
}

/// A fingerprint of a module's parameters and buffers (TensorFingerprint, inference tensors by
/// identity). In-place updates (optimizer steps, checkpoint loads) bump the version and device or
/// dtype moves replace the storage, so `changed()` reports both. Streaming caches use it to
/// notice that the weights behind their cached per-bar values moved.
class ParameterStamp {
 public:
  /// An empty stamp (`changed()` is false).
  ParameterStamp() = default;
  /// Records the current state of every parameter and buffer of `m` (recursively).
  explicit ParameterStamp(const torch::nn::Module& m);
  /// True when any recorded tensor was modified in place or re-allocated since the stamp was
  /// taken. Cheap: no allocation, no tensor operation.
  bool changed() const;

 private:
  std::vector<torch::Tensor> tensors_;  // the recorded tensors (shared handles)
  TensorFingerprint fingerprint_;       // theirs at stamp time
};

/// Throws InputError unless `t` is defined, has `expected_sizes` (-1 = any), lies on `device`,
/// has a floating dtype and only finite values: the same contract and messages as
/// `check_float_input`, with the finite scan done in place for contiguous CPU tensors (one bar's
/// row is checked without launching tensor ops).
void check_stream_input(const std::string& component, const std::string& name,
                        const torch::Tensor& t, const std::vector<int64_t>& expected_sizes,
                        const torch::Device& device);

}  // namespace foxhunt::models
