// The query-tile kernel of CUDA attention (nvcc only; private to attention.cu and
// paged_attention.cu), in three passes over the keys a tile sees, flash style (a 16-row query tile
// in shared memory, keys and values streamed in tiles of 32 positions, never a [T, T] matrix):
//
//   forward: online softmax; out = Σ p v / Σ p and lse = m + log Σ p, p = exp(s - m) rounded to
//            the storage type before P·V (bfloat16: what HF does);
//   delta:   the backward's D_i = Σ_j p_ij (dO_i · v_j) = dO_i · o_i with p = exp(s - lse) (the
//            forward's out is not an argument of the backward, so o is recomputed in float32);
//   dq:      dq_i = scaling · Σ_j p_ij (dO_i · v_j - D_i) k_j, written or accumulated.
//
// Each half warp owns one query row: lane l computes the scores of keys l and l + 16 of a key
// tile (dot products in column order, one FMA per term), the row's max and sum go through the
// same 16-lane shuffle tree every time, and the lane accumulates columns l, l + 16, ... over keys
// in position order. Key tiles sit at multiples of 32 positions, tiles a row cannot see are
// skipped for that row (a no-op, bit for bit), so a row's result depends only on its query, its
// position and the keys it sees: the packed and the paged forward give the same bits. float32
// arithmetic throughout (no TF32, accurate expf / logf).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/ops/cuda/attention_tiles.cuh"
#include "gpu/ops/cuda/launch.h"

