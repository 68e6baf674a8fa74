// The embedding lookup and its scatter-add on CUDA (embedding.h says the contract).
//   forward:  one thread per (token, group of W columns), W = 16 bytes of storage when the table's
//             rows, the column window and out allow aligned vectors, else W = 1; a bad id writes
//             zeros and records its position (integer atomicMin: the smallest, whatever the order).
//   backward: ids checked and (id, token) pairs stable-sorted by CUB into scratch; then one block
//             per (run of equal ids, column tile) adds the run's dout rows in token order into its
//             d_table row, read once and written once.
// Both end by copying the bad-id flag to the host (the header's refusal needs it).
#include "gpu/ops/cuda/embedding.h"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

#include "gpu/core/host_waits.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/elementwise_map.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

using flag_t = unsigned long long;
constexpr flag_t no_bad_id = ~0ull;  // the flag's value while every id is in range
constexpr int threads = 256;

// ---------------------------------------------------------------------------------------------
// kernels

/// out[t, j..j+W) = table[ids[t], column_begin + j..+W) · scale; a bad id gives zeros and
/// *bad = min(*bad, t).
template <class S, int W>
__global__ void embedding_forward_kernel(const std::int32_t* __restrict__ ids, std::int64_t tokens, std::int64_t vocab,
                                         const S* __restrict__ table, std::int64_t table_width,
                                         std::int64_t column_begin, std::int64_t width, float scale,
                                         S* __restrict__ out, flag_t* __restrict__ bad) {
  const std::int64_t groups = width / W, items = tokens * groups;
  const bool narrow = items <= 0xffffffffLL;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += step) {
    std::int64_t t, g;
    div_mod(i, groups, narrow, t, g);
    const std::int64_t j = g * W;
    const std::int32_t id = ids[t];
    float v[W];
    if (id < 0 || id >= vocab) {
      if (g == 0) atomicMin(bad, static_cast<flag_t>(t));
#pragma unroll
      for (int k = 0; k < W; ++k) v[k] = 0.f;
    } else {
      load_group<S, W>(table + id * table_width + column_begin + j, v);
#pragma unroll
      for (int k = 0; k < W; ++k) v[k] *= scale;
    }
    store_group<S, W>(out + t * width + j, v);
  }
}

/// order[t] = t (order given), and *bad = min(*bad, t) for every id outside [0, vocab).
__global__ void embedding_prepare_kernel(const std::int32_t* __restrict__ ids, std::int64_t tokens, std::int64_t vocab,
                                         std::int32_t* __restrict__ order, flag_t* __restrict__ bad) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t t = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < tokens; t += step) {
    if (order) order[t] = static_cast<std::int32_t>(t);
    const std::int32_t id = ids[t];
    if (id < 0 || id >= vocab) atomicMin(bad, static_cast<flag_t>(t));
  }
}

