// The tensor-core backward of bfloat16 attention on mma.sync (nvcc only; private to attention.cu):
// its kernels run head dim 512, and D and the split reduction serve head dim 256 too, whose dK/dV
// and dQ passes run on warpgroup instructions (attention_wgmma_dkdv.cuh, attention_wgmma_dq.cuh;
// the shapes below still give their tilings: 64 keys a dK/dV tile, 128 rows a dQ tile). Deterministic, no atomics: every output element is owned by one thread and
// summed in a fixed order. Three kernels:
//
//   delta: D_i = Σ_c dO_ic · o_ic from the forward's out (a warp per row, a fixed shuffle tree);
//   dkdv:  blocks per (tile of KEYS key positions of one sequence, kv head): the tile's items
//          (query head of the kv head, tile of 32 query positions from the keys' own first
//          position to the last query whose window holds them), heads outer, are cut into
//          `splits` contiguous ranges, one block each (splits from the shape: about three waves
//          of blocks; the grid is ordered by key tile, longest first in a causal sequence); Q and
//          dO double-buffered by cp.async; per item Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, Pᵀ = exp2(scaling·
//          log2(e)·Sᵀ - log2(e)·lse), dSᵀ = Pᵀ (dPᵀ - D), then dV += Pᵀ·dO, dK += dSᵀ·Q. One
//          split adds into dk / dv directly; several write float32 partials to scratch and
//          dkdv_reduce adds them in split order (one rounding to bf16);
//   dq:    a block per query tile of the forward's layout (GQA heads x positions), K and V tiles
//          double-buffered; per tile S, dP, dS as above, dQ += dS·K; dq = scaling · acc.
//
// Warps as in the forward: NS warps share 16 rows (keys in dkdv, queries in dq), warp `sub` of a
// group owns D/NS head-dim columns for both the score reductions (partials added through shared
// memory in warp order) and its accumulators. dkdv: D 256 -> NS 2 (64 keys a block), D 512 ->
// NS 4 (32 keys); 16 x 128 columns of dK and of dV per warp = 128 f32 registers. dq: D 256 ->
// NS 1 (128 rows, key tiles of 32), D 512 -> NS 2 (64 rows, key tiles of 16). P and dS are
// rounded to bf16 as mma operands; everything else is f32. See attention_mma_common.cuh for the
// fragment layouts every index below follows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/ops/cuda/attention_dkdv.cuh"
#include "gpu/ops/cuda/attention_mma_common.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

template <int D>
struct dkdv_shape {
  static constexpr int ns = D == 512 ? 4 : 2;
  static constexpr int groups = warps / ns;
  static constexpr int keys = 16 * groups;   // key positions per block
  static constexpr int dw = D / ns;
  static constexpr int query_tile = 32;
  static constexpr int nt = query_tile / 8;  // score n-tiles per warp
  static constexpr std::size_t exchange_floats = static_cast<std::size_t>(warps) * 2 * nt * 4 * 32;
  static constexpr std::size_t smem_bytes = (2 * keys + 4 * query_tile) * static_cast<std::size_t>(D) * 2 +
                                            exchange_floats * sizeof(float) + 4 * query_tile * sizeof(float);
};

/// Float32 partial dK (unscaled) and dV of the dkdv splits, [splits][T][G][D] each (null when splits == 1).
struct dkdv_partials {
  float* dk;
  float* dv;
  int splits;
};

template <int D>
struct dq_shape {
  static constexpr int ns = D == 512 ? 2 : 1;
  static constexpr int groups = warps / ns;
  static constexpr int block_rows = 16 * groups;
  static constexpr int dw = D / ns;
  static constexpr int key_tile = D == 512 ? 16 : 32;
  static constexpr int nt = key_tile / 8;
  static constexpr std::size_t exchange_floats = ns > 1 ? static_cast<std::size_t>(warps) * 2 * nt * 4 * 32 : 0;
  static constexpr std::size_t smem_bytes = (2 * block_rows + 4 * key_tile) * static_cast<std::size_t>(D) * 2 +
                                            exchange_floats * sizeof(float) +
                                            block_rows * (2 * sizeof(std::int64_t) + 2 * sizeof(float));
};

