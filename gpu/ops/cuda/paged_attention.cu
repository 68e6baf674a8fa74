// Paged attention on CUDA: a one-block check of the rows' offsets, positions and blocks (the
// CPU's refusals, found on the device and copied back), the K/V write (a block per new row, 16-byte
// copies where aligned), and the forward: the packed forward's query-tile kernel with the keys read
// through the block table (attention_query.cuh), so a row gives the packed kernel's bits; bfloat16
// at d 256 / 512 runs the packed forward's tensor-core kernel (attention_wgmma_forward.cuh) likewise,
// or for a decode step the 8-row decode kernel of the same arithmetic (attention_decode.cuh).
#include "gpu/ops/cuda/paged_attention.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "gpu/core/host_waits.h"
#include "gpu/ops/cuda/attention_decode.cuh"
#include "gpu/ops/cuda/attention_wgmma_forward.cuh"
#include "gpu/ops/cuda/attention_query.cuh"
#include "gpu/ops/cuda/attention_tiles.cuh"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

/// The first fault of a call in the CPU's order (check_blocks in paged_attention.cpp).
struct paged_fault {
  std::int64_t kind;  // fault_kind
  std::int64_t seq, row, position, logical, block;
};

enum fault_kind : std::int64_t { no_fault = 0, bad_range = 1, decreasing = 2, negative_position = 3, bad_block = 4 };

/// What a check needs: the rows and the cache's geometry.
struct paged_geometry {
  const std::int32_t* cu;         // I32 [S + 1]
  const std::int32_t* positions;  // I32 [n]
  const std::int32_t* table;      // I32 [S, M]
  std::int64_t num_seqs, rows, table_cols, blocks, block_size;
};

std::size_t aligned(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// ---------------------------------------------------------------------------------------------
// kernels

/// The sequence of row r: the last s < count with cu[s] <= r (offsets cu[0..count] nondecreasing).
__device__ std::int64_t sequence_of(const std::int32_t* cu, std::int64_t count, std::int64_t r) {
  std::int64_t lo = 0, hi = count;
  while (hi - lo > 1) {
    const std::int64_t mid = (lo + hi) / 2;
    if (cu[mid] <= r) lo = mid; else hi = mid;
  }
  return lo;
}

/// Minimum over the block (blockDim.x a multiple of 32); shared holds 33 values.
__device__ std::int64_t block_min(std::int64_t v, std::int64_t* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const std::int64_t o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = o < v ? o : v;
  }
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < warps ? shared[lane] : INT64_MAX;
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
      const std::int64_t o = __shfl_xor_sync(0xffffffffu, v, offset);
      v = o < v ? o : v;
    }
    if (lane == 0) shared[32] = v;
  }
  __syncthreads();
  v = shared[32];
  __syncthreads();
  return v;
}

/// The fault of row r of sequence s, if any: a negative position, or the first logical block of
/// positions first..p (first = p for a write) that is unmapped or outside [0, N).
__device__ paged_fault row_fault(const paged_geometry& g, std::int64_t s, std::int64_t r, std::int64_t window,
                                 bool whole_window) {
  paged_fault f{no_fault, s, r, 0, 0, 0};
  const std::int64_t p = g.positions[r];
  f.position = p;
  if (p < 0) {
    f.kind = negative_position;
    return f;
  }
  const std::int64_t first = whole_window ? attn::first_visible(p, window) : p;
  for (std::int64_t b = first / g.block_size; b <= p / g.block_size; ++b) {
    const std::int64_t block = b < g.table_cols ? g.table[s * g.table_cols + b] : -1;
    if (block < 0 || block >= g.blocks) {
      f.kind = bad_block;
      f.logical = b;
      f.block = block;
      return f;
    }
  }
  return f;
}

