// The PLE combination and layer gate on CUDA: element-wise maps (elementwise_map.cuh: 16-byte
// vectors when aligned); the layer slice of ple / d_ple is a strided operand (rows L·P apart), so
// the gate reads and writes that slice only.
#include "gpu/ops/cuda/per_layer_input.h"

#include <cstdint>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/elementwise_map.cuh"
#include "gpu/ops/cuda/gated_mlp_gelu.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

// 2^(−1/2), a Python float in the model, applied in float32 (the CPU float path's constant).
constexpr float inv_sqrt2 = 0.70710678118654752440f;

// ---------------------------------------------------------------------------------------------
// kernels (the functors of the map)

/// ple = (c + t) · 2^(−1/2), the sum first; inputs (c, t).
struct combine_forward_op {
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const { y[0] = (x[0] + x[1]) * inv_sqrt2; }
};

/// Every output = dple · 2^(−1/2).
template <int Out>
struct combine_backward_op {
  __device__ void operator()(const float (&x)[1], float (&y)[Out]) const {
#pragma unroll
    for (int k = 0; k < Out; ++k) y[k] = x[0] * inv_sqrt2;
  }
};

/// g = gelu_tanh(a) · e; inputs (a, e = ple_l).
struct gate_forward_op {
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const { y[0] = gelu_tanh(x[0]) * x[1]; }
};

/// (da, d_ple_l) = (gelu_tanh'(a) · e · dg, gelu_tanh(a) · dg); inputs (a, e, dg).
struct gate_backward_op {
  __device__ void operator()(const float (&x)[3], float (&y)[2]) const {
    const gelu_and_slope g = gelu_tanh_with_slope(x[0]);
    y[0] = g.slope * x[1] * x[2];
    y[1] = g.value * x[2];
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status ple_combine_forward(const exec_context& ctx, dtype storage, const tensor& c, const tensor& t,
                           const tensor& ple) {
  constexpr const char* op = "ple_combine_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[2] = {c.as<const S>(), t.as<const S>()};
    S* out[1] = {ple.as<S>()};
    return launch_map(ctx, op, "map_kernel<combine_forward_op>", in, out, c.numel(), combine_forward_op{});
  });
}

status ple_combine_backward(const exec_context& ctx, dtype storage, const tensor& dple, const tensor& dc,
                            const tensor& dt) {
  constexpr const char* op = "ple_combine_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  if (dc.empty() && dt.empty()) return status::ok();
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[1] = {dple.as<const S>()};
    if (!dc.empty() && !dt.empty()) {
      S* out[2] = {dc.as<S>(), dt.as<S>()};
      return launch_map(ctx, op, "map_kernel<combine_backward_op<2>>", in, out, dple.numel(),
                        combine_backward_op<2>{});
    }
    S* out[1] = {dc.empty() ? dt.as<S>() : dc.as<S>()};
    return launch_map(ctx, op, "map_kernel<combine_backward_op<1>>", in, out, dple.numel(), combine_backward_op<1>{});
  });
}

status ple_gate_forward(const exec_context& ctx, dtype storage, const tensor& a, const tensor& ple,
                        std::int64_t layer, const tensor& g) {
  constexpr const char* op = "ple_gate_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = a.dim(0), p = a.dim(1), ple_stride = ple.dim(1) * p;
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const map_operands<S, 2, 1> m{{a.as<const S>(), ple.as<const S>() + layer * p}, {p, ple_stride}, {g.as<S>()}, {p}};
    return launch_map(ctx, op, "map_kernel<gate_forward_op>", m, n, p, gate_forward_op{});
  });
}

status ple_gate_backward(const exec_context& ctx, dtype storage, const tensor& a, const tensor& ple,
                         std::int64_t layer, const tensor& dg, const tensor& da, const tensor& d_ple) {
  constexpr const char* op = "ple_gate_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = a.dim(0), p = a.dim(1), ple_stride = ple.dim(1) * p;
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const map_operands<S, 3, 2> m{{a.as<const S>(), ple.as<const S>() + layer * p, dg.as<const S>()},
                                  {p, ple_stride, p},
                                  {da.as<S>(), d_ple.as<S>() + layer * p},
                                  {p, ple_stride}};
    return launch_map(ctx, op, "map_kernel<gate_backward_op>", m, n, p, gate_backward_op{});
  });
}

}  // namespace tandem::gpu::ops::cuda
