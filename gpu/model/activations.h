// What the forward keeps for the backward, by recompute mode (gpu/README.md, "Recompute"):
//   none       every activation below;
//   selective  all but the attention core (attn, lse) and the MLP's gate, up and act, which the
//              backward recomputes from the kept q/k/v and normed input;
//   full       per layer only its input and its argument bundle (layer_args: the rotary tables of
//              its queries and keys, either possibly absent; the shared K/V it reads; the
//              per-layer inputs), and the K/V of store layers; the backward reruns the layer.
// Buffers on the device the forward ran on, in the weights' dtype. Shapes with T tokens, H hidden, nh query and g KV heads of
// head dim d, I the layer's MLP width, P the per-layer input width, K experts per token.
#pragma once

#include <map>
#include <vector>

#include "gpu/core/device_buffer.h"
#include "gpu/model/config.h"
#include "gpu/ops/paged_attention.h"

namespace tandem::gpu {

enum class recompute_mode { none, selective, full };

/// "none", "selective", "full".
std::string_view to_string(recompute_mode m);

/// cos and sin [T, d] of one layer type for a batch's positions.
struct rope_table {
  device_buffer cos, sin;
};

/// K and V of a non-shared layer, as attention reads them and as their backward needs them.
struct kv_activations {
  device_buffer k_raw;   // [T, g*d]   k_proj output (also V's input when k_eq_v)
  device_buffer k_inv;   // [T*g]      k_norm's inverse RMS
  device_buffer k;       // [T, g, d]  after k_norm and RoPE
  device_buffer v_raw;   // [T, g*d]   v_proj output (empty with k_eq_v: k_raw is V's input)
  device_buffer v_inv;   // [T*g]
  device_buffer v;       // [T, g, d]  after the scale-less v_norm
};

/// Decoding and chunked prefill: the K/V a layer attends to live in the paged cache. A non-shared
/// layer first writes its new rows' K/V into k_cache / v_cache (its own), a KV-shared layer reads
/// its store layer's.
struct cached_kv {
  tensor k_cache, v_cache;  // [blocks, B, g, d]  of the layer whose K/V are read
  ops::paged_rows rows;     // the new rows: block tables of the layer's type, offsets, positions
};

/// Everything a decoder layer reads besides its input and weights.
struct layer_args {
  const rope_table* q_rope = nullptr;         ///< the queries' rotary table; null: no RoPE on q
  const rope_table* k_rope = nullptr;         ///< the keys' rotary table; null: no RoPE on k
  const kv_activations* shared_kv = nullptr;  ///< KV-shared layers: the store layer's K/V
  tensor ple;                                 ///< [T, L, P] per-layer inputs of every layer, or empty
  const cached_kv* cache = nullptr;           ///< inference over a KV cache; null: the packed batch is everything
};

struct layer_activations {
  device_buffer h_in;                    // [T, H]  the layer's input
  device_buffer a, a_inv;                // [T, H], [T]  input_layernorm output and inverse RMS
  device_buffer q_raw, q_inv, q;         // [T, nh*d], [T*nh], [T, nh, d]
  device_buffer lse, attn;               // [T, nh], [T, nh*d]  attention core
  device_buffer o, o_inv;                // [T, H], [T]  o_proj output, post_attention_layernorm
  device_buffer h_attn;                  // [T, H]  after the attention residual
  device_buffer f, f_inv;                // [T, H], [T]  pre_feedforward_layernorm
  device_buffer gate, up, act;           // [T, I]  gate and up projections, gelu(gate) * up
  device_buffer m_dense, m_dense_inv;    // [T, H], [T]  down_proj output (post_feedforward_layernorm_1 input with MoE)
  device_buffer router_w, router_idx, router_r, router_inv;  // [T, K] F, [T, K] I32, [T, K], [T]
  device_buffer y, y_inv;                // [T, H], [T]  pre_feedforward_layernorm_2
  device_buffer experts, experts_inv;    // [T, H], [T]  experts output, post_feedforward_layernorm_2
  device_buffer m, m_inv;                // [T, H], [T]  the branch entering post_feedforward_layernorm
  device_buffer h_ffn;                   // [T, H]  after the feed-forward residual
  device_buffer ple_a, ple_g;            // [T, P]  per_layer_input_gate output, gated input
  device_buffer ple_o, ple_o_inv;        // [T, H], [T]  per_layer_projection output
  device_buffer h_pre_scale;             // [T, H]  before layer_scalar
  layer_args args;                     // what the layer read (kept in every mode)
};

struct model_activations {
  recompute_mode mode = recompute_mode::none;
  device_buffer c_pre, c_inv;  // [T, L*P], [T*L]  per_layer_model_projection · H^-1/2, its norm's inverse RMS
  device_buffer ple;           // [T, L, P]  the combined per-layer inputs
  std::vector<layer_activations> layers;
  std::map<int, kv_activations> kv;  // by layer: the K/V of every non-shared layer (store layers' in full mode)
  device_buffer h_out;                 // [T, H]  before the final norm
  device_buffer final_inv;             // [T]
  std::map<layer_type, rope_table> rope;  // per layer type
};

}  // namespace tandem::gpu
