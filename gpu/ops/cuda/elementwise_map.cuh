// The element-wise map of the CUDA ops of softcap, gated_mlp, per_layer_input and elementwise
// (nvcc only): In inputs and Out outputs of one storage type, each a [rows, cols] matrix whose rows
// lie `stride` elements apart (stride == cols: contiguous), and a functor computing the outputs of
// one element in float32 from its inputs. Every element is read before its own outputs are
// written and no thread touches another's elements, so an output may be one of the inputs (in
// place). 16-byte vector loads and stores when every pointer is 16-byte aligned (and, for strided
// operands, cols and every stride are multiples of the vector width), a scalar path otherwise;
// grid-stride loops over 64-bit counts.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"

namespace tandem::gpu::ops::cuda {

/// Elements of storage S in 16 bytes: 4 float32, 8 bfloat16.
template <class S>
inline constexpr int vec_width = static_cast<int>(16 / sizeof(S));

/// The operands of a map; each row r of operand k starts at ptr + r · stride.
template <class S, int In, int Out>
struct map_operands {
  const S* in[In];
  std::int64_t in_stride[In];
  S* out[Out];
  std::int64_t out_stride[Out];
};

/// v[k] = float(p[k]) for k < vec_width<S>, one 16-byte load; p is 16-byte aligned.
template <class S>
__device__ __forceinline__ void load_vec(const S* p, float (&v)[vec_width<S>]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  S s[vec_width<S>];
  memcpy(s, &raw, sizeof raw);
#pragma unroll
  for (int k = 0; k < vec_width<S>; ++k) v[k] = to_float(s[k]);
}

/// p[k] = S(v[k]) (bfloat16: round to nearest even), one 16-byte store; p is 16-byte aligned.
template <class S>
__device__ __forceinline__ void store_vec(S* p, const float (&v)[vec_width<S>]) {
  S s[vec_width<S>];
#pragma unroll
  for (int k = 0; k < vec_width<S>; ++k) s[k] = from_float<S>(v[k]);
  uint4 raw;
  memcpy(&raw, s, sizeof raw);
  *reinterpret_cast<uint4*>(p) = raw;
}

/// W values of p (W = vec_width<S>: one 16-byte load; W = 1: one scalar) as float, and back.
template <class S, int W>
__device__ __forceinline__ void load_group(const S* p, float (&v)[W]) {
  if constexpr (W == 1)
    v[0] = to_float(*p);
  else
    load_vec(p, v);
}

template <class S, int W>
__device__ __forceinline__ void store_group(S* p, const float (&v)[W]) {
  if constexpr (W == 1)
    *p = from_float<S>(v[0]);
  else
    store_vec(p, v);
}

/// q = i / d, r = i % d, in 32-bit arithmetic when `narrow` (every index below 2^32), the same
/// result either way; `narrow` is uniform over the grid, so the branch never diverges.
__device__ __forceinline__ void div_mod(std::int64_t i, std::int64_t d, bool narrow, std::int64_t& q, std::int64_t& r) {
  if (narrow) {
    const auto ui = static_cast<std::uint32_t>(i), ud = static_cast<std::uint32_t>(d);
    q = ui / ud;
    r = ui - static_cast<std::uint32_t>(q) * ud;
  } else {
    q = i / d;
    r = i - q * d;
  }
}

/// A functor may load what it needs once per thread (a scalar in device memory): f.bound() when
/// it has one, f itself otherwise.
template <class F>
__device__ __forceinline__ auto bound_functor(const F& f) {
  if constexpr (requires { f.bound(); })
    return f.bound();
  else
    return f;
}

// ---------------------------------------------------------------------------------------------
// kernels

/// One element at offset in_off[k] / out_off[k] of each operand.
template <class S, int In, int Out, class F>
__device__ __forceinline__ void map_scalar(const map_operands<S, In, Out>& m, const std::int64_t (&in_off)[In],
                                           const std::int64_t (&out_off)[Out], const F& f) {
  float x[In], y[Out];
#pragma unroll
  for (int k = 0; k < In; ++k) x[k] = to_float(m.in[k][in_off[k]]);
  f(x, y);
#pragma unroll
  for (int k = 0; k < Out; ++k) m.out[k][out_off[k]] = from_float<S>(y[k]);
}

/// vec_width<S> consecutive elements at the given (aligned) offsets.
template <class S, int In, int Out, class F>
__device__ __forceinline__ void map_vector(const map_operands<S, In, Out>& m, const std::int64_t (&in_off)[In],
                                           const std::int64_t (&out_off)[Out], const F& f) {
  constexpr int V = vec_width<S>;
  float x[In][V], y[Out][V];
#pragma unroll
  for (int k = 0; k < In; ++k) load_vec(m.in[k] + in_off[k], x[k]);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    float xe[In], ye[Out];
#pragma unroll
    for (int k = 0; k < In; ++k) xe[k] = x[k][e];
    f(xe, ye);
#pragma unroll
    for (int k = 0; k < Out; ++k) y[k][e] = ye[k];
  }
#pragma unroll
  for (int k = 0; k < Out; ++k) store_vec(m.out[k] + out_off[k], y[k]);
}

