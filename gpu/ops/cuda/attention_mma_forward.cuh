// The tensor-core forward of bfloat16 attention at head dims 256 and 512 (nvcc only; private to
// attention.cu and paged_attention.cu), FA2 style: a block of 8 warps owns BM query rows (the
// GQA heads of one kv head times consecutive positions, attn::query_layout), streams key and value
// tiles of 64 positions through shared memory with cp.async (K of tile t+1 loads during P·V of
// tile t, V of tile t during Q·Kᵀ), and keeps an online softmax in f32 registers.
//
// Warps: NS warps share 16 query rows (a row group); warp sub = warp % NS of a group owns the
// head-dim columns [sub·D/NS, (sub+1)·D/NS) both as its share of the Q·Kᵀ reduction and as its
// columns of O. D = 256: NS = 1 (8 groups, BM = 128, O = 128 f32 registers per thread);
// D = 512: NS = 2 (4 groups, BM = 64, O again 128 registers): the two warps of a group add their
// partial scores through shared memory in a fixed order (identical bits in both), run the same
// softmax and each accumulates its half of O.
//
// Per row: s2 = scaling·log2(e)·q·k (-inf where masked), m = running max, p = exp2(s2 - m),
// l = Σ p (f32, unrounded p), p rounded to bf16 as the A operand of P·V, out = acc / l,
// lse = ln 2 · m + ln l. Key tiles sit at multiples of 64 positions; a tile a row sees nothing of
// leaves the row's m, l and acc unchanged (alpha = exp2(0) = 1, p = 0), and a row's numbers never
// depend on the other rows of its tile (an mma output element uses only its row of A), so the
// packed and the paged kernels (Keys) give a row the same bits. The sign of an exact zero output
// is canonicalised (+0) so that adding 0·v of another row's keys cannot show. Keys and values must
// be finite (a masked key's value still meets a zero probability in the mma).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/ops/cuda/attention_mma_common.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

constexpr int fwd_key_tile = 64;

template <int D>
struct fwd_shape {
  static constexpr int ns = D == 512 ? 2 : 1;         // warps per row group
  static constexpr int groups = warps / ns;
  static constexpr int block_rows = 16 * groups;      // BM
  static constexpr int dw = D / ns;                   // columns per warp
  static constexpr std::size_t tile_bytes = static_cast<std::size_t>(D) * 2;
  static constexpr std::size_t exchange_floats = ns > 1 ? static_cast<std::size_t>(warps) * (fwd_key_tile / 2) * 32 : 0;
  static constexpr std::size_t smem_bytes =
      (block_rows + 2 * fwd_key_tile) * tile_bytes + exchange_floats * sizeof(float) + block_rows * 2 * sizeof(std::int64_t);
};