/// Writes the NT x 4 partial sums of two accumulators to this warp's exchange slot, waits for the
/// warps of its group, and replaces both by the group's sums taken in warp order (the same bits
/// in every warp of the group).
template <int NS, int NT>
__device__ __forceinline__ void exchange_pair(float (&x)[NT][4], float (&y)[NT][4], float* exch, int warp, int grp,
                                              int lane) {
  constexpr int slot = 2 * NT * 4 * 32;
  float* const mine = exch + static_cast<std::size_t>(warp) * slot;
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      mine[(i * 4 + e) * 32 + lane] = x[i][e];
      mine[((NT + i) * 4 + e) * 32 + lane] = y[i][e];
    }
  named_barrier(1 + grp, NS * 32);
  const float* const base = exch + static_cast<std::size_t>(grp * NS) * slot;
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float sx = base[(i * 4 + e) * 32 + lane], sy = base[((NT + i) * 4 + e) * 32 + lane];
#pragma unroll
      for (int w = 1; w < NS; ++w) {
        sx = __fadd_rn(sx, base[static_cast<std::size_t>(w) * slot + (i * 4 + e) * 32 + lane]);
        sy = __fadd_rn(sy, base[static_cast<std::size_t>(w) * slot + ((NT + i) * 4 + e) * 32 + lane]);
      }
      x[i][e] = sx;
      y[i][e] = sy;
    }
}

/// C fragments of NT n-tiles (16 x 8·NT) as the A fragments of NT / 2 k-steps, bf16.
template <int NT>
__device__ __forceinline__ void c_to_a(const float (&c)[NT][4], std::uint32_t (&a)[NT / 2][4]) {
#pragma unroll
  for (int kk = 0; kk < NT / 2; ++kk) {
    a[kk][0] = pack_bf16(c[2 * kk][0], c[2 * kk][1]);
    a[kk][1] = pack_bf16(c[2 * kk][2], c[2 * kk][3]);
    a[kk][2] = pack_bf16(c[2 * kk + 1][0], c[2 * kk + 1][1]);
    a[kk][3] = pack_bf16(c[2 * kk + 1][2], c[2 * kk + 1][3]);
  }
}

/// x = A·Bᵀ over columns col0..col0+DW-1: A rows a_row0..+15 of tile a ([m][k]), B rows
/// 0..8·NT-1 of tile b ([n][k]).
template <int D, int DW, int NT>
__device__ __forceinline__ void mma_scores(float (&x)[NT][4], const bf16* a, const bf16* b, int a_row0, int col0,
                                           int lane) {
  const int a_row = a_row0 + (lane & 15), a_chunk = lane >> 4;
  const int b_row = (lane & 7) + ((lane >> 4) << 3), b_chunk = (lane >> 3) & 1;
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) x[i][j] = 0.f;
#pragma unroll
  for (int kk = 0; kk < DW / 16; ++kk) {
    const int col = col0 + kk * 16;
    std::uint32_t fa[4];
    ldsm_x4(fa, a + swz<D>(a_row, col + a_chunk * 8));
#pragma unroll
    for (int nn = 0; nn < NT / 2; ++nn) {
      std::uint32_t fb[4];
      ldsm_x4(fb, b + swz<D>(nn * 16 + b_row, col + b_chunk * 8));
      mma_bf16(x[2 * nn], fa, fb[0], fb[1]);
      mma_bf16(x[2 * nn + 1], fa, fb[2], fb[3]);
    }
  }
}

/// x = A·Bᵀ and y = C·Eᵀ (mma_scores twice).
template <int D, int DW, int NT>
__device__ __forceinline__ void mma_two_scores(float (&x)[NT][4], float (&y)[NT][4], const bf16* a, const bf16* b,
                                               const bf16* c, const bf16* e, int a_row0, int col0, int lane) {
  mma_scores<D, DW, NT>(x, a, b, a_row0, col0, lane);
  mma_scores<D, DW, NT>(y, c, e, a_row0, col0, lane);
}

// ---------------------------------------------------------------------------------------------
// kernels

