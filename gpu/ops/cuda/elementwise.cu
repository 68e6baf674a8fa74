// Element-wise arithmetic on CUDA: element-wise maps (elementwise_map.cuh: 16-byte vectors when
// aligned), and scale_by's ds in two deterministic passes: a fixed grid (a function of the element
// count only) writes one double partial sum per block to scratch, each block by a fixed shuffle
// tree, then one block adds the partials by a fixed assignment and tree and adds the total to ds.
#include "gpu/ops/cuda/elementwise.h"

#include <cstdint>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/elementwise_map.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

constexpr int sum_threads = 256;
constexpr int finish_threads = 1024;
constexpr std::int64_t max_partials = 132 * 8;  // blocks of the partial pass, at most

// ---------------------------------------------------------------------------------------------
// kernels

/// y = a + b; inputs (a, b).
struct add_op {
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const { y[0] = x[0] + x[1]; }
};

/// y = x · s.
struct scale_op {
  float s;
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const { y[0] = x[0] * s; }
};

/// y = x · s[0]: each thread reads s[0] once and maps with scale_op.
template <class S>
struct scale_by_op {
  const S* s;
  __device__ scale_op bound() const { return {to_float(*s)}; }
};

/// Sum over the 32 lanes of a warp in double, every lane gets it; the same tree on every call.
__device__ __forceinline__ double warp_sum_double(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// The sum over a block (a multiple of 32 threads, at most 1024) in double, valid in thread 0.
__device__ __forceinline__ double block_sum_double(double v) {
  __shared__ double shared[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum_double(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  double total = lane < warps ? shared[lane] : 0.0;
  return warp_sum_double(total);
}

/// partial[block] = Σ over this block's grid-stride elements of double(x) · double(dy); vectors of
/// 16 bytes (Vector: both pointers aligned) over the first n / V·V elements, then the tail.
template <class S, bool Vector>
__global__ void dot_partial_kernel(const S* __restrict__ x, const S* __restrict__ dy, std::int64_t n,
                                   double* __restrict__ partial) {
  constexpr int V = vec_width<S>;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  double acc = 0.0;
  std::int64_t scalar_begin = 0;
  if constexpr (Vector) {
    const std::int64_t vectors = n / V;
    for (std::int64_t v = first; v < vectors; v += step) {
      float a[V], b[V];
      load_vec(x + v * V, a);
      load_vec(dy + v * V, b);
#pragma unroll
      for (int k = 0; k < V; ++k) acc += static_cast<double>(a[k]) * static_cast<double>(b[k]);
    }
    scalar_begin = vectors * V;
  }
  for (std::int64_t i = scalar_begin + first; i < n; i += step)
    acc += static_cast<double>(to_float(x[i])) * static_cast<double>(to_float(dy[i]));
  const double total = block_sum_double(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

/// ds[0] = S(float(ds[0]) + float(Σ_b partial[b])), one block; thread k adds partials k, k + 1024, ...
template <class S>
__global__ void dot_finish_kernel(const double* __restrict__ partial, std::int64_t partials, S* ds) {
  double acc = 0.0;
  for (std::int64_t b = threadIdx.x; b < partials; b += blockDim.x) acc += partial[b];
  const double total = block_sum_double(acc);
  if (threadIdx.x == 0) ds[0] = from_float<S>(to_float(ds[0]) + static_cast<float>(total));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status add_forward(const exec_context& ctx, dtype storage, const tensor& a, const tensor& b, const tensor& y) {
  constexpr const char* op = "add_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[2] = {a.as<const S>(), b.as<const S>()};
    S* out[1] = {y.as<S>()};
    return launch_map(ctx, op, "map_kernel<add_op>", in, out, a.numel(), add_op{});
  });
}

status scale_forward(const exec_context& ctx, dtype storage, const tensor& x, double s, const tensor& y) {
  constexpr const char* op = "scale_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[1] = {x.as<const S>()};
    S* out[1] = {y.as<S>()};
    return launch_map(ctx, op, "map_kernel<scale_op>", in, out, x.numel(), scale_op{static_cast<float>(s)});
  });
}

status scale_by_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& s, const tensor& y) {
  constexpr const char* op = "scale_by_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[1] = {x.as<const S>()};
    S* out[1] = {y.as<S>()};
    return launch_map(ctx, op, "map_kernel<scale_by_op>", in, out, x.numel(), scale_by_op<S>{s.as<const S>()});
  });
}

status scale_by_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& s, const tensor& dy,
                         const tensor& dx, const tensor& ds) {
  constexpr const char* op = "scale_by_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = x.numel();
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    const cudaStream_t stream = stream_of(ctx);
    if (!ds.empty() && n > 0) {  // before dx: dx may be dy
      const bool vector = aligned16(x.data()) && aligned16(dy.data()) && n >= vec_width<S>;
      const unsigned blocks = blocks_for(vector ? n / vec_width<S> : n, sum_threads, max_partials);
      auto scratch = op_scratch::get(ctx, op, static_cast<std::size_t>(blocks) * sizeof(double));
      if (!scratch) return scratch.error();
      double* partial = reinterpret_cast<double*>(scratch->data());
      if (vector)
        dot_partial_kernel<S, true><<<blocks, sum_threads, 0, stream>>>(x.as<const S>(), dy.as<const S>(), n, partial);
      else
        dot_partial_kernel<S, false><<<blocks, sum_threads, 0, stream>>>(x.as<const S>(), dy.as<const S>(), n, partial);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "dot_partial_kernel"));
      dot_finish_kernel<S><<<1, finish_threads, 0, stream>>>(partial, blocks, ds.as<S>());
      TANDEM_RETURN_IF_ERROR(launch_status(op, "dot_finish_kernel"));
    }
    if (!dx.empty()) {
      const S* in[1] = {dy.as<const S>()};
      S* out[1] = {dx.as<S>()};
      TANDEM_RETURN_IF_ERROR(
          launch_map(ctx, op, "map_kernel<scale_by_op>", in, out, n, scale_by_op<S>{s.as<const S>()}));
    }
    return status::ok();
  });
}

}  // namespace tandem::gpu::ops::cuda
