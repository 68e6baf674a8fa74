// Decode attention on mma.sync (nvcc only; private to paged_attention.cu): bfloat16 at head dims
// 256 and 512 over a paged cache, for calls whose sequences bring one new row (or a few) each.
// The packed forward's kernel (attention_wgmma_forward.cuh) gives a block 128 or 64 query rows
// and holds a whole SM; a decode step fills 8 of them (one position times the 8 query heads of a
// kv head), so 256 sequences ran as two waves of mostly empty warpgroup products. Here a block
// owns 8 rows (the upper half of one m16n8k16 tile; its lower half is zeros), holds about 99 KB
// of shared memory, and two blocks share an SM: every sequence of a 256-row step runs at once.
//
// The same bits as the packed forward, row for row. A row's numbers there depend on its query,
// its keys and values, and the key tiles (64 positions at d 256, 32 at d 512, at multiples of the
// tile in position space), not on its neighbours or on which tiles the block visits beyond its
// own (attention_softmax.cuh). This kernel keeps those tiles and their order and runs the same
// arithmetic on them:
//   * scores: each score is one chain of k16 steps from zero over 256 columns (d 512: two chains,
//     columns 0..255 and 256..511, then their sum, as the forward's two warpgroups add their
//     partials); m16n8k16 steps round like the forward's wgmma steps on the same operands
//     (tools/bench/tensor_core_rounding.cu measures that on the device);
//   * the online softmax is the forward's routine (attention_softmax.cuh), over the same 8·NT
//     scores of a row in the same thread layout;
//   * P·V: p rounded to bf16 as the A operand, the accumulators rescaled by alpha first, then one
//     k16 step per 16 keys in key order; out = acc · (1 / l) and lse as the forward's.
//
// Work of a block (4 warps) per key tile: the tile's score products are 8 (n-tile, column half)
// chains, two per warp (one ldmatrix.x4 of K feeds both); their row-g accumulators meet in shared
// memory, every warp reads the whole row back in the forward's register layout and runs the
// softmax (the same numbers in every warp), and warp w accumulates output columns
// [w·D/4, (w+1)·D/4). Q sits in registers (the A fragments of the warp's column half).
//
// Copies: K and V tiles stream through a ring of three buffers, K_0 V_0 K_1 V_1 ... (copy j in
// buffer j mod 3), so two copies are in flight while a tile is computed:
//
//   tile i:  wait K_i; barrier (every warp is done with V_{i-1}'s buffer)   -> copy K_{i+1} there
//            scores of K_i -> exchange; barrier (K_i's buffer is free)      -> copy V_{i+1} there
//            softmax; wait V_i; barrier; acc += P·V_i
//
// The physical offsets of a tile's key rows (through the block table) are computed once per tile
// by its first threads into shared memory, a tile ahead, and serve both of its copies.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/ops/cuda/attention_mma_common.cuh"
#include "gpu/ops/cuda/attention_softmax.cuh"
#include "gpu/ops/cuda/attention_wgmma_forward.cuh"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda::attn::mma {

/// Query rows of a decode block (heads of one kv head times positions, mma_tiling's block_rows).
constexpr std::int64_t decode_block_rows = 8;

template <int D>
struct decode_shape {
  static constexpr int threads = 128;
  static constexpr int warp_count = threads / 32;
  static constexpr int key_tile = fwd_shape<D>::key_tile;      // the forward's: a row's softmax steps
  static constexpr int score_regs = fwd_shape<D>::score_regs;  // a row's scores of a tile per thread
  static constexpr int halves = D / 256;                       // score chains per score (the forward's warpgroups)
  static constexpr int nt = key_tile / 8;                      // score n-tiles
  static constexpr int chains = nt * halves;
  static constexpr int cols = D / warp_count;                  // output columns of a warp
  static constexpr int buffers = 3;
  static constexpr std::size_t tile_bytes = static_cast<std::size_t>(key_tile) * D * 2;  // one K or V tile
  static constexpr std::size_t exchange_floats = static_cast<std::size_t>(chains) * 2 * 32;
  static constexpr std::size_t smem_bytes =
      buffers * tile_bytes + exchange_floats * sizeof(float) + 2 * key_tile * sizeof(std::int64_t);
  static_assert(chains == 2 * warp_count, "two score chains per warp, one ldmatrix.x4 of K each k-step");
  static_assert(score_regs == 4 * nt && nt % 2 == 0, "the forward's accumulator layout");
  static constexpr std::size_t launch_smem_bytes = smem_bytes + 128;  // and the alignment of the tiles
  static_assert(2 * (launch_smem_bytes + 1024) <= 228 * 1024, "two blocks per SM");
};