/// For each run of equal keys in keys [tokens] (sorted, stable: tokens in order[] ascending
/// within a run) that starts at a position this block's x visits, and each column tile this
/// block's y visits: row = d_table[key, column_begin + tile columns]; row += scale · dout[token]
/// for the run's tokens in order; stored once. Nothing when *bad is set; the padding key's run
/// is skipped.
template <class S, int W>
__global__ void embedding_backward_kernel(const std::uint32_t* __restrict__ keys,
                                          const std::int32_t* __restrict__ order,
                                          std::int64_t tokens, const S* __restrict__ dout, std::int64_t width,
                                          float scale, std::int64_t padding_id, S* __restrict__ d_table,
                                          std::int64_t table_width, std::int64_t column_begin,
                                          const flag_t* __restrict__ bad) {
  if (*bad != no_bad_id) return;
  const std::int64_t tile_columns = static_cast<std::int64_t>(blockDim.x) * W;
  const std::int64_t tiles = (width + tile_columns - 1) / tile_columns;
  for (std::int64_t i = blockIdx.x; i < tokens; i += gridDim.x) {
    const std::uint32_t key = keys[i];
    if ((i > 0 && keys[i - 1] == key) || static_cast<std::int64_t>(key) == padding_id) continue;
    for (std::int64_t tile = blockIdx.y; tile < tiles; tile += gridDim.y) {
      const std::int64_t j = tile * tile_columns + static_cast<std::int64_t>(threadIdx.x) * W;
      if (j >= width) continue;  // W divides width when W > 1
      S* row = d_table + static_cast<std::int64_t>(key) * table_width + column_begin + j;
      float acc[W];
      load_group<S, W>(row, acc);
      for (std::int64_t k = i; k < tokens && keys[k] == key; ++k) {
        float g[W];
        load_group<S, W>(dout + static_cast<std::int64_t>(order[k]) * width + j, g);
#pragma unroll
        for (int e = 0; e < W; ++e) acc[e] += scale * g[e];
      }
      store_group<S, W>(row, acc);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// launchers

std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// Waits for the stream, then ok if *bad was never set, else the CPU path's refusal naming the
/// first bad position and its value.
status verdict(const exec_context& ctx, const char* op, const tensor& ids, std::int64_t vocab, const flag_t* bad) {
  const cudaStream_t stream = stream_of(ctx);
  flag_t position = no_bad_id;
  {  // the wait covers the copy: into pageable memory it returns once done
    const host_wait waiting;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(&position, bad, sizeof position, cudaMemcpyDeviceToHost, stream));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  if (position == no_bad_id) return status::ok();
  std::int32_t value = 0;
  TANDEM_CUDA_CHECK(cudaMemcpyAsync(&value, ids.as<const std::int32_t>() + position, sizeof value,
                                    cudaMemcpyDeviceToHost, stream));
  {
    const host_wait waiting;
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  return require(false, op,
                 "ids: position " + std::to_string(position) + " holds " + std::to_string(value) + ", outside [0, " +
                     std::to_string(vocab) + ")");
}

/// W = vec_width<S> when every row start of both matrices is 16-byte aligned and W divides width.
template <class S>
bool rows_vectorise(const void* a, std::int64_t a_stride, const void* b, std::int64_t b_stride, std::int64_t width) {
  constexpr int V = vec_width<S>;
  return aligned16(a) && aligned16(b) && a_stride % V == 0 && b_stride % V == 0 && width % V == 0;
}

}  // namespace

status embedding_forward(const exec_context& ctx, dtype storage, const tensor& ids, const tensor& table, double scale,
                         const tensor& out, std::int64_t column_begin, bool host_checked) {
  constexpr const char* op = "embedding_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t tokens = ids.dim(0), vocab = table.dim(0), table_width = table.dim(1), width = out.dim(1);
  if (tokens == 0) return status::ok();
  auto scratch = op_scratch::get(ctx, op, sizeof(flag_t));
  if (!scratch) return scratch.error();
  flag_t* bad = reinterpret_cast<flag_t*>(scratch->data());
  const cudaStream_t stream = stream_of(ctx);
  TANDEM_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(flag_t), stream));
  TANDEM_RETURN_IF_ERROR(with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    constexpr int V = vec_width<S>;
    if (width == 0) {  // nothing to look up, the ids are still checked
      embedding_prepare_kernel<<<blocks_for(tokens, threads), threads, 0, stream>>>(ids.as<const std::int32_t>(),
                                                                                     tokens, vocab, nullptr, bad);
      return launch_status(op, "embedding_prepare_kernel");
    }
    const S* source = table.as<const S>() + column_begin;
    if (rows_vectorise<S>(source, table_width, out.data(), width, width))
      embedding_forward_kernel<S, V><<<blocks_for(tokens * (width / V), threads), threads, 0, stream>>>(
          ids.as<const std::int32_t>(), tokens, vocab, table.as<const S>(), table_width, column_begin, width,
          static_cast<float>(scale), out.as<S>(), bad);
    else
      embedding_forward_kernel<S, 1><<<blocks_for(tokens * width, threads), threads, 0, stream>>>(
          ids.as<const std::int32_t>(), tokens, vocab, table.as<const S>(), table_width, column_begin, width,
          static_cast<float>(scale), out.as<S>(), bad);
    return launch_status(op, "embedding_forward_kernel");
  }));
  return host_checked ? status::ok() : verdict(ctx, op, ids, vocab, bad);
}

