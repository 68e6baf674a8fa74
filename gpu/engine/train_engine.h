// The train engine contract: per-token logprobs of packed sequences (chunked over the vocabulary,
// scored under the sampler's distribution), the clipped policy-gradient loss and its backward on
// micro-batches, the optimizer step, and the weight export / import used by refit and
// checkpoints. Implementations: the fake engine of the runtime tests and the Gemma 4 engine
// (gemma4_train_engine.h, on the CPU or CUDA); the policy_worker actor drives one through this
// interface.
//
// A training step, as the policy_worker runs it:
//
//   logprobs(batch)                        -> lp_prev (and lp_ref with the reference weights)
//   train_step(micro-batches, global counts)
//     = for each micro-batch: train_micro_batch(mb, global counts)   gradients accumulate
//       then optimizer_step()              -> clip, all-reduce / reduce-scatter, AdamW, zero grads
//       (an engine may override train_step to overlap the reduction with the last backward)
//   export_bucket(i) for i < bucket_count  -> refit (the weight version increments)
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "gpu/core/status.h"
#include "gpu/engine/weight_manifest.h"
#include "gpu/engine/weight_source.h"
#include "gpu/model/activations.h"
#include "gpu/ops/adamw.h"
#include "gpu/ops/logprobs.h"
#include "plain/training.h"
#include "gpu/ops/pg_loss.h"
#include "plain/sequences.h"

namespace tandem::gpu {

/// How a train engine trains: one struct for every engine, filled from the recipe's policy keys.
/// The fake engine honours the learning-rate schedule and max_grad_norm and checks the rest;
/// the Gemma 4 engines honour all of it.
struct train_engine_options {
  ops::adamw_hyper adamw;            ///< lr (after warm-up, >= 0), betas, eps, weight_decay; the engine counts the step
  double warmup_start_factor = 1.0;  ///< lr factor of the first step, in (0, 1], rising linearly to 1
  std::int64_t warmup_steps = 0;     ///< steps of the linear warm-up, >= 0 (0: none)
  double max_grad_norm = 1.0;        ///< clip the global gradient norm to this; 0: no clipping
  recompute_mode recompute = recompute_mode::none;
  std::int64_t logprob_chunk_rows = 256;    ///< rows of [rows, vocabulary] logits that exist at once, > 0
  dtype master_dtype = dtype::float32;      ///< the weights AdamW updates: float32 or bfloat16
  dtype first_moment_dtype = dtype::float32;   ///< exp_avg: float32 or bfloat16
  dtype second_moment_dtype = dtype::float32;  ///< exp_avg_sq: float32 or bfloat16
};

/// ok, or invalid_argument "<who>: <field> ..." naming the first field out of range.
status check_train_engine_options(const char* who, const train_engine_options& options);

/// ok, or invalid_argument "<who>: set_learning_rate: lr must be finite and >= 0 ...".
status check_learning_rate(const char* who, double lr);

/// The learning rate of optimizer step `step` (0-based): lr times the warm-up factor, which rises
/// linearly from warmup_start_factor at step 0 to 1 at step warmup_steps, then stays 1.
double scheduled_lr(const train_engine_options& options, std::int64_t step);

/// Where a train engine's state lives between calls. A colocated run gives the device to the
/// generator between steps:
///
///              offload_state()                restore_state()
///   resident -----------------> offloaded -----------------> resident
///
/// offload_state(): the optimizer state (moments, and master weights where they are not the
/// weights themselves) is copied to host memory and its device memory freed; the gradients
/// (zero between steps) and the scratch workspace are released. The weights stay where they are,
/// so a colocated generator keeps reading them. While offloaded, logprobs(), weights_digest(),
/// export_bucket() and shared_weights() work; every call that trains, saves or loads is refused
/// (invalid_argument "... the training state is offloaded"). Each transition completes or leaves
/// the previous state with a status saying why; offload_state() is refused while gradients of
/// unfinished micro-batches are pending, so nothing is lost.
enum class train_memory_state { resident, offloaded };

/// Variable-length sequences packed end to end (no padding): one definition for every layer
/// (plain/sequences.h).
using packed_sequences = plain::packed_sequences;

/// One micro-batch of the loss: sequences plus their per-token RL data, aligned with `tokens`
/// (the value at token t scores predicting token t from tokens before it; token 0 of each
/// sequence has mask 0).
struct train_micro_batch_data {
  packed_sequences sequences;
  std::vector<float> advantages;  ///< per token
  std::vector<float> mask;        ///< per token, 0 or 1 (loss mask x sample mask)
  std::vector<float> lp_prev;     ///< per token, from logprobs() before the step
  std::vector<float> lp_gen;      ///< per token, from the generator
  std::vector<float> lp_ref;      ///< per token, reference policy; empty when the KL term is off
};

/// Totals over every micro-batch of every data-parallel rank of the step, so summed micro-batch
/// losses equal the global loss.
/// A global batch's masked-token counts and what an optimizer step did: one definition for every
/// layer (plain/training.h).
using plain::global_counts;
using plain::optimizer_result;

/// What one train_step did: the loss metrics merged over its micro-batches, and the update.
struct train_step_result {
  ops::pg_loss_metrics metrics;
  optimizer_result optimizer;
};

/// ok when every per-token vector of `mb` holds one value per token (lp_prev may be empty with
/// force_on_policy_ratio, lp_ref when the KL term is off); else invalid_argument starting with `op`.
status check_micro_batch_sizes(const char* op, const train_micro_batch_data& mb, const ops::pg_loss_settings& loss);

/// The loss op's inputs over `mb` (views of its vectors, valid while `mb` and `lp_cur` live) with
/// the current logprobs `lp_cur` (one per token) and the step's global counts.
ops::pg_loss_inputs pg_loss_inputs_of(const train_micro_batch_data& mb, const std::vector<float>& lp_cur,
                                      const global_counts& counts);

class train_engine {
 public:
  virtual ~train_engine() = default;

