// A decoder layer's forward and backward over the ops; each block's backward mirrors its forward.
#include "gpu/model/layer.h"

#include "gpu/core/memory.h"
#include "gpu/ops/attention.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/gated_mlp.h"
#include "gpu/ops/linear.h"
#include "gpu/ops/moe.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/paged_attention.h"
#include "gpu/ops/per_layer_input.h"
#include "gpu/ops/rmsnorm.h"
#include "gpu/ops/rope.h"

namespace tandem::gpu {
namespace {

using namespace ops;

// Buffers on the context's device in the dtype of `like`, for outputs that the next op writes
// whole: unfilled (no memset on the device; NaN on the CPU, where the tests would see a read before
// the write).
status make(const exec_context& ctx, const device_buffer& like, std::initializer_list<buffer_request> requests) {
  return allocate_unfilled_buffers(ctx, like.type(), requests);
}

// Zero-filled, for outputs that ops accumulate into.
status make_zeros(const exec_context& ctx, const device_buffer& like, std::initializer_list<buffer_request> requests) {
  return allocate_buffers(ctx, like.type(), requests);
}

// The dtype of a saved statistic (inverse RMS, log-sum-exp) beside values of `like`'s dtype.
dtype stat(const device_buffer& like) { return statistics_type(like.type()); }

status copy(const exec_context& ctx, const tensor& from, const device_buffer& to) {
  return copy_on_device(ctx, to.data<std::byte>(), from.data(), from.bytes());
}

attention_options attention_of(const model_config& c, const layer_config& L) {
  attention_options o;
  o.scaling = 1.0;
  o.sliding_window = L.type == layer_type::sliding ? c.sliding_window : 0;
  return o;
}

// y = rope(rmsnorm(x)·w) per head, in one pass (x [T, heads, d]); the norm alone without a table.
status norm_rope(const exec_context& ctx, const rope_table* t, const tensor& x, const tensor& w, double eps, const tensor& y,
                 const tensor& inv_rms) {
  if (t) return rmsnorm_rope_forward(ctx, x, w, eps, t->cos, t->sin, y, inv_rms);
  const std::int64_t rows = x.dim(0) * x.dim(1), d = x.dim(2);
  return rmsnorm_forward(ctx, x.reshaped({rows, d}), w, eps, y.reshaped({rows, d}), inv_rms);
}
status unrope_if(const exec_context& ctx, const rope_table* t, const tensor& dx) { return t ? rope_backward(ctx, dx, t->cos, t->sin, dx) : status::ok(); }

// --- attention ---------------------------------------------------------------------------------

status kv_forward(const exec_context& ctx, const model_config& c, const layer_config& L, const layer_weights& w, const layer_activations& s,
                  kv_activations& kv) {
  const std::int64_t T = s.a.shape()[0], g = L.num_key_value_heads, d = L.head_dim;
  const double eps = c.rms_norm_eps;
  kv = kv_activations{};
  TANDEM_RETURN_IF_ERROR(make(ctx, s.a, {{&kv.k_raw, {T, g * d}}, {&kv.k_inv, {T * g}, stat(s.a)}, {&kv.k, {T, g, d}}, {&kv.v_inv, {T * g}, stat(s.a)},
                                         {&kv.v, {T, g, d}}}));
  TANDEM_RETURN_IF_ERROR(linear_forward(ctx, s.a, w.k_proj, kv.k_raw));
  if (!w.v_proj.empty()) {
    TANDEM_RETURN_IF_ERROR(make(ctx, s.a, {{&kv.v_raw, {T, g * d}}}));
    TANDEM_RETURN_IF_ERROR(linear_forward(ctx, s.a, w.v_proj, kv.v_raw));
  }
  const device_buffer& v_in = w.v_proj.empty() ? kv.k_raw : kv.v_raw;  // k_eq_v: V is the raw key projection
  TANDEM_RETURN_IF_ERROR(norm_rope(ctx, s.args.k_rope, kv.k_raw.view().reshaped({T, g, d}), w.k_norm, eps, kv.k, kv.k_inv));
  return rmsnorm_forward(ctx, v_in.view().reshaped({T * g, d}), tensor{}, eps, kv.v.view().reshaped({T * g, d}), kv.v_inv);
}

status kv_backward(const exec_context& ctx, const model_config& c, const layer_config& L, const layer_weights& w, const layer_weights& g,
                   const layer_activations& s, const kv_activations& kv, kv_gradients& d, const tensor& da) {
  const std::int64_t T = s.a.shape()[0], gh = L.num_key_value_heads, hd = L.head_dim;
  (void)c;
  TANDEM_RETURN_IF_ERROR(unrope_if(ctx, s.args.k_rope, d.dk));
  device_buffer dk_raw, dv_raw;
  TANDEM_RETURN_IF_ERROR(make(ctx, s.a, {{&dk_raw, {T, gh * hd}}, {&dv_raw, {T, gh * hd}}}));
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, kv.k_raw.view().reshaped({T * gh, hd}), w.k_norm, kv.k_inv,
                                          d.dk.view().reshaped({T * gh, hd}), dk_raw.view().reshaped({T * gh, hd}), g.k_norm));
  const bool k_eq_v = w.v_proj.empty();
  const device_buffer& v_in = k_eq_v ? kv.k_raw : kv.v_raw;
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, v_in.view().reshaped({T * gh, hd}), tensor{}, kv.v_inv,
                                          d.dv.view().reshaped({T * gh, hd}), dv_raw.view().reshaped({T * gh, hd}), tensor{}));
  if (k_eq_v) TANDEM_RETURN_IF_ERROR(add_forward(ctx, dk_raw, dv_raw, dk_raw));  // both paths into k_proj
  else TANDEM_RETURN_IF_ERROR(linear_backward(ctx, s.a, w.v_proj, dv_raw, da, g.v_proj, true));
  return linear_backward(ctx, s.a, w.k_proj, dk_raw, da, g.k_proj, true);
}

