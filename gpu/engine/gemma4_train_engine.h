// The Gemma 4 train engine: the model of gpu/model/ behind the train_engine contract, on the device
// its context names (the CPU, or a CUDA device: the same code over the same ops), with the weights
// and gradients stored in the checkpoint's opened dtype: float32, or bfloat16 on CUDA.
// Weights, gradients, AdamW moments (and bfloat16 master weights, when asked for) each live in
// one slab on that device, laid out by the model's layout table; activations live in device
// buffers for one micro-batch. A data-parallel group (optional, on the engine's device)
// all-reduces the gradients, and every rank then takes the same AdamW step on the whole model, so
// the ranks stay bitwise identical.
//
// What crosses to the host: the tokens of a batch (in), the logprob of every token (out), the
// policy-gradient loss and its gradient by token (computed on the host: one value per token),
// the gradient norm's per-tensor sums, the digest's and the export's bytes, save and load.
//
// A step: logprobs() (token 0 of a sequence gets 0, token t the logprob of t given tokens < t),
// train_micro_batch() per micro-batch (forward keeping what `recompute` says, the clipped
// policy-gradient loss, backward; gradients accumulate), optimizer_step() (all-reduce, global
// norm over the trainable tensors, refusal of a non-finite norm naming the first non-finite
// tensor, AdamW at scheduled_lr on every trainable tensor with the clipping factor to
// max_grad_norm applied to the gradient inside the step (one launch per run of adjacent trainable
// tensors; layer_scalar is a buffer: it never changes), gradients zeroed).
//
// Master weights: the weights themselves when master_dtype is their dtype; else a separate slab
// that AdamW updates and copies into the weights: a bfloat16 master beside float32 weights (the
// weights rounded once, at creation and at load, so they always equal the master), or a float32
// master beside bfloat16 weights (the weights are the master rounded after every step; save()
// writes the master, so nothing is lost).
//
// save() writes a drop-in Hugging Face directory (float32 values of the finer of the weights and
// the master, so nothing is rounded away) with optimizer.safetensors beside it (exp_avg.NAME, exp_avg_sq.NAME and
// the step count); load() reads it back in place or leaves the engine unchanged.
#pragma once

#include <memory>

#include "gpu/comm/communicator.h"
#include "gpu/core/exec_context.h"
#include "gpu/core/slab.h"
#include "gpu/engine/train_engine.h"
#include "gpu/model/activations.h"
#include "gpu/model/checkpoint.h"
#include "gpu/model/forward.h"
#include "gpu/model/model_weights.h"
#include "gpu/ops/adamw.h"
#include "gpu/ops/sum_squares.h"

namespace tandem::gpu {

class gemma4_train_engine final : public train_engine {
 public:
  /// Loads the checkpoint's text stack (open_checkpoint with float32) onto `ctx`'s device, whose
  /// stream orders the engine's work. `group`, when given, must outlive the engine; every rank
  /// needs an engine of the same checkpoint and options. The engine owns its scratch workspace
  /// (ctx.scratch is not used).
  static result<std::unique_ptr<gemma4_train_engine>> create(const exec_context& ctx, checkpoint source,
                                                              const train_engine_options& options, communicator* group = nullptr);
  /// The same over weights already in a slab of the layout on ctx's device (random initial
  /// weights for a benchmark, initial_weights.h): `source` gives the config, layout and names and
  /// may be a config-only checkpoint.
  static result<std::unique_ptr<gemma4_train_engine>> create_with_weights(const exec_context& ctx, checkpoint source, slab weights,
                                                                          const train_engine_options& options,
                                                                          communicator* group = nullptr);

  result<std::vector<float>> logprobs(const packed_sequences& batch, const ops::sampling_params& params) override;
  result<ops::pg_loss_metrics> train_micro_batch(const train_micro_batch_data& mb, const ops::pg_loss_settings& loss,
                                                 const global_counts& counts, const ops::sampling_params& params) override;
  using train_engine::train_cross_entropy;
  result<double> train_cross_entropy(const packed_sequences& batch, std::span<const float> mask,
                                     std::int64_t global_tokens) override;
  status set_learning_rate(double lr) override;
  result<optimizer_result> optimizer_step() override;
  void zero_gradients() override;
  void abandon_step() override;
  /// chunked_xxh3 of the manifest's byte stream (every tensor's float32 bytes in manifest order).
  std::uint64_t weights_digest() const override;
  const weight_manifest& manifest() const override { return manifest_; }
  status export_bucket(const bucket_plan& plan, std::size_t index, std::span<std::byte> out) const override;
  status save(const std::filesystem::path& directory) const override;
  status load(const std::filesystem::path& directory) override;
  /// Offloaded: moments and master weights copied out of their slabs (slab::offload), gradients
  /// and the workspace freed.
  status offload_state() override;
  status restore_state() override;
  train_memory_state memory_state() const override { return state_; }
  std::int64_t offloaded_state_bytes() const override { return memory().optimizer; }
  weight_source shared_weights() const override;

