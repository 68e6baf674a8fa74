// The forward of the text stack, layer by layer in the exact order of docs/gemma4.md
// §2.4, in the weights' dtype. Every intermediate lives in a buffer of model_activations: kept
// for the backward when asked, dropped layer by layer otherwise.
#include "gpu/model/forward.h"

#include <cmath>

#include "gpu/core/half.h"
#include "gpu/core/memory.h"
#include "gpu/model/layer.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/elementwise.h"
#include "gpu/ops/embedding.h"
#include "gpu/ops/linear.h"
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

// Allocates the buffers of one forward in the compute dtype on the context's device, unfilled:
// the op after each allocation writes it whole.
struct alloc {
  const exec_context& ctx;
  dtype type;
  status operator()(std::initializer_list<buffer_request> requests) const { return allocate_unfilled_buffers(ctx, type, requests); }
};

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

// The one forward: `keep` null for inference (each layer's activations dropped once it ran,
// K/V only while a later layer reads them), else what `mode` keeps.
// `cached` (inference only): each layer's route through the paged KV cache.
// `host_tokens`: the batch's tokens on the host too (or empty), for the lookups to check there.
status run_forward(const exec_context& ctx, const model_config& c, const model_weights& w, const packed_batch& batch, const tensor& hidden,
                   const tracer& trace, model_activations* keep, recompute_mode mode, const layer_args_hook& hook,
                   const std::vector<cached_kv>* cached = nullptr, const tensor& host_tokens = {}) {
  TANDEM_RETURN_IF_ERROR(check_batch(c, w, batch, hidden));
  const std::int64_t T = batch.tokens.dim(0), H = c.hidden_size, P = c.hidden_size_per_layer_input;
  const std::int64_t L = c.num_hidden_layers;
  const double eps = c.rms_norm_eps;
  const dtype type = w.embed_tokens.type();
  const alloc make{ctx, type};
  model_activations local;
  model_activations& act = keep ? *keep : local;
  act = model_activations{};
  act.mode = mode;
  act.layers.resize(static_cast<std::size_t>(L));

  device_buffer h;
  TANDEM_RETURN_IF_ERROR(make({{&h, {T, H}}}));
  TANDEM_RETURN_IF_ERROR(embedding_forward(ctx, batch.tokens, w.embed_tokens, embed_scale(H, type), h, 0, host_tokens));
  trace(h, "embed");

  if (P > 0) {  // §2.2: ple = (norm(projection(x0) · H^-1/2) + table[ids] · √P) · 2^-1/2
    device_buffer t;
    TANDEM_RETURN_IF_ERROR(make({{&act.c_pre, {T, L * P}}, {&act.c_inv, {T * L}, statistics_type(type)}, {&act.ple, {T, L, P}}, {&t, {T, L * P}}}));
    const tensor ple2 = act.ple.view().reshaped({T, L * P});
    TANDEM_RETURN_IF_ERROR(embedding_forward(ctx, batch.tokens, w.embed_tokens_per_layer, embed_scale(P, type), t, 0, host_tokens));
    TANDEM_RETURN_IF_ERROR(linear_forward(ctx, h, w.ple_model_projection, act.c_pre));
    TANDEM_RETURN_IF_ERROR(scale_forward(ctx, act.c_pre, 1.0 / std::sqrt(static_cast<double>(H)), act.c_pre));
    TANDEM_RETURN_IF_ERROR(rmsnorm_forward(ctx, act.c_pre.view().reshaped({T * L, P}), w.ple_projection_norm, eps,
                                           act.ple.view().reshaped({T * L, P}), act.c_inv));
    TANDEM_RETURN_IF_ERROR(ple_combine_forward(ctx, ple2, t, ple2));
    trace(act.ple, "ple");
  }

  for (const layer_config& layer : c.layers) {
    if (act.rope.count(layer.type)) continue;
    device_buffer inv_freq;
    TANDEM_RETURN_IF_ERROR(allocate_buffers(ctx, dtype::float32, {{&inv_freq, {layer.head_dim / 2}}}));
    TANDEM_RETURN_IF_ERROR(rope_inv_freq(ctx, c.rope_for(layer.type), layer.head_dim, inv_freq));
    rope_table& table = act.rope[layer.type];
    TANDEM_RETURN_IF_ERROR(make({{&table.cos, {T, layer.head_dim}}, {&table.sin, {T, layer.head_dim}}}));
    TANDEM_RETURN_IF_ERROR(rope_tables(ctx, batch.positions, inv_freq, table.cos, table.sin));
  }

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const layer_config& layer = c.layers[static_cast<std::size_t>(l)];
    layer_activations& s = act.layers[static_cast<std::size_t>(l)];
    s.h_in = h;
    const rope_table* rope = &act.rope.at(layer.type);
    s.args = layer_args{rope, rope, nullptr, act.ple.view()};
    if (cached) {
      s.args.cache = &(*cached)[static_cast<std::size_t>(l)];
    } else if (layer.is_kv_shared) {
      const auto source = act.kv.find(layer.kv_source_layer);
      if (source == act.kv.end())
        return status(status_code::invalid_argument, "layer " + std::to_string(l) + " reads the K/V of layer " +
                                                         std::to_string(layer.kv_source_layer) + ", which has none");
      s.args.shared_kv = &source->second;
    }
    if (hook) hook(l, s.args);
    kv_activations own;
    h = device_buffer{};
    TANDEM_RETURN_IF_ERROR(make({{&h, {T, H}}}));
    TANDEM_LAYER(l, layer_forward(ctx, c, l, w.layers[static_cast<std::size_t>(l)], batch, s, layer.is_kv_shared ? nullptr : &own,
                                  h, trace));
    if (!layer.is_kv_shared) act.kv[l] = std::move(own);
    // What survives the layer.
    const bool read_again = layer.is_kv_store && !cached;  // over a cache, readers read the cache
    if (!keep || mode == recompute_mode::full) {
      if (!layer.is_kv_shared && !read_again) act.kv.erase(l);
      layer_activations bundle;  // full: the input and the argument bundle only
      if (keep) {
        bundle.h_in = s.h_in;
        bundle.args = s.args;
      }
      s = std::move(bundle);
    } else if (mode == recompute_mode::selective) {
      s.attn = s.lse = s.gate = s.up = s.act = device_buffer{};
    }
  }
  act.h_out = h;
  TANDEM_RETURN_IF_ERROR(make({{&act.final_inv, {T}, statistics_type(type)}}));
  TANDEM_RETURN_IF_ERROR(rmsnorm_forward(ctx, h, w.final_norm, eps, hidden, act.final_inv));
  trace(hidden, "final_norm");
  return status::ok();
}

}  // namespace

