// One Gemma 4 decoder layer, forward and backward side by side (docs/gemma4.md §2.4):
//   h_attn = h_in + post_attention_norm(o_proj(attention(rope_q(q_norm(q)), rope_k(k_norm(k)), v_norm(v))))
//   h_ffn  = h_attn + post_feedforward_norm(mlp(pre_feedforward_norm(h_attn)) [+ MoE block])
//   h_out  = layer_scalar · (h_ffn [+ post_ple_norm(ple_projection(gelu(ple_gate(h_ffn)) ⊙ ple_l))])
// with a, q, k, v from input_norm(h_in); a KV-shared layer reads its store layer's k and v.
// Everything the layer reads besides h_in and its weights is in layer_args, so a recomputed layer
// sees exactly what the first forward saw.
#pragma once

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/core/trace.h"
#include "gpu/model/activations.h"
#include "gpu/model/config.h"
#include "gpu/model/forward.h"
#include "gpu/model/model_weights.h"

namespace tandem::gpu {

/// Gradients of a non-shared layer's K and V (after their norms and RoPE), summed over every
/// layer that attends to them.
struct kv_gradients {
  device_buffer dk, dv;  // [T, g, d]
};

/// Forward of layer l from s.h_in with s.args (both set by the caller): fills every activation
/// of `s`; a non-shared layer also fills own_kv (not null), which its attention reads. Writes
/// h_out [T, H]. On failure the outputs are unspecified.
status layer_forward(const exec_context& ctx, const model_config& c, int l, const layer_weights& w, const packed_batch& batch, layer_activations& s,
                     kv_activations* own_kv, const tensor& h_out, const tracer& trace = {});

/// Backward of layer l with the activations of its forward (recomputing the attention core and the
/// MLP's gate, up and act where `s` dropped them: recompute selective). dh: the gradient with
/// respect to h_out, replaced by the one with respect to h_in. kv: the K/V the layer attended to;
/// dkv: their gradient accumulators, which attention adds into; a non-shared layer (all its
/// readers having been through) then takes them back into its k_proj / v_proj. d_ple [T, L, P]:
/// this layer's slice written. Weight gradients accumulate into g.
status layer_backward(const exec_context& ctx, const model_config& c, int l, const layer_weights& w, const layer_weights& g,
                      const packed_batch& batch, const layer_activations& s, const kv_activations& kv, kv_gradients& dkv,
                      const tensor& d_ple, device_buffer& dh);

}  // namespace tandem::gpu