/// One block of 1024 threads: *fault = the first fault in the CPU's order (the offsets' range,
/// then sequence by sequence: its rows in order, a decrease after them), or no_fault.
__global__ void __launch_bounds__(1024) paged_check_kernel(paged_geometry g, std::int64_t window, bool whole_window,
                                                           paged_fault* fault) {
  __shared__ std::int64_t shared[33];
  if (g.cu[0] != 0 || g.cu[g.num_seqs] != g.rows) {  // uniform
    if (threadIdx.x == 0) *fault = paged_fault{bad_range, 0, 0, 0, 0, 0};
    return;
  }
  std::int64_t dec = INT64_MAX;
  for (std::int64_t s = threadIdx.x; s < g.num_seqs; s += blockDim.x)
    if (g.cu[s + 1] < g.cu[s]) {
      dec = s;
      break;
    }
  dec = block_min(dec, shared);
  const std::int64_t seqs = dec == INT64_MAX ? g.num_seqs : dec;  // offsets cu[0..seqs] nondecreasing
  const std::int64_t limit = g.cu[seqs] < g.rows ? g.cu[seqs] : g.rows;
  std::int64_t bad = INT64_MAX;
  for (std::int64_t r = threadIdx.x; r < limit; r += blockDim.x)
    if (row_fault(g, sequence_of(g.cu, seqs, r), r, window, whole_window).kind != no_fault) {
      bad = r;
      break;
    }
  bad = block_min(bad, shared);
  if (threadIdx.x != 0) return;
  if (bad != INT64_MAX) *fault = row_fault(g, sequence_of(g.cu, seqs, bad), bad, window, whole_window);
  else if (dec != INT64_MAX) *fault = paged_fault{decreasing, dec, 0, 0, 0, 0};
  else *fault = paged_fault{no_fault, 0, 0, 0, 0, 0};
}

