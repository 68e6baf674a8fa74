// The gated GELU activation on CUDA: element-wise maps (elementwise_map.cuh: 16-byte vectors when
// aligned; the fused [g | u] layout as strided operands, rows 2I apart), one tanhf per element
// even where the backward needs both gelu_tanh and its derivative (gated_mlp_gelu.cuh).
#include "gpu/ops/cuda/gated_mlp.h"

#include <cstdint>

#include "gpu/ops/cuda/device_math.cuh"
#include "gpu/ops/cuda/elementwise_map.cuh"
#include "gpu/ops/cuda/gated_mlp_gelu.cuh"
#include "gpu/ops/cuda/launch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops::cuda {
namespace {

// ---------------------------------------------------------------------------------------------
// kernels (the functors of the map)

/// y = gelu_tanh(x).
struct gelu_forward_op {
  __device__ void operator()(const float (&x)[1], float (&y)[1]) const { y[0] = gelu_tanh(x[0]); }
};

/// dx = gelu_tanh'(x) · dy; inputs (x, dy).
struct gelu_backward_op {
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const { y[0] = gelu_tanh_derivative(x[0]) * x[1]; }
};

/// dx = dx + gelu_tanh'(x) · dy; inputs (x, dy, dx).
struct gelu_backward_accumulate_op {
  __device__ void operator()(const float (&x)[3], float (&y)[1]) const {
    y[0] = x[2] + gelu_tanh_derivative(x[0]) * x[1];
  }
};

/// h = gelu_tanh(g) · u; inputs (g, u).
struct gated_forward_op {
  __device__ void operator()(const float (&x)[2], float (&y)[1]) const { y[0] = gelu_tanh(x[0]) * x[1]; }
};

/// (dgate, dup) = (dh · u · gelu_tanh'(g), dh · gelu_tanh(g)); inputs (g, u, dh).
struct gated_backward_op {
  __device__ void operator()(const float (&x)[3], float (&y)[2]) const {
    const gelu_and_slope g = gelu_tanh_with_slope(x[0]);
    y[0] = x[2] * x[1] * g.slope;
    y[1] = x[2] * g.value;
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// launchers

status gelu_tanh_forward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& y) {
  constexpr const char* op = "gelu_tanh_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[1] = {x.as<const S>()};
    S* out[1] = {y.as<S>()};
    return launch_map(ctx, op, "map_kernel<gelu_forward_op>", in, out, x.numel(), gelu_forward_op{});
  });
}

status gelu_tanh_backward(const exec_context& ctx, dtype storage, const tensor& x, const tensor& dy, const tensor& dx,
                          bool accumulate_dx) {
  constexpr const char* op = "gelu_tanh_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    S* out[1] = {dx.as<S>()};
    if (accumulate_dx) {
      const S* in[3] = {x.as<const S>(), dy.as<const S>(), dx.as<const S>()};
      return launch_map(ctx, op, "map_kernel<gelu_backward_accumulate_op>", in, out, x.numel(),
                        gelu_backward_accumulate_op{});
    }
    const S* in[2] = {x.as<const S>(), dy.as<const S>()};
    return launch_map(ctx, op, "map_kernel<gelu_backward_op>", in, out, x.numel(), gelu_backward_op{});
  });
}

status gated_gelu_forward(const exec_context& ctx, dtype storage, const tensor& gate, const tensor& up,
                          const tensor& h) {
  constexpr const char* op = "gated_gelu_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[2] = {gate.as<const S>(), up.as<const S>()};
    S* out[1] = {h.as<S>()};
    return launch_map(ctx, op, "map_kernel<gated_forward_op>", in, out, gate.numel(), gated_forward_op{});
  });
}

status gated_gelu_backward(const exec_context& ctx, dtype storage, const tensor& gate, const tensor& up,
                           const tensor& dh, const tensor& dgate, const tensor& dup) {
  constexpr const char* op = "gated_gelu_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* in[3] = {gate.as<const S>(), up.as<const S>(), dh.as<const S>()};
    S* out[2] = {dgate.as<S>(), dup.as<S>()};
    return launch_map(ctx, op, "map_kernel<gated_backward_op>", in, out, gate.numel(), gated_backward_op{});
  });
}

status gated_gelu_fused_forward(const exec_context& ctx, dtype storage, const tensor& gate_up, const tensor& h) {
  constexpr const char* op = "gated_gelu_fused_forward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = h.dim(0), width = h.dim(1);
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* gu = gate_up.as<const S>();
    const map_operands<S, 2, 1> m{{gu, gu + width}, {2 * width, 2 * width}, {h.as<S>()}, {width}};
    return launch_map(ctx, op, "map_kernel<gated_forward_op>", m, n, width, gated_forward_op{});
  });
}

status gated_gelu_fused_backward(const exec_context& ctx, dtype storage, const tensor& gate_up, const tensor& dh,
                                 const tensor& dgate_up) {
  constexpr const char* op = "gated_gelu_fused_backward";
  TANDEM_RETURN_IF_ERROR(use_device(ctx));
  const std::int64_t n = dh.dim(0), width = dh.dim(1);
  return with_storage(storage, op, [&](auto zero) {
    using S = decltype(zero);
    const S* gu = gate_up.as<const S>();
    S* dgu = dgate_up.as<S>();
    const map_operands<S, 3, 2> m{
        {gu, gu + width, dh.as<const S>()}, {2 * width, 2 * width, width}, {dgu, dgu + width}, {2 * width, 2 * width}};
    return launch_map(ctx, op, "map_kernel<gated_backward_op>", m, n, width, gated_backward_op{});
  });
}

}  // namespace tandem::gpu::ops::cuda