double embed_scale(std::int64_t width, dtype type) {
  const double s = std::sqrt(static_cast<double>(width));
  if (type == dtype::float64) return s;
  if (type == dtype::bfloat16) return to_float(to_bfloat16(static_cast<float>(s)));
  return static_cast<float>(s);
}

result<packed_tokens> pack_tokens(const exec_context& ctx, const std::vector<std::int32_t>& tokens,
                                  const std::vector<std::int32_t>& offsets) {
  std::vector<std::int32_t> positions(tokens.size()), targets(tokens.size(), 0);
  for (std::size_t q = 0; q + 1 < offsets.size(); ++q)
    for (std::int32_t t = offsets[q]; t < offsets[q + 1]; ++t) {
      positions[static_cast<std::size_t>(t)] = t - offsets[q];
      if (t + 1 < offsets[q + 1]) targets[static_cast<std::size_t>(t)] = tokens[static_cast<std::size_t>(t) + 1];
    }
  const auto T = static_cast<std::int64_t>(tokens.size());
  packed_tokens out;
  TANDEM_RETURN_IF_ERROR(allocate_buffers(ctx, dtype::int32, {{&out.tokens, {T}}, {&out.positions, {T}},
                                                             {&out.cu_seqlens, {static_cast<std::int64_t>(offsets.size())}},
                                                             {&out.targets, {T}}}));
  using upload = std::pair<const device_buffer*, const std::vector<std::int32_t>*>;
  for (const auto& [to, from] : {upload{&out.tokens, &tokens}, upload{&out.positions, &positions}, upload{&out.cu_seqlens, &offsets},
                                 upload{&out.targets, &targets}})
    TANDEM_RETURN_IF_ERROR(copy_to_device(ctx, to->template data<std::int32_t>(), from->data(),
                                          static_cast<std::int64_t>(from->size() * sizeof(std::int32_t))));
  return out;
}