status embedding_backward(const exec_context& ctx, dtype storage, const tensor& ids, const tensor& dout, double scale,
                          const tensor& d_table, std::int64_t padding_id, std::int64_t column_begin) {
  constexpr const char* op = "embedding_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t tokens = ids.dim(0), width = dout.dim(1), vocab = d_table.dim(0), table_width = d_table.dim(1);
  if (tokens == 0) return status::ok();
  TANDEM_RETURN_IF_ERROR(require(tokens <= std::numeric_limits<std::int32_t>::max(), op,
                                 "ids: " + std::to_string(tokens) +
                                     " tokens, the CUDA backward takes at most 2^31 - 1"));
  const int items = static_cast<int>(tokens);
  // The key bits that in-range ids use (out-of-range ids are refused; their order does not matter).
  const auto largest_key = static_cast<std::uint64_t>(std::max<std::int64_t>(vocab - 1, 1));
  const int end_bit = std::clamp(static_cast<int>(std::bit_width(largest_key)), 1, 32);
  const cudaStream_t stream = stream_of(ctx);

  // Scratch: the flag | sorted keys | token order | sorted token order | CUB's temporary storage.
  std::size_t sort_bytes = 0;
  TANDEM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, sort_bytes, static_cast<const std::uint32_t*>(nullptr),
                                                    static_cast<std::uint32_t*>(nullptr),
                                                    static_cast<const std::int32_t*>(nullptr),
                                                    static_cast<std::int32_t*>(nullptr), items, 0, end_bit, stream));
  const std::size_t list_bytes = round_up(static_cast<std::size_t>(tokens) * sizeof(std::int32_t));
  auto scratch = op_scratch::get(ctx, op, round_up(sizeof(flag_t)) + 3 * list_bytes + sort_bytes);
  if (!scratch) return scratch.error();
  std::byte* base = scratch->data();
  flag_t* bad = reinterpret_cast<flag_t*>(base);
  base += round_up(sizeof(flag_t));
  auto* sorted_keys = reinterpret_cast<std::uint32_t*>(base);
  auto* order = reinterpret_cast<std::int32_t*>(base + list_bytes);
  auto* sorted_order = reinterpret_cast<std::int32_t*>(base + 2 * list_bytes);
  void* sort_storage = base + 3 * list_bytes;

  TANDEM_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(flag_t), stream));
  embedding_prepare_kernel<<<blocks_for(tokens, threads), threads, 0, stream>>>(ids.as<const std::int32_t>(), tokens,
                                                                                 vocab, order, bad);
  TANDEM_RETURN_IF_ERROR(launch_status(op, "embedding_prepare_kernel"));
  // Radix sort is stable: equal ids keep their tokens in ascending order.
  const auto* keys = reinterpret_cast<const std::uint32_t*>(ids.as<const std::int32_t>());
  TANDEM_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_storage, sort_bytes, keys, sorted_keys, order, sorted_order,
                                                    items, 0, end_bit, stream));
  TANDEM_RETURN_IF_ERROR(with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    constexpr int V = vec_width<S>;
    if (width == 0) return status::ok();
    const bool vector = rows_vectorise<S>(d_table.as<const S>() + column_begin, table_width, dout.data(), width, width);
    const int w = vector ? V : 1;
    const std::int64_t groups = (width + w - 1) / w;
    const int block = static_cast<int>(std::min<std::int64_t>(threads, (groups + 31) / 32 * 32));
    const std::int64_t tiles = (groups + block - 1) / block;
    const dim3 grid(static_cast<unsigned>(std::min<std::int64_t>(tokens, 1 << 20)),
                    static_cast<unsigned>(std::min<std::int64_t>(tiles, 65535)));
    if (vector)
      embedding_backward_kernel<S, V><<<grid, block, 0, stream>>>(sorted_keys, sorted_order, tokens, dout.as<const S>(),
                                                                  width, static_cast<float>(scale), padding_id,
                                                                  d_table.as<S>(), table_width, column_begin, bad);
    else
      embedding_backward_kernel<S, 1><<<grid, block, 0, stream>>>(sorted_keys, sorted_order, tokens, dout.as<const S>(),
                                                                  width, static_cast<float>(scale), padding_id,
                                                                  d_table.as<S>(), table_width, column_begin, bad);
    return launch_status(op, "embedding_backward_kernel");
  }));
  return verdict(ctx, op, ids, vocab, bad);
}

}  // namespace tandem::gpu::ops::cuda
