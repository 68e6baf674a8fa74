// RMSNorm on CUDA: one block per row for y and dx (the row's sum of squares and Σ dn·n by the
// fixed block tree of device_math.cuh), and dw in two deterministic passes: column tiles x row
// chunks write partial sums to scratch, then each column adds its chunks in order.
#include "gpu/ops/cuda/rmsnorm.h"

#include <algorithm>
#include <cstdint>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"
#include "gpu/ops/scratch.h"

namespace tandem::gpu::ops::cuda {
namespace {

constexpr int row_threads = 256;

// ---------------------------------------------------------------------------------------------
// kernels

/// Block r: inv = (mean(x_r²) + eps)^(-1/2), y_r = x_r · inv · w.
template <class S>
__global__ void rmsnorm_forward_kernel(const S* x, const S* __restrict__ w, std::int64_t d, float eps,
                                       S* y, float* __restrict__ inv_rms) {
  __shared__ float shared[32];
  const std::int64_t r = blockIdx.x;
  const S* xr = x + r * d;
  float sum = 0.f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = to_float(xr[j]);
    sum += v * v;
  }
  sum = block_sum(sum, shared);
  const float inv = 1.f / sqrtf(sum / static_cast<float>(d) + eps);
  if (inv_rms && threadIdx.x == 0) inv_rms[r] = inv;
  S* yr = y + r * d;  // may alias xr: each element is read before its own write
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float v = to_float(xr[j]) * inv;
    yr[j] = from_float<S>(w ? v * to_float(w[j]) : v);
  }
}

/// Block r: dx_r = inv · (dn − n · mean(dn · n)) with n = x · inv, dn = dy · w.
template <class S>
__global__ void rmsnorm_dx_kernel(const S* __restrict__ x, const S* __restrict__ w, const float* __restrict__ inv_rms,
                                  const S* __restrict__ dy, std::int64_t d, S* __restrict__ dx, bool accumulate) {
  __shared__ float shared[32];
  const std::int64_t r = blockIdx.x;
  const S* xr = x + r * d;
  const S* gr = dy + r * d;
  const float inv = inv_rms[r];
  float dot = 0.f;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float dn = to_float(gr[j]) * (w ? to_float(w[j]) : 1.f);
    dot += dn * to_float(xr[j]) * inv;
  }
  const float mean_dot = block_sum(dot, shared) / static_cast<float>(d);
  S* out = dx + r * d;
  for (std::int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const float dn = to_float(gr[j]) * (w ? to_float(w[j]) : 1.f);
    const float g = inv * (dn - to_float(xr[j]) * inv * mean_dot);
    out[j] = from_float<S>(accumulate ? to_float(out[j]) + g : g);
  }
}

/// partial[c, j] = Σ_{rows of chunk c} dy · x · inv for columns j (one thread per column).
template <class S>
__global__ void rmsnorm_dw_partial_kernel(const S* __restrict__ x, const float* __restrict__ inv_rms,
                                          const S* __restrict__ dy, std::int64_t rows, std::int64_t d,
                                          std::int64_t rows_per_chunk, float* __restrict__ partial) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t c = blockIdx.y;
  if (j >= d) return;
  const std::int64_t begin = c * rows_per_chunk, end = std::min(rows, begin + rows_per_chunk);
  float acc = 0.f;
  for (std::int64_t r = begin; r < end; ++r) acc += to_float(dy[r * d + j]) * to_float(x[r * d + j]) * inv_rms[r];
  partial[c * d + j] = acc;
}

/// dw[j] += Σ_c partial[c, j], chunks in order.
template <class S>
__global__ void rmsnorm_dw_finish_kernel(const float* __restrict__ partial, std::int64_t chunks, std::int64_t d,
                                         S* __restrict__ dw) {
  const std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  float acc = 0.f;
  for (std::int64_t c = 0; c < chunks; ++c) acc += partial[c * d + j];
  dw[j] = from_float<S>(to_float(dw[j]) + acc);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status rmsnorm_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, double eps,
                       const tensor& y, const tensor& inv_rms) {
  constexpr const char* op = "rmsnorm_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t rows = x.dim(0), d = x.dim(1);
  if (rows == 0) return status::ok();
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    rmsnorm_forward_kernel<S><<<static_cast<unsigned>(rows), row_threads, 0, stream_of(ctx)>>>(
        x.as<const S>(), w.empty() ? nullptr : w.as<const S>(), d, static_cast<float>(eps), y.as<S>(),
        inv_rms.empty() ? nullptr : inv_rms.as<float>());
    return launch_status(op, "rmsnorm_forward_kernel");
  });
}

status rmsnorm_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& w, const tensor& inv_rms,
                        const tensor& dy, const tensor& dx, const tensor& dw, bool accumulate_dx) {
  constexpr const char* op = "rmsnorm_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t rows = x.dim(0), d = x.dim(1);
  if (rows == 0) return status::ok();
  return with_storage(storage, op, [&](auto zero) -> status {
    using S = decltype(zero);
    const cudaStream_t stream = stream_of(ctx);
    if (!dw.empty()) {
      // Enough chunks to fill the GPU with d columns; the chunk count depends on the shape only.
      constexpr int threads = 128;
      const std::int64_t column_blocks = (d + threads - 1) / threads;
      const std::int64_t chunks = std::clamp<std::int64_t>((132 * 8) / std::max<std::int64_t>(column_blocks, 1), 1,
                                                           std::min<std::int64_t>(rows, 1024));
      const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
      auto scratch = op_scratch::get(ctx, op, static_cast<std::size_t>(chunks * d) * sizeof(float));
      if (!scratch) return scratch.error();
      float* partial = reinterpret_cast<float*>(scratch->data());
      rmsnorm_dw_partial_kernel<S><<<dim3(static_cast<unsigned>(column_blocks), static_cast<unsigned>(chunks)), threads,
                                     0, stream>>>(x.as<const S>(), inv_rms.as<const float>(), dy.as<const S>(), rows, d,
                                                  rows_per_chunk, partial);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "rmsnorm_dw_partial_kernel"));
      rmsnorm_dw_finish_kernel<S><<<static_cast<unsigned>(column_blocks), threads, 0, stream>>>(partial, chunks, d,
                                                                                                dw.as<S>());
      TANDEM_RETURN_IF_ERROR(launch_status(op, "rmsnorm_dw_finish_kernel"));
    }
    if (!dx.empty()) {
      rmsnorm_dx_kernel<S><<<static_cast<unsigned>(rows), row_threads, 0, stream>>>(
          x.as<const S>(), w.empty() ? nullptr : w.as<const S>(), inv_rms.as<const float>(), dy.as<const S>(), d,
          dx.as<S>(), accumulate_dx);
      TANDEM_RETURN_IF_ERROR(launch_status(op, "rmsnorm_dx_kernel"));
    }
    return status::ok();
  });
}

}  // namespace tandem::gpu::ops::cuda