std::string_view to_string(recompute_mode m) {
  switch (m) {
    case recompute_mode::none: return "none";
    case recompute_mode::selective: return "selective";
    case recompute_mode::full: return "full";
  }
  return "?";
}

status forward_hidden(const exec_context& ctx, const model_config& c, const model_weights& w, const packed_batch& batch, const tensor& hidden,
                      const tracer& trace) {
  return run_forward(ctx, c, w, batch, hidden, trace, nullptr, recompute_mode::none, {});
}

status forward_for_backward(const exec_context& ctx, const model_config& c, const model_weights& w, const packed_batch& batch, const tensor& hidden,
                            model_activations& act, recompute_mode mode, const tracer& trace, const layer_args_hook& hook) {
  return run_forward(ctx, c, w, batch, hidden, trace, &act, mode, hook);
}

status head_logits(const exec_context& ctx, const model_config& c, const model_weights& w, const tensor& hidden_rows, const tensor& logits) {
  TANDEM_RETURN_IF_ERROR(linear_forward(ctx, hidden_rows, w.lm_head, logits));
  if (c.final_logit_softcapping) TANDEM_RETURN_IF_ERROR(softcap_forward(ctx, logits, *c.final_logit_softcapping, logits));
  return status::ok();
}

status head_logprobs(const exec_context& ctx, const model_config& c, const model_weights& w, const tensor& hidden, const tensor& targets,
                     const sampling_params& params, const tensor& logprobs, std::int64_t chunk_rows, const tensor& raw_logits) {
  constexpr const char* op = "head_logprobs";
  const std::int64_t T = hidden.dim(0);
  TANDEM_RETURN_IF_ERROR(expect_shape(targets, op, "targets", {T}));
  TANDEM_RETURN_IF_ERROR(expect_shape(logprobs, op, "logprobs", {T}));
  TANDEM_RETURN_IF_ERROR(require(chunk_rows > 0, op, "chunk_rows must be positive"));
  TANDEM_RETURN_IF_ERROR(check_sampling_params(op, params, false));
  const bool keep = !raw_logits.empty();
  if (keep) {
    TANDEM_RETURN_IF_ERROR(expect_shape(raw_logits, op, "raw_logits", {T, c.vocab_size}));
    TANDEM_RETURN_IF_ERROR(expect_type(raw_logits, op, "raw_logits", hidden.type()));
  }
  // The chunk buffer takes the product and is softcapped in place; kept logits take the product
  // and the chunk buffer their softcap (the raw ones stay): the same values either way.
  const auto cap = c.final_logit_softcapping;
  device_buffer logits;
  if (!keep || cap)
    TANDEM_RETURN_IF_ERROR(
        allocate_unfilled_buffers(ctx, hidden.type(), {{&logits, {std::min(chunk_rows, std::max<std::int64_t>(T, 1)), c.vocab_size}}}));
  for (std::int64_t begin = 0; begin < T; begin += chunk_rows) {
    const std::int64_t end = std::min(T, begin + chunk_rows);
    const tensor raw = keep ? raw_logits.rows(begin, end) : logits.view().rows(0, end - begin);
    const tensor y = keep && cap ? logits.view().rows(0, end - begin) : raw;
    TANDEM_RETURN_IF_ERROR(linear_forward(ctx, hidden.rows(begin, end), w.lm_head, raw));
    if (cap) TANDEM_RETURN_IF_ERROR(softcap_forward(ctx, raw, *cap, y));
    TANDEM_RETURN_IF_ERROR(logprobs_forward(ctx, y, targets.rows(begin, end), params, logprobs.rows(begin, end)));
  }
  return status::ok();
}

