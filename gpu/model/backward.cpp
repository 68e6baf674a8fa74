// The backward of the text stack, layer by layer in reverse, each block the mirror of its
// forward in forward.cpp.
#include "gpu/model/backward.h"

#include <cmath>
#include <cstring>

#include "gpu/ops/attention.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/embedding.h"
#include "gpu/ops/gated_mlp.h"
#include "gpu/ops/linear.h"
#include "gpu/ops/moe.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/per_layer_input.h"
#include "gpu/ops/rmsnorm.h"
#include "gpu/ops/rope.h"
#include "gpu/ops/softcap.h"

namespace tandem::gpu {
namespace {

using namespace ops;

status in_layer(status s, int layer) {
  if (s.is_ok()) return s;
  return status(s.code(), "backward, layer " + std::to_string(layer) + ": " + s.message());
}

#define TANDEM_LAYER(layer, expr) TANDEM_RETURN_IF_ERROR(in_layer((expr), (layer)))

double embed_scale(std::int64_t width, dtype type) {
  const double s = std::sqrt(static_cast<double>(width));
  return type == dtype::float64 ? s : static_cast<float>(s);
}

std::optional<std::int32_t> padding(const model_config& c) {
  if (!c.pad_token_id) return std::nullopt;
  return static_cast<std::int32_t>(*c.pad_token_id);
}

// Gradients of one non-shared layer's K and V (after their norms and RoPE), summed over every
// layer that attends to them.
struct kv_gradients {
  host_buffer dk, dv;  // [T, g, d]
};

// Back through K and V of layer l into its k_proj / v_proj, adding into da (the layer's normed
// input).
status kv_backward(const model_config& c, int l, const layer_weights& w, const layer_weights& g, const layer_activations& s,
                   const kv_activations& kv, kv_gradients& d, const std::pair<host_buffer, host_buffer>& rope,
                   const tensor& da) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = s.a.shape()[0], gh = L.num_key_value_heads, hd = L.head_dim;
  const dtype type = s.a.type();
  // K: rope, then k_norm (with weight), from k_raw.
  TANDEM_RETURN_IF_ERROR(rope_backward(d.dk, rope.first, rope.second, d.dk));
  host_buffer dk_raw(type, {T, gh * hd});
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(kv.k_raw.view().reshaped({T * gh, hd}), w.k_norm, kv.k_inv,
                                          d.dk.view().reshaped({T * gh, hd}), dk_raw.view().reshaped({T * gh, hd}), g.k_norm));
  // V: the scale-less v_norm, from v_raw or (k_eq_v) from k_raw itself.
  const bool k_eq_v = w.v_proj.empty();
  host_buffer dv_raw(type, {T, gh * hd});
  const host_buffer& v_in = k_eq_v ? kv.k_raw : kv.v_raw;
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(v_in.view().reshaped({T * gh, hd}), tensor{}, kv.v_inv,
                                          d.dv.view().reshaped({T * gh, hd}), dv_raw.view().reshaped({T * gh, hd}), tensor{}));
  if (k_eq_v) {
    TANDEM_RETURN_IF_ERROR(add_forward(dk_raw, dv_raw, dk_raw));
  } else {
    TANDEM_RETURN_IF_ERROR(linear_backward(s.a, w.v_proj, dv_raw, da, g.v_proj, true));
  }
  return linear_backward(s.a, w.k_proj, dk_raw, da, g.k_proj, true);
}