/// out, lse of the rows of `layout` (decode_block_rows rows a tile; forward arguments of
/// attn::query_args: q, out, lse_out, scale, window) over paged keys.
template <int D>
__global__ void __launch_bounds__(decode_shape<D>::threads, 2)
    decode_forward_kernel(query_args<bf16> a, query_layout layout, const __grid_constant__ paged_keys<bf16> keys) {
  using shape = decode_shape<D>;
  constexpr int BN = shape::key_tile, NT = shape::nt, SR = shape::score_regs, COLS = shape::cols;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* const smem = smem_raw + ((128u - (shared_address(smem_raw) & 127u)) & 127u);
  bf16* const tiles_s = reinterpret_cast<bf16*>(smem);  // [3][BN][D], swizzled (swz<D>)
  float* const exch = reinterpret_cast<float*>(smem + shape::buffers * shape::tile_bytes);  // [chains][2][32]
  std::int64_t* const offsets_s = reinterpret_cast<std::int64_t*>(exch + shape::exchange_floats);  // [2][BN]

  const query_tile tile = find_query_tile(layout);
  if (!tile.place.valid) return;
  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int g = lane >> 2, t = lane & 3;  // this thread's row g (the m16 tile's rows 8..15 are zeros)
  std::int64_t qrow = -1, pos64 = -1;
  query_row(layout, tile, g, qrow, pos64);
  std::int64_t pmin = pos64 >= 0 ? pos64 : INT64_MAX, pmax = pos64;
#pragma unroll
  for (int offset = 4; offset < 32; offset <<= 1) {  // over the 8 rows (lanes 4g)
    const std::int64_t lo = __shfl_xor_sync(0xffffffffu, pmin, offset), hi = __shfl_xor_sync(0xffffffffu, pmax, offset);
    pmin = lo < pmin ? lo : pmin;
    pmax = hi > pmax ? hi : pmax;
  }
  if (pmax < 0) return;  // no row (uniform over the block)
  const std::int64_t kmin = first_visible(pmin, a.window), kmax = pmax;
  const std::int64_t kt_first = kmin / BN;
  const int tiles = static_cast<int>(kmax / BN - kt_first + 1);
  const std::int64_t full_first = first_visible(pmax, a.window);
  // positions fit 32 bits (the paged positions are I32)
  const int pos = static_cast<int>(pos64), first = static_cast<int>(first_visible(pos64 < 0 ? 0 : pos64, a.window));
  const float scale2 = a.scale * log2e;

  // The physical element offsets of tile i's key rows (-1: outside the block's keys: zeros).
  const auto key_offsets = [&](int i) {
    if (i >= tiles || static_cast<int>(threadIdx.x) >= BN) return;
    const std::int64_t j = (kt_first + i) * BN + threadIdx.x;
    offsets_s[(i & 1) * BN + threadIdx.x] =
        j >= kmin && j <= kmax ? keys.offset(tile.place.seq, tile.place.start, j, tile.g) : std::int64_t{-1};
  };
  // Copy c of the ring (K_{c/2} or V_{c/2}) into buffer c mod 3; one commit group per copy.
  const auto issue = [&](int c) {
    if (c < 2 * tiles) {
      const std::int64_t* const offs = offsets_s + ((c >> 1) & 1) * BN;
      load_tile<D, BN, shape::threads>(tiles_s + (c % shape::buffers) * BN * D, (c & 1) ? keys.v : keys.k,
                                       [&](int jl) { return offs[jl]; });
    }
    cp_async_commit();
  };

  // Q: the A fragments of this warp's column half (k-steps of 16 columns), rows 8..15 zero.
  const int half = (2 * warp) / NT, n0 = (2 * warp) % NT;  // chains 2w, 2w + 1: n-tiles n0, n0 + 1
  std::uint32_t q_lo[16], q_hi[16];
  {
    const bf16* const qr = a.q + (qrow >= 0 ? qrow : 0) * D + half * 256 + 2 * t;
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
      q_lo[kk] = qrow >= 0 ? *reinterpret_cast<const std::uint32_t*>(qr + kk * 16) : 0u;
      q_hi[kk] = qrow >= 0 ? *reinterpret_cast<const std::uint32_t*>(qr + kk * 16 + 8) : 0u;
    }
  }

  key_offsets(0);
  __syncthreads();
  issue(0);
  issue(1);
  key_offsets(1);

  float o[COLS / 8][4];
