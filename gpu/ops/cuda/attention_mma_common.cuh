// Tensor-core helpers of the bfloat16 attention kernels (nvcc only; private to attention.cu and
// paged_attention.cu): inline PTX for mma.sync m16n8k16 (bf16 in, f32 accumulate), ldmatrix and
// cp.async, the swizzled shared-memory layout of a [rows][D] bf16 tile, its asynchronous loader,
// and the query tiling of the mma kernels (more rows per block than the FFMA kernels' 16).
//
// Fragment ownership of mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA), for lane
// L = 4·g + t (g = L >> 2 the groupID, t = L & 3 the thread in its group); every index of the
// kernels is derived from this table:
//   A (16 x 16, row-major M x K), 4 registers of 2 bf16 (the lower column in the low half):
//     a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]   a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
//   B (16 x 8, K x N, "col"), 2 registers:
//     b[0] = B[2t, 2t+1][g]   b[1] = B[2t+8, 2t+9][g]
//   C / D (16 x 8, f32):
//     c[0] = C[g][2t]  c[1] = C[g][2t+1]  c[2] = C[g+8][2t]  c[3] = C[g+8][2t+1]
// ldmatrix.x4: lane 8i + r gives the address of row r of 8 x 8 matrix i (16 contiguous bytes);
// register i of lane L receives matrix i's (row L/4, columns 2(L%4), 2(L%4)+1); with .trans it
// receives the transposed matrix's, i.e. stored (rows 2(L%4), 2(L%4)+1, column L/4).
//   * A from a row-major [m][k] tile: lane L points at row (L & 15), column chunk (L >> 4): the
//     matrices (rows 0-7 | 8-15) x (k 0-7 | 8-15) in a[0..3]'s order.
//   * B from a [n][k] tile (K rows for Q·Kᵀ): lane L points at row (L & 7) + 8 (L >> 4), chunk
//     (L >> 3) & 1: registers 0, 1 = b[0], b[1] of n-tile 0 (n 0-7), registers 2, 3 of n-tile 1.
//   * B from a [k][n] tile (V rows for P·V), .trans: lane L points at row (L & 7) + 8 ((L >> 3) & 1),
//     chunk L >> 4: registers 0, 1 = b[0], b[1] of n-tile 0, registers 2, 3 of n-tile 1.
//   * C to A: the C fragments of n-tiles 2j, 2j+1 (16 columns) ARE the A fragment of k-step j:
//     a[0] = (c0, c1) of 2j, a[1] = (c2, c3) of 2j, a[2] = (c0, c1) of 2j+1, a[3] = (c2, c3) of 2j+1.
//
// Shared tiles are [rows][D] bf16 with the 16-byte chunk c of row r stored at chunk c ^ (r & 7):
// the 8 rows of one ldmatrix matrix (consecutive rows, one logical chunk) hit 8 distinct 16-byte
// bank groups (a row is a multiple of 128 bytes), so loads and cp.async stores are conflict-free.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/ops/cuda/attention_query.cuh"
#include "gpu/ops/cuda/attention_tiles.cuh"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/mbarrier.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

constexpr int warps = 8;
constexpr int threads = 32 * warps;
constexpr float log2e = 1.4426950408889634f;
constexpr float ln2 = 0.6931471805599453f;

/// Head dims with an mma kernel (bfloat16 storage only).
inline bool has_kernel(std::int64_t d) { return d == 256 || d == 512; }

__device__ __forceinline__ void mma_bf16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0, std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

using async_copy::shared_address;

