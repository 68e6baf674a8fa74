// Element-wise arithmetic: checks and dispatch to the CPU and CUDA kernels.
#include "gpu/ops/elementwise.h"

#include "gpu/ops/cpu/elementwise.h"
#include "gpu/ops/cuda/elementwise.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {

status like(const tensor& t, const tensor& x, const char* op, const char* name) {
  TANDEM_RETURN_IF_ERROR(expect_shape(t, op, name, {x.dim(0), x.dim(1)}));
  TANDEM_RETURN_IF_ERROR(expect_type(t, op, name, x.type()));
  return expect_same_device(t, x, op, name);
}

status scalar(const tensor& s, const tensor& x, const char* op, const char* name) {
  TANDEM_RETURN_IF_ERROR(expect_shape(s, op, name, {1}));
  TANDEM_RETURN_IF_ERROR(expect_type(s, op, name, x.type()));
  return expect_same_device(s, x, op, name);
}

}  // namespace

status add_forward(const exec_context& ctx, const tensor& a, const tensor& b, const tensor& y) {
  constexpr const char* op = "add_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(a, op, "a", {any, any}));
  TANDEM_RETURN_IF_ERROR(like(b, a, op, "b"));
  TANDEM_RETURN_IF_ERROR(like(y, a, op, "y"));
  return dispatch_float(ctx, op, a, [&](auto zero) {
    using T = decltype(zero);
    cpu::add_forward<T>(a.as<T>(), b.as<T>(), a.numel(), y.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::add_forward(ctx, storage, a, b, y)));
}

status scale_forward(const exec_context& ctx, const tensor& x, double s, const tensor& y) {
  constexpr const char* op = "scale_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  TANDEM_RETURN_IF_ERROR(like(y, x, op, "y"));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::scale_forward<T>(x.as<T>(), static_cast<T>(s), x.numel(), y.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::scale_forward(ctx, storage, x, s, y)));
}

status scale_by_forward(const exec_context& ctx, const tensor& x, const tensor& s, const tensor& y) {
  constexpr const char* op = "scale_by_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  TANDEM_RETURN_IF_ERROR(scalar(s, x, op, "s"));
  TANDEM_RETURN_IF_ERROR(like(y, x, op, "y"));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::scale_forward<T>(x.as<T>(), *s.as<T>(), x.numel(), y.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::scale_by_forward(ctx, storage, x, s, y)));
}

status scale_by_backward(const exec_context& ctx, const tensor& x, const tensor& s, const tensor& dy, const tensor& dx, const tensor& ds) {
  constexpr const char* op = "scale_by_backward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  TANDEM_RETURN_IF_ERROR(scalar(s, x, op, "s"));
  TANDEM_RETURN_IF_ERROR(like(dy, x, op, "dy"));
  if (!dx.empty()) TANDEM_RETURN_IF_ERROR(like(dx, x, op, "dx"));
  if (!ds.empty()) TANDEM_RETURN_IF_ERROR(scalar(ds, x, op, "ds"));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    if (!ds.empty()) *ds.as<T>() += static_cast<T>(cpu::dot<T>(x.as<T>(), dy.as<T>(), x.numel()));
    if (!dx.empty()) cpu::scale_forward<T>(dy.as<T>(), *s.as<T>(), x.numel(), dx.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::scale_by_backward(ctx, storage, x, s, dy, dx, ds)));
}

}  // namespace tandem::gpu::ops