// The attention core: attn [T, nh*d] and lse [T, nh] from q and the K/V read.
status core_forward(const exec_context& ctx, const model_config& c, const layer_config& L, const packed_batch& batch, const device_buffer& q,
                    const kv_activations& kv, device_buffer& attn, device_buffer& lse) {
  const std::int64_t T = q.shape()[0], nh = c.num_attention_heads, d = L.head_dim;
  TANDEM_RETURN_IF_ERROR(make(ctx, q, {{&attn, {T, nh * d}}, {&lse, {T, nh}, stat(q)}}));
  return attention_forward(ctx, q, kv.k, kv.v, batch.cu_seqlens, attn.view().reshaped({T, nh, d}), lse, attention_of(c, L));
}

status attention_forward_block(const exec_context& ctx, const model_config& c, int l, const layer_weights& w, const packed_batch& batch,
                               layer_activations& s, kv_activations* own_kv, const tracer& trace) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = s.a.shape()[0], nh = c.num_attention_heads, d = L.head_dim;
  TANDEM_RETURN_IF_ERROR(make(ctx, s.a, {{&s.q_raw, {T, nh * d}}, {&s.q_inv, {T * nh}, stat(s.a)}, {&s.q, {T, nh, d}}}));
  TANDEM_RETURN_IF_ERROR(linear_forward(ctx, s.a, w.q_proj, s.q_raw));
  trace(s.q_raw, "q_raw", l);
  TANDEM_RETURN_IF_ERROR(norm_rope(ctx, s.args.q_rope, s.q_raw.view().reshaped({T, nh, d}), w.q_norm, c.rms_norm_eps, s.q, s.q_inv));
  trace(s.q, "q", l);
  const kv_activations* kv = s.args.shared_kv;
  if (!L.is_kv_shared) {
    if (!own_kv) return status(status_code::invalid_argument, "a non-shared layer needs a place for its K/V");
    TANDEM_RETURN_IF_ERROR(kv_forward(ctx, c, L, w, s, *own_kv));
    kv = own_kv;
  }
  if (const cached_kv* cache = s.args.cache) {  // the K/V of every earlier position are in the cache
    if (kv) {
      trace(kv->k, "k", l);
      trace(kv->v, "v", l);
      TANDEM_RETURN_IF_ERROR(paged_kv_write(ctx, kv->k, kv->v, cache->rows, cache->k_cache, cache->v_cache));
    }
    TANDEM_RETURN_IF_ERROR(make(ctx, s.a, {{&s.attn, {T, nh * d}}, {&s.lse, {T, nh}, stat(s.a)}}));
    TANDEM_RETURN_IF_ERROR(paged_attention_forward(ctx, s.q, cache->k_cache, cache->v_cache, cache->rows,
                                                   s.attn.view().reshaped({T, nh, d}), s.lse, attention_of(c, L)));
  } else {
    if (!kv) return status(status_code::invalid_argument, "a KV-shared layer without the K/V of its store layer");
    trace(kv->k, "k", l);
    trace(kv->v, "v", l);
    TANDEM_RETURN_IF_ERROR(core_forward(ctx, c, L, batch, s.q, *kv, s.attn, s.lse));
  }
  trace(s.attn, "attn_core", l);
  TANDEM_RETURN_IF_ERROR(make(ctx, s.a, {{&s.o, {T, c.hidden_size}}}));
  return linear_forward(ctx, s.attn, w.o_proj, s.o);
}

