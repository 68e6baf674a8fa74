// Logit softcapping: checks and dispatch to the CPU and CUDA kernels.
#include "gpu/ops/softcap.h"

#include <string>
#include <utility>

#include "gpu/ops/cpu/softcap.h"
#include "gpu/ops/cuda/softcap.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
status softcap_forward(const exec_context& ctx, const tensor& x, double cap, const tensor& y) {
  constexpr const char* op = "softcap_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  TANDEM_RETURN_IF_ERROR(expect_shape(y, op, "y", {x.dim(0), x.dim(1)}));
  TANDEM_RETURN_IF_ERROR(expect_type(y, op, "y", x.type()));
  TANDEM_RETURN_IF_ERROR(expect_same_device(y, x, op, "y"));
  TANDEM_RETURN_IF_ERROR(require(cap > 0, op, "cap must be positive, got " + number(cap)));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::softcap_forward<T>(x.as<T>(), x.numel(), static_cast<T>(cap), y.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::softcap_forward(ctx, storage, x, cap, y)));
}

status softcap_backward(const exec_context& ctx, const tensor& x, double cap, const tensor& dy, const tensor& dx) {
  constexpr const char* op = "softcap_backward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dy, op, "dy", {x.dim(0), x.dim(1)}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dx, op, "dx", {x.dim(0), x.dim(1)}));
  for (auto [t, name] : {std::pair{&dy, "dy"}, {&dx, "dx"}}) {
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, x.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, x, op, name));
  }
  TANDEM_RETURN_IF_ERROR(require(cap > 0, op, "cap must be positive, got " + number(cap)));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::softcap_backward<T>(x.as<T>(), dy.as<T>(), x.numel(), static_cast<T>(cap), dx.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::softcap_backward(ctx, storage, x, cap, dy, dx)));
}

}  // namespace tandem::gpu::ops
