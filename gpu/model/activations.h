// What the forward keeps for the backward, by recompute mode (gpu/README.md, "Recompute"):
//   none       every activation below;
//   selective  all but the attention core (attn, lse) and the MLP's gate, up and act, which the
//              backward recomputes from the kept q/k/v and normed input;
//   full       per layer only its input and its argument bundle (layer_args: the rotary tables of
//              its queries and keys, either possibly absent; the shared K/V it reads; the
//              per-layer inputs), and the K/V of store layers; the backward reruns the layer.
// Host buffers in the weights' dtype. Shapes with T tokens, H hidden, nh query and g KV heads of
// head dim d, I the layer's MLP width, P the per-layer input width, K experts per token.
#pragma once

#include <map>
#include <vector>

#include "gpu/core/host_buffer.h"
#include "gpu/model/config.h"
#include "gpu/ops/paged_attention.h"

namespace tandem::gpu {

enum class recompute_mode { none, selective, full };

/// "none", "selective", "full".
std::string_view to_string(recompute_mode m);

/// cos and sin [T, d] of one layer type for a batch's positions.
struct rope_table {
  host_buffer cos, sin;
};

/// K and V of a non-shared layer, as attention reads them and as their backward needs them.
struct kv_activations {
  host_buffer k_raw;   // [T, g*d]   k_proj output (also V's input when k_eq_v)
  host_buffer k_inv;   // [T*g]      k_norm's inverse RMS
  host_buffer k;       // [T, g, d]  after k_norm and RoPE
  host_buffer v_raw;   // [T, g*d]   v_proj output (empty with k_eq_v: k_raw is V's input)
  host_buffer v_inv;   // [T*g]
  host_buffer v;       // [T, g, d]  after the scale-less v_norm
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
  host_buffer h_in;                    // [T, H]  the layer's input
  host_buffer a, a_inv;                // [T, H], [T]  input_layernorm output and inverse RMS
  host_buffer q_raw, q_inv, q;         // [T, nh*d], [T*nh], [T, nh, d]
  host_buffer lse, attn;               // [T, nh], [T, nh*d]  attention core
  host_buffer o, o_inv;                // [T, H], [T]  o_proj output, post_attention_layernorm
  host_buffer h_attn;                  // [T, H]  after the attention residual
  host_buffer f, f_inv;                // [T, H], [T]  pre_feedforward_layernorm
  host_buffer gate, up, act;           // [T, I]  gate and up projections, gelu(gate) * up
  host_buffer m_dense, m_dense_inv;    // [T, H], [T]  down_proj output (post_feedforward_layernorm_1 input with MoE)
  host_buffer router_w, router_idx, router_r, router_inv;  // [T, K] F, [T, K] I32, [T, K], [T]
  host_buffer y, y_inv;                // [T, H], [T]  pre_feedforward_layernorm_2
  host_buffer experts, experts_inv;    // [T, H], [T]  experts output, post_feedforward_layernorm_2
  host_buffer m, m_inv;                // [T, H], [T]  the branch entering post_feedforward_layernorm
  host_buffer h_ffn;                   // [T, H]  after the feed-forward residual
  host_buffer ple_a, ple_g;            // [T, P]  per_layer_input_gate output, gated input
  host_buffer ple_o, ple_o_inv;        // [T, H], [T]  per_layer_projection output
  host_buffer h_pre_scale;             // [T, H]  before layer_scalar
  layer_args args;                     // what the layer read (kept in every mode)
};

struct model_activations {
  recompute_mode mode = recompute_mode::none;
  host_buffer c_pre, c_inv;  // [T, L*P], [T*L]  per_layer_model_projection · H^-1/2, its norm's inverse RMS
  host_buffer ple;           // [T, L, P]  the combined per-layer inputs
  std::vector<layer_activations> layers;
  std::map<int, kv_activations> kv;  // by layer: the K/V of every non-shared layer (store layers' in full mode)
  host_buffer h_out;                 // [T, H]  before the final norm
  host_buffer final_inv;             // [T]
  std::map<layer_type, rope_table> rope;  // per layer type
};

}  // namespace tandem::gpu
