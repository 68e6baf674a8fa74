// The forward of the text stack, layer by layer in the exact order of gemma4-architecture.md
// §2.4, in the weights' dtype. Every intermediate lives in a buffer of model_activations: kept
// for the backward when asked, dropped layer by layer otherwise.
#include "gpu/model/forward.h"

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

// Prefixes an op's failure with the layer it happened in.
status in_layer(status s, int layer) {
  if (s.is_ok()) return s;
  return status(s.code(), "layer " + std::to_string(layer) + ": " + s.message());
}

#define TANDEM_LAYER(layer, expr) TANDEM_RETURN_IF_ERROR(in_layer((expr), (layer)))

// The embedding scale as the model applies it: √width rounded to the compute dtype.
double embed_scale(std::int64_t width, dtype type) {
  const double s = std::sqrt(static_cast<double>(width));
  return type == dtype::float64 ? s : static_cast<float>(s);
}

// Allocates the buffers of one forward in the compute dtype.
struct alloc {
  dtype type;
  host_buffer operator()(std::vector<std::int64_t> shape) const { return host_buffer(type, std::move(shape)); }
};

status attention_block(const model_config& c, int l, const layer_weights& w, const packed_batch& batch,
                       const std::pair<host_buffer, host_buffer>& rope, model_activations& act, layer_activations& s,
                       const alloc& make, const tracer& trace) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = s.a.shape()[0], nh = c.num_attention_heads, d = L.head_dim, g = L.num_key_value_heads;
  const double eps = c.rms_norm_eps;
  s.q_raw = make({T, nh * d});
  s.q_inv = make({T * nh});
  s.q = make({T, nh, d});
  TANDEM_RETURN_IF_ERROR(linear_forward(s.a, w.q_proj, s.q_raw));
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(s.q_raw.view().reshaped({T * nh, d}), w.q_norm, eps, s.q.view().reshaped({T * nh, d}), s.q_inv));
  TANDEM_RETURN_IF_ERROR(rope_forward(s.q, rope.first, rope.second, s.q));
  trace(s.q, "q", l);
  if (!L.is_kv_shared) {
    kv_activations kv{make({T, g * d}), make({T * g}), make({T, g, d}), {}, make({T * g}), make({T, g, d})};
    TANDEM_RETURN_IF_ERROR(linear_forward(s.a, w.k_proj, kv.k_raw));
    if (!w.v_proj.empty()) {
      kv.v_raw = make({T, g * d});
      TANDEM_RETURN_IF_ERROR(linear_forward(s.a, w.v_proj, kv.v_raw));
    }
    // k_eq_v: V is the raw key projection, normed without scale.
    const host_buffer& v_in = w.v_proj.empty() ? kv.k_raw : kv.v_raw;
    TANDEM_RETURN_IF_ERROR(rmsnorm_forward(kv.k_raw.view().reshaped({T * g, d}), w.k_norm, eps, kv.k.view().reshaped({T * g, d}), kv.k_inv));
    TANDEM_RETURN_IF_ERROR(rope_forward(kv.k, rope.first, rope.second, kv.k));
    TANDEM_RETURN_IF_ERROR(rmsnorm_forward(v_in.view().reshaped({T * g, d}), tensor{}, eps, kv.v.view().reshaped({T * g, d}), kv.v_inv));
    act.kv[l] = std::move(kv);
  }
  const auto source = act.kv.find(L.kv_source_layer);
  if (source == act.kv.end())
    return status(status_code::invalid_argument, "reads the K/V of layer " + std::to_string(L.kv_source_layer) + ", which has none");
  trace(source->second.k, "k", l);
  trace(source->second.v, "v", l);
  s.attn = make({T, nh * d});
  s.lse = make({T, nh});
  attention_options options;
  options.scaling = 1.0;
  options.sliding_window = L.type == layer_type::sliding ? c.sliding_window : 0;
  TANDEM_RETURN_IF_ERROR(attention_forward(s.q, source->second.k, source->second.v, batch.cu_seqlens,
                                           s.attn.view().reshaped({T, nh, d}), s.lse, options));
  trace(s.attn, "attn_core", l);
  s.o = make({T, c.hidden_size});
  return linear_forward(s.attn, w.o_proj, s.o);
}