/// delta F32 [rows] = Σ_c dout[r][c] · out[r][c] (rows = T·H, d a multiple of 8, 16-byte aligned rows).
static __global__ void __launch_bounds__(256) delta_from_out_kernel(const bf16* __restrict__ out,
                                                                    const bf16* __restrict__ dout, std::int64_t rows,
                                                                    int d, float* __restrict__ delta) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::int64_t warps_total = static_cast<std::int64_t>(gridDim.x) * (blockDim.x >> 5);
  for (std::int64_t r = static_cast<std::int64_t>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5); r < rows;
       r += warps_total) {
    const bf16* const o = out + r * d;
    const bf16* const g = dout + r * d;
    float part = 0.f;
    for (int c = lane * 8; c < d; c += 32 * 8) {
      const uint4 ro = *reinterpret_cast<const uint4*>(o + c), rg = *reinterpret_cast<const uint4*>(g + c);
      const bf16* const eo = reinterpret_cast<const bf16*>(&ro);
      const bf16* const eg = reinterpret_cast<const bf16*>(&rg);
#pragma unroll
      for (int i = 0; i < 8; ++i) part = fmaf(to_float(eg[i]), to_float(eo[i]), part);
    }
    part = warp_sum(part);
    if (lane == 0) delta[r] = part;
  }
}

