// The forward of the text stack, layer by layer in the exact order of gemma4-architecture.md
// §2.4, over host scratch buffers (the activation slab of training comes with the backward).
#include "gpu/model/forward.h"

#include <cmath>
#include <cstring>
#include <map>

#include "gpu/core/host_buffer.h"
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

// cos and sin [T, d] of one layer type for the batch's positions.
struct rope_table {
  host_buffer cos, sin;
};

status make_rope(const rope_config& rope, std::int64_t d, const tensor& positions, rope_table& out) {
  host_buffer inv_freq(dtype::float32, {d / 2});
  TANDEM_RETURN_IF_ERROR(rope_inv_freq(rope, d, inv_freq));
  out.cos = host_buffer(dtype::float32, {positions.dim(0), d});
  out.sin = host_buffer(dtype::float32, {positions.dim(0), d});
  return rope_tables(positions, inv_freq, out.cos, out.sin);
}

// The embedding scale as the model applies it: √width rounded to the compute dtype.
double embed_scale(std::int64_t width) { return static_cast<float>(std::sqrt(static_cast<double>(width))); }

// Keys and values a layer attends to: its own, or its store layer's.
struct kv_pair {
  host_buffer k, v;  // F32 [T, kv, d]
};

status attention_block(const model_config& c, int l, const layer_weights& w, const tensor& a, const packed_batch& batch,
                       const rope_table& rope, std::map<int, kv_pair>& kv, const tensor& out, const tracer& trace) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = a.dim(0), nh = c.num_attention_heads, d = L.head_dim, g = L.num_key_value_heads;
  const double eps = c.rms_norm_eps;
  host_buffer q(dtype::float32, {T, nh, d});
  TANDEM_RETURN_IF_ERROR(linear_forward(a, w.q_proj, q.view().reshaped({T, nh * d})));
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(q.view().reshaped({T * nh, d}), w.q_norm, eps, q.view().reshaped({T * nh, d})));
  TANDEM_RETURN_IF_ERROR(rope_forward(q, rope.cos, rope.sin, q));
  trace(q, "q", l);
  if (!L.is_kv_shared) {
    kv_pair own{host_buffer(dtype::float32, {T, g, d}), host_buffer(dtype::float32, {T, g, d})};
    TANDEM_RETURN_IF_ERROR(linear_forward(a, w.k_proj, own.k.view().reshaped({T, g * d})));
    if (w.v_proj.empty()) {  // k_eq_v: V is the raw key projection, normed without scale
      std::memcpy(own.v.data<float>(), own.k.data<float>(), static_cast<std::size_t>(own.k.view().bytes()));
    } else {
      TANDEM_RETURN_IF_ERROR(linear_forward(a, w.v_proj, own.v.view().reshaped({T, g * d})));
    }
    const tensor k_rows = own.k.view().reshaped({T * g, d}), v_rows = own.v.view().reshaped({T * g, d});
    TANDEM_RETURN_IF_ERROR(rmsnorm_forward(k_rows, w.k_norm, eps, k_rows));
    TANDEM_RETURN_IF_ERROR(rope_forward(own.k, rope.cos, rope.sin, own.k));
    TANDEM_RETURN_IF_ERROR(rmsnorm_forward(v_rows, tensor{}, eps, v_rows));
    kv[l] = own;
  }
  const auto source = kv.find(L.kv_source_layer);
  if (source == kv.end())
    return status(status_code::invalid_argument, "reads the K/V of layer " + std::to_string(L.kv_source_layer) + ", which has none");
  trace(source->second.k, "k", l);
  trace(source->second.v, "v", l);
  host_buffer attn(dtype::float32, {T, nh, d}), lse(dtype::float32, {T, nh});
  attention_options options;
  options.scaling = 1.0;
  options.sliding_window = L.type == layer_type::sliding ? c.sliding_window : 0;
  TANDEM_RETURN_IF_ERROR(attention_forward(q, source->second.k, source->second.v, batch.cu_seqlens, attn, lse, options));
  trace(attn, "attn_core", l);
  TANDEM_RETURN_IF_ERROR(linear_forward(attn.view().reshaped({T, nh * d}), w.o_proj, out));
  return status::ok();
}