  /// Per-token logprobs of each sequence (token 0 of a sequence gets 0) at `params`' temperature
  /// and top-k/top-p masks, as the generator sampled them. Processes logits in chunks of rows;
  /// never holds [tokens, vocabulary] at once. Leaves weights and gradients untouched.
  virtual result<std::vector<float>> logprobs(const packed_sequences& batch, const ops::sampling_params& params) = 0;

  /// Forward, loss and backward of one micro-batch; gradients accumulate until optimizer_step().
  /// On failure the accumulated gradients are unspecified: the caller must discard the step
  /// (zero_gradients()) before training again. Weights are untouched.
  virtual result<ops::pg_loss_metrics> train_micro_batch(const train_micro_batch_data& mb,
                                                         const ops::pg_loss_settings& loss,
                                                         const global_counts& counts,
                                                         const ops::sampling_params& params) = 0;

  /// Supervised next-token cross-entropy of one micro-batch (warm-up, the `tandem loss` command):
  /// loss = Σ over predicted tokens of -logprob(token | tokens before it), at temperature 1 with
  /// no masks, divided by `global_tokens` (the predicted tokens of the whole step, every rank and
  /// micro-batch), so the summed micro-batch losses equal the step's mean. Returns this
  /// micro-batch's share; gradients accumulate until optimizer_step(). On failure, as
  /// train_micro_batch.
  /// `mask`, when not empty, holds one weight per token of `batch` (the value at token t weighs
  /// predicting token t; token 0 of each sequence is never predicted): the supervised warm-up puts
  /// 1 on a target's tokens and 0 on its prompt's. The loss is then the mask-weighted sum,
  /// still divided by `global_tokens` (the masked tokens of the step).
  virtual result<double> train_cross_entropy(const packed_sequences& batch, std::span<const float> mask,
                                             std::int64_t global_tokens) = 0;
  /// Every predicted token, weight 1.
  result<double> train_cross_entropy(const packed_sequences& batch, std::int64_t global_tokens) {
    return train_cross_entropy(batch, {}, global_tokens);
  }