// --- feed-forward ------------------------------------------------------------------------------

status mlp_activations(const exec_context& ctx, const layer_weights& w, const layer_activations& s, device_buffer& gate, device_buffer& up,
                       device_buffer& act, std::int64_t I) {
  const std::int64_t T = s.f.shape()[0];
  TANDEM_RETURN_IF_ERROR(make(ctx, s.f, {{&gate, {T, I}}, {&up, {T, I}}, {&act, {T, I}}}));
  TANDEM_RETURN_IF_ERROR(linear_forward(ctx, s.f, w.gate_proj, gate));
  TANDEM_RETURN_IF_ERROR(linear_forward(ctx, s.f, w.up_proj, up));
  return gated_gelu_forward(ctx, gate, up, act);
}

// s.m = the feed-forward branch (dense MLP, plus the MoE block when enabled), before
// post_feedforward_layernorm; s.h_attn is the residual stream entering it, s.f its
// pre_feedforward_layernorm (made with h_attn by layer_forward).
status feedforward_forward(const exec_context& ctx, const model_config& c, int l, const layer_weights& w, layer_activations& s, const tracer& trace) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = s.h_attn.shape()[0], H = c.hidden_size;
  const double eps = c.rms_norm_eps;
  const device_buffer& r = s.h_attn;
  TANDEM_RETURN_IF_ERROR(make(ctx, r, {{&s.m_dense, {T, H}}}));
  TANDEM_RETURN_IF_ERROR(mlp_activations(ctx, w, s, s.gate, s.up, s.act, L.intermediate_size));
  TANDEM_RETURN_IF_ERROR(linear_forward(ctx, s.act, w.down_proj, s.m_dense));
  trace(s.m_dense, "mlp_out", l);
  if (!c.enable_moe_block) {
    s.m = s.m_dense;  // the same buffer: post_feedforward_layernorm reads the dense branch itself
    return status::ok();
  }
  const std::int64_t K = c.top_k_experts;
  TANDEM_RETURN_IF_ERROR(make(ctx, r, {{&s.m, {T, H}}, {&s.m_dense_inv, {T}, stat(r)}}));
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(ctx, s.m_dense, w.post_feedforward_norm_1, eps, s.m, s.m_dense_inv));
  TANDEM_RETURN_IF_ERROR(make(ctx, r, {{&s.router_w, {T, K}}, {&s.router_r, {T, K}}, {&s.router_inv, {T}, stat(r)}}));
  TANDEM_RETURN_IF_ERROR(allocate_unfilled_buffers(ctx, dtype::int32, {{&s.router_idx, {T, K}}}));
  TANDEM_RETURN_IF_ERROR(moe_router_forward(ctx, r, w.router_scale, w.router_proj, w.router_per_expert_scale, s.router_w,
                                            s.router_idx, s.router_r, s.router_inv, eps));
  device_buffer normed;
  TANDEM_RETURN_IF_ERROR(make(ctx, r, {{&s.y, {T, H}}, {&s.y_inv, {T}, stat(r)}, {&s.experts, {T, H}}, {&s.experts_inv, {T}, stat(r)}, {&normed, {T, H}}}));
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(ctx, r, w.pre_feedforward_norm_2, eps, s.y, s.y_inv));
  TANDEM_RETURN_IF_ERROR(moe_experts_forward(ctx, s.y, w.experts_gate_up, w.experts_down, s.router_w, s.router_idx, s.experts));
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(ctx, s.experts, w.post_feedforward_norm_2, eps, normed, s.experts_inv));
  trace(normed, "moe_out", l);
  return add_forward(ctx, s.m, normed, s.m);
}

