// The gated GELU activation: checks and dispatch to the CPU and CUDA kernels.
#include "gpu/ops/gated_mlp.h"

#include <initializer_list>
#include <string_view>
#include <utility>

#include "gpu/ops/cpu/gated_mlp.h"
#include "gpu/ops/cuda/gated_mlp.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {

using named = std::pair<const tensor*, const char*>;

// Each operand has x's dtype and device.
status same_type_and_device(const tensor& x, std::initializer_list<named> operands, std::string_view op) {
  for (auto [t, name] : operands) {
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, x.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, x, op, name));
  }
  return status::ok();
}

}  // namespace

status gelu_tanh_forward(const exec_context& ctx, const tensor& x, const tensor& y) {
  constexpr const char* op = "gelu_tanh_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  TANDEM_RETURN_IF_ERROR(expect_shape(y, op, "y", {x.dim(0), x.dim(1)}));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(x, {{&y, "y"}}, op));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::gelu_tanh_forward<T>(x.as<T>(), x.numel(), y.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::gelu_tanh_forward(ctx, storage, x, y)));
}

status gelu_tanh_backward(const exec_context& ctx, const tensor& x, const tensor& dy, const tensor& dx, bool accumulate_dx) {
  constexpr const char* op = "gelu_tanh_backward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dy, op, "dy", {x.dim(0), x.dim(1)}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dx, op, "dx", {x.dim(0), x.dim(1)}));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(x, {{&dy, "dy"}, {&dx, "dx"}}, op));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::gelu_tanh_backward<T>(x.as<T>(), dy.as<T>(), x.numel(), dx.as<T>(), accumulate_dx);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::gelu_tanh_backward(ctx, storage, x, dy, dx, accumulate_dx)));
}

status gated_gelu_forward(const exec_context& ctx, const tensor& gate, const tensor& up, const tensor& h) {
  constexpr const char* op = "gated_gelu_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(gate, op, "gate", {any, any}));
  const std::int64_t n = gate.dim(0), width = gate.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(up, op, "up", {n, width}));
  TANDEM_RETURN_IF_ERROR(expect_shape(h, op, "h", {n, width}));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(gate, {{&up, "up"}, {&h, "h"}}, op));
  return dispatch_float(ctx, op, gate, [&](auto zero) {
    using T = decltype(zero);
    cpu::gated_gelu_forward<T>(gate.as<T>(), up.as<T>(), width, n, width, h.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::gated_gelu_forward(ctx, storage, gate, up, h)));
}

status gated_gelu_backward(const exec_context& ctx, const tensor& gate, const tensor& up, const tensor& dh, const tensor& dgate,
                           const tensor& dup) {
  constexpr const char* op = "gated_gelu_backward";
  TANDEM_RETURN_IF_ERROR(expect_shape(gate, op, "gate", {any, any}));
  const std::int64_t n = gate.dim(0), width = gate.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(up, op, "up", {n, width}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dh, op, "dh", {n, width}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dgate, op, "dgate", {n, width}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dup, op, "dup", {n, width}));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(gate, {{&up, "up"}, {&dh, "dh"}, {&dgate, "dgate"}, {&dup, "dup"}}, op));
  return dispatch_float(ctx, op, gate, [&](auto zero) {
    using T = decltype(zero);
    cpu::gated_gelu_backward<T>(gate.as<T>(), up.as<T>(), width, dh.as<T>(), n, width, dgate.as<T>(), dup.as<T>(),
                                width);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::gated_gelu_backward(ctx, storage, gate, up, dh, dgate, dup)));
}

status gated_gelu_fused_forward(const exec_context& ctx, const tensor& gate_up, const tensor& h) {
  constexpr const char* op = "gated_gelu_fused_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(gate_up, op, "gate_up", {any, any}));
  const std::int64_t n = gate_up.dim(0), width = gate_up.dim(1) / 2;
  TANDEM_RETURN_IF_ERROR(require(gate_up.dim(1) % 2 == 0, op,
                                 "gate_up: expected an even width [gate | up], got " + gate_up.describe()));
  TANDEM_RETURN_IF_ERROR(expect_shape(h, op, "h", {n, width}));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(gate_up, {{&h, "h"}}, op));
  return dispatch_float(ctx, op, gate_up, [&](auto zero) {
    using T = decltype(zero);
    const T* gu = gate_up.as<T>();
    cpu::gated_gelu_forward<T>(gu, gu + width, 2 * width, n, width, h.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::gated_gelu_fused_forward(ctx, storage, gate_up, h)));
}

status gated_gelu_fused_backward(const exec_context& ctx, const tensor& gate_up, const tensor& dh, const tensor& dgate_up) {
  constexpr const char* op = "gated_gelu_fused_backward";
  TANDEM_RETURN_IF_ERROR(expect_shape(gate_up, op, "gate_up", {any, any}));
  const std::int64_t n = gate_up.dim(0), width = gate_up.dim(1) / 2;
  TANDEM_RETURN_IF_ERROR(require(gate_up.dim(1) % 2 == 0, op,
                                 "gate_up: expected an even width [gate | up], got " + gate_up.describe()));
  TANDEM_RETURN_IF_ERROR(expect_shape(dh, op, "dh", {n, width}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dgate_up, op, "dgate_up", {n, 2 * width}));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(gate_up, {{&dh, "dh"}, {&dgate_up, "dgate_up"}}, op));
  return dispatch_float(ctx, op, gate_up, [&](auto zero) {
    using T = decltype(zero);
    const T* gu = gate_up.as<T>();
    T* dgu = dgate_up.as<T>();
    cpu::gated_gelu_backward<T>(gu, gu + width, 2 * width, dh.as<T>(), n, width, dgu, dgu + width, 2 * width);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::gated_gelu_fused_backward(ctx, storage, gate_up, dh, dgate_up)));
}

}  // namespace tandem::gpu::ops
