// Device-side helpers of the CUDA ops (nvcc only): float loads and stores of either storage type
// (float32, bfloat16: round to nearest even), deterministic warp and block sums (a fixed shuffle
// tree, the same order on every run), the tanh-approximated GELU and its derivative, and the
// dispatch from a storage dtype to the kernel's storage type.
#pragma once

#include <cuda_bf16.h>

#include <string>
#include <string_view>

#include "gpu/core/dtype.h"
#include "gpu/core/status.h"

namespace tandem::gpu::ops::cuda {

using bf16 = __nv_bfloat16;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(bf16 v) { return __bfloat162float(v); }

template <class S>
__device__ __forceinline__ S from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ bf16 from_float<bf16>(float v) { return __float2bfloat16_rn(v); }

/// RoPE's half-split rotation of a pair (a = x_j, b = x_{j+h}) with the table values of the output
/// column, each product rounded then the sum (no FMA: every kernel that rotates gives the same
/// bits). Forward: y_j = a·cos − b·sin, y_{j+h} = b·cos + a·sin; the inverse swaps the signs.
__device__ __forceinline__ float rope_low(float a, float b, float c, float s) { return __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s)); }
__device__ __forceinline__ float rope_high(float a, float b, float c, float s) { return __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s)); }
__device__ __forceinline__ float rope_low_inverse(float a, float b, float c, float s) {
  return __fadd_rn(__fmul_rn(a, c), __fmul_rn(b, s));
}
__device__ __forceinline__ float rope_high_inverse(float a, float b, float c, float s) {
  return __fsub_rn(__fmul_rn(b, c), __fmul_rn(a, s));
}

/// 2^t by the special-function unit (ex2.approx.ftz: relative error ~2^-22, 2^t below 2^-126
/// flushed to +0, 2^-inf = +0, NaN stays NaN): one instruction, where expf takes eight and exp2f
/// four (the same unit's result, with a rescaling for results below 2^-126 around it).
__device__ __forceinline__ float exp2_approx(float t) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(t));
  return y;
}

/// Sum over the 32 lanes of a warp, every lane gets it; the same tree on every call.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024); every thread gets it.
/// `shared` holds 32 floats. Ends with a barrier, so it can be called again at once.
__device__ __forceinline__ float block_sum(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float total = lane < warps ? shared[lane] : 0.f;
  total = warp_sum(total);
  __syncthreads();
  return total;
}

__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float m = lane < warps ? shared[lane] : -INFINITY;
  m = warp_max(m);
  __syncthreads();
  return m;
}

/// gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
__device__ __forceinline__ float gelu_tanh(float x) {
  constexpr float k = 0.7978845608028654f;
  return 0.5f * x * (1.f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/// d gelu_tanh / dx.
__device__ __forceinline__ float gelu_tanh_derivative(float x) {
  constexpr float k = 0.7978845608028654f;
  const float t = tanhf(k * (x + 0.044715f * x * x * x));
  return 0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * k * (1.f + 3.f * 0.044715f * x * x);
}

/// Calls f(float{}) or f(bf16{}) for float32 or bfloat16 storage; unsupported naming the op
/// otherwise.
template <class F>
status with_storage(dtype storage, std::string_view op, F&& f) {
  switch (storage) {
    case dtype::float32: return f(float{});
    case dtype::bfloat16: return f(bf16{});
    default:
      return {status_code::unsupported,
              std::string(op) + ": the CUDA backend stores float32 or bfloat16, got " + std::string(to_string(storage))};
  }
}

}  // namespace tandem::gpu::ops::cuda
