// A fake train_engine for actor and multi-process tests: its "weights" are a deterministic float32
// vector (fake_weights.h) that every optimizer step changes, so the hash of the weights
// (chunked_xxh3, gpu/core/chunked_hash.h) names a weight version. Cheap, CPU-only, sized at will
// (hundreds of MB move like real weights).
//
// Behaviour (all of it deterministic: the same inputs on the same weights give the same outputs):
// - logprobs(): token t at position p > 0 of a sequence gets fake_token_logprob(hash, t, p, vocab);
//   token 0 of each sequence gets 0. The fake generator reports the same values for the tokens it
//   emits, so generator and trainer agree on-policy.
// - train_micro_batch(): the real clipped policy-gradient loss (ops::pg_loss_forward) over those
//   logprobs gives the loss and metrics; the "gradient" added to the accumulator is
//   scale * u_i, u_i in [-1, 1) drawn from the chunked_xxh3 of (mixed weight hash, tokens,
//   offsets, mask, masked advantages) as one byte stream,
//   scale = 1 + sum of masked |advantage| / global token count. Never zero, so every step changes
//   the weights even when every advantage is 0.
// - optimizer_step(): sums the gradients over the data-parallel group (when one is given; every
//   rank must call it), averages them (g / dp_size), clips that to options.max_grad_norm like the
//   real engines, then w -= lr_t * g on every rank (identical weights everywhere), lr_t the
//   scheduled_lr of the step; zeroes the gradients and counts the step. grad_norm is the norm
//   before clipping. The other train_engine_options are checked, not used (the fake has no
//   activations to recompute, no logits to chunk, no AdamW moments).
// - offload_state() / restore_state(): the gradient buffer is freed and re-created; the weights
//   stay where shared_weights() points.
// - save()/load(): "weights.bin" (the raw weight stream) and "weights.txt" ("chunked_xxh3 <16 hex>",
//   "step <n>", "bytes <n>") written into a temporary sibling folder that is renamed into place
//   (replacing an older save); load() refuses a folder whose weights do not hash to its weights.txt.
//
// Not thread-safe, except fail_next(), which a test may call from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "gpu/comm/communicator.h"
#include "gpu/engine/fake/fake_weights.h"
#include "gpu/engine/train_engine.h"

namespace tandem::gpu {

/// The calls whose failure a test can inject.
enum class fake_train_operation { logprobs, train_micro_batch, optimizer_step, export_bucket, save, load };

class fake_train_engine final : public train_engine {
 public:
  /// Weights initialised from `model.seed` (invalid model options are normalized(), see
  /// fake_weights.h; invalid train options fail every training call with the reason).
  /// `data_parallel_group`, when given, must outlive the engine; every rank of it needs an engine
  /// with the same options.
  explicit fake_train_engine(const fake_model_options& model, const train_engine_options& train = {},
                             communicator* data_parallel_group = nullptr);

  result<std::vector<float>> logprobs(const packed_sequences& batch, const ops::sampling_params& params) override;
  result<ops::pg_loss_metrics> train_micro_batch(const train_micro_batch_data& mb, const ops::pg_loss_settings& loss,
                                                 const global_counts& counts,
                                                 const ops::sampling_params& params) override;
  /// The mean of -logprobs() over predicted tokens (scaled by their share of global_tokens); the
  /// gradient is a pseudo-random direction named by the weights and the batch, as in
  /// train_micro_batch.
  using train_engine::train_cross_entropy;
  result<double> train_cross_entropy(const packed_sequences& batch, std::span<const float> mask,
                                     std::int64_t global_tokens) override;
  status set_learning_rate(double lr) override;
  result<optimizer_result> optimizer_step() override;
  void zero_gradients() override;
  void abandon_step() override;
  /// weight_hash(): chunked_xxh3 of the weight stream.
  std::uint64_t weights_digest() const override { return weight_hash(); }
  const weight_manifest& manifest() const override { return manifest_; }
  status export_bucket(const bucket_plan& plan, std::size_t index, std::span<std::byte> out) const override;
  status save(const std::filesystem::path& directory) const override;
  status load(const std::filesystem::path& directory) override;
  status offload_state() override;
  status restore_state() override;
  train_memory_state memory_state() const override { return state_; }
  /// The fake engine keeps no optimizer state.
  std::int64_t offloaded_state_bytes() const override { return 0; }
  weight_source shared_weights() const override;

  /// The options in use (after normalized()).
  const fake_model_options& options() const { return options_; }
  /// chunked_xxh3 of weight_bytes() (cached until the weights change).
  std::uint64_t weight_hash() const;
  /// The weights as bytes, in manifest order. Valid for the engine's lifetime; contents change
  /// on optimizer_step() and load().
  std::span<const std::byte> weight_bytes() const { return std::as_bytes(std::span<const float>(weights_)); }
  /// Optimizer steps taken (restored by load()).
  std::int64_t step_count() const { return step_; }
  /// Micro-batches accumulated since the last optimizer step or zero_gradients().
  std::int64_t accumulated_micro_batches() const { return micro_batches_; }

  /// Makes the next call of `op` (after `skip` calls that pass) fail with device_error
  /// "fake_train_engine: injected failure in <op>", leaving the state each call documents for a failure: logprobs and export_bucket change
  /// nothing, train_micro_batch leaves gradients as they were, optimizer_step zeroes the gradients
  /// and keeps the weights (inject it on every rank of a group, or the others wait in the
  /// all-reduce forever), save leaves no folder, load changes nothing.
  void fail_next(fake_train_operation op, int skip = 0) { failures_.arm(op, skip); }

 private:
  status check_batch(const char* op, const packed_sequences& batch) const;
  /// ok when the training state is resident and the train options are valid.
  status check_trainable(const char* op) const;
  void ensure_gradients();

  fake_model_options options_;
  train_engine_options train_;
  train_memory_state state_ = train_memory_state::resident;
  communicator* group_;
  weight_manifest manifest_;
  std::vector<std::int64_t> entry_begin_;  // byte offset of each manifest entry in the weight stream
  std::vector<float> weights_;             // F32 [weight_bytes / 4]
  std::vector<float> gradients_;           // F32 [weight_bytes / 4]; empty until the first micro-batch
  std::int64_t step_ = 0;
  std::int64_t micro_batches_ = 0;
  mutable std::optional<std::uint64_t> hash_;
  mutable fake_failure_switch<fake_train_operation> failures_;
};

/// "logprobs", "train_micro_batch", ...
const char* to_string(fake_train_operation op);

}  // namespace tandem::gpu
