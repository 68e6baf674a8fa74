// RoPE on CUDA: the inverse frequencies uploaded from the host, the cos/sin tables one thread per
// (token, frequency) with sincosf (full range reduction), and the rotation one thread per
// (token, head, group of V frequencies): 16-byte vector loads of x[j..j+V), x[j+h..j+h+V) and of
// the four table slices when every pointer is aligned and h is a multiple of V, else V = 1.
#include "gpu/ops/cuda/rope.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/elementwise_map.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

constexpr int threads = 256;

// ---------------------------------------------------------------------------------------------
// kernels

/// The inverse frequencies by value: a launch copies its arguments, so the host's array may go.
struct inv_freq_values {
  float v[rope_max_half];
};

__global__ void rope_inv_freq_kernel(inv_freq_values values, std::int64_t half, float* __restrict__ out) {
  for (std::int64_t j = threadIdx.x; j < half; j += blockDim.x) out[j] = values.v[j];
}

/// cos[t, j] = cos[t, j + half] = cos(float(pos[t]) · inv_freq[j]), the same for sin.
template <class S>
__global__ void rope_tables_kernel(const std::int32_t* __restrict__ positions, const float* __restrict__ inv_freq,
                                   std::int64_t n, std::int64_t half, S* __restrict__ cos, S* __restrict__ sin) {
  const std::int64_t items = n * half, d = 2 * half;
  const bool narrow = items <= 0xffffffffLL;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += step) {
    std::int64_t t, j;
    div_mod(i, half, narrow, t, j);
    const float angle = static_cast<float>(positions[t]) * inv_freq[j];
    float s, c;
    sincosf(angle, &s, &c);
    const S cs = from_float<S>(c), sn = from_float<S>(s);
    cos[t * d + j] = cs;
    cos[t * d + j + half] = cs;
    sin[t * d + j] = sn;
    sin[t * d + j + half] = sn;
  }
}

/// For every (token t, head, j in a group of W): a = in[j], b = in[j + h],
///   forward:  out[j] = a·cos[j] − b·sin[j],      out[j + h] = b·cos[j + h] + a·sin[j + h];
///   inverse:  out[j] = a·cos[j] + b·sin[j + h],  out[j + h] = b·cos[j + h] − a·sin[j].
/// Both halves are read before either is written (out may be in).
template <class S, int W, bool Inverse>
__global__ void rope_rotate_kernel(const S* in, std::int64_t tokens, std::int64_t heads, std::int64_t d,
                                   const S* __restrict__ cos, const S* __restrict__ sin, S* out) {
  const std::int64_t half = d / 2, groups = half / W, rows = tokens * heads, items = rows * groups;
  const bool narrow = items <= 0xffffffffLL;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += step) {
    std::int64_t row, g, t, head;
    div_mod(i, groups, narrow, row, g);
    div_mod(row, heads, narrow, t, head);
    const std::int64_t j = g * W;
    const S* xi = in + row * d;
    const S* c = cos + t * d;
    const S* s = sin + t * d;
    float a[W], b[W], c_lo[W], c_hi[W], s_lo[W], s_hi[W];
    load_group<S, W>(xi + j, a);
    load_group<S, W>(xi + j + half, b);
    load_group<S, W>(c + j, c_lo);
    load_group<S, W>(c + j + half, c_hi);
    load_group<S, W>(s + j, s_lo);
    load_group<S, W>(s + j + half, s_hi);
    float lo[W], hi[W];
#pragma unroll
    for (int k = 0; k < W; ++k) {
      if constexpr (!Inverse) {
        lo[k] = rope_low(a[k], b[k], c_lo[k], s_lo[k]);
        hi[k] = rope_high(a[k], b[k], c_hi[k], s_hi[k]);
      } else {
        lo[k] = rope_low_inverse(a[k], b[k], c_lo[k], s_hi[k]);
        hi[k] = rope_high_inverse(a[k], b[k], c_hi[k], s_lo[k]);
      }
    }
    S* yo = out + row * d;
    store_group<S, W>(yo + j, lo);
    store_group<S, W>(yo + j + half, hi);
  }
}

template <class S, bool Inverse>
status rotate(const exec_context& ctx, const char* op, const tensor& in, const tensor& cos, const tensor& sin,
              const tensor& out) {
  constexpr int V = vec_width<S>;
  const std::int64_t tokens = in.dim(0), heads = in.dim(1), d = in.dim(2);
  const std::int64_t items = tokens * heads * (d / 2);
  if (items == 0) return status::ok();
  const cudaStream_t stream = stream_of(ctx);
  const bool vector = (d / 2) % V == 0 && aligned16(in.data()) && aligned16(out.data()) && aligned16(cos.data()) &&
                      aligned16(sin.data());
  if (vector)
    rope_rotate_kernel<S, V, Inverse><<<blocks_for(items / V, threads), threads, 0, stream>>>(
        in.as<const S>(), tokens, heads, d, cos.as<const S>(), sin.as<const S>(), out.as<S>());
  else
    rope_rotate_kernel<S, 1, Inverse><<<blocks_for(items, threads), threads, 0, stream>>>(
        in.as<const S>(), tokens, heads, d, cos.as<const S>(), sin.as<const S>(), out.as<S>());
  return launch_status(op, "rope_rotate_kernel");
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status rope_inv_freq(const exec_context& ctx, const float* host_values, const tensor& inv_freq) {
  constexpr const char* op = "rope_inv_freq";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t half = inv_freq.numel();
  if (half > rope_max_half)
    return {status_code::unsupported, std::string(op) + ": " + std::to_string(half) + " frequencies, above the CUDA path's " +
                                          std::to_string(rope_max_half)};
  if (half == 0) return status::ok();
  inv_freq_values values{};
  std::copy(host_values, host_values + half, values.v);
  rope_inv_freq_kernel<<<1, 256, 0, stream_of(ctx)>>>(values, half, inv_freq.as<float>());
  return launch_status(op, "rope_inv_freq_kernel");
}

status rope_tables(const exec_context& ctx, dtype storage, const tensor& positions, const tensor& inv_freq,
                   const tensor& cos, const tensor& sin) {
  constexpr const char* op = "rope_tables";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = positions.dim(0), half = inv_freq.dim(0);
  if (n * half == 0) return status::ok();
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    rope_tables_kernel<S><<<blocks_for(n * half, threads), threads, 0, stream_of(ctx)>>>(
        positions.as<const std::int32_t>(), inv_freq.as<const float>(), n, half, cos.as<S>(), sin.as<S>());
    return launch_status(op, "rope_tables_kernel");
  });
}

status rope_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& cos, const tensor& sin,
                    const tensor& y) {
  constexpr const char* op = "rope_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    return rotate<S, false>(ctx, op, x, cos, sin, y);
  });
}

status rope_backward(const exec_context& ctx, dtype storage, const tensor& dy, const tensor& cos, const tensor& sin,
                     const tensor& dx) {
  constexpr const char* op = "rope_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    return rotate<S, true>(ctx, op, dy, cos, sin, dx);
  });
}

}  // namespace tandem::gpu::ops::cuda