status forward_cached(const exec_context& ctx, const model_config& c, const model_weights& w, kv_cache& cache,
                      const cached_batch& batch, const tensor& hidden, const tracer& trace) {
  constexpr const char* op = "forward_cached";
  TANDEM_RETURN_IF_ERROR(require(batch.padding >= 0, op, "padding " + std::to_string(batch.padding) + " is negative"));
  TANDEM_RETURN_IF_ERROR(
      expect_shape(batch.cu_rows, op, "cu_rows", {static_cast<std::int64_t>(batch.sequences.size()) + batch.padding + 1}));
  TANDEM_RETURN_IF_ERROR(expect_type(batch.cu_rows, op, "cu_rows", dtype::int32));
  for (const kv_cache::sequence_id s : batch.sequences)
    TANDEM_RETURN_IF_ERROR(require(cache.has(s), op, "sequence " + std::to_string(s) + " is not in the cache"));
  const packed_batch packed{batch.tokens, batch.positions, batch.cu_rows};
  TANDEM_RETURN_IF_ERROR(check_batch(c, w, packed, hidden));
  const bool mirrored = !batch.host_positions.empty();
  TANDEM_RETURN_IF_ERROR(require(mirrored == !batch.host_cu_rows.empty() && mirrored == !batch.host_tokens.empty(), op,
                                 "host_tokens, host_positions and host_cu_rows go together"));
  const bool given = !batch.block_tables[0].empty();
  TANDEM_RETURN_IF_ERROR(require(!given || mirrored, op, "block tables come with the host mirrors of the rows"));
  TANDEM_RETURN_IF_ERROR(require(given || batch.padding == 0, op, "padding sequences come with the block tables"));
  // The block tables, built on the host, go to the device once for every layer of their type
  // (unless the caller sent them); the host copies stay as the rows' mirror where the caller gave
  // its rows one.
  host_buffer built[2];
  device_buffer uploaded[2];
  tensor tables[2], host_tables[2];
  ops::paged_rows mirrors[2];
  for (const layer_type t : {layer_type::sliding, layer_type::full}) {
    const int i = static_cast<int>(t);
    if (given) {
      tables[i] = batch.block_tables[i];
      host_tables[i] = batch.host_block_tables[i];
    } else {
      built[i] = cache.block_table(t, batch.sequences);
      TANDEM_RETURN_IF_ERROR(allocate_unfilled_buffers(ctx, dtype::int32, {{&uploaded[i], built[i].shape()}}));
      TANDEM_RETURN_IF_ERROR(
          copy_to_device(ctx, uploaded[i].data<std::int32_t>(), built[i].data<std::int32_t>(), built[i].numel() * 4));
      tables[i] = uploaded[i].view();
      host_tables[i] = built[i].view();
    }
    mirrors[i] = {host_tables[i], batch.host_cu_rows, batch.host_positions};
  }
  std::vector<cached_kv> routes(static_cast<std::size_t>(c.num_hidden_layers));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const layer_config& L = c.layers[static_cast<std::size_t>(l)];
    const int i = static_cast<int>(L.type);
    routes[static_cast<std::size_t>(l)] = {cache.k(L.kv_source_layer), cache.v(L.kv_source_layer),
                                           {tables[i], batch.cu_rows, batch.positions, mirrored ? &mirrors[i] : nullptr}};
  }
  return run_forward(ctx, c, w, packed, hidden, trace, nullptr, recompute_mode::none, {}, &routes, batch.host_tokens);
}

status forward_logprobs(const exec_context& ctx, const model_config& c, const model_weights& w, const packed_batch& batch, const tensor& targets,
                        const sampling_params& params, const tensor& logprobs, std::int64_t chunk_rows, const tracer& trace) {
  device_buffer hidden;
  TANDEM_RETURN_IF_ERROR(allocate_buffers(ctx, w.embed_tokens.type(), {{&hidden, {batch.tokens.dim(0), c.hidden_size}}}));
  TANDEM_RETURN_IF_ERROR(forward_hidden(ctx, c, w, batch, hidden, trace));
  return head_logprobs(ctx, c, w, hidden, targets, params, logprobs, chunk_rows);
}

}  // namespace tandem::gpu
