// Rows as 16-byte vectors (nvcc only): a vector's loads (plain, read-only, streaming), its
// elements as floats and back, and the fixed-order sum over a row's group of threads. Shared by
// the norm kernels (rmsnorm.cu) and the norm-backward probe (tools/bench/norm_backward_designs.cu),
// so the probe's designs do the kept kernels' arithmetic.
#pragma once

#include <cuda_runtime.h>

#include <cstring>

#include "gpu/ops/cuda/device_math.cuh"

namespace tandem::gpu::ops::cuda {

/// Elements of storage S in 16 bytes.
template <class S>
inline constexpr int width = static_cast<int>(16 / sizeof(S));

template <class S>
__device__ __forceinline__ uint4 load16(const S* p) { return *reinterpret_cast<const uint4*>(p); }

template <class S>
__device__ __forceinline__ uint4 load16_nc(const S* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

/// The 16 bytes as floats.
template <class S>
__device__ __forceinline__ void unpack(const uint4& raw, float (&v)[width<S>]) {
  S s[width<S>];
  memcpy(s, &raw, sizeof raw);
#pragma unroll
  for (int k = 0; k < width<S>; ++k) v[k] = to_float(s[k]);
}

/// The floats rounded to S (nearest even), as 16 bytes.
template <class S>
__device__ __forceinline__ uint4 pack(const float (&v)[width<S>]) {
  S s[width<S>];
#pragma unroll
  for (int k = 0; k < width<S>; ++k) s[k] = from_float<S>(v[k]);
  uint4 raw;
  memcpy(&raw, s, sizeof raw);
  return raw;
}

/// The sum over the G threads of a row group (G = 32 · warps, groups aligned to warps) in a fixed
/// order: the warp tree, then the group's warps in order. `shared` holds a float per warp of the
/// block; every thread of the block must call it (it has barriers when G > 32).
template <int G>
__device__ __forceinline__ float group_sum(float v, float* shared) {
  v = warp_sum(v);
  if constexpr (G == 32) {
    return v;
  } else {
    constexpr int W = G / 32;
    const int warp = threadIdx.x >> 5, first = warp / W * W;
    if ((threadIdx.x & 31) == 0) shared[warp] = v;
    __syncthreads();
    float total = shared[first];
#pragma unroll
    for (int i = 1; i < W; ++i) total += shared[first + i];
    __syncthreads();
    return total;
  }
}

/// 16 bytes loaded from global memory through the read-only path without allocating in L1 (for
/// data read once, as the narrow norm backward reads each byte).
template <class S>
__device__ __forceinline__ uint4 load16_stream(const S* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

}  // namespace tandem::gpu::ops::cuda