// m = the feed-forward branch of §2.4 (dense MLP, plus the MoE block when enabled), before
// post_feedforward_layernorm; r is the residual stream entering it.
status feedforward_block(const model_config& c, int l, const layer_weights& w, const tensor& r, const tensor& m,
                         const tracer& trace) {
  const layer_config& L = c.layers[static_cast<std::size_t>(l)];
  const std::int64_t T = r.dim(0), H = c.hidden_size, I = L.intermediate_size;
  const double eps = c.rms_norm_eps;
  host_buffer a(dtype::float32, {T, H}), gate(dtype::float32, {T, I}), up(dtype::float32, {T, I});
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(r, w.pre_feedforward_norm, eps, a));
  TANDEM_RETURN_IF_ERROR(linear_forward(a, w.gate_proj, gate));
  TANDEM_RETURN_IF_ERROR(linear_forward(a, w.up_proj, up));
  TANDEM_RETURN_IF_ERROR(gated_gelu_forward(gate, up, gate));
  TANDEM_RETURN_IF_ERROR(linear_forward(gate, w.down_proj, m));
  trace(m, "mlp_out", l);
  if (!c.enable_moe_block) return status::ok();
  const std::int64_t K = c.top_k_experts;
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(m, w.post_feedforward_norm_1, eps, m));
  host_buffer weights(dtype::float32, {T, K}), indices(dtype::int32, {T, K});
  TANDEM_RETURN_IF_ERROR(moe_router_forward(r, w.router_scale, w.router_proj, w.router_per_expert_scale, weights, indices,
                                            tensor{}, tensor{}, eps));
  host_buffer y(dtype::float32, {T, H}), experts(dtype::float32, {T, H});
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(r, w.pre_feedforward_norm_2, eps, y));
  TANDEM_RETURN_IF_ERROR(moe_experts_forward(y, w.experts_gate_up, w.experts_down, weights, indices, experts));
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(experts, w.post_feedforward_norm_2, eps, experts));
  trace(experts, "moe_out", l);
  return add_forward(m, experts, m);
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
                      const tracer& trace) {
  TANDEM_RETURN_IF_ERROR(check_batch(c, w, batch, hidden));
  const std::int64_t T = batch.tokens.dim(0), H = c.hidden_size, P = c.hidden_size_per_layer_input;
  const std::int64_t L = c.num_hidden_layers;
  const double eps = c.rms_norm_eps;

  host_buffer h(dtype::float32, {T, H});
  TANDEM_RETURN_IF_ERROR(embedding_forward(batch.tokens, w.embed_tokens, embed_scale(H), h));
  trace(h, "embed");

  host_buffer ple;  // F32 [T, L, P]: the per-layer inputs of every layer (§2.2)
  if (P > 0) {
    ple = host_buffer(dtype::float32, {T, L, P});
    host_buffer t(dtype::float32, {T, L * P});
    const tensor c2 = ple.view().reshaped({T, L * P});
    TANDEM_RETURN_IF_ERROR(embedding_forward(batch.tokens, w.embed_tokens_per_layer, embed_scale(P), t));
    TANDEM_RETURN_IF_ERROR(linear_forward(h, w.ple_model_projection, c2));
    TANDEM_RETURN_IF_ERROR(scale_forward(c2, 1.0 / std::sqrt(static_cast<double>(H)), c2));
    const tensor rows = ple.view().reshaped({T * L, P});
    TANDEM_RETURN_IF_ERROR(rmsnorm_forward(rows, w.ple_projection_norm, eps, rows));
    TANDEM_RETURN_IF_ERROR(ple_combine_forward(c2, t, c2));
    trace(ple, "ple");
  }

  std::map<layer_type, rope_table> rope;
  for (const layer_config& layer : c.layers) {
    if (rope.count(layer.type)) continue;
    TANDEM_RETURN_IF_ERROR(make_rope(c.rope_for(layer.type), layer.head_dim, batch.positions, rope[layer.type]));
  }

  std::map<int, kv_pair> kv;
  host_buffer a(dtype::float32, {T, H}), branch(dtype::float32, {T, H});
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const layer_weights& lw = w.layers[static_cast<std::size_t>(l)];
    const layer_config& layer = c.layers[static_cast<std::size_t>(l)];
    // h = h + post_attention_norm(attention(input_norm(h)))
    TANDEM_LAYER(l, rmsnorm_forward(h, lw.input_norm, eps, a));
    TANDEM_LAYER(l, attention_block(c, l, lw, a, batch, rope.at(layer.type), kv, branch, trace));
    TANDEM_LAYER(l, rmsnorm_forward(branch, lw.post_attention_norm, eps, branch));
    trace(branch, "attn_out", l);
    TANDEM_LAYER(l, add_forward(h, branch, h));
    trace(h, "attn_residual", l);
    // h = h + post_feedforward_norm(mlp(...) [+ moe(...)])
    TANDEM_LAYER(l, feedforward_block(c, l, lw, h, branch, trace));
    TANDEM_LAYER(l, rmsnorm_forward(branch, lw.post_feedforward_norm, eps, branch));
    TANDEM_LAYER(l, add_forward(h, branch, h));
    trace(h, "ffn_residual", l);
    if (P > 0) {  // h = h + post_ple_norm(ple_projection(gelu(ple_gate(h)) * ple_l))
      host_buffer gate(dtype::float32, {T, P}), gated(dtype::float32, {T, P});
      TANDEM_LAYER(l, linear_forward(h, lw.ple_gate, gate));
      TANDEM_LAYER(l, ple_gate_forward(gate, ple, l, gated));
      TANDEM_LAYER(l, linear_forward(gated, lw.ple_projection, branch));
      TANDEM_LAYER(l, rmsnorm_forward(branch, lw.ple_post_norm, eps, branch));
      trace(branch, "ple_out", l);
      TANDEM_LAYER(l, add_forward(h, branch, h));
    }
    TANDEM_LAYER(l, scale_by_forward(h, lw.layer_scalar, h));
    trace(h, "layer_out", l);
    if (!layer.is_kv_shared && !layer.is_kv_store) kv.erase(l);  // only store layers' K/V are read again
  }
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(h, w.final_norm, eps, hidden));
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
  host_buffer hidden(dtype::float32, {T, c.hidden_size});
  TANDEM_RETURN_IF_ERROR(forward_hidden(c, w, batch, hidden, trace));
  host_buffer logits(dtype::float32, {std::min(chunk_rows, std::max<std::int64_t>(T, 1)), c.vocab_size});
  for (std::int64_t begin = 0; begin < T; begin += chunk_rows) {
    const std::int64_t end = std::min(T, begin + chunk_rows);
    const tensor rows = logits.view().rows(0, end - begin);
    TANDEM_RETURN_IF_ERROR(head_logits(c, w, hidden.view().rows(begin, end), rows));
    TANDEM_RETURN_IF_ERROR(logprobs_forward(rows, targets.rows(begin, end), params, logprobs.rows(begin, end)));
  }
  return status::ok();
}

}  // namespace tandem::gpu