// From dm (the gradient of the branch entering post_feedforward_layernorm) into dr (the residual
// entering the block), accumulated.
status feedforward_backward(const exec_context& ctx, const model_config& c, int l, const layer_weights& w, const layer_weights& g,
                            const layer_activations& s, const tensor& dm, const tensor& dr) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = s.h_attn.shape()[0], H = c.hidden_size, I = L.intermediate_size;
  device_buffer d_dense;
  TANDEM_RETURN_IF_ERROR(make(ctx, s.h_attn, {{&d_dense, {T, H}}}));
  if (c.enable_moe_block) {  // m = norm_1(m_dense) + norm_2(experts(norm_pre2(r), router(r)))
    TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, s.m_dense, w.post_feedforward_norm_1, s.m_dense_inv, dm, d_dense,
                                            g.post_feedforward_norm_1));
    device_buffer d_experts, dy, dweights;
    TANDEM_RETURN_IF_ERROR(make(ctx, s.h_attn, {{&d_experts, {T, H}}, {&dy, {T, H}}, {&dweights, s.router_w.shape()}}));
    TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, s.experts, w.post_feedforward_norm_2, s.experts_inv, dm, d_experts,
                                            g.post_feedforward_norm_2));
    TANDEM_RETURN_IF_ERROR(moe_experts_backward(ctx, s.y, w.experts_gate_up, w.experts_down, s.router_w, s.router_idx, d_experts,
                                                dy, g.experts_gate_up, g.experts_down, dweights));
    TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, s.h_attn, w.pre_feedforward_norm_2, s.y_inv, dy, dr, g.pre_feedforward_norm_2, true));
    TANDEM_RETURN_IF_ERROR(moe_router_backward(ctx, s.h_attn, w.router_scale, w.router_proj, w.router_per_expert_scale,
                                               s.router_idx, s.router_r, s.router_inv, dweights, dr, g.router_proj,
                                               g.router_scale, g.router_per_expert_scale, true));
  } else {
    TANDEM_RETURN_IF_ERROR(copy(ctx, dm, d_dense));
  }
  device_buffer gate = s.gate, up = s.up, act = s.act;
  if (act.empty()) TANDEM_RETURN_IF_ERROR(mlp_activations(ctx, w, s, gate, up, act, I));  // recompute selective
  device_buffer d_act, d_gate, d_up, df;
  TANDEM_RETURN_IF_ERROR(make(ctx, s.f, {{&d_act, {T, I}}, {&d_gate, {T, I}}, {&d_up, {T, I}}, {&df, {T, H}}}));
  TANDEM_RETURN_IF_ERROR(linear_backward(ctx, act, w.down_proj, d_dense, d_act, g.down_proj));
  TANDEM_RETURN_IF_ERROR(gated_gelu_backward(ctx, gate, up, d_act, d_gate, d_up));
  TANDEM_RETURN_IF_ERROR(linear_backward(ctx, s.f, w.gate_proj, d_gate, df, g.gate_proj));
  TANDEM_RETURN_IF_ERROR(linear_backward(ctx, s.f, w.up_proj, d_up, df, g.up_proj, true));
  return rmsnorm_backward(ctx, s.h_attn, w.pre_feedforward_norm, s.f_inv, df, dr, g.pre_feedforward_norm, true);
}

}  // namespace

