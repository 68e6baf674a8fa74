// Packed causal attention on CUDA: the tile numbering of each call (tile_offsets_kernel), then the
// forward pass of the query-tile kernel (attention_query.cuh); the backward runs its delta pass
// (D into scratch), the dK/dV key-tile kernel (attention_dkdv.cuh) and its dq pass. Every output
// element is written by one thread in a fixed order: deterministic, no atomics. bfloat16 at head
// dims 256 and 512 (16-byte aligned tensors) takes the tensor-core kernels instead
// (the forward on Hopper's warpgroup products, attention_wgmma_forward.cuh; the backward's dK/dV
// and dQ passes on them too: at d 256 a block a unit, attention_wgmma_dkdv.cuh and
// attention_wgmma_dq.cuh, at d 512 a cluster of two blocks a unit, each block a column half,
// attention_wgmma_dkdv_cluster.cuh and attention_wgmma_dq_cluster.cuh; the same tile-numbering
// scheme with larger tiles; D from the forward's out when the caller passes it).
#include "gpu/ops/cuda/attention.h"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>

#include "gpu/ops/cuda/attention_dkdv.cuh"
#include "gpu/ops/cuda/attention_backward_common.cuh"
#include "gpu/ops/cuda/attention_wgmma_dkdv.cuh"
#include "gpu/ops/cuda/attention_wgmma_dkdv_cluster.cuh"
#include "gpu/ops/cuda/attention_wgmma_dq_cluster.cuh"
#include "gpu/ops/cuda/attention_wgmma_dq.cuh"
#include "gpu/ops/cuda/attention_wgmma_forward.cuh"
#include "gpu/ops/cuda/attention_query.cuh"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Sizes of one call and its tiling.
struct call_shape {
  std::int64_t tokens, heads, kv_heads, d, num_seqs;
  attn::query_tiling tiling;
  int slots;
  dim3 query_grid;
};

status shape_of(const char* op, const tensor& q, const tensor& k, const tensor& cu_seqlens, call_shape& c) {
  c.tokens = q.dim(0);
  c.heads = q.dim(1);
  c.d = q.dim(2);
  c.kv_heads = k.dim(1);
  c.num_seqs = cu_seqlens.dim(0) - 1;
  c.slots = attn::column_slots(c.d);
  if (c.slots == 0)
    return {status_code::unsupported, std::string(op) + ": head dim " + std::to_string(c.d) +
                                          " is above the CUDA kernels' " + std::to_string(attn::max_head_dim)};
  if (c.heads == 0 || c.tokens == 0) return status::ok();
  c.tiling = attn::query_tiling_for(c.heads, c.kv_heads);
  // At most ceil(T / rows_per_tile) + S query tiles (each sequence's last tile may be partial).
  const std::int64_t tiles = (c.tokens + c.tiling.rows_per_tile - 1) / c.tiling.rows_per_tile + c.num_seqs;
  const std::int64_t chunks = c.kv_heads * c.tiling.head_chunks;
  if (tiles > 0x7fffffffLL || chunks > 65535)
    return {status_code::unsupported, std::string(op) + ": too many tokens or heads for one CUDA grid"};
  c.query_grid = dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
  return status::ok();
}

status tile_offsets(cudaStream_t stream, const char* op, const tensor& cu_seqlens, std::int64_t num_seqs,
                    std::int64_t rows_per_tile, std::int64_t* offsets) {
  attn::tile_offsets_kernel<<<1, 1024, 0, stream>>>(cu_seqlens.as<const std::int32_t>(), num_seqs, rows_per_tile,
                                                    offsets);
  return launch_status(op, "tile_offsets_kernel");
}

/// Whether a call takes the tensor-core kernels: bfloat16 storage, head dim 256 or 512, every
/// tensor 16-byte aligned (cp.async).
bool use_mma(dtype storage, std::int64_t d, std::initializer_list<const tensor*> tensors) {
  if (storage != dtype::bfloat16 || !attn::mma::has_kernel(d)) return false;
  for (const tensor* t : tensors)
    if (!attn::mma::aligned16(t->data())) return false;
  return true;
}

