// The parameter tensors of a Gemma 4 text stack bound once to views of a slab laid out by
// build_layout(): the model code reads fields, never names. A gradient slab with the same layout
// binds to the same struct. Absent tensors (no PLE, no MoE, no K/V on a KV-shared layer, no v_proj
// on a k_eq_v full layer, a tied head) are empty views.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "gpu/core/slab.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"
#include "gpu/model/config.h"
#include "gpu/model/layout.h"

namespace tandem::gpu {

struct layer_weights {
  tensor input_norm;        // [H]
  tensor q_proj;            // [nh*d, H]
  tensor q_norm;            // [d]
  tensor k_proj;            // [kv*d, H]     empty on KV-shared layers
  tensor k_norm;            // [d]           empty on KV-shared layers
  tensor v_proj;            // [kv*d, H]     empty on KV-shared and k_eq_v full layers
  tensor o_proj;            // [H, nh*d]
  tensor post_attention_norm;  // [H]
  tensor pre_feedforward_norm;  // [H]
  tensor gate_proj, up_proj;    // [I_l, H]
  tensor down_proj;             // [H, I_l]
  tensor post_feedforward_norm;  // [H]
  // MoE (enable_moe_block), else empty:
  tensor post_feedforward_norm_1;  // [H]  dense branch out
  tensor router_proj;              // [E, H]
  tensor router_scale;             // [H]
  tensor router_per_expert_scale;  // [E]
  tensor pre_feedforward_norm_2;   // [H]  experts in
  tensor experts_gate_up;          // [E, 2*Im, H]
  tensor experts_down;             // [E, H, Im]
  tensor post_feedforward_norm_2;  // [H]  experts out
  // Per-layer input (P > 0), else empty:
  tensor ple_gate;       // [P, H]
  tensor ple_projection;  // [H, P]
  tensor ple_post_norm;   // [H]
  tensor layer_scalar;    // [1]
};

struct model_weights {
  tensor embed_tokens;            // [V, H]
  tensor embed_tokens_per_layer;  // [V_ple, L*P]  empty without PLE
  tensor ple_model_projection;    // [L*P, H]      empty without PLE
  tensor ple_projection_norm;     // [P]           empty without PLE
  tensor final_norm;              // [H]
  tensor lm_head;                 // [V, H]: embed_tokens when tied
  std::vector<layer_weights> layers;
};

/// Views of every tensor of `layout` inside `s` (resident, at least layout.total_bytes(), in the
/// layout's dtype). invalid_argument when the slab is too small.
result<model_weights> bind_weights(const model_config& config, const model_layout& layout, const slab& s);

/// Views of every tensor of `layout` at its own address on `dev` (addresses[i] holds
/// layout.tensors[i]): the weights a colocated generator reads in place from a train engine.
result<model_weights> bind_weights(const model_config& config, const model_layout& layout,
                                   const std::vector<const std::byte*>& addresses, device dev);

/// The binding itself: `view` gives the tensor of a layout entry (and its index).
result<model_weights> bind_with(const model_config& config, const model_layout& layout,
                                const std::function<result<tensor>(const tensor_entry&, std::size_t)>& view);

}  // namespace tandem::gpu
