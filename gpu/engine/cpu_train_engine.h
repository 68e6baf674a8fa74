// The CPU train engine: the Gemma 4 model of gpu/model/ behind the train_engine contract, in
// float32. Weights, gradients and AdamW moments each live in one slab laid out by the model's
// layout table; a data-parallel group (optional) all-reduces the gradients, and every rank then
// takes the same AdamW step on the whole model, so the ranks stay bitwise identical.
//
// A step: logprobs() (token 0 of a sequence gets 0, token t the logprob of t given tokens < t),
// train_micro_batch() per micro-batch (forward keeping what `recompute` says, the clipped
// policy-gradient loss, backward; gradients accumulate), optimizer_step() (all-reduce, global
// norm over the trainable tensors, refusal of a non-finite norm naming the first non-finite
// tensor, clipping to max_grad_norm, AdamW with a linear warm-up of the learning rate on every
// trainable tensor (layer_scalar is a buffer: it never changes), gradients zeroed).
//
// save() writes a drop-in Hugging Face directory (float32 weights, so nothing is rounded away)
// with optimizer.safetensors beside it (exp_avg.NAME, exp_avg_sq.NAME and the step count);
// load() reads it back or leaves the engine unchanged.
#pragma once

#include <memory>

#include "gpu/comm/communicator.h"
#include "gpu/core/slab.h"
#include "gpu/engine/train_engine.h"
#include "gpu/model/activations.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/model_weights.h"
#include "gpu/ops/adamw.h"

namespace tandem::gpu {

struct cpu_train_options {
  ops::adamw_hyper adamw;            ///< lr, betas, eps, weight_decay (step is counted by the engine)
  double warmup_start_factor = 1.0;  ///< lr factor of the first step, rising linearly to 1
  std::int64_t warmup_steps = 0;     ///< steps of the linear warm-up (0: none)
  double max_grad_norm = 1.0;        ///< clip the global gradient norm to this; 0: no clipping
  recompute_mode recompute = recompute_mode::none;
  std::int64_t logprob_chunk_rows = 256;  ///< rows of logits at a time
  dtype moment_dtype = dtype::float32;    ///< AdamW moments: float32 or bfloat16
};

class cpu_train_engine final : public train_engine {
 public:
  /// Loads the checkpoint's text stack (open_checkpoint with float32). `group`, when given, must
  /// outlive the engine; every rank needs an engine of the same checkpoint and options.
  static result<std::unique_ptr<cpu_train_engine>> create(checkpoint source, const cpu_train_options& options,
                                                          communicator* group = nullptr);

  result<std::vector<float>> logprobs(const packed_sequences& batch, const ops::sampling_params& params) override;
  result<ops::pg_loss_metrics> train_micro_batch(const train_micro_batch_data& mb, const ops::pg_loss_settings& loss,
                                                 const global_counts& counts, const ops::sampling_params& params) override;
  result<double> train_cross_entropy(const packed_sequences& batch, std::int64_t global_tokens) override;
  result<optimizer_result> optimizer_step() override;
  void zero_gradients() override;
  /// FNV-1a 64 of the manifest's byte stream (every tensor's float32 bytes in manifest order).
  std::uint64_t weights_digest() const override;
  const weight_manifest& manifest() const override { return manifest_; }
  status export_bucket(const bucket_plan& plan, std::size_t index, std::span<std::byte> out) const override;
  status save(const std::filesystem::path& directory) const override;
  status load(const std::filesystem::path& directory) override;

  const model_config& config() const { return source_.config; }
  const model_layout& layout() const { return source_.layout; }
  /// The float32 weight slab (layout order) and the gradient slab.
  const slab& weights() const { return weights_; }
  const slab& gradients() const { return grads_; }
  std::int64_t step_count() const { return step_; }

 private:
  cpu_train_engine() = default;
  status check_batch(const char* op, const packed_sequences& batch) const;

  checkpoint source_;
  cpu_train_options options_;
  communicator* group_ = nullptr;
  slab weights_, grads_, exp_avg_, exp_avg_sq_;
  model_weights w_, g_;
  weight_manifest manifest_;
  std::vector<std::string> names_;  // Hugging Face name of each layout tensor, as in the source
  std::int64_t step_ = 0;
};

}  // namespace tandem::gpu
