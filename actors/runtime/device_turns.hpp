// The device of a colocated member, handed between its two engines. Training and generation take
// turns on one device (a colocated run is synchronous: the controller never overlaps its phases),
// and the policy worker and the rollout worker each ask for their turn on their engine thread
// before an engine call:
//
//                  for_generation()
//   training ----------------------------> generating  (created: the generator is made in the
//      ^                                       |         generation turn)
//      +------------- for_training() ----------+
//
//   for_generation(): with policy.offload_optimizer_for_generation, the trainer's optimizer state
//     (moments, a separate master) goes to pinned host memory and its gradients and scratch are
//     released (train_engine::offload_state); then the generator's KV cache is made again
//     (generate_engine::restore_cache).
//   for_training(): the generator's KV cache and scratch are released (release_cache), then the
//     trainer's state comes back (restore_state).
//
// Each is a no-op in the turn it leads to. Each engine's transition completes or leaves that
// engine as it was; a failure says which engine and what failed, and the turn stays the one before
// (the next call tries again). The figures of every transition (seconds, bytes, the device memory
// in use as each turn ends) accumulate until take_figures(), which the policy worker's train
// report carries to the controller; the first generation turn's, taken as the member starts (the
// first offload allocates the pinned host buffers, which takes far longer than a copy), are kept
// apart (startup_figures) so that no step's rates include it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>

#include "gpu/core/device.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/engine/generate_engine.h"
#include "gpu/engine/train_engine.h"
#include "plain/training.h"

namespace tandem {

class device_turns {
 public:
  /// The turns of a colocated member whose trainer is made: it hands the device to the generator
  /// `make_generator` makes, which starts with the generation turn. With `offload_optimizer`
  /// (policy.offload_optimizer_for_generation) the optimizer state leaves first, so the KV cache
  /// is sized for a device without it, and the host link of `ctx`'s device is measured once (a
  /// 256 MiB copy each way, the faster of three rounds). Fails naming what failed.
  static gpu::result<std::shared_ptr<device_turns>> create(
      std::shared_ptr<gpu::train_engine> train,
      const std::function<gpu::result<std::shared_ptr<gpu::generate_engine>>()>& make_generator, const gpu::exec_context& ctx,
      bool offload_optimizer);

  std::shared_ptr<gpu::generate_engine> generator() const { return generate_; }

  gpu::status for_generation();
  gpu::status for_training();

  /// The figures since the last call (and the host link's bandwidth, measured once), then zeroes
  /// the counts. The first is the first step's: the start-up turn is not among them.
  plain::device_turn_figures take_figures();

  /// The first generation turn's figures, taken by create() before any step: the optimizer state's
  /// first offload, its pinned host buffers allocated then.
  const plain::device_turn_figures& startup_figures() const { return startup_; }

 private:
  enum class turn { training, generating };

  device_turns(std::shared_ptr<gpu::train_engine> train, gpu::device dev, bool offload_optimizer);
  /// The generation turn's handover (offload_state, restore_cache), counted in the figures.
  gpu::status hand_to_generation();
  /// The device memory in use now (0 on the CPU, whose device memory is the host's).
  std::uint64_t in_use() const;

  std::mutex mutex_;
  std::shared_ptr<gpu::train_engine> train_;
  std::shared_ptr<gpu::generate_engine> generate_;
  gpu::device dev_;
  bool offload_optimizer_ = false;
  turn turn_ = turn::training;
  plain::device_turn_figures figures_;
  plain::device_turn_figures startup_;
};

}  // namespace tandem