namespace tandem::gpu::ops::cuda::attn {

enum class query_pass { forward, delta, dq };

/// What a pass reads and writes (unused pointers null). Row index = token (or new row) · H + head.
template <class S>
struct query_args {
  const S* q;              // [rows, H, d]
  const S* dout;           // [rows, H, d]    delta, dq
  const float* lse_in;     // F32 [rows, H]   delta, dq
  const float* delta_in;   // F32 [rows, H]   dq
  S* out;                  // [rows, H, d]    forward
  float* lse_out;          // F32 [rows, H]   forward
  float* delta_out;        // F32 [rows, H]   delta
  S* dq;                   // [rows, H, d]    dq (= or += per accumulate_dq)
  bool accumulate_dq;
  int d;
  float scale;
  std::int64_t window;
};

/// Dynamic shared memory of a pass: the query tile (and dO tile for dq), a key and a value tile,
/// and the tile's probabilities (or dS).
inline std::size_t query_smem_bytes(query_pass pass, int d) {
  const std::size_t ld = static_cast<std::size_t>(staged_stride(d));
  const std::size_t query_tiles = pass == query_pass::dq ? 2 : 1;
  return ((query_tiles * tile_rows + 2 * key_tile) * ld + tile_rows * key_tile) * sizeof(float);
}

// ---------------------------------------------------------------------------------------------
// kernels

/// Block (x, y): the query tile numbered gridDim.x - 1 - x (the longest rows first) of kv head
/// chunk y; NC = column slots per lane (16 · NC >= d).
template <query_pass Pass, class S, int NC, class Keys>
__global__ void __launch_bounds__(threads, 1) query_tile_kernel(query_args<S> a, query_layout layout, Keys keys) {
  constexpr int slots = key_tile / row_lanes;
  constexpr bool is_forward = Pass == query_pass::forward, is_dq = Pass == query_pass::dq;
  extern __shared__ float smem[];
  __shared__ std::int64_t qrow_s[tile_rows], pos_s[tile_rows];
  __shared__ float lse_s[tile_rows], delta_s[tile_rows];
  const int d = a.d, ld = staged_stride(d);
  float* const qs = smem;                                      // [16][ld]
  float* const dos = qs + tile_rows * ld;                      // [16][ld]   dq only
  float* const ks = dos + (is_dq ? tile_rows * ld : 0);        // [32][ld]
  float* const vs = ks + key_tile * ld;                        // [32][ld]
  float* const ps = vs + key_tile * ld;                        // [16][32]   p, or dS for dq

  const query_tile tile = find_query_tile(layout);
  if (!tile.place.valid) return;
  if (threadIdx.x < tile_rows) {
    std::int64_t qrow = -1, pos = -1;
    query_row(layout, tile, static_cast<int>(threadIdx.x), qrow, pos);
    qrow_s[threadIdx.x] = qrow;
    pos_s[threadIdx.x] = pos;
    lse_s[threadIdx.x] = !is_forward && qrow >= 0 ? a.lse_in[qrow] : 0.f;
    delta_s[threadIdx.x] = is_dq && qrow >= 0 ? a.delta_in[qrow] : 0.f;
  }
  __syncthreads();
  std::int64_t pmin, pmax;
  position_range(pos_s, tile_rows, pmin, pmax);
  if (pmax < 0) return;  // no row (uniform over the block)
  const std::int64_t kmin = first_visible(pmin, a.window), kmax = pmax;
  const auto query_offset = [&](int l) { return qrow_s[l] >= 0 ? qrow_s[l] * d : std::int64_t{-1}; };
  stage_rows(qs, ld, a.q, tile_rows, d, query_offset);
  if constexpr (is_dq) stage_rows(dos, ld, a.dout, tile_rows, d, query_offset);

  const int r = static_cast<int>(threadIdx.x) / row_lanes, lane = static_cast<int>(threadIdx.x) % row_lanes;
  const std::int64_t my_pos = pos_s[r], my_qrow = qrow_s[r];
  const std::int64_t my_first = first_visible(my_pos < 0 ? 0 : my_pos, a.window);
  const float my_lse = lse_s[r], my_delta = delta_s[r];
  const float* const my_q = qs + r * ld;
  const float* const my_do = dos + r * ld;
  float* const my_p = ps + r * key_tile;
  float acc[NC];
#pragma unroll
  for (int i = 0; i < NC; ++i) acc[i] = 0.f;
  float m = -INFINITY, l = 0.f;  // forward: running max and sum

  for (std::int64_t kt = kmin / key_tile; kt <= kmax / key_tile; ++kt) {
    const std::int64_t j0 = kt * key_tile;
    __syncthreads();  // the previous tile's reads of ks, vs and ps are done
    const auto key_offset = [&](int jl) {
      const std::int64_t j = j0 + jl;
      return j >= kmin && j <= kmax ? keys.offset(tile.place.seq, tile.place.start, j, tile.g) : std::int64_t{-1};
    };
    stage_rows(ks, ld, keys.k, key_tile, d, key_offset);
    stage_rows(vs, ld, keys.v, key_tile, d, key_offset);
    __syncthreads();

    bool visible[slots];
    float w[slots];  // this lane's weights of the tile: p (forward, delta) or dS (dq)
    float any = 0.f;
#pragma unroll
    for (int jj = 0; jj < slots; ++jj) {
      const std::int64_t j = j0 + lane + row_lanes * jj;
      visible[jj] = my_pos >= 0 && j >= my_first && j <= my_pos;
      any = visible[jj] ? 1.f : any;
    }
    any = half_warp_max(any);

    if constexpr (is_forward) {
      float s[slots];
      float tile_max = -INFINITY;
#pragma unroll
      for (int jj = 0; jj < slots; ++jj) {
        const int jl = lane + row_lanes * jj;
        s[jj] = visible[jj] ? __fmul_rn(row_dot(my_q, ks + jl * ld, d), a.scale) : -INFINITY;
        tile_max = fmaxf(tile_max, s[jj]);
      }
      tile_max = half_warp_max(tile_max);
      const float m_new = fmaxf(m, tile_max);
      float alpha = 1.f, tile_sum = 0.f;
#pragma unroll
      for (int jj = 0; jj < slots; ++jj) w[jj] = 0.f;
      if (any > 0.f) {  // m_new is finite: the row sees a key of this tile
        alpha = expf(m - m_new);
#pragma unroll
        for (int jj = 0; jj < slots; ++jj) w[jj] = visible[jj] ? expf(s[jj] - m_new) : 0.f;
      }
#pragma unroll
      for (int jj = 0; jj < slots; ++jj) tile_sum = __fadd_rn(tile_sum, w[jj]);
      tile_sum = half_warp_sum(tile_sum);
      if (any > 0.f) {
        l = __fadd_rn(__fmul_rn(l, alpha), tile_sum);
        m = m_new;
#pragma unroll
        for (int i = 0; i < NC; ++i) acc[i] = __fmul_rn(acc[i], alpha);
      }
#pragma unroll
      for (int jj = 0; jj < slots; ++jj) w[jj] = round_to<S>(w[jj]);
    } else {
#pragma unroll
      for (int jj = 0; jj < slots; ++jj) {
        const int jl = lane + row_lanes * jj;
        w[jj] = 0.f;
        if (visible[jj]) {
          const float s = __fmul_rn(row_dot(my_q, ks + jl * ld, d), a.scale);
          const float p = expf(s - my_lse);
          if constexpr (is_dq) {
            const float dp = row_dot(my_do, vs + jl * ld, d);
            w[jj] = __fmul_rn(p, dp - my_delta);
          } else {
            w[jj] = p;
          }
        }
      }
    }
#pragma unroll
    for (int jj = 0; jj < slots; ++jj) my_p[lane + row_lanes * jj] = w[jj];
    __syncwarp();
    if (any > 0.f) {  // acc += Σ_j w_j · (v_j or, for dq, k_j), keys in position order
      const float* const b = is_dq ? ks : vs;
#pragma unroll 4
      for (int jl = 0; jl < key_tile; ++jl) {
        const float wj = my_p[jl];
        const float* const brow = b + jl * ld;
#pragma unroll
        for (int i = 0; i < NC; ++i) {
          const int c = lane + row_lanes * i;
          if (c < d) acc[i] = fmaf(wj, brow[c], acc[i]);
        }
      }
    }
  }

  if constexpr (is_forward) {
    if (my_qrow >= 0) {
      S* const o = a.out + my_qrow * d;
#pragma unroll
      for (int i = 0; i < NC; ++i) {
        const int c = lane + row_lanes * i;
        if (c < d) o[c] = from_float<S>(acc[i] / l);
      }
      if (lane == 0) a.lse_out[my_qrow] = __fadd_rn(m, logf(l));
    }
  } else if constexpr (Pass == query_pass::delta) {
    float part = 0.f;
    if (my_qrow >= 0) {
      const S* const g = a.dout + my_qrow * d;
#pragma unroll
      for (int i = 0; i < NC; ++i) {
        const int c = lane + row_lanes * i;
        if (c < d) part = fmaf(to_float(g[c]), acc[i], part);
      }
    }
    part = half_warp_sum(part);
    if (my_qrow >= 0 && lane == 0) a.delta_out[my_qrow] = part;
  } else {
    if (my_qrow >= 0) {
      S* const g = a.dq + my_qrow * d;
#pragma unroll
      for (int i = 0; i < NC; ++i) {
        const int c = lane + row_lanes * i;
        if (c < d) {
          const float grad = __fmul_rn(a.scale, acc[i]);
          g[c] = from_float<S>(a.accumulate_dq ? __fadd_rn(to_float(g[c]), grad) : grad);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// launchers (shared by attention.cu and paged_attention.cu)

/// How a call's query rows are tiled: heads_per_tile heads of one kv head (all of its group, up to
/// 16) times rows_per_tile = 16 / heads_per_tile rows.
struct query_tiling {
  std::int64_t group, heads_per_tile, head_chunks, rows_per_tile;
};

inline query_tiling query_tiling_for(std::int64_t heads, std::int64_t kv_heads) {
  query_tiling t{};
  t.group = heads / kv_heads;
  t.heads_per_tile = t.group < tile_rows ? t.group : tile_rows;
  t.head_chunks = (t.group + t.heads_per_tile - 1) / t.heads_per_tile;
  t.rows_per_tile = tile_rows / t.heads_per_tile;
  return t;
}

template <query_pass Pass, class S, int NC, class Keys>
status launch_query_slots(cudaStream_t stream, const char* op, dim3 grid, const query_args<S>& a,
                          const query_layout& layout, const Keys& keys) {
  const std::size_t smem = query_smem_bytes(Pass, a.d);
  auto* kernel = &query_tile_kernel<Pass, S, NC, Keys>;
  TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<grid, threads, smem, stream>>>(a, layout, keys);
  return launch_status(op, Pass == query_pass::forward ? "query_tile_kernel<forward>"
                           : Pass == query_pass::delta ? "query_tile_kernel<delta>"
                                                       : "query_tile_kernel<dq>");
}

/// One pass over every query tile: grid (tile bound, kv heads x head chunks); `slots` from
/// column_slots(d).
template <query_pass Pass, class S, class Keys>
status launch_query_pass(cudaStream_t stream, const char* op, int slots, dim3 grid, const query_args<S>& a,
                         const query_layout& layout, const Keys& keys) {
  switch (slots) {
    case 2: return launch_query_slots<Pass, S, 2>(stream, op, grid, a, layout, keys);
    case 8: return launch_query_slots<Pass, S, 8>(stream, op, grid, a, layout, keys);
    case 16: return launch_query_slots<Pass, S, 16>(stream, op, grid, a, layout, keys);
    case 32: return launch_query_slots<Pass, S, 32>(stream, op, grid, a, layout, keys);
    default: return {status_code::unsupported, std::string(op) + ": head dim " + std::to_string(a.d) +
                                                   " is above the CUDA kernels' " + std::to_string(max_head_dim)};
  }
}

}  // namespace tandem::gpu::ops::cuda::attn