// s.m = the feed-forward branch of §2.4 (dense MLP, plus the MoE block when enabled), before
// post_feedforward_layernorm; s.h_attn is the residual stream entering it.
status feedforward_block(const model_config& c, int l, const layer_weights& w, layer_activations& s, const alloc& make,
                         const tracer& trace) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = s.h_attn.shape()[0], H = c.hidden_size, I = L.intermediate_size;
  const double eps = c.rms_norm_eps;
  const host_buffer& r = s.h_attn;
  s.f = make({T, H});
  s.f_inv = make({T});
  s.gate = make({T, I});
  s.up = make({T, I});
  s.act = make({T, I});
  s.m_dense = make({T, H});
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(r, w.pre_feedforward_norm, eps, s.f, s.f_inv));
  TANDEM_RETURN_IF_ERROR(linear_forward(s.f, w.gate_proj, s.gate));
  TANDEM_RETURN_IF_ERROR(linear_forward(s.f, w.up_proj, s.up));
  TANDEM_RETURN_IF_ERROR(gated_gelu_forward(s.gate, s.up, s.act));
  TANDEM_RETURN_IF_ERROR(linear_forward(s.act, w.down_proj, s.m_dense));
  trace(s.m_dense, "mlp_out", l);
  if (!c.enable_moe_block) {
    s.m = s.m_dense;  // the same buffer: post_feedforward_layernorm reads the dense branch itself
    return status::ok();
  }
  const std::int64_t K = c.top_k_experts;
  s.m = make({T, H});
  s.m_dense_inv = make({T});
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(s.m_dense, w.post_feedforward_norm_1, eps, s.m, s.m_dense_inv));
  s.router_w = make({T, K});
  s.router_idx = host_buffer(dtype::int32, {T, K});
  s.router_r = make({T, K});
  s.router_inv = make({T});
  TANDEM_RETURN_IF_ERROR(moe_router_forward(r, w.router_scale, w.router_proj, w.router_per_expert_scale, s.router_w,
                                            s.router_idx, s.router_r, s.router_inv, eps));
  s.y = make({T, H});
  s.y_inv = make({T});
  s.experts = make({T, H});
  s.experts_inv = make({T});
  host_buffer normed = make({T, H});
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(r, w.pre_feedforward_norm_2, eps, s.y, s.y_inv));
  TANDEM_RETURN_IF_ERROR(moe_experts_forward(s.y, w.experts_gate_up, w.experts_down, s.router_w, s.router_idx, s.experts));
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(s.experts, w.post_feedforward_norm_2, eps, normed, s.experts_inv));
  trace(normed, "moe_out", l);
  return add_forward(s.m, normed, s.m);
}

status check_batch(const model_config& c, const model_weights& w, const packed_batch& b, const tensor& hidden) {
  constexpr const char* op = "forward_hidden";
  TANDEM_RETURN_IF_ERROR(expect_shape(b.tokens, op, "tokens", {any}));
  TANDEM_RETURN_IF_ERROR(expect_type(b.tokens, op, "tokens", dtype::int32));
  TANDEM_RETURN_IF_ERROR(expect_shape(b.positions, op, "positions", {b.tokens.dim(0)}));
  TANDEM_RETURN_IF_ERROR(expect_type(b.positions, op, "positions", dtype::int32));
  TANDEM_RETURN_IF_ERROR(expect_shape(b.cu_seqlens, op, "cu_seqlens", {any}));
  TANDEM_RETURN_IF_ERROR(expect_shape(hidden, op, "hidden", {b.tokens.dim(0), c.hidden_size}));
  TANDEM_RETURN_IF_ERROR(expect_type(hidden, op, "hidden", w.embed_tokens.type()));
  return require(w.layers.size() == static_cast<std::size_t>(c.num_hidden_layers), op, "weights bound for another config");
}

}  // namespace