/// The grid of an mma query-tile kernel: (query tiles, kv heads x head chunks).
status mma_grid(const char* op, const call_shape& c, const attn::query_tiling& tiling, dim3& grid) {
  const std::int64_t tiles = (c.tokens + tiling.rows_per_tile - 1) / tiling.rows_per_tile + c.num_seqs;
  const std::int64_t chunks = c.kv_heads * tiling.head_chunks;
  if (tiles > 0x7fffffffLL || chunks > 65535)
    return {status_code::unsupported, std::string(op) + ": too many tokens or heads for one CUDA grid"};
  grid = dim3(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
  return status::ok();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status attention_forward(const exec_context& ctx, dtype storage, const tensor& q, const tensor& k, const tensor& v,
                         const tensor& cu_seqlens, const tensor& out, const tensor& lse,
                         const attention_options& options) {
  constexpr const char* op = "attention_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  call_shape c{};
  TANDEM_RETURN_IF_ERROR(shape_of(op, q, k, cu_seqlens, c));
  if (c.heads == 0 || c.tokens == 0) return status::ok();
  const cudaStream_t stream = stream_of(ctx);
  auto scratch = op_scratch::get(ctx, op, aligned(static_cast<std::size_t>(c.num_seqs + 1) * sizeof(std::int64_t)));
  if (!scratch) return scratch.error();
  auto* offsets = reinterpret_cast<std::int64_t*>(scratch->data());
  if (use_mma(storage, c.d, {&q, &k, &v, &out})) {  // tensor cores: bf16 at d 256 / 512
    const attn::query_tiling tiling = attn::mma::mma_tiling(c.heads, c.kv_heads, attn::mma::forward_block_rows(c.d));
    dim3 grid;
    TANDEM_RETURN_IF_ERROR(mma_grid(op, c, tiling, grid));
    TANDEM_RETURN_IF_ERROR(tile_offsets(stream, op, cu_seqlens, c.num_seqs, tiling.rows_per_tile, offsets));
    const attn::query_layout layout{cu_seqlens.as<const std::int32_t>(), offsets, nullptr, c.num_seqs,
                                    c.tokens, c.heads, tiling.group, tiling.rows_per_tile,
                                    tiling.heads_per_tile, tiling.head_chunks};
    attn::query_args<bf16> a{};
    a.q = q.as<const bf16>();
    a.out = out.as<bf16>();
    a.lse_out = lse.as<float>();
    a.d = static_cast<int>(c.d);
    a.scale = static_cast<float>(options.scaling);
    a.window = options.sliding_window;
    attn::mma::tma_keys keys{};
    TANDEM_RETURN_IF_ERROR(attn::mma::make_tma_keys(
        op, attn::packed_keys<bf16>{k.as<const bf16>(), v.as<const bf16>(), c.tokens, c.kv_heads, c.d}, keys));
    // A sliding window makes short tiles (window + rows keys): a persistent grid hides each
    // tile's setup, Q load and first keys behind the last tile's work.
    return attn::mma::launch_forward(stream, op, grid, a, layout, keys, options.sliding_window > 0);
  }
  TANDEM_RETURN_IF_ERROR(tile_offsets(stream, op, cu_seqlens, c.num_seqs, c.tiling.rows_per_tile, offsets));
  const attn::query_layout layout{cu_seqlens.as<const std::int32_t>(), offsets, nullptr, c.num_seqs,
                                  c.tokens, c.heads, c.tiling.group, c.tiling.rows_per_tile,
                                  c.tiling.heads_per_tile, c.tiling.head_chunks};
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    attn::query_args<S> a{};
    a.q = q.as<const S>();
    a.out = out.as<S>();
    a.lse_out = lse.as<float>();
    a.d = static_cast<int>(c.d);
    a.scale = static_cast<float>(options.scaling);
    a.window = options.sliding_window;
    const attn::packed_keys<S> keys{k.as<const S>(), v.as<const S>(), c.tokens, c.kv_heads, c.d};
    return attn::launch_query_pass<attn::query_pass::forward>(stream, op, c.slots, c.query_grid, a, layout, keys);
  });
}