#pragma unroll
  for (int i = 0; i < COLS / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  online_row<SR, 0> row;
  const int b_row = (lane & 7) + ((lane >> 4) << 3), b_chunk = (lane >> 3) & 1;

  for (int i = 0; i < tiles; ++i) {
    cp_async_wait<1>();  // K_i has landed (V_i may not have)
    __syncthreads();     // ... for every thread; every warp is done with V_{i-1}; offsets of tile i + 1 visible
    issue(2 * i + 2);    // K_{i+1} into V_{i-1}'s buffer

    // this warp's two score chains of K_i: n-tiles n0, n0 + 1 over the columns of its half
    const bf16* const kb = tiles_s + ((2 * i) % shape::buffers) * BN * D;
    float c[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
      const std::uint32_t fa[4] = {q_lo[kk], 0u, q_hi[kk], 0u};
      std::uint32_t fb[4];
      ldsm_x4(fb, kb + swz<D>(n0 * 8 + b_row, half * 256 + kk * 16 + b_chunk * 8));
      mma_bf16(c[0], fa, fb[0], fb[1]);
      mma_bf16(c[1], fa, fb[2], fb[3]);
    }
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      exch[((2 * warp + k) * 2 + 0) * 32 + lane] = c[k][0];
      exch[((2 * warp + k) * 2 + 1) * 32 + lane] = c[k][1];
    }
    __syncthreads();   // the exchange is written; K_i's buffer is free
    issue(2 * i + 3);  // V_{i+1} into it

    // the row's scores in the forward's layout (s[4n + e], e = 0, 1; entries 2, 3 are rows 8..15)
    float s[SR];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float x = exch[(n * 2 + e) * 32 + lane];
        if constexpr (shape::halves == 2) x = __fadd_rn(x, exch[((NT + n) * 2 + e) * 32 + lane]);
        s[4 * n + e] = x;
      }
      s[4 * n + 2] = s[4 * n + 3] = 0.f;
    }
    const std::int64_t j0 = (kt_first + i) * BN;
    const bool whole = j0 + BN - 1 <= pmin && j0 >= full_first;  // uniform over the block
    const float alpha = row.update(s, row.scale_mask_max(s, static_cast<int>(j0), t, pos, first, whole, scale2));
#pragma unroll
    for (int n = 0; n < COLS / 8; ++n) {
      o[n][0] = __fmul_rn(o[n][0], alpha);
      o[n][1] = __fmul_rn(o[n][1], alpha);
    }
    std::uint32_t pa[BN / 16][4];  // P as the A operand (rows 8..15 zero)
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pa[kk][0] = pack_bf16(s[8 * kk], s[8 * kk + 1]);
      pa[kk][1] = 0u;
      pa[kk][2] = pack_bf16(s[8 * kk + 4], s[8 * kk + 5]);
      pa[kk][3] = 0u;
    }
    key_offsets(i + 2);  // tile i's offsets (same slot) served both of its copies

    cp_async_wait<2>();  // V_i has landed (K_{i+1}, V_{i+1} may not have)
    __syncthreads();
    mma_a_times_rows<D, COLS, BN / 16>(o, pa, tiles_s + ((2 * i + 1) % shape::buffers) * BN * D, warp * COLS, lane);
  }
  cp_async_wait<0>();  // (only empty groups remain)

  if (qrow < 0) return;
  const float inv = row.inverse();
  bf16* const out = a.out + qrow * D + warp * COLS + 2 * t;
#pragma unroll
  for (int n = 0; n < COLS / 8; ++n)
    *reinterpret_cast<std::uint32_t*>(out + n * 8) = pack_bf16(scaled_output(o[n][0], inv), scaled_output(o[n][1], inv));
  if (warp == 0 && t == 0) a.lse_out[qrow] = row.lse();
}

// ---------------------------------------------------------------------------------------------
// launchers

/// Grid (query tiles of mma_tiling(H, G, decode_block_rows), kv heads x head chunks); d 256 or 512.
inline status launch_decode(cudaStream_t stream, const char* op, dim3 grid, const query_args<bf16>& a,
                            const query_layout& layout, const paged_keys<bf16>& keys) {
  if (a.d == 512) {
    constexpr std::size_t smem = decode_shape<512>::launch_smem_bytes;
    TANDEM_RETURN_IF_ERROR(allow_shared_memory<&decode_forward_kernel<512>>(smem, true));
    decode_forward_kernel<512><<<grid, decode_shape<512>::threads, smem, stream>>>(a, layout, keys);
  } else {
    constexpr std::size_t smem = decode_shape<256>::launch_smem_bytes;
    TANDEM_RETURN_IF_ERROR(allow_shared_memory<&decode_forward_kernel<256>>(smem, true));
    decode_forward_kernel<256><<<grid, decode_shape<256>::threads, smem, stream>>>(a, layout, keys);
  }
  return launch_status(op, "decode_forward_kernel");
}

}  // namespace tandem::gpu::ops::cuda::attn::mma
