// The backward of the text stack (recompute none): from the gradient of the final normed hidden
// states back to every trainable tensor, through the activations forward_hidden kept. KV-shared
// layers accumulate into the K/V gradient of the layer that stores their K/V; with k_eq_v both
// paths into the raw key projection sum; the tied embedding sums its two uses (the grads struct
// binds lm_head to embed_tokens); MoE routing gradients flow through the router.
#pragma once

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/model/activations.h"
#include "gpu/model/config.h"
#include "gpu/model/forward.h"
#include "gpu/model/model_weights.h"
#include "gpu/ops/logprobs.h"

namespace tandem::gpu {

/// Accumulates (+=) into `grads` (bound to a gradient slab with the weights' layout) the gradient
/// of the loss whose gradient with respect to the final normed hidden states is d_hidden [T, H].
/// `act` is what forward_for_backward kept for the same batch and weights, in any recompute mode
/// (the modes give bitwise-equal gradients on the CPU). On failure the gradients are unspecified.
status model_backward(const exec_context& ctx, const model_config& config, const model_weights& w, const packed_batch& batch,
                      const model_activations& act, const tensor& d_hidden, const model_weights& grads);

/// The head's part of a loss Σ_t dlogprobs[t] · logprob(targets[t]) under `params`: from the
/// final normed hidden states [T, H], `chunk_rows` rows of logits at a time, writes d_hidden
/// [T, H] and accumulates the head's weight gradient into grads.lm_head. raw_logits: empty (the
/// head's product is computed again), or what head_logprobs kept for the same hidden states and
/// weights, [T, V] (the same bits, one product fewer).
status head_backward(const exec_context& ctx, const model_config& config, const model_weights& w, const tensor& hidden, const tensor& targets,
                     const ops::sampling_params& params, const tensor& dlogprobs, const tensor& d_hidden,
                     const model_weights& grads, std::int64_t chunk_rows = 256, const tensor& raw_logits = {});

}  // namespace tandem::gpu
