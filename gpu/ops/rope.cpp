// RoPE: parameter and argument checks, then dispatch to the CPU and CUDA kernels.
#include "gpu/ops/rope.h"

#include <cmath>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpu/ops/cpu/rope.h"
#include "gpu/ops/cuda/rope.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {


// The shared checks of rope_forward and rope_backward: in [tokens, heads, d], d even, tables
// [tokens, d], out like in, one dtype, one device.
status check_rotation(const tensor& in, const tensor& cos, const tensor& sin, const tensor& out, std::string_view op,
                      const char* in_name, const char* out_name) {
  TANDEM_RETURN_IF_ERROR(expect_shape(in, op, in_name, {any, any, any}));
  const std::int64_t tokens = in.dim(0), heads = in.dim(1), d = in.dim(2);
  TANDEM_RETURN_IF_ERROR(require(d % 2 == 0, op, std::string(in_name) + ": head dim " + std::to_string(d) +
                                                     " is odd (the half-split rotation pairs j with j + d/2)"));
  TANDEM_RETURN_IF_ERROR(expect_shape(cos, op, "cos", {tokens, d}));
  TANDEM_RETURN_IF_ERROR(expect_shape(sin, op, "sin", {tokens, d}));
  TANDEM_RETURN_IF_ERROR(expect_shape(out, op, out_name, {tokens, heads, d}));
  for (auto [t, name] : {std::pair{&cos, "cos"}, {&sin, "sin"}, {&out, out_name}}) {
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, in.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, in, op, name));
  }
  return status::ok();
}

}  // namespace

status rope_inv_freq(const exec_context& ctx, const rope_parameters& p, std::int64_t head_dim, const tensor& inv_freq) {
  constexpr const char* op = "rope_inv_freq";
  TANDEM_RETURN_IF_ERROR(require(head_dim > 0 && head_dim % 2 == 0, op,
                                 "head_dim must be even and positive, got " + std::to_string(head_dim)));
  TANDEM_RETURN_IF_ERROR(require(p.theta > 0, op, "theta must be positive, got " + number(p.theta)));
  const bool proportional = p.kind == rope_kind::proportional;
  if (proportional) {
    TANDEM_RETURN_IF_ERROR(require(p.partial_rotary_factor >= 0 && p.partial_rotary_factor <= 1, op,
                                   "partial_rotary_factor must lie in [0, 1], got " +
                                       number(p.partial_rotary_factor)));
    TANDEM_RETURN_IF_ERROR(require(p.factor > 0, op, "factor must be positive, got " + number(p.factor)));
  }
  TANDEM_RETURN_IF_ERROR(expect_shape(inv_freq, op, "inv_freq", {head_dim / 2}));
  TANDEM_RETURN_IF_ERROR(expect_type(inv_freq, op, "inv_freq", dtype::float32));
  TANDEM_RETURN_IF_ERROR(on_backend(ctx, op, inv_freq));
  const std::int64_t half = head_dim / 2;
  // Python's int(partial_rotary_factor * d // 2): floor of the float product over 2.
  const std::int64_t rotated =
      proportional ? static_cast<std::int64_t>(std::floor(p.partial_rotary_factor * static_cast<double>(head_dim) / 2))
                   : half;
  const float theta = static_cast<float>(p.theta), factor = proportional ? static_cast<float>(p.factor) : 1.0f;
  if (ctx.dev.is_cpu()) {
    cpu::rope_inv_freq(half, head_dim, rotated, theta, factor, inv_freq.as<float>());
    return status::ok();
  }
  // CUDA: the same float32 values computed on the host, then copied into the device tensor.
  std::vector<float> values(static_cast<std::size_t>(half));
  cpu::rope_inv_freq(half, head_dim, rotated, theta, factor, values.data());
  return TANDEM_ON_CUDA(cuda::rope_inv_freq(ctx, values.data(), inv_freq))(dtype::float32);
}

status rope_tables(const exec_context& ctx, const tensor& positions, const tensor& inv_freq, const tensor& cos, const tensor& sin) {
  constexpr const char* op = "rope_tables";
  TANDEM_RETURN_IF_ERROR(expect_shape(positions, op, "positions", {any}));
  const std::int64_t n = positions.dim(0);
  TANDEM_RETURN_IF_ERROR(expect_shape(inv_freq, op, "inv_freq", {any}));
  const std::int64_t half = inv_freq.dim(0);
  TANDEM_RETURN_IF_ERROR(expect_shape(cos, op, "cos", {n, 2 * half}));
  TANDEM_RETURN_IF_ERROR(expect_shape(sin, op, "sin", {n, 2 * half}));
  TANDEM_RETURN_IF_ERROR(expect_type(positions, op, "positions", dtype::int32));
  TANDEM_RETURN_IF_ERROR(expect_type(inv_freq, op, "inv_freq", dtype::float32));
  TANDEM_RETURN_IF_ERROR(expect_type(sin, op, "sin", cos.type()));
  for (auto [t, name] : {std::pair{&positions, "positions"}, {&inv_freq, "inv_freq"}, {&sin, "sin"}})
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, cos, op, name));
  return dispatch_float(ctx, op, cos, [&](auto zero) {
    using T = decltype(zero);
    const std::int32_t* pos = positions.as<std::int32_t>();
    for (std::int64_t t = 0; t < n; ++t)
      TANDEM_RETURN_IF_ERROR(require(pos[t] >= 0, op,
                                     "positions: entry " + std::to_string(t) + " holds " + std::to_string(pos[t]) +
                                         ", expected >= 0"));
    cpu::rope_tables<T>(pos, n, inv_freq.as<float>(), half, cos.as<T>(), sin.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::rope_tables(ctx, storage, positions, inv_freq, cos, sin)));
}

status rope_forward(const exec_context& ctx, const tensor& x, const tensor& cos, const tensor& sin, const tensor& y) {
  constexpr const char* op = "rope_forward";
  TANDEM_RETURN_IF_ERROR(check_rotation(x, cos, sin, y, op, "x", "y"));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::rope_rotate<T>(x.as<T>(), x.dim(0), x.dim(1), x.dim(2), cos.as<T>(), sin.as<T>(), y.as<T>(), false);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::rope_forward(ctx, storage, x, cos, sin, y)));
}

status rope_backward(const exec_context& ctx, const tensor& dy, const tensor& cos, const tensor& sin, const tensor& dx) {
  constexpr const char* op = "rope_backward";
  TANDEM_RETURN_IF_ERROR(check_rotation(dy, cos, sin, dx, op, "dy", "dx"));
  return dispatch_float(ctx, op, dy, [&](auto zero) {
    using T = decltype(zero);
    cpu::rope_rotate<T>(dy.as<T>(), dy.dim(0), dy.dim(1), dy.dim(2), cos.as<T>(), sin.as<T>(), dx.as<T>(), true);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::rope_backward(ctx, storage, dy, cos, sin, dx)));
}

}  // namespace tandem::gpu::ops