/// Block per new row (grid-stride): its k and v rows [G·d] into the slot of its position; rows
/// whose sequence, position or block is invalid are skipped (the check refuses the call).
template <class S>
__global__ void paged_kv_write_kernel(const S* __restrict__ k, const S* __restrict__ v, paged_geometry g,
                                      std::int64_t row_elems, S* __restrict__ k_cache, S* __restrict__ v_cache) {
  for (std::int64_t r = blockIdx.x; r < g.rows; r += gridDim.x) {
    const std::int64_t s = sequence_of(g.cu, g.num_seqs, r);
    if (!(g.cu[s] <= r && r < g.cu[s + 1])) continue;
    const std::int64_t p = g.positions[r];
    if (p < 0 || p / g.block_size >= g.table_cols) continue;
    const std::int64_t block = g.table[s * g.table_cols + p / g.block_size];
    if (block < 0 || block >= g.blocks) continue;
    const std::int64_t dst = (block * g.block_size + p % g.block_size) * row_elems, src = r * row_elems;
    const auto aligned16 = [](const void* x) { return (reinterpret_cast<std::uintptr_t>(x) & 15) == 0; };
    if ((row_elems * static_cast<std::int64_t>(sizeof(S))) % 16 == 0 && aligned16(k + src) && aligned16(v + src) &&
        aligned16(k_cache + dst) && aligned16(v_cache + dst)) {
      const std::int64_t n = row_elems * static_cast<std::int64_t>(sizeof(S)) / 16;
      const uint4* ks = reinterpret_cast<const uint4*>(k + src);
      const uint4* vs = reinterpret_cast<const uint4*>(v + src);
      uint4* kd = reinterpret_cast<uint4*>(k_cache + dst);
      uint4* vd = reinterpret_cast<uint4*>(v_cache + dst);
      for (std::int64_t e = threadIdx.x; e < n; e += blockDim.x) {
        kd[e] = ks[e];
        vd[e] = vs[e];
      }
    } else {
      for (std::int64_t e = threadIdx.x; e < row_elems; e += blockDim.x) {
        k_cache[dst + e] = k[src + e];
        v_cache[dst + e] = v[src + e];
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// launchers

paged_geometry geometry_of(const paged_rows& rows, const tensor& k_cache, std::int64_t n) {
  return {rows.cu_rows.as<const std::int32_t>(), rows.positions.as<const std::int32_t>(),
          rows.block_table.as<const std::int32_t>(), rows.block_table.dim(0), n, rows.block_table.dim(1),
          k_cache.dim(0), k_cache.dim(1)};
}

/// Enqueues the check into fault (device).
status enqueue_check(cudaStream_t stream, const char* op, const paged_geometry& g, std::int64_t window,
                     bool whole_window, paged_fault* fault) {
  paged_check_kernel<<<1, 1024, 0, stream>>>(g, window, whole_window, fault);
  return launch_status(op, "paged_check_kernel");
}

/// Waits for the stream, then the CPU's message for the fault the check found (ok if none).
status check_verdict(cudaStream_t stream, const char* op, const paged_fault* fault, const paged_geometry& g) {
  paged_fault f{};
  {  // the wait covers the copy: into pageable memory it returns once done
    const host_wait waiting;
    TANDEM_CUDA_CHECK(cudaMemcpyAsync(&f, fault, sizeof f, cudaMemcpyDeviceToHost, stream));
    TANDEM_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  const auto str = [](std::int64_t x) { return std::to_string(x); };
  switch (f.kind) {
    case no_fault: return status::ok();
    case bad_range: return require(false, op, "cu_rows must run from 0 to the " + str(g.rows) + " rows");
    case decreasing: return require(false, op, "cu_rows decreases at sequence " + str(f.seq));
    case negative_position: return require(false, op, "row " + str(f.row) + " has position " + str(f.position));
    default:
      return require(false, op, "sequence " + str(f.seq) + ", position " + str(f.position) + ": logical block " +
                                    str(f.logical) +
                                    (f.block < 0 ? " is not mapped"
                                                 : " maps to block " + str(f.block) + ", outside the " +
                                                       str(g.blocks) + " blocks of the cache"));
  }
}

}  // namespace

status paged_kv_write(const exec_context& ctx, dtype storage, const tensor& k, const tensor& v, const paged_rows& rows,
                      const tensor& k_cache, const tensor& v_cache) {
  constexpr const char* op = "paged_kv_write";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const cudaStream_t stream = stream_of(ctx);
  const std::int64_t n = k.dim(0);
  const paged_geometry g = geometry_of(rows, k_cache, n);
  auto scratch = op_scratch::get(ctx, op, aligned(sizeof(paged_fault)));
  if (!scratch) return scratch.error();
  auto* fault = reinterpret_cast<paged_fault*>(scratch->data());
  if (!rows.host) TANDEM_RETURN_IF_ERROR(enqueue_check(stream, op, g, 0, false, fault));
  const std::int64_t row_elems = k.dim(1) * k.dim(2);
  if (n > 0 && row_elems > 0) {
    TANDEM_RETURN_IF_ERROR(with_storage(storage, op, [&](auto zero) -> status {
      using S = decltype(zero);
      paged_kv_write_kernel<S><<<blocks_for(n, 1, 65535), 128, 0, stream>>>(k.as<const S>(), v.as<const S>(), g,
                                                                          row_elems, k_cache.as<S>(), v_cache.as<S>());
      return launch_status(op, "paged_kv_write_kernel");
    }));
  }
  return rows.host ? status::ok() : check_verdict(stream, op, fault, g);
}

status paged_attention_forward(const exec_context& ctx, dtype storage, const tensor& q, const tensor& k_cache,
                               const tensor& v_cache, const paged_rows& rows, const tensor& out, const tensor& lse,
                               const attention_options& options) {
  constexpr const char* op = "paged_attention_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const cudaStream_t stream = stream_of(ctx);
  const std::int64_t n = q.dim(0), heads = q.dim(1), d = q.dim(2), kv_heads = k_cache.dim(2);
  const int slots = attn::column_slots(d);
  if (slots == 0)
    return {status_code::unsupported, std::string(op) + ": head dim " + std::to_string(d) +
                                          " is above the CUDA kernels' " + std::to_string(attn::max_head_dim)};
  const paged_geometry g = geometry_of(rows, k_cache, n);
  const std::size_t fault_bytes = aligned(sizeof(paged_fault));
  auto scratch = op_scratch::get(ctx, op, fault_bytes + aligned(static_cast<std::size_t>(g.num_seqs + 1) * sizeof(std::int64_t)));
  if (!scratch) return scratch.error();
  auto* fault = reinterpret_cast<paged_fault*>(scratch->data());
  auto* offsets = reinterpret_cast<std::int64_t*>(scratch->data() + fault_bytes);
  if (!rows.host) TANDEM_RETURN_IF_ERROR(enqueue_check(stream, op, g, options.sliding_window, true, fault));
  // bfloat16 at d 256 / 512 with aligned tensors: the packed forward's tensor-core kernel (the
  // same choice attention_forward makes, so a row keeps the packed row's bits)
  const bool mma = storage == dtype::bfloat16 && attn::mma::has_kernel(d) && attn::mma::aligned16(q.data()) &&
                   attn::mma::aligned16(k_cache.data()) && attn::mma::aligned16(v_cache.data()) &&
                   attn::mma::aligned16(out.data());
  // A decode step (a position or two a sequence: as many as a decode block holds) runs the
  // decode kernel: the same bits in blocks of 8 rows instead of 64 or 128.
  const attn::query_tiling decode_tiling = attn::mma::mma_tiling(heads, kv_heads, attn::mma::decode_block_rows);
  const bool decode = mma && n <= g.num_seqs * decode_tiling.rows_per_tile;
  if (n > 0 && heads > 0) {
    const attn::query_tiling tiling = decode ? decode_tiling
                                      : mma  ? attn::mma::mma_tiling(heads, kv_heads, attn::mma::forward_block_rows(d))
                                             : attn::query_tiling_for(heads, kv_heads);
    const std::int64_t tiles = (n + tiling.rows_per_tile - 1) / tiling.rows_per_tile + g.num_seqs;
    const std::int64_t chunks = kv_heads * tiling.head_chunks;
    if (tiles > 0x7fffffffLL || chunks > 65535)
      return {status_code::unsupported, std::string(op) + ": too many rows or heads for one CUDA grid"};
    attn::tile_offsets_kernel<<<1, 1024, 0, stream>>>(g.cu, g.num_seqs, tiling.rows_per_tile, offsets);
    TANDEM_RETURN_IF_ERROR(launch_status(op, "tile_offsets_kernel"));
    const attn::query_layout layout{g.cu, offsets, g.positions, g.num_seqs, n, heads, tiling.group,
                                    tiling.rows_per_tile, tiling.heads_per_tile, tiling.head_chunks};
    const dim3 grid(static_cast<unsigned>(tiles), static_cast<unsigned>(chunks));
    TANDEM_RETURN_IF_ERROR(with_storage(storage, op, [&](auto zero) -> status {
      using S = decltype(zero);
      attn::query_args<S> a{};
      a.q = q.as<const S>();
      a.out = out.as<S>();
      a.lse_out = lse.as<float>();
      a.d = static_cast<int>(d);
      a.scale = static_cast<float>(options.scaling);
      a.window = options.sliding_window;
      const attn::paged_keys<S> keys{k_cache.as<const S>(), v_cache.as<const S>(), g.table, g.table_cols, g.blocks,
                                     g.block_size, kv_heads, d};
      if constexpr (std::is_same_v<S, bf16>) {
        if (decode) return attn::mma::launch_decode(stream, op, grid, a, layout, keys);
        if (mma) return attn::mma::launch_forward(stream, op, grid, a, layout, keys);
      }
      return attn::launch_query_pass<attn::query_pass::forward>(stream, op, slots, grid, a, layout, keys);
    }));
  }
  return rows.host ? status::ok() : check_verdict(stream, op, fault, g);
}

}  // namespace tandem::gpu::ops::cuda