/// Contiguous operands of n elements: vectors over the first n / V·V (Vector), then the tail.
template <class S, int In, int Out, class F, bool Vector>
__global__ void map_flat_kernel(map_operands<S, In, Out> m, std::int64_t n, F f0) {
  constexpr int V = vec_width<S>;
  const auto f = bound_functor(f0);
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::int64_t scalar_begin = 0;
  if constexpr (Vector) {
    const std::int64_t vectors = n / V;
    for (std::int64_t v = first; v < vectors; v += step) {
      std::int64_t in_off[In], out_off[Out];
#pragma unroll
      for (int k = 0; k < In; ++k) in_off[k] = v * V;
#pragma unroll
      for (int k = 0; k < Out; ++k) out_off[k] = v * V;
      map_vector(m, in_off, out_off, f);
    }
    scalar_begin = vectors * V;
  }
  for (std::int64_t i = scalar_begin + first; i < n; i += step) {
    std::int64_t in_off[In], out_off[Out];
#pragma unroll
    for (int k = 0; k < In; ++k) in_off[k] = i;
#pragma unroll
    for (int k = 0; k < Out; ++k) out_off[k] = i;
    map_scalar(m, in_off, out_off, f);
  }
}

/// Strided operands, [rows, cols]: items of V elements (Vector; cols % V == 0) or of one.
template <class S, int In, int Out, class F, bool Vector>
__global__ void map_strided_kernel(map_operands<S, In, Out> m, std::int64_t rows, std::int64_t cols, F f0) {
  constexpr int W = Vector ? vec_width<S> : 1;
  const auto f = bound_functor(f0);
  const std::int64_t per_row = cols / W, items = rows * per_row;
  const bool narrow = items <= 0xffffffffLL;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += step) {
    std::int64_t r, c;
    div_mod(i, per_row, narrow, r, c);
    c *= W;
    std::int64_t in_off[In], out_off[Out];
#pragma unroll
    for (int k = 0; k < In; ++k) in_off[k] = r * m.in_stride[k] + c;
#pragma unroll
    for (int k = 0; k < Out; ++k) out_off[k] = r * m.out_stride[k] + c;
    if constexpr (Vector)
      map_vector(m, in_off, out_off, f);
    else
      map_scalar(m, in_off, out_off, f);
  }
}

// ---------------------------------------------------------------------------------------------
// launcher

inline bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

/// Enqueues the map over [rows, cols] on the context's stream; the status of the launch, naming
/// `op` and `kernel`. The contiguous kernel when every stride equals cols (or there is one row).
template <class S, int In, int Out, class F>
status launch_map(const exec_context& ctx, const char* op, const char* kernel, const map_operands<S, In, Out>& m,
                  std::int64_t rows, std::int64_t cols, const F& f) {
  constexpr int V = vec_width<S>;
  constexpr int threads = 256;
  const std::int64_t n = rows * cols;
  if (n == 0) return status::ok();
  bool contiguous = true, aligned = true, strides_divide = cols % V == 0;
  for (int k = 0; k < In; ++k) {
    contiguous = contiguous && (rows == 1 || m.in_stride[k] == cols);
    aligned = aligned && aligned16(m.in[k]);
    strides_divide = strides_divide && m.in_stride[k] % V == 0;
  }
  for (int k = 0; k < Out; ++k) {
    contiguous = contiguous && (rows == 1 || m.out_stride[k] == cols);
    aligned = aligned && aligned16(m.out[k]);
    strides_divide = strides_divide && m.out_stride[k] % V == 0;
  }
  const cudaStream_t stream = stream_of(ctx);
  if (contiguous) {
    if (aligned && n >= V)
      map_flat_kernel<S, In, Out, F, true><<<blocks_for(n / V, threads), threads, 0, stream>>>(m, n, f);
    else
      map_flat_kernel<S, In, Out, F, false><<<blocks_for(n, threads), threads, 0, stream>>>(m, n, f);
  } else if (aligned && strides_divide) {
    map_strided_kernel<S, In, Out, F, true><<<blocks_for(n / V, threads), threads, 0, stream>>>(m, rows, cols, f);
  } else {
    map_strided_kernel<S, In, Out, F, false><<<blocks_for(n, threads), threads, 0, stream>>>(m, rows, cols, f);
  }
  return launch_status(op, kernel);
}

/// launch_map over n contiguous elements.
template <class S, int In, int Out, class F>
status launch_map(const exec_context& ctx, const char* op, const char* kernel, const S* const (&in)[In],
                  S* const (&out)[Out], std::int64_t n, const F& f) {
  map_operands<S, In, Out> m{};
  for (int k = 0; k < In; ++k) {
    m.in[k] = in[k];
    m.in_stride[k] = n;
  }
  for (int k = 0; k < Out; ++k) {
    m.out[k] = out[k];
    m.out_stride[k] = n;
  }
  return launch_map(ctx, op, kernel, m, 1, n, f);
}

}  // namespace tandem::gpu::ops::cuda