status attention_backward(const exec_context& ctx, dtype storage, const tensor& q, const tensor& k, const tensor& v,
                          const tensor& cu_seqlens, const tensor& lse, const tensor& dout, const tensor& dq,
                          const tensor& dk, const tensor& dv, const attention_options& options, bool accumulate_dq,
                          const tensor& out) {
  constexpr const char* op = "attention_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  call_shape c{};
  TANDEM_RETURN_IF_ERROR(shape_of(op, q, k, cu_seqlens, c));
  if (c.heads == 0 || c.tokens == 0) return status::ok();
  const cudaStream_t stream = stream_of(ctx);
  const bool mma = use_mma(storage, c.d, {&q, &k, &v, &dout, &dq, &dk, &dv});
  const bool delta_from_out = mma && !out.empty() && attn::mma::aligned16(out.data());
  const std::int64_t key_rows = mma ? attn::mma::dkdv_wg_shape::keys : attn::tile_rows;
  const std::int64_t key_tiles = (c.tokens + key_rows - 1) / key_rows + c.num_seqs;
  // The mma dkdv kernel splits a key tile's work over blocks when the grid is small (float32
  // partials, added in split order by a reduction kernel).
  int splits = 1;
  if (mma) {
    int sms = 0;
    TANDEM_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx.dev.index));
    // d 512: a cluster of two blocks (two SMs) takes a key tile
    splits = attn::mma::dkdv_splits(c.d, key_tiles, c.tokens, c.kv_heads, c.tiling.group, c.d == 512 ? sms / 2 : sms);
  }
  // Scratch: query-tile offsets of the FFMA tiling, key-tile offsets, query-tile offsets of the
  // mma dq kernel (I64 [S + 1] each), D (F32 [T, H]), the dkdv partials of dK and of dV
  // (F32 [splits, T, G, d] each, when splits > 1).
  const std::size_t offsets_bytes = aligned(static_cast<std::size_t>(c.num_seqs + 1) * sizeof(std::int64_t));
  const std::size_t delta_bytes = aligned(static_cast<std::size_t>(c.tokens * c.heads) * sizeof(float));
  const std::size_t partial_bytes = aligned(attn::mma::dkdv_partial_bytes(splits, c.d, c.tokens, c.kv_heads));
  auto scratch = op_scratch::get(ctx, op, 3 * offsets_bytes + delta_bytes + 2 * partial_bytes);
  if (!scratch) return scratch.error();
  auto* query_offsets = reinterpret_cast<std::int64_t*>(scratch->data());
  auto* key_offsets = reinterpret_cast<std::int64_t*>(scratch->data() + offsets_bytes);
  auto* mma_offsets = reinterpret_cast<std::int64_t*>(scratch->data() + 2 * offsets_bytes);
  auto* delta = reinterpret_cast<float*>(scratch->data() + 3 * offsets_bytes);
  std::byte* const partials = scratch->data() + 3 * offsets_bytes + delta_bytes;
  const attn::mma::dkdv_partials part{splits > 1 ? reinterpret_cast<float*>(partials) : nullptr,
                                      splits > 1 ? reinterpret_cast<float*>(partials + partial_bytes) : nullptr, splits};
  if (!delta_from_out)
    TANDEM_RETURN_IF_ERROR(tile_offsets(stream, op, cu_seqlens, c.num_seqs, c.tiling.rows_per_tile, query_offsets));
  TANDEM_RETURN_IF_ERROR(tile_offsets(stream, op, cu_seqlens, c.num_seqs, key_rows, key_offsets));
  const attn::query_layout layout{cu_seqlens.as<const std::int32_t>(), query_offsets, nullptr, c.num_seqs,
                                  c.tokens, c.heads, c.tiling.group, c.tiling.rows_per_tile,
                                  c.tiling.heads_per_tile, c.tiling.head_chunks};
  if (key_tiles > 0x7fffffffLL || c.kv_heads > 65535)
    return {status_code::unsupported, std::string(op) + ": too many tokens or kv heads for one CUDA grid"};
  const dim3 key_grid(static_cast<unsigned>(key_tiles), static_cast<unsigned>(c.kv_heads));
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    const attn::packed_keys<S> keys{k.as<const S>(), v.as<const S>(), c.tokens, c.kv_heads, c.d};
    attn::query_args<S> a{};
    a.q = q.as<const S>();
    a.dout = dout.as<const S>();
    a.lse_in = lse.as<const float>();
    a.delta_in = delta;
    a.delta_out = delta;
    a.dq = dq.as<S>();
    a.accumulate_dq = accumulate_dq;
    a.d = static_cast<int>(c.d);
    a.scale = static_cast<float>(options.scaling);
    a.window = options.sliding_window;
    if constexpr (std::is_same_v<S, bf16>) {
      if (delta_from_out)
        TANDEM_RETURN_IF_ERROR(attn::mma::launch_delta_from_out(stream, op, out.as<const bf16>(), dout.as<const bf16>(),
                                                                c.tokens * c.heads, a.d, delta));
    }
    if (!delta_from_out)
      TANDEM_RETURN_IF_ERROR(
          attn::launch_query_pass<attn::query_pass::delta>(stream, op, c.slots, c.query_grid, a, layout, keys));
    const attn::dkdv_args<S> b{q.as<const S>(), k.as<const S>(), v.as<const S>(), dout.as<const S>(),
                               lse.as<const float>(), delta, dk.as<S>(), dv.as<S>(),
                               cu_seqlens.as<const std::int32_t>(), key_offsets, c.num_seqs, c.tokens,
                               c.heads, c.kv_heads, c.tiling.group, static_cast<int>(c.d),
                               static_cast<float>(options.scaling), options.sliding_window};
    if constexpr (std::is_same_v<S, bf16>) {
      if (mma) {  // tensor cores: bf16 at d 256 / 512
        // The warpgroup kernels: one block a unit at d 256, a cluster of two blocks (a column half
        // each) at d 512. dK/dV: 64 keys a unit (key_rows); dQ: 128 rows a unit at d 256, 64 at
        // d 512.
        static_assert(attn::mma::dkdv_cluster_shape::keys == attn::mma::dkdv_wg_shape::keys);
        attn::mma::tma_keys maps{};  // d 256: the copy engine's maps of k and v, for both passes
        if (c.d == 256) TANDEM_RETURN_IF_ERROR(attn::mma::make_tma_keys(op, keys, maps));
        TANDEM_RETURN_IF_ERROR(c.d == 256 ? attn::mma::launch_wgmma_dkdv(stream, op, key_tiles, b, part, maps)
                                          : attn::mma::launch_wgmma_dkdv_cluster(stream, op, key_tiles, b, part));
        const attn::query_tiling tiling = attn::mma::mma_tiling(
            c.heads, c.kv_heads, c.d == 256 ? attn::mma::dq_wg_shape::block_rows : attn::mma::dq_cluster_shape::block_rows);
        dim3 grid;
        TANDEM_RETURN_IF_ERROR(mma_grid(op, c, tiling, grid));
        TANDEM_RETURN_IF_ERROR(tile_offsets(stream, op, cu_seqlens, c.num_seqs, tiling.rows_per_tile, mma_offsets));
        const attn::query_layout dq_layout{cu_seqlens.as<const std::int32_t>(), mma_offsets, nullptr, c.num_seqs,
                                           c.tokens, c.heads, tiling.group, tiling.rows_per_tile,
                                           tiling.heads_per_tile, tiling.head_chunks};
        return c.d == 256 ? attn::mma::launch_wgmma_dq(stream, op, grid, a, dq_layout, maps)
                          : attn::mma::launch_wgmma_dq_cluster(stream, op, grid, a, dq_layout, keys);
      }
    }
    TANDEM_RETURN_IF_ERROR(attn::launch_dkdv(stream, op, c.slots, key_grid, b));
    return attn::launch_query_pass<attn::query_pass::dq>(stream, op, c.slots, c.query_grid, a, layout, keys);
  });
}

}  // namespace tandem::gpu::ops::cuda