/// out, lse of the rows of `layout` (forward arguments of attn::query_args: q, out, lse_out, scale, window).
template <int D, class Keys>
__global__ void __launch_bounds__(threads, 1) mma_forward_kernel(query_args<bf16> a, query_layout layout, Keys keys) {
  using shape = fwd_shape<D>;
  constexpr int NS = shape::ns, BM = shape::block_rows, BN = fwd_key_tile, DW = shape::dw;
  constexpr int NT = BN / 8;   // score n-tiles per warp
  constexpr int OT = DW / 8;   // output n-tiles per warp
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* const qs = reinterpret_cast<bf16*>(smem_raw);   // [BM][D]
  bf16* const ks = qs + BM * D;                         // [BN][D]
  bf16* const vs = ks + BN * D;                         // [BN][D]
  float* const exch = reinterpret_cast<float*>(vs + BN * D);                        // [warps][NT·4][32]
  std::int64_t* const qrow_s = reinterpret_cast<std::int64_t*>(exch + shape::exchange_floats);  // [BM]
  std::int64_t* const pos_s = qrow_s + BM;                                          // [BM]

  const query_tile tile = find_query_tile(layout);
  if (!tile.place.valid) return;
  for (int l = static_cast<int>(threadIdx.x); l < BM; l += threads) {
    std::int64_t qrow = -1, pos = -1;
    query_row(layout, tile, l, qrow, pos);
    qrow_s[l] = qrow;
    pos_s[l] = pos;
  }
  __syncthreads();
  std::int64_t pmin = INT64_MAX, pmax = -1;
  for (int l = 0; l < BM; ++l) {
    const std::int64_t p = pos_s[l];
    if (p >= 0) {
      pmin = p < pmin ? p : pmin;
      pmax = p > pmax ? p : pmax;
    }
  }
  if (pmax < 0) return;  // no row (uniform over the block)
  const std::int64_t kmin = first_visible(pmin, a.window), kmax = pmax;
  const std::int64_t kt_first = kmin / BN, kt_last = kmax / BN;

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int grp = warp / NS, sub = warp % NS;
  const int g = lane >> 2, t = lane & 3;
  const int row0 = grp * 16 + g;  // this thread's rows: row0 (c[0], c[1]) and row0 + 8 (c[2], c[3])
  // positions fit 32 bits (cu_seqlens and the paged positions are I32); -1: no row
  const int pos0 = static_cast<int>(pos_s[row0]), pos1 = static_cast<int>(pos_s[row0 + 8]);
  const int first0 = static_cast<int>(first_visible(pos0 < 0 ? 0 : pos0, a.window));
  const int first1 = static_cast<int>(first_visible(pos1 < 0 ? 0 : pos1, a.window));
  // A key tile [j0, j0 + BN) every row sees whole (j0 + BN - 1 <= pmin, j0 >= the first key of
  // pmax) needs no mask: the same bits as the masked path, without its per-element tests.
  const std::int64_t full_first = first_visible(pmax, a.window);
  const float scale2 = a.scale * log2e;

  const auto load_keys = [&](bf16* dst, const bf16* src, std::int64_t kt) {
    const std::int64_t j0 = kt * BN;
    load_tile<D, BN>(dst, src, [&](int jl) {
      const std::int64_t j = j0 + jl;
      return j >= kmin && j <= kmax ? keys.offset(tile.place.seq, tile.place.start, j, tile.g) : std::int64_t{-1};
    });
  };
  load_tile<D, BM>(qs, a.q, [&](int l) { return qrow_s[l] >= 0 ? qrow_s[l] * D : std::int64_t{-1}; });
  load_keys(ks, keys.k, kt_first);
  cp_async_commit();

  float o[OT][4];
#pragma unroll
  for (int i = 0; i < OT; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.f, l1 = 0.f;
  const bf16* const q_lane = qs;  // A of Q·Kᵀ: row grp·16 + (lane & 15), chunk lane >> 4
  const int a_row = grp * 16 + (lane & 15), a_chunk = lane >> 4;
  const int bk_row = (lane & 7) + ((lane >> 4) << 3), bk_chunk = (lane >> 3) & 1;   // B from [n][k]
  const int bv_row = (lane & 7) + (((lane >> 3) & 1) << 3), bv_chunk = lane >> 4;   // B from [k][n], .trans

  for (std::int64_t kt = kt_first; kt <= kt_last; ++kt) {
    cp_async_wait<0>();
    __syncthreads();  // K of tile kt (and Q) are in; every warp is done with V of tile kt - 1
    load_keys(vs, keys.v, kt);
    cp_async_commit();

    // s = Q·Kᵀ over this warp's columns [sub·DW, (sub+1)·DW)
    float s[NT][4];
#pragma unroll
    for (int i = 0; i < NT; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < DW / 16; ++kk) {
      const int col = sub * DW + kk * 16;
      std::uint32_t qa[4];
      ldsm_x4(qa, q_lane + swz<D>(a_row, col + a_chunk * 8));
#pragma unroll
      for (int nn = 0; nn < NT / 2; ++nn) {
        std::uint32_t kb[4];
        ldsm_x4(kb, ks + swz<D>(nn * 16 + bk_row, col + bk_chunk * 8));
        mma_bf16(s[2 * nn], qa, kb[0], kb[1]);
        mma_bf16(s[2 * nn + 1], qa, kb[2], kb[3]);
      }
    }
    if constexpr (NS > 1) {  // the group's partial sums, added in warp order by every warp of it
      float* const mine = exch + static_cast<std::size_t>(warp) * NT * 4 * 32;
#pragma unroll
      for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) mine[(i * 4 + e) * 32 + lane] = s[i][e];
      named_barrier(1 + grp, NS * 32);
      const float* const base = exch + static_cast<std::size_t>(grp * NS) * NT * 4 * 32;
#pragma unroll
      for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float sum = base[(i * 4 + e) * 32 + lane];
#pragma unroll
          for (int w = 1; w < NS; ++w) sum = __fadd_rn(sum, base[(static_cast<std::size_t>(w) * NT * 4 + i * 4 + e) * 32 + lane]);
          s[i][e] = sum;
        }
    }

    // mask, scale, online softmax (rows row0: e = 0, 1; row0 + 8: e = 2, 3)
    float mx0 = -INFINITY, mx1 = -INFINITY;
    if (kt * BN + BN - 1 <= pmin && kt * BN >= full_first) {  // uniform over the block
#pragma unroll
      for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[i][e] = __fmul_rn(s[i][e], scale2);
          if (e < 2) mx0 = fmaxf(mx0, s[i][e]); else mx1 = fmaxf(mx1, s[i][e]);
        }
    } else {
      const int j0 = static_cast<int>(kt * BN);
#pragma unroll
      for (int i = 0; i < NT; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int j = j0 + i * 8 + 2 * t + (e & 1);
          const bool visible = e < 2 ? (pos0 >= 0 && j >= first0 && j <= pos0) : (pos1 >= 0 && j >= first1 && j <= pos1);
          s[i][e] = visible ? __fmul_rn(s[i][e], scale2) : -INFINITY;
          if (e < 2) mx0 = fmaxf(mx0, s[i][e]); else mx1 = fmaxf(mx1, s[i][e]);
        }
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    // a row that has seen no key yet keeps m = -inf, l = 0, acc = 0 (p = exp2(-inf) = 0)
    const float base0 = mn0 == -INFINITY ? 0.f : mn0, base1 = mn1 == -INFINITY ? 0.f : mn1;
    const float alpha0 = mn0 == -INFINITY ? 1.f : exp2f(m0 - mn0);
    const float alpha1 = mn1 == -INFINITY ? 1.f : exp2f(m1 - mn1);
    float sum0 = 0.f, sum1 = 0.f;
#pragma unroll
    for (int i = 0; i < NT; ++i) {
      s[i][0] = exp2f(s[i][0] - base0);
      s[i][1] = exp2f(s[i][1] - base0);
      s[i][2] = exp2f(s[i][2] - base1);
      s[i][3] = exp2f(s[i][3] - base1);
      sum0 = __fadd_rn(__fadd_rn(sum0, s[i][0]), s[i][1]);
      sum1 = __fadd_rn(__fadd_rn(sum1, s[i][2]), s[i][3]);
    }
    sum0 = __fadd_rn(sum0, __shfl_xor_sync(0xffffffffu, sum0, 1));
    sum0 = __fadd_rn(sum0, __shfl_xor_sync(0xffffffffu, sum0, 2));
    sum1 = __fadd_rn(sum1, __shfl_xor_sync(0xffffffffu, sum1, 1));
    sum1 = __fadd_rn(sum1, __shfl_xor_sync(0xffffffffu, sum1, 2));
    l0 = __fadd_rn(__fmul_rn(l0, alpha0), sum0);
    l1 = __fadd_rn(__fmul_rn(l1, alpha1), sum1);
    m0 = mn0;
    m1 = mn1;
#pragma unroll
    for (int i = 0; i < OT; ++i) {
      o[i][0] = __fmul_rn(o[i][0], alpha0);
      o[i][1] = __fmul_rn(o[i][1], alpha0);
      o[i][2] = __fmul_rn(o[i][2], alpha1);
      o[i][3] = __fmul_rn(o[i][3], alpha1);
    }
    std::uint32_t pa[BN / 16][4];  // P as the A operand of P·V (C -> A, see the common header)
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pa[kk][0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
      pa[kk][1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
      pa[kk][2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
      pa[kk][3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }

    cp_async_wait<0>();
    __syncthreads();  // V of tile kt is in; every warp is done with K of tile kt
    if (kt < kt_last) {
      load_keys(ks, keys.k, kt + 1);
      cp_async_commit();
    }
    // o += P·V over this warp's columns
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk)
#pragma unroll
      for (int dn = 0; dn < OT / 2; ++dn) {
        std::uint32_t vb[4];
        ldsm_x4_trans(vb, vs + swz<D>(kk * 16 + bv_row, sub * DW + dn * 16 + bv_chunk * 8));
        mma_bf16(o[2 * dn], pa[kk], vb[0], vb[1]);
        mma_bf16(o[2 * dn + 1], pa[kk], vb[2], vb[3]);
      }
  }

  const std::int64_t qrow0 = qrow_s[row0], qrow1 = qrow_s[row0 + 8];
#pragma unroll
  for (int i = 0; i < OT; ++i) {
    const int col = sub * DW + i * 8 + 2 * t;
    if (qrow0 >= 0)
      *reinterpret_cast<std::uint32_t*>(a.out + qrow0 * D + col) =
          pack_bf16(__fadd_rn(o[i][0] / l0, 0.f), __fadd_rn(o[i][1] / l0, 0.f));
    if (qrow1 >= 0)
      *reinterpret_cast<std::uint32_t*>(a.out + qrow1 * D + col) =
          pack_bf16(__fadd_rn(o[i][2] / l1, 0.f), __fadd_rn(o[i][3] / l1, 0.f));
  }
  if (sub == 0 && t == 0) {
    if (qrow0 >= 0) a.lse_out[qrow0] = fmaf(m0, ln2, logf(l0));
    if (qrow1 >= 0) a.lse_out[qrow1] = fmaf(m1, ln2, logf(l1));
  }
}

// ---------------------------------------------------------------------------------------------
// launchers (shared by attention.cu and paged_attention.cu)

/// Rows per block of the forward at head dim d (256 or 512): the block_rows of mma_tiling.
inline std::int64_t forward_block_rows(std::int64_t d) { return d == 512 ? fwd_shape<512>::block_rows : fwd_shape<256>::block_rows; }

template <int D, class Keys>
status launch_forward_dim(cudaStream_t stream, const char* op, dim3 grid, const query_args<bf16>& a,
                          const query_layout& layout, const Keys& keys) {
  constexpr std::size_t smem = fwd_shape<D>::smem_bytes;
  auto* kernel = &mma_forward_kernel<D, Keys>;
  TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<grid, threads, smem, stream>>>(a, layout, keys);
  return launch_status(op, "mma_forward_kernel");
}

/// Grid (query tiles of mma_tiling(H, G, forward_block_rows(d)), kv heads x head chunks); d 256 or 512.
template <class Keys>
status launch_forward(cudaStream_t stream, const char* op, dim3 grid, const query_args<bf16>& a,
                      const query_layout& layout, const Keys& keys) {
  if (a.d == 512) return launch_forward_dim<512>(stream, op, grid, a, layout, keys);
  return launch_forward_dim<256>(stream, op, grid, a, layout, keys);
}

}  // namespace tandem::gpu::ops::cuda::attn::mma