// Back through the feed-forward branch: from dm (the gradient of the branch entering
// post_feedforward_layernorm) into dr (the residual entering the block), accumulated.
status feedforward_backward(const model_config& c, int l, const layer_weights& w, const layer_weights& g,
                            const layer_activations& s, const tensor& dm, const tensor& dr) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = s.h_attn.shape()[0], H = c.hidden_size, I = L.intermediate_size;
  const dtype type = s.h_attn.type();
  host_buffer d_dense(type, {T, H});
  if (c.enable_moe_block) {
    // m = norm_1(m_dense) + norm_2(experts(norm_pre2(r), router(r)))
    TANDEM_RETURN_IF_ERROR(rmsnorm_backward(s.m_dense, w.post_feedforward_norm_1, s.m_dense_inv, dm, d_dense,
                                            g.post_feedforward_norm_1));
    host_buffer d_experts(type, {T, H}), dy(type, {T, H}), dweights(type, s.router_w.shape());
    TANDEM_RETURN_IF_ERROR(rmsnorm_backward(s.experts, w.post_feedforward_norm_2, s.experts_inv, dm, d_experts,
                                            g.post_feedforward_norm_2));
    TANDEM_RETURN_IF_ERROR(moe_experts_backward(s.y, w.experts_gate_up, w.experts_down, s.router_w, s.router_idx, d_experts,
                                                dy, g.experts_gate_up, g.experts_down, dweights));
    TANDEM_RETURN_IF_ERROR(rmsnorm_backward(s.h_attn, w.pre_feedforward_norm_2, s.y_inv, dy, dr, g.pre_feedforward_norm_2, true));
    TANDEM_RETURN_IF_ERROR(moe_router_backward(s.h_attn, w.router_scale, w.router_proj, w.router_per_expert_scale,
                                               s.router_idx, s.router_r, s.router_inv, dweights, dr, g.router_proj,
                                               g.router_scale, g.router_per_expert_scale, true));
  } else {
    std::memcpy(d_dense.data<std::byte>(), dm.data(), static_cast<std::size_t>(dm.bytes()));
  }
  host_buffer d_act(type, {T, I}), d_gate(type, {T, I}), d_up(type, {T, I}), df(type, {T, H});
  TANDEM_RETURN_IF_ERROR(linear_backward(s.act, w.down_proj, d_dense, d_act, g.down_proj));
  TANDEM_RETURN_IF_ERROR(gated_gelu_backward(s.gate, s.up, d_act, d_gate, d_up));
  TANDEM_RETURN_IF_ERROR(linear_backward(s.f, w.gate_proj, d_gate, df, g.gate_proj));
  TANDEM_RETURN_IF_ERROR(linear_backward(s.f, w.up_proj, d_up, df, g.up_proj, true));
  return rmsnorm_backward(s.h_attn, w.pre_feedforward_norm, s.f_inv, df, dr, g.pre_feedforward_norm, true);
}

}  // namespace

status head_backward(const model_config& c, const model_weights& w, const tensor& hidden, const tensor& targets,
                     const sampling_params& params, const tensor& dlogprobs, const tensor& d_hidden,
                     const model_weights& grads, std::int64_t chunk_rows) {
  constexpr const char* op = "head_backward";
  const std::int64_t T = hidden.dim(0), V = c.vocab_size;
  TANDEM_RETURN_IF_ERROR(expect_shape(targets, op, "targets", {T}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dlogprobs, op, "dlogprobs", {T}));
  TANDEM_RETURN_IF_ERROR(expect_shape(d_hidden, op, "d_hidden", {T, c.hidden_size}));
  TANDEM_RETURN_IF_ERROR(require(chunk_rows > 0, op, "chunk_rows must be positive"));
  const dtype type = hidden.type();
  const std::int64_t rows = std::min(chunk_rows, std::max<std::int64_t>(T, 1));
  host_buffer raw(type, {rows, V}), logits(type, {rows, V}), dlogits(type, {rows, V});
  for (std::int64_t begin = 0; begin < T; begin += chunk_rows) {
    const std::int64_t end = std::min(T, begin + chunk_rows), n = end - begin;
    const tensor x = raw.view().rows(0, n), y = logits.view().rows(0, n), dy = dlogits.view().rows(0, n);
    const tensor h = hidden.rows(begin, end);
    TANDEM_RETURN_IF_ERROR(linear_forward(h, w.lm_head, x));
    if (c.final_logit_softcapping) {
      TANDEM_RETURN_IF_ERROR(softcap_forward(x, *c.final_logit_softcapping, y));
      TANDEM_RETURN_IF_ERROR(logprobs_backward(y, targets.rows(begin, end), params, dlogprobs.rows(begin, end), dy));
      TANDEM_RETURN_IF_ERROR(softcap_backward(x, *c.final_logit_softcapping, dy, dy));
    } else {
      TANDEM_RETURN_IF_ERROR(logprobs_backward(x, targets.rows(begin, end), params, dlogprobs.rows(begin, end), dy));
    }
    TANDEM_RETURN_IF_ERROR(linear_backward(h, w.lm_head, dy, d_hidden.rows(begin, end), grads.lm_head));
  }
  return status::ok();
}