status layer_forward(const exec_context& ctx, const model_config& c, int l, const layer_weights& w, const packed_batch& batch, layer_activations& s,
                     kv_activations* own_kv, const tensor& h_out, const tracer& trace) {
  const std::int64_t T = s.h_in.shape()[0], H = c.hidden_size, P = c.hidden_size_per_layer_input;
  const double eps = c.rms_norm_eps;
  // Each branch joins the stream through one residual_norm_forward (its norm, the add, the layer
  // scalar at the end, the next norm); the branch itself is kept only for a trace.
  device_buffer branch;
  TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&s.a, {T, H}}, {&s.a_inv, {T}, stat(s.h_in)}, {&s.o_inv, {T}, stat(s.h_in)}, {&s.h_attn, {T, H}}}));
  if (trace.enabled()) TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&branch, {T, H}}}));
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(ctx, s.h_in, w.input_norm, eps, s.a, s.a_inv));
  trace(s.a, "attn_in", l);
  TANDEM_RETURN_IF_ERROR(attention_forward_block(ctx, c, l, w, batch, s, own_kv, trace));
  TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&s.f, {T, H}}, {&s.f_inv, {T}, stat(s.h_in)}}));
  residual_norm_io attn{};
  attn.x = s.o;
  attn.w = w.post_attention_norm;
  attn.residual = s.h_in;
  attn.out = s.h_attn;
  attn.inv_rms = s.o_inv;
  attn.branch = branch;
  attn.next_w = w.pre_feedforward_norm;
  attn.next = s.f;
  attn.next_inv_rms = s.f_inv;
  TANDEM_RETURN_IF_ERROR(residual_norm_forward(ctx, attn, eps));
  trace(branch, "attn_out", l);
  trace(s.h_attn, "attn_residual", l);
  TANDEM_RETURN_IF_ERROR(feedforward_forward(ctx, c, l, w, s, trace));
  TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&s.m_inv, {T}, stat(s.h_in)}, {&s.h_ffn, {T, H}}}));
  residual_norm_io ffn{};
  ffn.x = s.m;
  ffn.w = w.post_feedforward_norm;
  ffn.residual = s.h_attn;
  ffn.inv_rms = s.m_inv;
  s.h_pre_scale = s.h_ffn;
  if (P > 0) {
    ffn.out = s.h_ffn;
    TANDEM_RETURN_IF_ERROR(residual_norm_forward(ctx, ffn, eps));
    trace(s.h_ffn, "ffn_residual", l);
    TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&s.ple_a, {T, P}}, {&s.ple_g, {T, P}}, {&s.ple_o, {T, H}}, {&s.ple_o_inv, {T}, stat(s.h_in)}}));
    TANDEM_RETURN_IF_ERROR(linear_forward(ctx, s.h_ffn, w.ple_gate, s.ple_a));
    TANDEM_RETURN_IF_ERROR(ple_gate_forward(ctx, s.ple_a, s.args.ple, l, s.ple_g));
    TANDEM_RETURN_IF_ERROR(linear_forward(ctx, s.ple_g, w.ple_projection, s.ple_o));
    TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&s.h_pre_scale, {T, H}}}));
    residual_norm_io ple{};
    ple.x = s.ple_o;
    ple.w = w.ple_post_norm;
    ple.residual = s.h_ffn;
    ple.out = h_out;
    ple.inv_rms = s.ple_o_inv;
    ple.branch = branch;
    ple.scale = w.layer_scalar;
    ple.pre_scale = s.h_pre_scale;
    TANDEM_RETURN_IF_ERROR(residual_norm_forward(ctx, ple, eps));
    trace(branch, "ple_out", l);
  } else {  // the stream's scalar right after the feed-forward branch
    ffn.out = h_out;
    ffn.scale = w.layer_scalar;
    ffn.pre_scale = s.h_ffn;
    TANDEM_RETURN_IF_ERROR(residual_norm_forward(ctx, ffn, eps));
    trace(s.h_ffn, "ffn_residual", l);
  }
  trace(h_out, "layer_out", l);
  return status::ok();
}