/// Block x = (key tile · G + kv head) · splits + split: key tile (of dkdv_shape<D>::keys positions)
/// of the numbering a.offsets in ascending order (in a causal sequence the first tiles see the
/// most queries: the longest blocks start first). The (head, query tile) items of a key tile,
/// heads outer, are cut into `splits` contiguous ranges of near-equal length; split s sums its
/// range in item order. splits == 1: dk, dv += the block's sums directly; else the block writes
/// its float32 sums (dK unscaled) to part.dk / part.dv [splits][T][G][D] and
/// dkdv_reduce_kernel adds the splits in order.
template <int D>
__global__ void __launch_bounds__(threads, 1) mma_dkdv_kernel(dkdv_args<bf16> a, dkdv_partials part) {
  using shape = dkdv_shape<D>;
  constexpr int NS = shape::ns, KEYS = shape::keys, DW = shape::dw, BQ = shape::query_tile, NT = shape::nt;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* const ks = reinterpret_cast<bf16*>(smem_raw);  // [KEYS][D]
  bf16* const vs = ks + KEYS * D;                      // [KEYS][D]
  bf16* const qs = vs + KEYS * D;                      // [2][BQ][D]
  bf16* const dos = qs + 2 * BQ * D;                   // [2][BQ][D]
  float* const exch = reinterpret_cast<float*>(dos + 2 * BQ * D);
  float* const lse2_s = exch + shape::exchange_floats;  // [2][BQ]  log2(e)·lse, +inf for no row
  float* const delta_s = lse2_s + 2 * BQ;               // [2][BQ]

  const std::int64_t split = static_cast<std::int64_t>(blockIdx.x) % part.splits;
  const std::int64_t tile_head = static_cast<std::int64_t>(blockIdx.x) / part.splits;
  const tile_place place = find_tile(a.offsets, a.cu, a.num_seqs, tile_head / a.kv_heads, KEYS);
  if (!place.valid) return;
  const std::int64_t g = tile_head % a.kv_heads;
  const std::int64_t j0 = place.first;
  const std::int64_t j_last = (j0 + KEYS < place.length ? j0 + KEYS : place.length) - 1;
  const std::int64_t q_last = a.window > 0 && j_last + a.window - 1 < place.length - 1 ? j_last + a.window - 1
                                                                                      : place.length - 1;
  const auto token_of = [=](std::int64_t position) {  // -1 outside the tensors (malformed offsets)
    const std::int64_t tok = place.start + position;
    return tok >= 0 && tok < a.tokens ? tok : std::int64_t{-1};
  };
  const std::int64_t query_tiles = (q_last - j0) / BQ + 1;
  const std::int64_t items = a.group * query_tiles;  // (head, query tile), heads outer
  const std::int64_t item_begin = items * split / part.splits, item_end = items * (split + 1) / part.splits;

  const auto load_item = [&](std::int64_t item, int buf) {
    const std::int64_t h = g * a.group + item / query_tiles;
    const std::int64_t q0 = j0 + (item % query_tiles) * BQ;
    const auto query_index = [=](int il) {
      const std::int64_t tok = q0 + il <= q_last ? token_of(q0 + il) : -1;
      return tok >= 0 ? tok * a.heads + h : std::int64_t{-1};
    };
    const auto query_offset = [=](int il) {
      const std::int64_t qi = query_index(il);
      return qi >= 0 ? qi * D : std::int64_t{-1};
    };
    load_tile<D, BQ>(qs + buf * BQ * D, a.q, query_offset);
    load_tile<D, BQ>(dos + buf * BQ * D, a.dout, query_offset);
    if (threadIdx.x < BQ) {
      const std::int64_t qi = query_index(static_cast<int>(threadIdx.x));
      lse2_s[buf * BQ + threadIdx.x] = qi >= 0 ? __fmul_rn(a.lse[qi], log2e) : INFINITY;
      delta_s[buf * BQ + threadIdx.x] = qi >= 0 ? a.delta[qi] : 0.f;
    }
  };
  const auto key_offset = [=](int jl) {
    const std::int64_t tok = j0 + jl <= j_last ? token_of(j0 + jl) : -1;
    return tok >= 0 ? (tok * a.kv_heads + g) * D : std::int64_t{-1};
  };
  load_tile<D, KEYS>(ks, a.k, key_offset);
  load_tile<D, KEYS>(vs, a.v, key_offset);
  if (item_begin < item_end) load_item(item_begin, 0);
  cp_async_commit();

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int grp = warp / NS, sub = warp % NS;
  const int gq = lane >> 2, t = lane & 3;
  const std::int64_t key0 = j0 + grp * 16 + gq, key1 = key0 + 8;  // this thread's keys (c[0..1], c[2..3])
  const float scale2 = a.scale * log2e;
  float dk[DW / 8][4], dv[DW / 8][4];
#pragma unroll
  for (int i = 0; i < DW / 8; ++i)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[i][e] = dv[i][e] = 0.f;

  for (std::int64_t item = item_begin; item < item_end; ++item) {
    const int buf = static_cast<int>((item - item_begin) & 1);
    cp_async_wait<0>();
    __syncthreads();  // item's Q / dO are in; every warp is done with item - 1 (the other buffer)
    if (item + 1 < item_end) {
      load_item(item + 1, buf ^ 1);
      cp_async_commit();
    }
    const bf16* const qb = qs + buf * BQ * D;
    const bf16* const dob = dos + buf * BQ * D;
    const float* const lse2 = lse2_s + buf * BQ;
    const float* const dl = delta_s + buf * BQ;
    const std::int64_t q0 = j0 + (item % query_tiles) * BQ;
    // every (key, query) of the item visible (all keys real, key ≤ query, inside the window):
    // the same bits without the per-element mask
    const bool full = j0 + KEYS - 1 == j_last && j_last <= q0 && q0 + BQ - 1 <= q_last &&
                      (a.window <= 0 || j0 > q0 + BQ - 1 - a.window);

    float st[NT][4], dpt[NT][4];  // Sᵀ, dPᵀ: rows = this group's 16 keys, columns = the tile's queries
    mma_two_scores<D, DW, NT>(st, dpt, ks, qb, vs, dob, grp * 16, sub * DW, lane);
    exchange_pair<NS, NT>(st, dpt, exch, warp, grp, lane);
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int il = i * 8 + 2 * t + (e & 1);
        const std::int64_t qp = q0 + il, j = e < 2 ? key0 : key1;
        const bool visible = full || (qp <= q_last && j <= j_last && j <= qp && (a.window <= 0 || j > qp - a.window));
        const float p = visible ? exp2f(fmaf(st[i][e], scale2, -lse2[il])) : 0.f;
        st[i][e] = p;
        dpt[i][e] = __fmul_rn(p, dpt[i][e] - dl[il]);
      }
    std::uint32_t pa[NT / 2][4], dsa[NT / 2][4];
    c_to_a<NT>(st, pa);
    c_to_a<NT>(dpt, dsa);
    mma_a_times_rows<D, DW, NT / 2>(dv, pa, dob, sub * DW, lane);
    mma_a_times_rows<D, DW, NT / 2>(dk, dsa, qb, sub * DW, lane);
  }

  cp_async_wait<0>();  // nothing in flight at exit (an empty range still loaded K and V)
  if (part.splits > 1) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const std::int64_t j = half == 0 ? key0 : key1;
      const std::int64_t tok = j <= j_last ? token_of(j) : -1;
      if (tok < 0) continue;
      const std::int64_t row = ((split * a.tokens + tok) * a.kv_heads + g) * D + sub * DW;
      float* const dkr = part.dk + row;
      float* const dvr = part.dv + row;