status forward_hidden(const model_config& c, const model_weights& w, const packed_batch& batch, const tensor& hidden,
                      const tracer& trace, model_activations* keep) {
  TANDEM_RETURN_IF_ERROR(check_batch(c, w, batch, hidden));
  const std::int64_t T = batch.tokens.dim(0), H = c.hidden_size, P = c.hidden_size_per_layer_input;
  const std::int64_t L = c.num_hidden_layers;
  const double eps = c.rms_norm_eps;
  const dtype type = w.embed_tokens.type();
  const alloc make{type};
  model_activations local;
  model_activations& act = keep ? *keep : local;
  act = model_activations{};
  act.layers.resize(static_cast<std::size_t>(L));

  host_buffer h = make({T, H});
  TANDEM_RETURN_IF_ERROR(embedding_forward(batch.tokens, w.embed_tokens, embed_scale(H, type), h));
  trace(h, "embed");

  if (P > 0) {  // §2.2: ple = (norm(projection(x0) · H^-1/2) + table[ids] · √P) · 2^-1/2
    act.c_pre = make({T, L * P});
    act.c_inv = make({T * L});
    act.ple = make({T, L, P});
    host_buffer t = make({T, L * P});
    const tensor ple2 = act.ple.view().reshaped({T, L * P});
    TANDEM_RETURN_IF_ERROR(embedding_forward(batch.tokens, w.embed_tokens_per_layer, embed_scale(P, type), t));
    TANDEM_RETURN_IF_ERROR(linear_forward(h, w.ple_model_projection, act.c_pre));
    TANDEM_RETURN_IF_ERROR(scale_forward(act.c_pre, 1.0 / std::sqrt(static_cast<double>(H)), act.c_pre));
    TANDEM_RETURN_IF_ERROR(rmsnorm_forward(act.c_pre.view().reshaped({T * L, P}), w.ple_projection_norm, eps,
                                           act.ple.view().reshaped({T * L, P}), act.c_inv));
    TANDEM_RETURN_IF_ERROR(ple_combine_forward(ple2, t, ple2));
    trace(act.ple, "ple");
  }

  for (const layer_config& layer : c.layers) {
    if (act.rope.count(layer.type)) continue;
    host_buffer inv_freq(dtype::float32, {layer.head_dim / 2});
    TANDEM_RETURN_IF_ERROR(rope_inv_freq(c.rope_for(layer.type), layer.head_dim, inv_freq));
    auto& [cos, sin] = act.rope[layer.type];
    cos = make({T, layer.head_dim});
    sin = make({T, layer.head_dim});
    TANDEM_RETURN_IF_ERROR(rope_tables(batch.positions, inv_freq, cos, sin));
  }

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const layer_weights& lw = w.layers[static_cast<std::size_t>(l)];
    const layer_config& layer = c.layers[static_cast<std::size_t>(l)];
    layer_activations& s = act.layers[static_cast<std::size_t>(l)];
    s.h_in = h;
    s.a = make({T, H});
    s.a_inv = make({T});
    // h = h + post_attention_norm(attention(input_norm(h)))
    TANDEM_LAYER(l, rmsnorm_forward(h, lw.input_norm, eps, s.a, s.a_inv));
    TANDEM_LAYER(l, attention_block(c, l, lw, batch, act.rope.at(layer.type), act, s, make, trace));
    host_buffer branch = make({T, H});
    s.o_inv = make({T});
    TANDEM_LAYER(l, rmsnorm_forward(s.o, lw.post_attention_norm, eps, branch, s.o_inv));
    trace(branch, "attn_out", l);
    s.h_attn = make({T, H});
    TANDEM_LAYER(l, add_forward(h, branch, s.h_attn));
    trace(s.h_attn, "attn_residual", l);
    // h = h + post_feedforward_norm(mlp(...) [+ moe(...)])
    TANDEM_LAYER(l, feedforward_block(c, l, lw, s, make, trace));
    s.m_inv = make({T});
    TANDEM_LAYER(l, rmsnorm_forward(s.m, lw.post_feedforward_norm, eps, branch, s.m_inv));
    s.h_ffn = make({T, H});
    TANDEM_LAYER(l, add_forward(s.h_attn, branch, s.h_ffn));
    trace(s.h_ffn, "ffn_residual", l);
    s.h_pre_scale = s.h_ffn;
    if (P > 0) {  // h = h + post_ple_norm(ple_projection(gelu(ple_gate(h)) * ple_l))
      s.ple_a = make({T, P});
      s.ple_g = make({T, P});
      s.ple_o = make({T, H});
      s.ple_o_inv = make({T});
      TANDEM_LAYER(l, linear_forward(s.h_ffn, lw.ple_gate, s.ple_a));
      TANDEM_LAYER(l, ple_gate_forward(s.ple_a, act.ple, l, s.ple_g));
      TANDEM_LAYER(l, linear_forward(s.ple_g, lw.ple_projection, s.ple_o));
      TANDEM_LAYER(l, rmsnorm_forward(s.ple_o, lw.ple_post_norm, eps, branch, s.ple_o_inv));
      trace(branch, "ple_out", l);
      s.h_pre_scale = make({T, H});
      TANDEM_LAYER(l, add_forward(s.h_ffn, branch, s.h_pre_scale));
    }
    h = make({T, H});
    TANDEM_LAYER(l, scale_by_forward(s.h_pre_scale, lw.layer_scalar, h));
    trace(h, "layer_out", l);
    if (!keep) {  // inference: only the K/V that later layers read survive a layer
      if (!layer.is_kv_shared && !layer.is_kv_store) act.kv.erase(l);
      s = layer_activations{};
    }
  }
  act.h_out = h;
  act.final_inv = make({T});
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(h, w.final_norm, eps, hidden, act.final_inv));
  trace(hidden, "final_norm");
  return status::ok();
}

