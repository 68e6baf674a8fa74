// The Gemma 4 text stack's forward over a packed batch (docs/gemma4.md §2): sequences
// packed end to end with their positions and offsets, never padded, never attending across
// their boundaries. Written once over the op interfaces (gpu/ops/), so every backend runs it.
// The trace hook names every intermediate ("embed", "ple", "q", "k", "v", "attn_out",
// "attn_residual", "mlp_out", "moe_out", "ffn_residual", "ple_out", "layer_out", "final_norm") with its
// layer, so a mismatch against a reference is located layer by layer.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "gpu/core/exec_context.h"
#include "gpu/core/device_buffer.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/core/trace.h"
#include "gpu/model/activations.h"
#include "gpu/model/config.h"
#include "gpu/model/kv_cache.h"
#include "gpu/model/model_weights.h"
#include "gpu/ops/logprobs.h"

namespace tandem::gpu {

/// Sequences packed end to end.
struct packed_batch {
  tensor tokens;      // I32 [T]      token ids
  tensor positions;   // I32 [T]      position of each token in its sequence (RoPE), >= 0
  tensor cu_seqlens;  // I32 [S + 1]  sequence offsets: 0 = cu[0] <= ... <= cu[S] = T
};

/// Token sequences packed into a model batch on a context's device: positions from 0 in each
/// sequence, each token's target the next token of its sequence (0 on a sequence's last token,
/// whose result nobody reads).
struct packed_tokens {
  device_buffer tokens, positions, cu_seqlens, targets;  // I32 [T], [T], [S + 1], [T]
  packed_batch view() const { return {tokens, positions, cu_seqlens}; }
};

/// `tokens` of every sequence end to end, sequence s being [offsets[s], offsets[s + 1]), copied
/// to ctx's device. Fails only when the buffers cannot be allocated or copied.
result<packed_tokens> pack_tokens(const exec_context& ctx, const std::vector<std::int32_t>& tokens,
                                  const std::vector<std::int32_t>& offsets);

/// The scale of an embedding lookup as the model applies it: √width rounded to the weights' dtype
/// (√1536 is 39.25 in bfloat16, as transformers casts its scale to the weights' dtype).
double embed_scale(std::int64_t width, dtype type);

/// The final normed hidden state of every token: hidden [T, H] in the weights' dtype (F32 on the
/// CPU; F64 weights give the float64 reference), written. On failure `hidden` is unspecified; an
/// error names the op, the layer and the tensor.
status forward_hidden(const exec_context& ctx, const model_config& config, const model_weights& w, const packed_batch& batch,
                      const tensor& hidden, const tracer& trace = {});

/// Changes what a layer reads before it runs (layer_args): a model variant's hook, e.g. a layer
/// whose queries take no rotary table. Null: Gemma 4's own arguments.
using layer_args_hook = std::function<void(int layer, layer_args& args)>;

/// forward_hidden for a backward: keeps in `act` what model_backward needs under `mode`
/// (activations.h says what each mode keeps).
status forward_for_backward(const exec_context& ctx, const model_config& config, const model_weights& w, const packed_batch& batch,
                            const tensor& hidden, model_activations& act, recompute_mode mode,
                            const tracer& trace = {}, const layer_args_hook& hook = {});

/// New rows of sequences whose earlier positions are in a KV cache: decoding (one row per
/// sequence) and chunked prefill (several). Sequence s's rows are [cu_rows[s], cu_rows[s + 1]),
/// at consecutive positions ending at most at cache.length(sequences[s]) - 1: the caller reserved
/// them (kv_cache::reserve) before the call.
/// host_tokens, host_positions and host_cu_rows (optional, all or none): the same values in host
/// memory, from a caller that built them there. The embedding lookups and the paged ops then
/// check them on the host, and on CUDA the step is enqueued without waiting for the device
/// (ops::paged_rows::host, embedding_forward's host_ids).
struct cached_batch {
  tensor tokens;     // I32 [n]
  tensor positions;  // I32 [n]
  tensor cu_rows;    // I32 [S + 1]
  std::vector<kv_cache::sequence_id> sequences;  // [S]
  tensor host_tokens;     // I32 [n] on the host, or empty
  tensor host_positions;  // I32 [n] on the host, or empty
  tensor host_cu_rows;    // I32 [S + 1] on the host, or empty
  /// Optional (with the host mirrors above): the cache's block tables of `sequences` for each
  /// layer_type (kv_cache::block_table), already on the device, and their host copies; else
  /// forward_cached builds them and copies them to the device itself.
  tensor block_tables[2];       // I32 [S, M_t] on the device, by layer_type
  tensor host_block_tables[2];  // the same on the host
  /// Sequences of cu_rows past `sequences` (S = sequences.size() + padding) that only fill a batch
  /// of fixed size (a captured decode step's): not in the cache, their given block tables point at
  /// its spare blocks (kv_cache::spare_block); what their rows compute means nothing.
  std::int64_t padding = 0;
};

/// The final normed hidden state of every new row, hidden [n, H]; each non-shared layer writes
/// the rows' K/V into the cache at their positions, then every layer attends over the cache. A
/// row's result equals, bit for bit, what forward_hidden gives the same position of its whole
/// sequence (the ops are row-invariant and paged attention shares the packed kernel's row
/// arithmetic). On failure `hidden` and the cache's slots of these rows are unspecified.
status forward_cached(const exec_context& ctx, const model_config& config, const model_weights& w, kv_cache& cache,
                      const cached_batch& batch, const tensor& hidden, const tracer& trace = {});

/// Logits of rows of normed hidden states: logits F32 [rows, V] = hidden_rows F32 [rows, H] ·
/// lm_headᵀ, softcapped when the config says so.
status head_logits(const exec_context& ctx, const model_config& config, const model_weights& w, const tensor& hidden_rows, const tensor& logits);

/// logprobs[t] = the logprob of targets[t] under the head's distribution of hidden row t [T, H]
/// (the final normed hidden states) and `params`, `chunk_rows` rows of logits at a time.
/// raw_logits: empty, or [T, V] of hidden's dtype, written with the head's product before the
/// softcap (kept for head_backward, which then skips that product; the logprobs are the same
/// bits either way).
status head_logprobs(const exec_context& ctx, const model_config& config, const model_weights& w, const tensor& hidden, const tensor& targets,
                     const ops::sampling_params& params, const tensor& logprobs, std::int64_t chunk_rows = 256,
                     const tensor& raw_logits = {});

/// logprobs[t] = the logprob of targets[t] given tokens up to t of its sequence, under `params`
/// (ops/logprobs.h), computed `chunk_rows` rows at a time so the [T, V] logits never exist.
///   targets  I32 [T] (any id in [0, V) where the caller ignores the result)
///   logprobs F32 [T], written
status forward_logprobs(const exec_context& ctx, const model_config& config, const model_weights& w, const packed_batch& batch,
                        const tensor& targets, const ops::sampling_params& params, const tensor& logprobs,
                        std::int64_t chunk_rows = 256, const tracer& trace = {});

}  // namespace tandem::gpu