  const model_config& config() const { return source_.config; }
  const model_layout& layout() const { return source_.layout; }
  /// The float32 weight slab (layout order) and the gradient slab.
  const slab& weights() const { return weights_; }
  const slab& gradients() const { return grads_; }
  std::int64_t step_count() const { return step_; }
  /// Bytes of what the engine keeps between calls on its device (offloaded or released slabs
  /// included at their resident size), and the most scratch it held at once.
  struct memory_use {
    std::int64_t weights = 0, gradients = 0, optimizer = 0;  ///< optimizer: moments and a separate master
    std::int64_t scratch_high_water = 0;
  };
  memory_use memory() const;

 private:
  gemma4_train_engine() = default;
  status check_batch(const char* op, const packed_sequences& batch) const;
  static status check_create(const exec_context& ctx, const checkpoint& source, const train_engine_options& options,
                             const communicator* group);
  status check_resident(const char* op) const;
  /// What a micro-batch's forward leaves for its loss and backward: the packed batch, the final
  /// hidden states with the activations `recompute` keeps, and the logprob of every row.
  struct micro_batch_forward {
    packed_tokens batch;
    model_activations act;
    device_buffer hidden;     // F32 [T, H] on the engine's device
    std::vector<float> rows;  // [T] on the host: row r, the logprob of token r + 1 of its sequence
    device_buffer logits;     // [T, V] of the weights' dtype: the head's product before the softcap,
                              // kept when recompute is none (else empty: the backward recomputes it)
  };
  /// The forward and the head's logprobs of `batch`; errors start with `op`.
  result<micro_batch_forward> forward_micro_batch(const char* op, const packed_sequences& batch, const ops::sampling_params& params);
  /// The head's and the model's backward from d_rows [T] (host: the loss's gradient by row);
  /// gradients accumulate. Counts the micro-batch as pending once gradients may have changed.
  status backward_micro_batch(const char* op, const micro_batch_forward& f, const std::vector<float>& d_rows,
                              const ops::sampling_params& params);
  /// The slabs whose contents optimizer state holds: the moments, and the master when separate.
  std::vector<slab*> optimizer_slabs();
  /// The weights' storage: float32, or bfloat16 (CUDA); the gradients have it too.
  dtype weight_type() const { return source_.layout.tensors.front().type; }
  /// Where the master is separate: it takes the weights in its dtype (rounded once when narrower),
  /// and the weights take it back, so they equal it.
  status round_weights_through_master();
  /// to = from in to's dtype, n elements on the engine's device (a copy when the dtypes agree).
  status converted_on_device(const tensor& from, const tensor& to, std::int64_t n) const;
  /// The optimizer step's refusal when trainable tensor `i`'s gradient is not finite: names the
  /// tensor and its first non-finite element.
  status non_finite_gradient(std::size_t i);

  checkpoint source_;
  train_engine_options options_;
  communicator* group_ = nullptr;
  std::unique_ptr<workspace> scratch_;
  exec_context ctx_;
  train_memory_state state_ = train_memory_state::resident;
  std::int64_t pending_micro_batches_ = 0;
  slab weights_;     // F32 [layout.total_elements]: what the forward reads (equal to the master)
  slab master_;      // BF16 [layout.total_elements] when master_dtype is bfloat16; else empty (weights_ is the master)
  slab grads_;       // F32 [layout.total_elements]
  slab exp_avg_;     // first_moment_dtype [layout.total_elements]
  slab exp_avg_sq_;  // second_moment_dtype [layout.total_elements]
  model_weights w_, g_;
  weight_manifest manifest_;
  std::vector<std::string> names_;  // Hugging Face name of each layout tensor, as in the source
  std::vector<std::size_t> trainable_;               // layout indexes of the trainable tensors
  std::vector<ops::element_range> trainable_ranges_;  // their elements in the gradient slab
  std::int64_t step_ = 0;
};

}  // namespace tandem::gpu