#pragma unroll
      for (int i = 0; i < DW / 8; ++i) {
        const int col = i * 8 + 2 * t;
        *reinterpret_cast<float2*>(dkr + col) = make_float2(dk[i][2 * half], dk[i][2 * half + 1]);
        *reinterpret_cast<float2*>(dvr + col) = make_float2(dv[i][2 * half], dv[i][2 * half + 1]);
      }
    }
    return;
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const std::int64_t j = half == 0 ? key0 : key1;
    const std::int64_t tok = j <= j_last ? token_of(j) : -1;
    if (tok < 0) continue;
    bf16* const dkr = a.dk + (tok * a.kv_heads + g) * D + sub * DW;
    bf16* const dvr = a.dv + (tok * a.kv_heads + g) * D + sub * DW;
#pragma unroll
    for (int i = 0; i < DW / 8; ++i) {
      const int col = i * 8 + 2 * t;
      const __nv_bfloat162 ok = *reinterpret_cast<const __nv_bfloat162*>(dkr + col);
      const __nv_bfloat162 ov = *reinterpret_cast<const __nv_bfloat162*>(dvr + col);
      *reinterpret_cast<std::uint32_t*>(dkr + col) =
          pack_bf16(__fadd_rn(__low2float(ok), __fmul_rn(a.scale, dk[i][2 * half])),
                    __fadd_rn(__high2float(ok), __fmul_rn(a.scale, dk[i][2 * half + 1])));
      *reinterpret_cast<std::uint32_t*>(dvr + col) =
          pack_bf16(__fadd_rn(__low2float(ov), dv[i][2 * half]), __fadd_rn(__high2float(ov), dv[i][2 * half + 1]));
    }
  }
}

/// Block (x, y): rows [8y, 8y + 8) of key tile x / G (the dkdv numbering), kv head x % G:
/// dk += scale · Σ_s part.dk[s], dv += Σ_s part.dv[s], s ascending (one rounding to bf16 each).
template <int D, int KEYS>
__global__ void __launch_bounds__(256) dkdv_reduce_kernel(dkdv_args<bf16> a, dkdv_partials part) {
  const std::int64_t tile_head = blockIdx.x;
  const tile_place place = find_tile(a.offsets, a.cu, a.num_seqs, tile_head / a.kv_heads, KEYS);
  if (!place.valid) return;
  const std::int64_t g = tile_head % a.kv_heads;
  constexpr int vecs = D / 4;  // float4 per row
  const std::int64_t slice = a.tokens * a.kv_heads * D;
  for (int e = static_cast<int>(threadIdx.x); e < 8 * vecs; e += static_cast<int>(blockDim.x)) {
    const std::int64_t j = place.first + 8 * static_cast<std::int64_t>(blockIdx.y) + e / vecs;
    if (j >= place.length || j >= place.first + KEYS) continue;
    const std::int64_t tok = place.start + j;
    if (tok < 0 || tok >= a.tokens) continue;
    const std::int64_t off = (tok * a.kv_heads + g) * D + (e % vecs) * 4;
    float4 sk = *reinterpret_cast<const float4*>(part.dk + off);
    float4 sv = *reinterpret_cast<const float4*>(part.dv + off);
    for (int s = 1; s < part.splits; ++s) {
      const float4 xk = *reinterpret_cast<const float4*>(part.dk + s * slice + off);
      const float4 xv = *reinterpret_cast<const float4*>(part.dv + s * slice + off);
      sk = make_float4(__fadd_rn(sk.x, xk.x), __fadd_rn(sk.y, xk.y), __fadd_rn(sk.z, xk.z), __fadd_rn(sk.w, xk.w));
      sv = make_float4(__fadd_rn(sv.x, xv.x), __fadd_rn(sv.y, xv.y), __fadd_rn(sv.z, xv.z), __fadd_rn(sv.w, xv.w));
    }
    uint2* const pk = reinterpret_cast<uint2*>(a.dk + off);
    uint2* const pv = reinterpret_cast<uint2*>(a.dv + off);
    const uint2 ok = *pk, ov = *pv;
    const __nv_bfloat162 k01 = *reinterpret_cast<const __nv_bfloat162*>(&ok.x), k23 = *reinterpret_cast<const __nv_bfloat162*>(&ok.y);
    const __nv_bfloat162 v01 = *reinterpret_cast<const __nv_bfloat162*>(&ov.x), v23 = *reinterpret_cast<const __nv_bfloat162*>(&ov.y);
    *pk = make_uint2(pack_bf16(__fadd_rn(__low2float(k01), __fmul_rn(a.scale, sk.x)), __fadd_rn(__high2float(k01), __fmul_rn(a.scale, sk.y))),
                     pack_bf16(__fadd_rn(__low2float(k23), __fmul_rn(a.scale, sk.z)), __fadd_rn(__high2float(k23), __fmul_rn(a.scale, sk.w))));
    *pv = make_uint2(pack_bf16(__fadd_rn(__low2float(v01), sv.x), __fadd_rn(__high2float(v01), sv.y)),
                     pack_bf16(__fadd_rn(__low2float(v23), sv.z), __fadd_rn(__high2float(v23), sv.w)));
  }
}