status head_logits(const model_config& c, const model_weights& w, const tensor& hidden_rows, const tensor& logits) {
  TANDEM_RETURN_IF_ERROR(linear_forward(hidden_rows, w.lm_head, logits));
  if (c.final_logit_softcapping) TANDEM_RETURN_IF_ERROR(softcap_forward(logits, *c.final_logit_softcapping, logits));
  return status::ok();
}

status forward_logprobs(const model_config& c, const model_weights& w, const packed_batch& batch, const tensor& targets,
                        const sampling_params& params, const tensor& logprobs, std::int64_t chunk_rows, const tracer& trace) {
  constexpr const char* op = "forward_logprobs";
  const std::int64_t T = batch.tokens.dim(0);
  TANDEM_RETURN_IF_ERROR(expect_shape(targets, op, "targets", {T}));
  TANDEM_RETURN_IF_ERROR(expect_shape(logprobs, op, "logprobs", {T}));
  TANDEM_RETURN_IF_ERROR(require(chunk_rows > 0, op, "chunk_rows must be positive"));
  TANDEM_RETURN_IF_ERROR(check_sampling_params(op, params, false));
  const dtype type = w.embed_tokens.type();
  host_buffer hidden(type, {T, c.hidden_size});
  TANDEM_RETURN_IF_ERROR(forward_hidden(c, w, batch, hidden, trace));
  host_buffer logits(type, {std::min(chunk_rows, std::max<std::int64_t>(T, 1)), c.vocab_size});
  for (std::int64_t begin = 0; begin < T; begin += chunk_rows) {
    const std::int64_t end = std::min(T, begin + chunk_rows);
    const tensor rows = logits.view().rows(0, end - begin);
    TANDEM_RETURN_IF_ERROR(head_logits(c, w, hidden.view().rows(begin, end), rows));
    TANDEM_RETURN_IF_ERROR(logprobs_forward(rows, targets.rows(begin, end), params, logprobs.rows(begin, end)));
  }
  return status::ok();
}

}  // namespace tandem::gpu