__device__ __forceinline__ void ldsm_x4(std::uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

__device__ __forceinline__ void ldsm_x4_trans(std::uint32_t (&r)[4], const bf16* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

/// 16 bytes global -> shared, bypassing L1; zeros when !valid (src is then not read).
__device__ __forceinline__ void cp_async16(bf16* dst, const bf16* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

/// Barrier of the `count` threads of named barrier `id` (1..15; 0 is __syncthreads').
__device__ __forceinline__ void named_barrier(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/// Arrival at named barrier `id` without waiting (the waiters of the `count` use named_barrier).
__device__ __forceinline__ void named_barrier_arrive(int id, int count) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

/// Two floats as a bf16 pair rounded to nearest even, `lo` in the low half (the lower column).
__device__ __forceinline__ std::uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&v);
}

/// A 4 x 4 transpose of 32-bit words across the four lanes of a quad (lanes 4g .. 4g + 3, t = lane
/// & 3): x[j] of lane t becomes x[t] of lane j. An accumulator row's words (lane t holds columns
/// 8i + 2t, 8i + 2t + 1 of column groups i = 4k .. 4k + 3) then lie as lane t's 16 bytes of group
/// 4k + t, for one 16-byte store instead of four of 4 bytes. Every lane of the warp must call it.
__device__ __forceinline__ void quad_transpose(std::uint32_t (&x)[4], int t) {
  const bool hi2 = (t & 2) != 0, hi1 = (t & 1) != 0;
#pragma unroll
  for (int j = 0; j < 2; ++j) {  // lanes t and t ^ 2 swap the halves that differ in bit 1
    const std::uint32_t r = __shfl_xor_sync(0xffffffffu, hi2 ? x[j] : x[j + 2], 2);
    if (hi2) x[j] = r; else x[j + 2] = r;
  }
#pragma unroll
  for (int j = 0; j < 4; j += 2) {  // then t and t ^ 1 across bit 0
    const std::uint32_t r = __shfl_xor_sync(0xffffffffu, hi1 ? x[j] : x[j + 1], 1);
    if (hi1) x[j] = r; else x[j + 1] = r;
  }
}

/// The f32 accumulators of a warpgroup product m64n(16·KS) (wgmma.cuh's layout) as the bf16 A
/// operand of a product with K = 16·KS from registers: the C fragments of n-tiles 2kk, 2kk + 1 are
/// A's k-step kk.
template <int KS>
__device__ __forceinline__ void accumulators_as_a(const float (&c)[8 * KS], std::uint32_t (&a)[KS][4]) {
#pragma unroll
  for (int kk = 0; kk < KS; ++kk) {
    a[kk][0] = pack_bf16(c[8 * kk], c[8 * kk + 1]);
    a[kk][1] = pack_bf16(c[8 * kk + 2], c[8 * kk + 3]);
    a[kk][2] = pack_bf16(c[8 * kk + 4], c[8 * kk + 5]);
    a[kk][3] = pack_bf16(c[8 * kk + 6], c[8 * kk + 7]);
  }
}

/// Element offset of (row, col) in a swizzled [rows][D] tile.
template <int D>
__device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

/// acc (16 x DW) += A (16 x 16·KS, registers) · B, B a [k][n] row-major swizzled tile read over
/// rows 0..16·KS-1 and columns col0..col0+DW-1 (ldmatrix .trans).
template <int D, int DW, int KS>
__device__ __forceinline__ void mma_a_times_rows(float (&acc)[DW / 8][4], const std::uint32_t (&a)[KS][4], const bf16* b,
                                                 int col0, int lane) {
  const int b_row = (lane & 7) + (((lane >> 3) & 1) << 3), b_chunk = lane >> 4;
#pragma unroll
  for (int kk = 0; kk < KS; ++kk)
#pragma unroll
    for (int dn = 0; dn < DW / 16; ++dn) {
      std::uint32_t r[4];
      ldsm_x4_trans(r, b + swz<D>(kk * 16 + b_row, col0 + dn * 16 + b_chunk * 8));
      mma_bf16(acc[2 * dn], a[kk], r[0], r[1]);
      mma_bf16(acc[2 * dn + 1], a[kk], r[2], r[3]);
    }
}

/// cp.async of ROWS rows of D bf16 into the swizzled tile dst: row r from src + offset_of(r)
/// (an element offset; -1: zeros). Every thread of the block (THREADS of them) takes part; commit
/// is the caller's.
template <int D, int ROWS, int THREADS = threads, class OffsetOf>
__device__ __forceinline__ void load_tile(bf16* dst, const bf16* src, OffsetOf offset_of) {
  constexpr int chunks = D / 8;                 // 16-byte chunks per row
  static_assert(THREADS % chunks == 0, "a thread keeps one chunk column");
  constexpr int rows_per_pass = THREADS / chunks;
  const int chunk = static_cast<int>(threadIdx.x) % chunks;
#pragma unroll
  for (int r = static_cast<int>(threadIdx.x) / chunks; r < ROWS; r += rows_per_pass) {
    const std::int64_t off = offset_of(r);
    cp_async16(dst + r * D + ((chunk ^ (r & 7)) << 3), off >= 0 ? src + off + chunk * 8 : src, off >= 0);
  }
}

/// Query tiling of the mma kernels: heads_per_tile heads of one kv head (up to block_rows) times
/// rows_per_tile = block_rows / heads_per_tile rows.
inline query_tiling mma_tiling(std::int64_t heads, std::int64_t kv_heads, std::int64_t block_rows) {
  query_tiling t{};
  t.group = heads / kv_heads;
  t.heads_per_tile = t.group < block_rows ? t.group : block_rows;
  t.head_chunks = (t.group + t.heads_per_tile - 1) / t.heads_per_tile;
  t.rows_per_tile = block_rows / t.heads_per_tile;
  return t;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15) == 0; }

}  // namespace tandem::gpu::ops::cuda::attn::mma