/// Block (x, y): the query tile numbered gridDim.x - 1 - x of layout (rows of dq_shape<D>), kv
/// head chunk y. Uses a.q, a.dout, a.lse_in, a.delta_in, a.dq, a.accumulate_dq, a.scale, a.window.
template <int D>
__global__ void __launch_bounds__(threads, 1) mma_dq_kernel(query_args<bf16> a, query_layout layout,
                                                            packed_keys<bf16> keys) {
  using shape = dq_shape<D>;
  constexpr int NS = shape::ns, BM = shape::block_rows, BN = shape::key_tile, DW = shape::dw, NT = shape::nt;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* const qs = reinterpret_cast<bf16*>(smem_raw);  // [BM][D]
  bf16* const dos = qs + BM * D;                       // [BM][D]
  bf16* const ks = dos + BM * D;                       // [2][BN][D]
  bf16* const vs = ks + 2 * BN * D;                    // [2][BN][D]
  float* const exch = reinterpret_cast<float*>(vs + 2 * BN * D);
  std::int64_t* const qrow_s = reinterpret_cast<std::int64_t*>(exch + shape::exchange_floats);  // [BM]
  std::int64_t* const pos_s = qrow_s + BM;                                                       // [BM]
  float* const lse2_s = reinterpret_cast<float*>(pos_s + BM);                                    // [BM]
  float* const delta_s = lse2_s + BM;                                                            // [BM]

  const query_tile tile = find_query_tile(layout);
  if (!tile.place.valid) return;
  for (int l = static_cast<int>(threadIdx.x); l < BM; l += threads) {
    std::int64_t qrow = -1, pos = -1;
    query_row(layout, tile, l, qrow, pos);
    qrow_s[l] = qrow;
    pos_s[l] = pos;
    lse2_s[l] = qrow >= 0 ? __fmul_rn(a.lse_in[qrow], log2e) : INFINITY;
    delta_s[l] = qrow >= 0 ? a.delta_in[qrow] : 0.f;
  }
  __syncthreads();
  std::int64_t pmin, pmax;
  position_range(pos_s, BM, pmin, pmax);
  if (pmax < 0) return;
  const std::int64_t kmin = first_visible(pmin, a.window), kmax = pmax;
  const std::int64_t kt_first = kmin / BN, kt_last = kmax / BN;
  const auto load_keys = [&](std::int64_t kt, int buf) {
    const std::int64_t j0 = kt * BN;
    const auto key_offset = [&](int jl) {
      const std::int64_t j = j0 + jl;
      return j >= kmin && j <= kmax ? keys.offset(tile.place.seq, tile.place.start, j, tile.g) : std::int64_t{-1};
    };
    load_tile<D, BN>(ks + buf * BN * D, keys.k, key_offset);
    load_tile<D, BN>(vs + buf * BN * D, keys.v, key_offset);
  };
  const auto query_offset = [&](int l) { return qrow_s[l] >= 0 ? qrow_s[l] * D : std::int64_t{-1}; };
  load_tile<D, BM>(qs, a.q, query_offset);
  load_tile<D, BM>(dos, a.dout, query_offset);
  load_keys(kt_first, 0);
  cp_async_commit();

  const int warp = static_cast<int>(threadIdx.x) >> 5, lane = static_cast<int>(threadIdx.x) & 31;
  const int grp = warp / NS, sub = warp % NS;
  const int gq = lane >> 2, t = lane & 3;
  const int row0 = grp * 16 + gq;
  // positions fit 32 bits (cu_seqlens is I32); -1: no row
  const int pos0 = static_cast<int>(pos_s[row0]), pos1 = static_cast<int>(pos_s[row0 + 8]);
  const int first0 = static_cast<int>(first_visible(pos0 < 0 ? 0 : pos0, a.window));
  const int first1 = static_cast<int>(first_visible(pos1 < 0 ? 0 : pos1, a.window));
  const float lse20 = lse2_s[row0], lse21 = lse2_s[row0 + 8];
  const float delta0 = delta_s[row0], delta1 = delta_s[row0 + 8];
  const float scale2 = a.scale * log2e;
  const std::int64_t full_first = first_visible(pmax, a.window);
  float acc[DW / 8][4];
#pragma unroll
  for (int i = 0; i < DW / 8; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;

  for (std::int64_t kt = kt_first; kt <= kt_last; ++kt) {
    const int buf = static_cast<int>((kt - kt_first) & 1);
    cp_async_wait<0>();
    __syncthreads();  // tile kt is in; every warp is done with tile kt - 1 (the other buffer)
    if (kt < kt_last) {
      load_keys(kt + 1, buf ^ 1);
      cp_async_commit();
    }
    const bf16* const kb = ks + buf * BN * D;
    const bf16* const vb = vs + buf * BN * D;
    float s[NT][4], dp[NT][4];
    mma_two_scores<D, DW, NT>(s, dp, qs, kb, dos, vb, grp * 16, sub * DW, lane);
    if constexpr (NS > 1) exchange_pair<NS, NT>(s, dp, exch, warp, grp, lane);
    const int j0 = static_cast<int>(kt * BN);
    // a tile every row sees whole (as in the forward): the same bits without the mask
    const bool full = kt * BN + BN - 1 <= pmin && kt * BN >= full_first;
#pragma unroll
    for (int i = 0; i < NT; ++i)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int j = j0 + i * 8 + 2 * t + (e & 1);
        const bool visible =
            full || (e < 2 ? (pos0 >= 0 && j >= first0 && j <= pos0) : (pos1 >= 0 && j >= first1 && j <= pos1));
        const float p = visible ? exp2f(fmaf(s[i][e], scale2, -(e < 2 ? lse20 : lse21))) : 0.f;
        dp[i][e] = __fmul_rn(p, dp[i][e] - (e < 2 ? delta0 : delta1));
      }
    std::uint32_t dsa[NT / 2][4];
    c_to_a<NT>(dp, dsa);
    mma_a_times_rows<D, DW, NT / 2>(acc, dsa, kb, sub * DW, lane);
  }

  const std::int64_t qrow0 = qrow_s[row0], qrow1 = qrow_s[row0 + 8];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const std::int64_t qrow = half == 0 ? qrow0 : qrow1;
    if (qrow < 0) continue;
    bf16* const dqr = a.dq + qrow * D + sub * DW;
#pragma unroll
    for (int i = 0; i < DW / 8; ++i) {
      const int col = i * 8 + 2 * t;
      float x = __fmul_rn(a.scale, acc[i][2 * half]), y = __fmul_rn(a.scale, acc[i][2 * half + 1]);
      if (a.accumulate_dq) {
        const __nv_bfloat162 old = *reinterpret_cast<const __nv_bfloat162*>(dqr + col);
        x = __fadd_rn(__low2float(old), x);
        y = __fadd_rn(__high2float(old), y);
      }
      *reinterpret_cast<std::uint32_t*>(dqr + col) = pack_bf16(x, y);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// launchers

/// delta F32 [rows] from out and dout [rows, d] (bf16, d 256 or 512, 16-byte aligned).
inline status launch_delta_from_out(cudaStream_t stream, const char* op, const bf16* out, const bf16* dout,
                                    std::int64_t rows, int d, float* delta) {
  delta_from_out_kernel<<<blocks_for(rows, 8, 65535), 256, 0, stream>>>(out, dout, rows, d, delta);
  return launch_status(op, "delta_from_out_kernel");
}

/// Key positions per dkdv block at head dim d (the rows_per_tile of its tile numbering).
inline std::int64_t dkdv_block_keys(std::int64_t d) { return d == 512 ? dkdv_shape<512>::keys : dkdv_shape<256>::keys; }

/// Query rows per dq block at head dim d (the block_rows of mma_tiling).
inline std::int64_t dq_block_rows(std::int64_t d) { return d == 512 ? dq_shape<512>::block_rows : dq_shape<256>::block_rows; }

/// Splits of a key tile's dkdv work: enough blocks (key_tiles · G · splits) for about three
/// waves of one block per SM (causal: the first tile sees twice the mean work, so fewer than two
/// waves leave SMs idle), at most the items of a tile, at most 16, and partials within 512 MiB.
inline int dkdv_splits(std::int64_t d, std::int64_t key_tiles, std::int64_t tokens, std::int64_t kv_heads,
                       std::int64_t group, int sms) {
  const std::int64_t blocks = key_tiles * kv_heads;
  const std::int64_t target = 3 * static_cast<std::int64_t>(sms > 0 ? sms : 132);
  std::int64_t splits = blocks >= target ? 1 : (target + blocks - 1) / blocks;
  const std::int64_t most_items = group * ((tokens + 31) / 32);
  if (splits > most_items) splits = most_items;
  if (splits > 16) splits = 16;
  const std::int64_t per_split = tokens * kv_heads * d * 2 * static_cast<std::int64_t>(sizeof(float));
  while (splits > 1 && splits * per_split > (std::int64_t{512} << 20)) --splits;
  return splits < 1 ? 1 : static_cast<int>(splits);
}

/// Bytes of the float32 partials of `splits` (0 when 1).
inline std::size_t dkdv_partial_bytes(int splits, std::int64_t d, std::int64_t tokens, std::int64_t kv_heads) {
  return splits > 1 ? static_cast<std::size_t>(splits) * static_cast<std::size_t>(tokens * kv_heads * d) * sizeof(float)
                    : 0;
}

template <int D>
status launch_dkdv_dim(cudaStream_t stream, const char* op, std::int64_t key_tiles, const dkdv_args<bf16>& a,
                       const dkdv_partials& part) {
  constexpr std::size_t smem = dkdv_shape<D>::smem_bytes;
  constexpr int keys = dkdv_shape<D>::keys;
  const std::int64_t blocks = key_tiles * a.kv_heads * part.splits;
  if (blocks > 0x7fffffffLL || key_tiles * a.kv_heads > 0x7fffffffLL)
    return {status_code::unsupported, std::string(op) + ": too many tokens or kv heads for one CUDA grid"};
  auto* kernel = &mma_dkdv_kernel<D>;
  TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<static_cast<unsigned>(blocks), threads, smem, stream>>>(a, part);
  status st = launch_status(op, "mma_dkdv_kernel");
  if (!st.ok() || part.splits == 1) return st;
  dkdv_reduce_kernel<D, keys><<<dim3(static_cast<unsigned>(key_tiles * a.kv_heads), keys / 8), 256, 0, stream>>>(a, part);
  return launch_status(op, "dkdv_reduce_kernel");
}

template <int D>
status launch_dq_dim(cudaStream_t stream, const char* op, dim3 grid, const query_args<bf16>& a,
                     const query_layout& layout, const packed_keys<bf16>& keys) {
  constexpr std::size_t smem = dq_shape<D>::smem_bytes;
  auto* kernel = &mma_dq_kernel<D>;
  TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<grid, threads, smem, stream>>>(a, layout, keys);
  return launch_status(op, "mma_dq_kernel");
}

/// key_tiles tiles of dkdv_block_keys(512) positions (numbering a.offsets) x kv heads x part.splits
/// blocks, then (splits > 1) the reduction of the partials; d 512 (d 256: launch_wgmma_dkdv).
inline status launch_dkdv(cudaStream_t stream, const char* op, std::int64_t key_tiles, const dkdv_args<bf16>& a,
                          const dkdv_partials& part) {
  if (a.d != 512) return {status_code::unsupported, std::string(op) + ": the mma.sync dK/dV kernel runs head dim 512 only"};
  return launch_dkdv_dim<512>(stream, op, key_tiles, a, part);
}

/// Grid (query tiles of mma_tiling(H, G, dq_block_rows(512)), kv heads x head chunks); d 512 (d 256:
/// launch_wgmma_dq).
inline status launch_dq(cudaStream_t stream, const char* op, dim3 grid, const query_args<bf16>& a,
                        const query_layout& layout, const packed_keys<bf16>& keys) {
  if (a.d != 512) return {status_code::unsupported, std::string(op) + ": the mma.sync dQ kernel runs head dim 512 only"};
  return launch_dq_dim<512>(stream, op, grid, a, layout, keys);
}

}  // namespace tandem::gpu::ops::cuda::attn::mma
