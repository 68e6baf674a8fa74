// Tiles of the CUDA attention kernels (nvcc only; private to attention.cu and paged_attention.cu):
// which rows a block owns, where a key position lives (packed tokens or a paged cache), and the
// staging of rows into shared memory as float32.
//
// A block owns a TILE: up to 16 query rows, `rows_per_tile` consecutive rows of ONE sequence times
// `heads_per_tile` query heads of ONE kv head (so they share every key and value it loads). Tiles
// never span sequences; the tiles of sequence s are numbered from offsets[s] (tile_offsets_kernel,
// on the device, so the host never reads the offsets). Keys are visited in tiles aligned to
// multiples of the key-tile width in POSITION space (positions count from the sequence's start),
// whatever the query tile: a row's arithmetic is then the same in the packed and the paged kernel.
#pragma once

#include <climits>
#include <cstdint>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"

namespace tandem::gpu::ops::cuda::attn {

constexpr int threads = 256;     // 8 warps per block
constexpr int tile_rows = 16;    // query rows of a query tile, keys of a dK/dV key tile
constexpr int row_lanes = 16;    // lanes sharing one row: a half warp
constexpr int key_tile = 32;     // keys per step of the query-tile kernels
constexpr int max_head_dim = 512;

/// Stride (floats) of a staged row of d values: odd, so 16 rows read at one column hit 16 banks.
__host__ __device__ inline int staged_stride(int d) { return d % 2 == 0 ? d + 1 : d; }

/// Accumulator slots per lane for head dim d (16 lanes share a row): 2, 8, 16 or 32; 0 if d > 512.
inline int column_slots(std::int64_t d) { return d <= 32 ? 2 : d <= 128 ? 8 : d <= 256 ? 16 : d <= 512 ? 32 : 0; }

/// The first key position a query at position p sees (window 0: the sequence's start).
__device__ __forceinline__ std::int64_t first_visible(std::int64_t p, std::int64_t window) {
  return window > 0 ? (p - window + 1 > 0 ? p - window + 1 : 0) : 0;
}

/// x rounded to storage S and back (the probabilities before P·V).
template <class S>
__device__ __forceinline__ float round_to(float x) { return to_float(from_float<S>(x)); }

__device__ __forceinline__ float half_warp_max(float v) {
#pragma unroll
  for (int offset = row_lanes / 2; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Sum over the 16 lanes of a half warp, the same tree on every call.
__device__ __forceinline__ float half_warp_sum(float v) {
#pragma unroll
  for (int offset = row_lanes / 2; offset > 0; offset >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Tiles of ceil(length / rows_per_tile) of sequence s (a negative length counts as empty).
__device__ __forceinline__ std::int64_t tiles_of(const std::int32_t* cu, std::int64_t s, std::int64_t rows_per_tile) {
  const std::int64_t length = static_cast<std::int64_t>(cu[s + 1]) - cu[s];
  return length > 0 ? (length + rows_per_tile - 1) / rows_per_tile : 0;
}

// ---------------------------------------------------------------------------------------------
// kernels

/// Inclusive prefix sum over the lanes of a warp (the same tree on every call).
__device__ __forceinline__ std::int64_t warp_inclusive_scan(std::int64_t v) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
#pragma unroll
  for (int offset = 1; offset < 32; offset <<= 1) {
    const std::int64_t other = __shfl_up_sync(0xffffffffu, v, offset);
    if (lane >= offset) v += other;
  }
  return v;
}

/// offsets I64 [S + 1]: offsets[s] = Σ_{s' < s} tiles_of(s'), offsets[S] the total. One block of
/// 1024 threads: contiguous chunks of sequences, their sums scanned within each warp by shuffles,
/// then the 32 warp totals by warp 0 (two block barriers, where a tree over shared memory took
/// twenty).
static __global__ void __launch_bounds__(1024) tile_offsets_kernel(const std::int32_t* __restrict__ cu, std::int64_t num_seqs,
                                                            std::int64_t rows_per_tile, std::int64_t* __restrict__ offsets) {
  // The kernel after it may be a dependent launch (the forward): it may start now and set itself
  // up, and it waits for this kernel's completion before reading the offsets.
  allow_dependents();
  __shared__ std::int64_t warp_total[32];
  const int tid = static_cast<int>(threadIdx.x), n = static_cast<int>(blockDim.x);
  const int warp = tid >> 5, lane = tid & 31;
  const std::int64_t per = (num_seqs + n - 1) / n;
  const std::int64_t begin = tid * per, end = begin + per < num_seqs ? begin + per : num_seqs;
  std::int64_t sum = 0;
  for (std::int64_t s = begin; s < end; ++s) sum += tiles_of(cu, s, rows_per_tile);
  const std::int64_t inclusive = warp_inclusive_scan(sum);
  if (lane == 31) warp_total[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const std::int64_t w = lane < (n >> 5) ? warp_total[lane] : 0;
    warp_total[lane] = warp_inclusive_scan(w);  // inclusive over the warps
  }
  __syncthreads();
  std::int64_t acc = inclusive - sum + (warp > 0 ? warp_total[warp - 1] : 0);
  for (std::int64_t s = begin; s < end; ++s) {
    offsets[s] = acc;
    acc += tiles_of(cu, s, rows_per_tile);
  }
  if (tid == n - 1) offsets[num_seqs] = acc;
}

// ---------------------------------------------------------------------------------------------
// device helpers

/// Where a block's tile lies: its sequence, the sequence's first row and length, and the position
/// of the tile's first row in it.
struct tile_place {
  std::int64_t seq, start, length, first;
  bool valid;
};

/// Tile `tile` of the numbering `offsets` (I64 [S + 1]) over the offsets `cu` (I32 [S + 1]).
__device__ __forceinline__ tile_place find_tile(const std::int64_t* offsets, const std::int32_t* cu,
                                                std::int64_t num_seqs, std::int64_t tile, std::int64_t rows_per_tile) {
  tile_place t{0, 0, 0, 0, false};
  if (tile >= offsets[num_seqs]) return t;
  std::int64_t lo = 0, hi = num_seqs;  // offsets[lo] <= tile < offsets[hi]
  while (hi - lo > 1) {
    const std::int64_t mid = (lo + hi) / 2;
    if (offsets[mid] <= tile) lo = mid; else hi = mid;
  }
  t.seq = lo;
  t.start = cu[lo];
  t.length = static_cast<std::int64_t>(cu[lo + 1]) - cu[lo];
  t.first = (tile - offsets[lo]) * rows_per_tile;
  t.valid = true;
  return t;
}

/// How query tiles are laid out: rows_per_tile rows x heads_per_tile heads (<= 16 in all); the
/// grid's y is kv head x head chunk. positions: I32 [rows] (the paged kernel) or null (packed:
/// a row's position is its index in its sequence).
struct query_layout {
  const std::int32_t* cu;         // I32 [S + 1]
  const std::int64_t* offsets;    // I64 [S + 1] tile numbering
  const std::int32_t* positions;  // I32 [rows] or null
  std::int64_t num_seqs, rows, heads, group, rows_per_tile, heads_per_tile, head_chunks;
};

/// A query tile: its place, kv head g and first query head h0 (heads h0..h0+head_count-1).
struct query_tile {
  tile_place place;
  std::int64_t g, h0, head_count;
};

/// Query tile number `tile` of kv head x head chunk `y`: its place, kv head g and first query head h0.
__device__ __forceinline__ query_tile find_query_tile_at(const query_layout& q, std::int64_t tile, unsigned y) {
  query_tile t;
  t.place = find_tile(q.offsets, q.cu, q.num_seqs, tile, q.rows_per_tile);
  const unsigned chunks = static_cast<unsigned>(q.head_chunks);  // 32-bit division
  t.g = y / chunks;
  const std::int64_t chunk = y % chunks;
  t.h0 = t.g * q.group + chunk * q.heads_per_tile;
  t.head_count = q.group - chunk * q.heads_per_tile < q.heads_per_tile ? q.group - chunk * q.heads_per_tile : q.heads_per_tile;
  return t;
}

/// The query tile of a block of a (query tiles, kv heads x head chunks) grid: number
/// gridDim.x - 1 - blockIdx.x (the last, longest rows first).
__device__ __forceinline__ query_tile find_query_tile(const query_layout& q) {
  return find_query_tile_at(q, static_cast<std::int64_t>(gridDim.x) - 1 - blockIdx.x, blockIdx.y);
}

/// The least and greatest position among the `rows` entries of pos_s (I32 or I64; -1: no row);
/// pmax < 0 when there is no row at all. Every lane of the calling warp must call it (each reads
/// every 32nd entry and the warp combines them; a thread walking all the entries alone took 4 µs
/// of a forward block's 35).
template <class T>
__device__ __forceinline__ void position_range(const T* pos_s, int rows, T& pmin, T& pmax) {
  pmin = sizeof(T) == 8 ? static_cast<T>(INT64_MAX) : static_cast<T>(INT_MAX);
  pmax = -1;
  for (int l = static_cast<int>(threadIdx.x) & 31; l < rows; l += 32) {
    const T p = pos_s[l];
    if (p >= 0) {
      pmin = p < pmin ? p : pmin;
      pmax = p > pmax ? p : pmax;
    }
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const T lo = __shfl_xor_sync(0xffffffffu, pmin, offset), hi = __shfl_xor_sync(0xffffffffu, pmax, offset);
    pmin = lo < pmin ? lo : pmin;
    pmax = hi > pmax ? hi : pmax;
  }
}

/// Local row l of a query tile: its row index in q ([rows · heads], -1: none) and position (-1: none).
__device__ __forceinline__ void query_row(const query_layout& q, const query_tile& t, int l, std::int64_t& qrow,
                                          std::int64_t& pos) {
  qrow = -1;
  pos = -1;
  const int heads_per_tile = static_cast<int>(q.heads_per_tile);  // <= 16: 32-bit division
  const std::int64_t tl = l / heads_per_tile, hl = l % heads_per_tile;
  if (tl >= q.rows_per_tile || hl >= t.head_count || t.place.first + tl >= t.place.length) return;
  const std::int64_t r = t.place.start + t.place.first + tl;
  if (r < 0 || r >= q.rows) return;  // malformed offsets: stay in bounds
  qrow = r * q.heads + t.h0 + hl;
  pos = q.positions ? (q.positions[r] > 0 ? q.positions[r] : 0) : t.place.first + tl;
}

/// Keys and values of a packed batch: position j of the sequence starting at token `start`.
template <class S>
struct packed_keys {
  const S* k;  // [T, G, d]
  const S* v;  // [T, G, d]
  std::int64_t tokens, kv_heads, d;
  /// Element offset of (position j of sequence seq starting at `start`, kv head g), -1 if none.
  __device__ __forceinline__ std::int64_t offset(std::int64_t, std::int64_t start, std::int64_t j, std::int64_t g) const {
    const std::int64_t t = start + j;
    return t >= 0 && t < tokens ? (t * kv_heads + g) * d : -1;
  }
};

/// Keys and values of a paged cache read through the block table.
template <class S>
struct paged_keys {
  const S* k;                  // [N, B, G, d]
  const S* v;                  // [N, B, G, d]
  const std::int32_t* table;   // I32 [S, M]
  std::int64_t table_cols, blocks, block_size, kv_heads, d;
  __device__ __forceinline__ std::int64_t offset(std::int64_t seq, std::int64_t, std::int64_t j, std::int64_t g) const {
    if (j < 0) return -1;
    const std::int64_t b = j / block_size;
    if (b >= table_cols) return -1;
    const std::int64_t block = table[seq * table_cols + b];
    if (block < 0 || block >= blocks) return -1;  // refused on the host side by the check kernel
    return ((block * block_size + j % block_size) * kv_heads + g) * d;
  }
};

/// dst[l·ld + c] = src[offset_of(l) + c] as float for l < rows, c < d (zeros where the offset is
/// -1); a warp per row, 16-byte loads where the row is aligned.
template <class S, class OffsetOf>
__device__ __forceinline__ void stage_rows(float* dst, int ld, const S* src, int rows, int d, OffsetOf offset_of) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  constexpr int vec = 16 / sizeof(S);
  for (int l = warp; l < rows; l += threads / 32) {
    const std::int64_t off = offset_of(l);
    float* out = dst + static_cast<std::int64_t>(l) * ld;
    if (off < 0) {
      for (int c = lane; c < d; c += 32) out[c] = 0.f;
      continue;
    }
    const S* in = src + off;
    if (d % vec == 0 && (reinterpret_cast<std::uintptr_t>(in) & 15) == 0) {
      for (int c = lane * vec; c < d; c += 32 * vec) {
        const uint4 raw = *reinterpret_cast<const uint4*>(in + c);
        const S* e = reinterpret_cast<const S*>(&raw);
#pragma unroll
        for (int i = 0; i < vec; ++i) out[c + i] = to_float(e[i]);
      }
    } else {
      for (int c = lane; c < d; c += 32) out[c] = to_float(in[c]);
    }
  }
}

/// Σ_c a[c]·b[c], c ascending, one fused multiply-add per term.
__device__ __forceinline__ float row_dot(const float* a, const float* b, int d) {
  float acc = 0.f;
#pragma unroll 8
  for (int c = 0; c < d; ++c) acc = fmaf(a[c], b[c], acc);
  return acc;
}

}  // namespace tandem::gpu::ops::cuda::attn
