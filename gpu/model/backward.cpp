// The backward of the text stack, layer by layer in reverse, each block the mirror of its
// forward in forward.cpp.
#include "gpu/model/backward.h"

#include <cmath>
#include <map>

#include "gpu/model/forward.h"
#include "gpu/model/layer.h"
#include "gpu/ops/embedding.h"
#include "gpu/ops/linear.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/per_layer_input.h"
#include "gpu/ops/rmsnorm.h"
#include "gpu/ops/softcap.h"

namespace tandem::gpu {
namespace {

using namespace ops;

status in_layer(status s, int layer) {
  if (s.is_ok()) return s;
  return status(s.code(), "backward, layer " + std::to_string(layer) + ": " + s.message());
}

#define TANDEM_LAYER(layer, expr) TANDEM_RETURN_IF_ERROR(in_layer((expr), (layer)))

std::optional<std::int32_t> padding(const model_config& c) {
  if (!c.pad_token_id) return std::nullopt;
  return static_cast<std::int32_t>(*c.pad_token_id);
}

}  // namespace

status head_backward(const exec_context& ctx, const model_config& c, const model_weights& w, const tensor& hidden, const tensor& targets,
                     const sampling_params& params, const tensor& dlogprobs, const tensor& d_hidden,
                     const model_weights& grads, std::int64_t chunk_rows, const tensor& raw_logits) {
  constexpr const char* op = "head_backward";
  const std::int64_t T = hidden.dim(0), V = c.vocab_size;
  TANDEM_RETURN_IF_ERROR(expect_shape(targets, op, "targets", {T}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dlogprobs, op, "dlogprobs", {T}));
  TANDEM_RETURN_IF_ERROR(expect_shape(d_hidden, op, "d_hidden", {T, c.hidden_size}));
  TANDEM_RETURN_IF_ERROR(require(chunk_rows > 0, op, "chunk_rows must be positive"));
  const dtype type = hidden.type();
  const bool kept = !raw_logits.empty();
  if (kept) {
    TANDEM_RETURN_IF_ERROR(expect_shape(raw_logits, op, "raw_logits", {T, V}));
    TANDEM_RETURN_IF_ERROR(expect_type(raw_logits, op, "raw_logits", type));
  }
  const std::int64_t rows = std::min(chunk_rows, std::max<std::int64_t>(T, 1));
  device_buffer raw, logits, dlogits;
  if (!kept) TANDEM_RETURN_IF_ERROR(allocate_unfilled_buffers(ctx, type, {{&raw, {rows, V}}}));
  TANDEM_RETURN_IF_ERROR(allocate_unfilled_buffers(ctx, type, {{&logits, {rows, V}}, {&dlogits, {rows, V}}}));
  for (std::int64_t begin = 0; begin < T; begin += chunk_rows) {
    const std::int64_t end = std::min(T, begin + chunk_rows), n = end - begin;
    const tensor x = kept ? raw_logits.rows(begin, end) : raw.view().rows(0, n), y = logits.view().rows(0, n),
                 dy = dlogits.view().rows(0, n);
    const tensor h = hidden.rows(begin, end);
    if (!kept) TANDEM_RETURN_IF_ERROR(linear_forward(ctx, h, w.lm_head, x));
    if (c.final_logit_softcapping) {
      TANDEM_RETURN_IF_ERROR(softcap_forward(ctx, x, *c.final_logit_softcapping, y));
      TANDEM_RETURN_IF_ERROR(logprobs_backward(ctx, y, targets.rows(begin, end), params, dlogprobs.rows(begin, end), dy));
      TANDEM_RETURN_IF_ERROR(softcap_backward(ctx, x, *c.final_logit_softcapping, dy, dy));
    } else {
      TANDEM_RETURN_IF_ERROR(logprobs_backward(ctx, x, targets.rows(begin, end), params, dlogprobs.rows(begin, end), dy));
    }
    TANDEM_RETURN_IF_ERROR(linear_backward(ctx, h, w.lm_head, dy, d_hidden.rows(begin, end), grads.lm_head));
  }
  return status::ok();
}

status model_backward(const exec_context& ctx, const model_config& c, const model_weights& w, const packed_batch& batch,
                      const model_activations& act, const tensor& d_hidden, const model_weights& g) {
  const std::int64_t T = batch.tokens.dim(0), H = c.hidden_size, P = c.hidden_size_per_layer_input;
  const std::int64_t L = c.num_hidden_layers;
  const dtype type = w.embed_tokens.type();
  TANDEM_RETURN_IF_ERROR(require(act.layers.size() == static_cast<std::size_t>(L) && act.h_out.numel() == T * H,
                                 "model_backward", "the activations are not those of this batch's forward"));

  device_buffer dh, d_ple;
  TANDEM_RETURN_IF_ERROR(allocate_unfilled_buffers(ctx, type, {{&dh, {T, H}}}));
  TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, act.h_out, w.final_norm, act.final_inv, d_hidden, dh, g.final_norm));
  if (P > 0) TANDEM_RETURN_IF_ERROR(allocate_buffers(ctx, type, {{&d_ple, {T, L, P}}}));  // zeros: each layer adds its slice
  std::map<int, kv_gradients> dkv;  // by the layer whose K/V they are

  for (int l = c.num_hidden_layers - 1; l >= 0; --l) {
    const layer_config& layer = c.layers[static_cast<std::size_t>(l)];
    const layer_weights& lw = w.layers[static_cast<std::size_t>(l)];
    const layer_activations* s = &act.layers[static_cast<std::size_t>(l)];
    layer_activations rerun;
    kv_activations own;
    if (act.mode == recompute_mode::full) {  // rerun the layer from its input and argument bundle
      rerun.h_in = s->h_in;
      rerun.args = s->args;
      device_buffer h_out;
      TANDEM_LAYER(l, allocate_unfilled_buffers(ctx, type, {{&h_out, {T, H}}}));
      TANDEM_LAYER(l, layer_forward(ctx, c, l, lw, batch, rerun, layer.is_kv_shared ? nullptr : &own, h_out));
      s = &rerun;
    }
    const kv_activations* kv = layer.is_kv_shared ? s->args.shared_kv
                               : act.mode == recompute_mode::full ? &own
                                                                  : &act.kv.at(l);
    TANDEM_LAYER(l, layer_backward(ctx, c, l, lw, g.layers[static_cast<std::size_t>(l)], batch, *s, *kv, dkv[layer.kv_source_layer],
                                   d_ple, dh));
  }

  if (P > 0) {  // the per-layer inputs: ple = (norm(c_pre) + t) · 2^-1/2
    const tensor dple2 = d_ple.view().reshaped({T, L * P});
    device_buffer dc, dt, dc_pre;
    TANDEM_RETURN_IF_ERROR(allocate_unfilled_buffers(ctx, type, {{&dc, {T, L * P}}, {&dt, {T, L * P}}, {&dc_pre, {T, L * P}}}));
    TANDEM_RETURN_IF_ERROR(ple_combine_backward(ctx, dple2, dc, dt));
    TANDEM_RETURN_IF_ERROR(embedding_backward(ctx, batch.tokens, dt, embed_scale(P, type), g.embed_tokens_per_layer, padding(c)));
    TANDEM_RETURN_IF_ERROR(rmsnorm_backward(ctx, act.c_pre.view().reshaped({T * L, P}), w.ple_projection_norm, act.c_inv,
                                            dc.view().reshaped({T * L, P}), dc_pre.view().reshaped({T * L, P}),
                                            g.ple_projection_norm));
    TANDEM_RETURN_IF_ERROR(scale_forward(ctx, dc_pre, 1.0 / std::sqrt(static_cast<double>(H)), dc_pre));
    TANDEM_RETURN_IF_ERROR(linear_backward(ctx, act.layers[0].h_in, w.ple_model_projection, dc_pre, dh, g.ple_model_projection, true));
  }
  return embedding_backward(ctx, batch.tokens, dh, embed_scale(H, type), g.embed_tokens, padding(c));
}

}  // namespace tandem::gpu
