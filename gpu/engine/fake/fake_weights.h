// What the fake engines (fake_train_engine.h, fake_generate_engine.h) share: the fake model's
// options and manifest, its deterministic initial weights, the per-token logprob both engines
// report, and the switch that injects failures. A weight version is named by the chunked_xxh3
// (gpu/core/chunked_hash.h) of the weight stream.
//
// The fake model: `tensors` float32 tensors "model.layers.N.fake.weight" (N = 0, 1, ...), each of
// floor(weight_bytes / 4 / tensors) elements, the last one taking the remainder; laid out end to
// end in manifest order, so "the weights" are one byte stream of exactly weight_bytes bytes.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>

#include "gpu/core/status.h"
#include "gpu/engine/weight_manifest.h"

namespace tandem::gpu {

/// Size and behaviour of the fake model; trainer and generator of one run use the same options.
struct fake_model_options {
  std::int64_t weight_bytes = 1 << 20;      ///< total bytes of all tensors; > 0, a multiple of 4, >= 4 * tensors
  std::int64_t tensors = 4;                 ///< number of tensors, >= 1
  std::uint64_t seed = 1;                   ///< initial weights are a pure function of it
  std::int32_t vocab = 64;                  ///< token ids are in [0, vocab), vocab >= 2
  std::int32_t max_sequence_length = 256;   ///< prompt plus generated tokens, >= 2
};

/// ok, or invalid_argument naming the first bad field ("fake model: weight_bytes must be a
/// positive multiple of 4, got 6").
status check_fake_model_options(const fake_model_options& options);

/// `options` made valid, for constructors that cannot refuse: weight_bytes rounded down to a
/// multiple of 4 and raised to 4 * tensors, tensors >= 1, vocab >= 2, max_sequence_length >= 2.
/// Valid options come back unchanged.
fake_model_options normalized(fake_model_options options);

/// The manifest of the (normalized) fake model: 1-D float32 tensors "model.layers.N.fake.weight".
weight_manifest fake_manifest(const fake_model_options& options);

/// Writes the initial weights, a pure function of (options.seed, element index), values in
/// [-1, 1). `out` holds weight_bytes / 4 floats.
void fill_fake_weights(const fake_model_options& options, std::span<float> out);

/// The splitmix64 finalizer: a bijection that scatters every input bit over the output.
std::uint64_t fake_mix64(std::uint64_t x);

/// The logprob both fakes report for `token` at `position` (0-based, in the whole sequence, prompt
/// included) under the weights whose hash is `weight_hash`: -(log(vocab) + u / 2) with u in
/// [0, 1) drawn from fake_mix64 of all three, so a generator's logprobs equal the trainer's
/// logprobs of the same sequence under the same weights.
float fake_token_logprob(std::uint64_t weight_hash, std::int32_t token, std::int64_t position, std::int32_t vocab);

/// A test hook: arm(op) makes the next take(op) return true once; arm(op, skip) lets `skip`
/// take(op) calls pass first. Operations are enumerators below 32 of the engine's own enum.
/// Thread-safe (tests arm from another thread).
template <class Operation>
class fake_failure_switch {
 public:
  void arm(Operation op, int skip = 0) {
    std::lock_guard<std::mutex> lock(mutex_);
    countdown_[index(op)] = skip;
  }
  /// True (and disarmed) when `op` was armed and its skips are used up.
  bool take(Operation op) {
    std::lock_guard<std::mutex> lock(mutex_);
    int& c = countdown_[index(op)];
    if (c < 0) return false;
    if (c > 0) {
      --c;
      return false;
    }
    c = -1;
    return true;
  }

 private:
  static std::size_t index(Operation op) { return static_cast<std::size_t>(op) % 32; }
  std::mutex mutex_;
  std::array<int, 32> countdown_ = filled();
  static std::array<int, 32> filled() {
    std::array<int, 32> a{};
    a.fill(-1);
    return a;
  }
};

}  // namespace tandem::gpu
