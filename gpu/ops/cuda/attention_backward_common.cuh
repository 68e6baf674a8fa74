// What the tensor-core attention backward passes share (nvcc only; private to attention.cu): D
// from the forward's out, and the split of a key tile's dK / dV work over several units (blocks
// at head dim 256, clusters of two blocks at 512: attention_wgmma_dkdv.cuh,
// attention_wgmma_dkdv_cluster.cuh) with its float32 partials and their reduction. Deterministic,
// no atomics: every output element is owned by one thread and summed in a fixed order.
//
//   delta:  D_i = Σ_c dO_ic · o_ic from the forward's out (a warp per row, a fixed shuffle tree);
//   splits: a key tile's items (query head of the kv head, tile of query positions from the keys'
//           own first position to the last query whose window holds them), heads outer, are cut
//           into `splits` contiguous ranges, one unit each (about three waves of units); one split
//           adds into dk / dv directly, several write float32 partials to scratch and
//           dkdv_reduce_kernel adds them in split order (one rounding to bf16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gpu/ops/cuda/attention_dkdv.cuh"
#include "gpu/ops/cuda/attention_mma_common.cuh"

namespace tandem::gpu::ops::cuda::attn::mma {

/// Float32 partial dK (unscaled) and dV of the dkdv splits, [splits][T][G][D] each (null when splits == 1).
struct dkdv_partials {
  float* dk;
  float* dv;
  int splits;
};

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

// ---------------------------------------------------------------------------------------------
// launchers

/// delta F32 [rows] from out and dout [rows, d] (bf16, d 256 or 512, 16-byte aligned).
inline status launch_delta_from_out(cudaStream_t stream, const char* op, const bf16* out, const bf16* dout,
                                    std::int64_t rows, int d, float* delta) {
  delta_from_out_kernel<<<blocks_for(rows, 8, 65535), 256, 0, stream>>>(out, dout, rows, d, delta);
  return launch_status(op, "delta_from_out_kernel");
}

/// Splits of a key tile's dkdv work: enough units (key_tiles · G · splits) for about three waves
/// of `sms` units at once (the SMs at d 256, half of them at d 512, where a unit is a cluster of
/// two blocks; causal: the first tile sees twice the mean work, so fewer than two waves leave SMs
/// idle), at most the items of a tile (64 queries each), at most 16, and partials within 512 MiB.
inline int dkdv_splits(std::int64_t d, std::int64_t key_tiles, std::int64_t tokens, std::int64_t kv_heads,
                       std::int64_t group, int sms) {
  const std::int64_t blocks = key_tiles * kv_heads;
  const std::int64_t target = 3 * static_cast<std::int64_t>(sms > 0 ? sms : 132);
  std::int64_t splits = blocks >= target ? 1 : (target + blocks - 1) / blocks;
  const std::int64_t most_items = group * ((tokens + 63) / 64);
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

}  // namespace tandem::gpu::ops::cuda::attn::mma