status model_backward(const model_config& c, const model_weights& w, const packed_batch& batch,
                      const model_activations& act, const tensor& d_hidden, const model_weights& g) {
  const std::int64_t T = batch.tokens.dim(0), H = c.hidden_size, P = c.hidden_size_per_layer_input;
  const std::int64_t L = c.num_hidden_layers;
  const dtype type = w.embed_tokens.type();
  TANDEM_RETURN_IF_ERROR(require(act.layers.size() == static_cast<std::size_t>(L) && act.h_out.numel() == T * H,
                                 "model_backward", "the activations are not those of this batch's forward"));

  host_buffer dh(type, {T, H});
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(act.h_out, w.final_norm, act.final_inv, d_hidden, dh, g.final_norm));
  host_buffer d_ple;
  if (P > 0) d_ple = host_buffer(type, {T, L, P});
  std::map<int, kv_gradients> dkv;

  for (int l = c.num_hidden_layers - 1; l >= 0; --l) {
    const layer_weights& lw = w.layers[static_cast<std::size_t>(l)];
    const layer_weights& lg = g.layers[static_cast<std::size_t>(l)];
    const layer_config& layer = c.layers[static_cast<std::size_t>(l)];
    const layer_activations& s = act.layers[static_cast<std::size_t>(l)];
    const auto& rope = act.rope.at(layer.type);
    const std::int64_t nh = c.num_attention_heads, d = layer.head_dim;

    // h = layer_scalar · h_pre_scale
    host_buffer d_pre(type, {T, H});
    TANDEM_LAYER(l, scale_by_backward(s.h_pre_scale, lw.layer_scalar, dh, d_pre, lg.layer_scalar));
    // h_pre_scale = h_ffn + post_ple_norm(ple_projection(ple_gate(h_ffn, ple_l)))
    host_buffer d_ffn(type, {T, H});
    std::memcpy(d_ffn.data<std::byte>(), d_pre.data<std::byte>(), static_cast<std::size_t>(d_pre.view().bytes()));
    if (P > 0) {
      host_buffer d_o(type, {T, H}), d_g(type, {T, P}), d_a(type, {T, P});
      TANDEM_LAYER(l, rmsnorm_backward(s.ple_o, lw.ple_post_norm, s.ple_o_inv, d_pre, d_o, lg.ple_post_norm));
      TANDEM_LAYER(l, linear_backward(s.ple_g, lw.ple_projection, d_o, d_g, lg.ple_projection));
      TANDEM_LAYER(l, ple_gate_backward(s.ple_a, act.ple, l, d_g, d_a, d_ple));
      TANDEM_LAYER(l, linear_backward(s.h_ffn, lw.ple_gate, d_a, d_ffn, lg.ple_gate, true));
    }
    // h_ffn = h_attn + post_feedforward_norm(m)
    host_buffer dm(type, {T, H}), d_attn(type, {T, H});
    TANDEM_LAYER(l, rmsnorm_backward(s.m, lw.post_feedforward_norm, s.m_inv, d_ffn, dm, lg.post_feedforward_norm));
    std::memcpy(d_attn.data<std::byte>(), d_ffn.data<std::byte>(), static_cast<std::size_t>(d_ffn.view().bytes()));
    TANDEM_LAYER(l, feedforward_backward(c, l, lw, lg, s, dm, d_attn));
    // h_attn = h_in + post_attention_norm(o_proj(attention(q, k, v)))
    host_buffer d_o(type, {T, H}), d_core(type, {T, nh * d}), dq(type, {T, nh, d}), da(type, {T, H});
    TANDEM_LAYER(l, rmsnorm_backward(s.o, lw.post_attention_norm, s.o_inv, d_attn, d_o, lg.post_attention_norm));
    TANDEM_LAYER(l, linear_backward(s.attn, lw.o_proj, d_o, d_core, lg.o_proj));
    const kv_activations& kv = act.kv.at(layer.kv_source_layer);
    kv_gradients& dsource = dkv[layer.kv_source_layer];
    if (dsource.dk.view().empty()) {
      const layer_config& src = c.layers[static_cast<std::size_t>(layer.kv_source_layer)];
      dsource.dk = host_buffer(type, {T, src.num_key_value_heads, src.head_dim});
      dsource.dv = host_buffer(type, {T, src.num_key_value_heads, src.head_dim});
    }
    attention_options options;
    options.scaling = 1.0;
    options.sliding_window = layer.type == layer_type::sliding ? c.sliding_window : 0;
    TANDEM_LAYER(l, attention_backward(s.q, kv.k, kv.v, batch.cu_seqlens, s.lse, d_core.view().reshaped({T, nh, d}), dq,
                                       dsource.dk, dsource.dv, options));
    // q = rope(q_norm(q_proj(a)))
    TANDEM_LAYER(l, rope_backward(dq, rope.first, rope.second, dq));
    host_buffer dq_raw(type, {T, nh * d});
    TANDEM_LAYER(l, rmsnorm_backward(s.q_raw.view().reshaped({T * nh, d}), lw.q_norm, s.q_inv, dq.view().reshaped({T * nh, d}),
                                     dq_raw.view().reshaped({T * nh, d}), lg.q_norm));
    TANDEM_LAYER(l, linear_backward(s.a, lw.q_proj, dq_raw, da, lg.q_proj));
    if (!layer.is_kv_shared) {  // every layer reading this K/V has been through: its gradient is whole
      TANDEM_LAYER(l, kv_backward(c, l, lw, lg, s, kv, dsource, rope, da));
    }
    // a = input_norm(h_in); the residual passes d_attn straight through.
    TANDEM_LAYER(l, rmsnorm_backward(s.h_in, lw.input_norm, s.a_inv, da, d_attn, lg.input_norm, true));
    dh = d_attn;
  }

  if (P > 0) {  // the per-layer inputs: ple = (norm(c_pre) + t) · 2^-1/2
    const tensor dple2 = d_ple.view().reshaped({T, L * P});
    host_buffer dc(type, {T, L * P}), dt(type, {T, L * P}), dc_pre(type, {T, L * P});
    TANDEM_RETURN_IF_ERROR(ple_combine_backward(dple2, dc, dt));
    TANDEM_RETURN_IF_ERROR(embedding_backward(batch.tokens, dt, embed_scale(P, type), g.embed_tokens_per_layer, padding(c)));
    TANDEM_RETURN_IF_ERROR(rmsnorm_backward(act.c_pre.view().reshaped({T * L, P}), w.ple_projection_norm, act.c_inv,
                                            dc.view().reshaped({T * L, P}), dc_pre.view().reshaped({T * L, P}),
                                            g.ple_projection_norm));
    TANDEM_RETURN_IF_ERROR(scale_forward(dc_pre, 1.0 / std::sqrt(static_cast<double>(H)), dc_pre));
    TANDEM_RETURN_IF_ERROR(linear_backward(act.layers[0].h_in, w.ple_model_projection, dc_pre, dh, g.ple_model_projection, true));
  }
  return embedding_backward(batch.tokens, dh, embed_scale(H, type), g.embed_tokens, padding(c));
}

}  // namespace tandem::gpu