status layer_backward(const exec_context& ctx, const model_config& c, int l, const layer_weights& w, const layer_weights& g,
                      const packed_batch& batch, const layer_activations& s, const kv_activations& kv, kv_gradients& dkv,
                      const tensor& d_ple, device_buffer& dh) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = s.h_in.shape()[0], H = c.hidden_size, P = c.hidden_size_per_layer_input;
  const std::int64_t nh = c.num_attention_heads, d = L.head_dim;
  // h_out = layer_scalar · h_pre_scale
  device_buffer d_pre, d_ffn;
  TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&d_pre, {T, H}}, {&d_ffn, {T, H}}}));
  TANDEM_RETURN_IF_ERROR(scale_by_backward(ctx, s.h_pre_scale, w.layer_scalar, dh, d_pre, g.layer_scalar));
  TANDEM_RETURN_IF_ERROR(copy(ctx, d_pre, d_ffn));
  if (P > 0) {  // h_pre_scale = h_ffn + post_ple_norm(ple_projection(ple_gate(h_ffn) ⊙ ple_l))
    device_buffer d_o, d_g, d_a;
    TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&d_o, {T, H}}, {&d_g, {T, P}}, {&d_a, {T, P}}}));
    TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, s.ple_o, w.ple_post_norm, s.ple_o_inv, d_pre, d_o, g.ple_post_norm));
    TANDEM_RETURN_IF_ERROR(linear_backward(ctx, s.ple_g, w.ple_projection, d_o, d_g, g.ple_projection));
    TANDEM_RETURN_IF_ERROR(ple_gate_backward(ctx, s.ple_a, s.args.ple, l, d_g, d_a, d_ple));
    TANDEM_RETURN_IF_ERROR(linear_backward(ctx, s.h_ffn, w.ple_gate, d_a, d_ffn, g.ple_gate, true));
  }
  // h_ffn = h_attn + post_feedforward_norm(m)
  device_buffer dm, d_attn;
  TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&dm, {T, H}}, {&d_attn, {T, H}}}));
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, s.m, w.post_feedforward_norm, s.m_inv, d_ffn, dm, g.post_feedforward_norm));
  TANDEM_RETURN_IF_ERROR(copy(ctx, d_ffn, d_attn));
  TANDEM_RETURN_IF_ERROR(feedforward_backward(ctx, c, l, w, g, s, dm, d_attn));
  // h_attn = h_in + post_attention_norm(o_proj(attention(q, k, v)))
  device_buffer d_o, d_core, dq, da;
  TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&d_o, {T, H}}, {&d_core, {T, nh * d}}, {&dq, {T, nh, d}}, {&da, {T, H}}}));
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, s.o, w.post_attention_norm, s.o_inv, d_attn, d_o, g.post_attention_norm));
  device_buffer attn = s.attn, lse = s.lse;
  if (lse.empty()) TANDEM_RETURN_IF_ERROR(core_forward(ctx, c, L, batch, s.q, kv, attn, lse));  // recompute selective
  TANDEM_RETURN_IF_ERROR(linear_backward(ctx, attn, w.o_proj, d_o, d_core, g.o_proj));
  if (dkv.dk.empty()) TANDEM_RETURN_IF_ERROR(make_zeros(ctx, s.h_in, {{&dkv.dk, kv.k.shape()}, {&dkv.dv, kv.v.shape()}}));  // accumulated
  // The forward's output gives the backward its row terms D = dO · O (without it, the backward
  // recomputes the forward for them).
  TANDEM_RETURN_IF_ERROR(attention_backward(ctx, s.q, kv.k, kv.v, batch.cu_seqlens, lse, d_core.view().reshaped({T, nh, d}), dq,
                                            dkv.dk, dkv.dv, attention_of(c, L), false, attn.view().reshaped({T, nh, d})));
  // q = rope_q(q_norm(q_proj(a)))
  TANDEM_RETURN_IF_ERROR(unrope_if(ctx, s.args.q_rope, dq));
  device_buffer dq_raw;
  TANDEM_RETURN_IF_ERROR(make(ctx, s.h_in, {{&dq_raw, {T, nh * d}}}));
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, s.q_raw.view().reshaped({T * nh, d}), w.q_norm, s.q_inv, dq.view().reshaped({T * nh, d}),
                                          dq_raw.view().reshaped({T * nh, d}), g.q_norm));
  TANDEM_RETURN_IF_ERROR(linear_backward(ctx, s.a, w.q_proj, dq_raw, da, g.q_proj));
  if (!L.is_kv_shared) TANDEM_RETURN_IF_ERROR(kv_backward(ctx, c, L, w, g, s, kv, dkv, da));
  // a = input_norm(h_in); the residual passes d_attn straight through.
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, s.h_in, w.input_norm, s.a_inv, da, d_attn, g.input_norm, true));
  dh = d_attn;
  return status::ok();
}

}  // namespace tandem::gpu