  /// One whole supervised step over this rank's micro-batches (possibly none): each one's
  /// masked cross-entropy and backward, then the optimizer step, with the failure handling of
  /// train_step. Returns this rank's share of the step's loss and the update.
  struct supervised_micro_batch {
    packed_sequences sequences;
    std::vector<float> mask;  ///< per token, as train_cross_entropy's
  };
  struct supervised_step_result {
    double loss = 0;
    optimizer_result optimizer;
  };
  result<supervised_step_result> train_supervised_step(const std::vector<supervised_micro_batch>& micro_batches,
                                                       std::int64_t global_tokens);

  /// The peak learning rate of the optimizer steps that follow (the warm-up factor of
  /// train_engine_options still applies by step count): finite and >= 0, where 0 leaves every
  /// weight as it is (a control run). Each phase of a run (the supervised warm-up, RL) sets its own.
  virtual status set_learning_rate(double lr) = 0;

  /// Reduces gradients over data-parallel ranks, clips to the configured norm, applies AdamW to
  /// this rank's shard, gathers the updated weights, and zeroes the gradients. On failure the
  /// weights are those before the call (the update is applied to a shard only after every
  /// collective succeeded) and the gradients are zeroed.
  virtual result<optimizer_result> optimizer_step() = 0;

  /// Drops accumulated gradients.
  virtual void zero_gradients() = 0;

  /// After this rank's part of a step failed before its optimizer step: takes part in the
  /// optimizer step's collectives with a gradient that is not finite, so every other
  /// data-parallel rank refuses the step at once (the gradient is not finite) instead of waiting
  /// for this one until the group's timeout. No rank's weights change; the gradients are zeroed.
  /// Without a data-parallel group it only zeroes the gradients.
  virtual void abandon_step() = 0;

  /// One whole step over this rank's micro-batches (possibly none): each micro-batch's forward,
  /// loss and backward, then the optimizer step (every rank of a data-parallel group must call it
  /// once per step). On failure the gradients are zeroed and the weights are those before the
  /// call; the error names the micro-batch or the optimizer step. A failed micro-batch abandons
  /// the step (abandon_step), so the other data-parallel ranks fail it too, at once.
  virtual result<train_step_result> train_step(const std::vector<train_micro_batch_data>& micro_batches,
                                               const ops::pg_loss_settings& loss, const global_counts& counts,
                                               const ops::sampling_params& params);

  /// A 64-bit digest of the weights (chunked_xxh3, gpu/core/chunked_hash.h, of the manifest's byte
  /// stream, or an equivalent the engine documents), equal on every data-parallel rank holding the
  /// same weights.
  virtual std::uint64_t weights_digest() const = 0;

  /// Offloads or restores the training state (train_memory_state above). No-op when already there.
  virtual status offload_state() = 0;
  virtual status restore_state() = 0;
  virtual train_memory_state memory_state() const = 0;
  /// Bytes offload_state() copies to host memory and restore_state() copies back (the optimizer
  /// state: moments and a separate master; 0 for an engine that keeps none on its device).
  virtual std::int64_t offloaded_state_bytes() const = 0;

  /// The live weights, tensor by tensor in manifest order, for a colocated generator to read in
  /// place (weight_source.h). The addresses stay valid and fixed for the engine's lifetime:
  /// optimizer_step() and load() rewrite the bytes, never move them.
  virtual weight_source shared_weights() const = 0;

  /// The refit manifest: every weight the generator needs, Hugging Face names, in slab order.
  virtual const weight_manifest& manifest() const = 0;
  /// Writes bucket `index` of `plan` (built from manifest()) into `out` (plan.bucket_size(index)
  /// bytes). Leaves the engine untouched.
  virtual status export_bucket(const bucket_plan& plan, std::size_t index, std::span<std::byte> out) const = 0;

  /// Saves weights as a Hugging Face safetensors directory and optimizer state by tensor name
  /// (so a run can resume with another data-parallel size). Writes into a temporary folder and
  /// renames it into place: a failed save leaves no partial directory behind.
  virtual status save(const std::filesystem::path& directory) const = 0;
  /// Loads what save() wrote. On failure nothing is changed.
  virtual status load(const std::filesystem::path& directory) = 0;
};

}  // namespace tandem::gpu
