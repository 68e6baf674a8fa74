// RMSNorm: checks and dispatch to the CPU kernels.
#include "gpu/ops/rmsnorm.h"

#include <string>
#include <utility>

#include "gpu/ops/cpu/rmsnorm.h"
#include "gpu/ops/cuda/rmsnorm.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
status rmsnorm_forward(const exec_context& ctx, const tensor& x, const tensor& w, double eps, const tensor& y, const tensor& inv_rms) {
  constexpr const char* op = "rmsnorm_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  const std::int64_t rows = x.dim(0), d = x.dim(1);
  if (!w.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(w, op, "w", {d}));
  TANDEM_RETURN_IF_ERROR(expect_shape(y, op, "y", {rows, d}));
  if (!inv_rms.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(inv_rms, op, "inv_rms", {rows}));
  TANDEM_RETURN_IF_ERROR(require(eps >= 0, op, "eps must not be negative, got " + number(eps)));
  for (auto [t, name] : {std::pair{&w, "w"}, {&y, "y"}, {&inv_rms, "inv_rms"}}) {
    if (t->empty()) continue;
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, t == &inv_rms ? statistics_type(x.type()) : x.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, x, op, name));
  }
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::rmsnorm_forward<T>(x.as<T>(), w.empty() ? nullptr : w.as<T>(), rows, d, static_cast<T>(eps), y.as<T>(),
                            inv_rms.empty() ? nullptr : inv_rms.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::rmsnorm_forward(ctx, storage, x, w, eps, y, inv_rms)));
}

status rmsnorm_backward(const exec_context& ctx, const tensor& x, const tensor& w, const tensor& inv_rms, const tensor& dy, const tensor& dx,
                        const tensor& dw, bool accumulate_dx) {
  constexpr const char* op = "rmsnorm_backward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  const std::int64_t rows = x.dim(0), d = x.dim(1);
  if (!w.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(w, op, "w", {d}));
  TANDEM_RETURN_IF_ERROR(expect_shape(inv_rms, op, "inv_rms", {rows}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dy, op, "dy", {rows, d}));
  if (!dx.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(dx, op, "dx", {rows, d}));
  if (!dw.empty()) {
    TANDEM_RETURN_IF_ERROR(require(!w.empty(), op, "dw: given for a scale-less norm (w is empty)"));
    TANDEM_RETURN_IF_ERROR(expect_shape(dw, op, "dw", {d}));
  }
  for (auto [t, name] : {std::pair{&w, "w"}, {&inv_rms, "inv_rms"}, {&dy, "dy"}, {&dx, "dx"}, {&dw, "dw"}}) {
    if (t->empty()) continue;
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, t == &inv_rms ? statistics_type(x.type()) : x.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, x, op, name));
  }
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::rmsnorm_backward<T>(x.as<T>(), w.empty() ? nullptr : w.as<T>(), inv_rms.as<T>(), dy.as<T>(), rows, d,
                             dx.empty() ? nullptr : dx.as<T>(), dw.empty() ? nullptr : dw.as<T>(), accumulate_dx);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::rmsnorm_backward(ctx, storage, x, w, inv_rms, dy, dx, dw, accumulate_dx)));
}

}  // namespace tandem::gpu::ops
