// The key-tile kernel of the CUDA attention backward (nvcc only; private to attention.cu): dK and
// dV of 16 keys of one sequence and kv head, looping over the query heads of that kv head in
// order, and for each over the 16-row query tiles that see the keys (from the keys' own position
// to the last query within the window), recomputing p = exp(s - lse) and dS = p (dO·v - D):
//
//   dv_j += Σ_i p_ij dO_i,   dk_j += scaling · Σ_i dS_ij q_i.
//
// Every dk / dv row is owned by one block and summed in a fixed order (heads, then query tiles,
// then rows), so the result is deterministic without atomics. float32 arithmetic throughout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpu/ops/cuda/attention_tiles.cuh"
#include "gpu/ops/cuda/launch.h"

namespace tandem::gpu::ops::cuda::attn {

template <class S>
struct dkdv_args {
  const S* q;               // [T, H, d]
  const S* k;               // [T, G, d]
  const S* v;               // [T, G, d]
  const S* dout;            // [T, H, d]
  const float* lse;         // F32 [T, H]
  const float* delta;       // F32 [T, H]
  S* dk;                    // [T, G, d]   +=
  S* dv;                    // [T, G, d]   +=
  const std::int32_t* cu;   // I32 [S + 1]
  const std::int64_t* offsets;  // I64 [S + 1] numbering of the 16-key tiles
  std::int64_t num_seqs, tokens, heads, kv_heads, group;
  int d;
  float scale;
  std::int64_t window;
};

/// Dynamic shared memory: key, value, query and dO tiles of 16 rows, p and dS of 16 x 16.
inline std::size_t dkdv_smem_bytes(int d) {
  return (4 * tile_rows * static_cast<std::size_t>(staged_stride(d)) + 2 * tile_rows * tile_rows) * sizeof(float);
}

// ---------------------------------------------------------------------------------------------
// kernels

/// Block (x, y): key tile x of the numbering, kv head y.
template <class S, int NC>
__global__ void __launch_bounds__(threads, 1) dkdv_kernel(dkdv_args<S> a) {
  extern __shared__ float smem[];
  __shared__ float lse_s[tile_rows], delta_s[tile_rows];
  const int d = a.d, ld = staged_stride(d);
  float* const ks = smem;                      // [16][ld]
  float* const vs = ks + tile_rows * ld;       // [16][ld]
  float* const qs = vs + tile_rows * ld;       // [16][ld]
  float* const dos = qs + tile_rows * ld;      // [16][ld]
  float* const ps = dos + tile_rows * ld;      // [16 queries][16 keys]
  float* const dss = ps + tile_rows * tile_rows;

  const tile_place place = find_tile(a.offsets, a.cu, a.num_seqs, blockIdx.x, tile_rows);
  if (!place.valid) return;
  const std::int64_t g = blockIdx.y;
  const std::int64_t j0 = place.first;  // positions j0..j_last of the sequence
  const std::int64_t j_last = (j0 + tile_rows < place.length ? j0 + tile_rows : place.length) - 1;
  const std::int64_t q_last = a.window > 0 && j_last + a.window - 1 < place.length - 1 ? j_last + a.window - 1
                                                                                      : place.length - 1;
  const auto token_of = [=](std::int64_t position) {  // -1 outside the tensors (malformed offsets)
    const std::int64_t t = place.start + position;
    return t >= 0 && t < a.tokens ? t : std::int64_t{-1};
  };
  const auto key_offset = [=](int jl) {
    const std::int64_t t = j0 + jl <= j_last ? token_of(j0 + jl) : -1;
    return t >= 0 ? (t * a.kv_heads + g) * d : std::int64_t{-1};
  };
  stage_rows(ks, ld, a.k, tile_rows, d, key_offset);
  stage_rows(vs, ld, a.v, tile_rows, d, key_offset);

  const int row = static_cast<int>(threadIdx.x) / row_lanes, lane = static_cast<int>(threadIdx.x) % row_lanes;
  float dk_acc[NC], dv_acc[NC];
#pragma unroll
  for (int i = 0; i < NC; ++i) dk_acc[i] = dv_acc[i] = 0.f;

  for (std::int64_t h = g * a.group; h < (g + 1) * a.group; ++h) {
    for (std::int64_t q0 = j0; q0 <= q_last; q0 += tile_rows) {
      const auto query_index = [=](int il) {  // row of q / lse, -1 for none
        const std::int64_t t = q0 + il <= q_last ? token_of(q0 + il) : -1;
        return t >= 0 ? t * a.heads + h : std::int64_t{-1};
      };
      __syncthreads();  // the previous query tile's reads are done (and the key tiles are staged)
      const auto query_offset = [=](int il) {
        const std::int64_t qi = query_index(il);
        return qi >= 0 ? qi * d : std::int64_t{-1};
      };
      stage_rows(qs, ld, a.q, tile_rows, d, query_offset);
      stage_rows(dos, ld, a.dout, tile_rows, d, query_offset);
      if (threadIdx.x < tile_rows) {
        const std::int64_t qi = query_index(static_cast<int>(threadIdx.x));
        lse_s[threadIdx.x] = qi >= 0 ? a.lse[qi] : 0.f;
        delta_s[threadIdx.x] = qi >= 0 ? a.delta[qi] : 0.f;
      }
      __syncthreads();
      {  // thread (query row, key lane): p and dS of one pair
        const std::int64_t i = q0 + row, j = j0 + lane;
        const bool visible = i <= q_last && j <= j_last && j <= i && j >= first_visible(i, a.window);
        float p = 0.f, ds = 0.f;
        if (visible) {
          const float s = __fmul_rn(row_dot(qs + row * ld, ks + lane * ld, d), a.scale);
          p = expf(s - lse_s[row]);
          const float dp = row_dot(dos + row * ld, vs + lane * ld, d);
          ds = __fmul_rn(p, dp - delta_s[row]);
        }
        ps[row * tile_rows + lane] = p;
        dss[row * tile_rows + lane] = ds;
      }
      __syncthreads();
      // thread (key row, column lane): dv += Σ_i p_i dO_i, dk += Σ_i dS_i q_i, queries in order
#pragma unroll 4
      for (int il = 0; il < tile_rows; ++il) {
        const float p = ps[il * tile_rows + row], ds = dss[il * tile_rows + row];
        const float* const dorow = dos + il * ld;
        const float* const qrow = qs + il * ld;
#pragma unroll
        for (int i = 0; i < NC; ++i) {
          const int c = lane + row_lanes * i;
          if (c < d) {
            dv_acc[i] = fmaf(p, dorow[c], dv_acc[i]);
            dk_acc[i] = fmaf(ds, qrow[c], dk_acc[i]);
          }
        }
      }
    }
  }

  const std::int64_t t = j0 + row <= j_last ? token_of(j0 + row) : -1;
  if (t < 0) return;
  S* const dkr = a.dk + (t * a.kv_heads + g) * d;
  S* const dvr = a.dv + (t * a.kv_heads + g) * d;
#pragma unroll
  for (int i = 0; i < NC; ++i) {
    const int c = lane + row_lanes * i;
    if (c < d) {
      dkr[c] = from_float<S>(__fadd_rn(to_float(dkr[c]), __fmul_rn(a.scale, dk_acc[i])));
      dvr[c] = from_float<S>(__fadd_rn(to_float(dvr[c]), dv_acc[i]));
    }
  }
}

// ---------------------------------------------------------------------------------------------
// launchers

template <class S, int NC>
status launch_dkdv_slots(cudaStream_t stream, const char* op, dim3 grid, const dkdv_args<S>& a) {
  const std::size_t smem = dkdv_smem_bytes(a.d);
  auto* kernel = &dkdv_kernel<S, NC>;
  TANDEM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  kernel<<<grid, threads, smem, stream>>>(a);
  return launch_status(op, "dkdv_kernel");
}

/// Grid (key tile bound, kv heads); `slots` from column_slots(d).
template <class S>
status launch_dkdv(cudaStream_t stream, const char* op, int slots, dim3 grid, const dkdv_args<S>& a) {
  switch (slots) {
    case 2: return launch_dkdv_slots<S, 2>(stream, op, grid, a);
    case 8: return launch_dkdv_slots<S, 8>(stream, op, grid, a);
    case 16: return launch_dkdv_slots<S, 16>(stream, op, grid, a);
    case 32: return launch_dkdv_slots<S, 32>(stream, op, grid, a);
    default: return {status_code::unsupported, std::string(op) + ": head dim " + std::to_string(a.d) +
                                                   " is above the CUDA kernels' " + std::to_string(max_head_dim)};
  }
}

}  // namespace tandem::gpu::ops::cuda::attn
