// RMSNorm and the residual step around it: checks and dispatch to the CPU and CUDA kernels.
#include "gpu/ops/rmsnorm.h"

#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "gpu/ops/cpu/elementwise.h"
#include "gpu/ops/cpu/rmsnorm.h"
#include "gpu/ops/cpu/rope.h"
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

status rmsnorm_rope_forward(const exec_context& ctx, const tensor& x, const tensor& w, double eps, const tensor& cos,
                            const tensor& sin, const tensor& y, const tensor& inv_rms) {
  constexpr const char* op = "rmsnorm_rope_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any, any}));
  const std::int64_t tokens = x.dim(0), heads = x.dim(1), d = x.dim(2);
  TANDEM_RETURN_IF_ERROR(require(d % 2 == 0, op, "x: head dim " + std::to_string(d) +
                                                     " is odd (the half-split rotation pairs j with j + d/2)"));
  TANDEM_RETURN_IF_ERROR(expect_shape(w, op, "w", {d}));
  TANDEM_RETURN_IF_ERROR(expect_shape(cos, op, "cos", {tokens, d}));
  TANDEM_RETURN_IF_ERROR(expect_shape(sin, op, "sin", {tokens, d}));
  TANDEM_RETURN_IF_ERROR(expect_shape(y, op, "y", {tokens, heads, d}));
  if (!inv_rms.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(inv_rms, op, "inv_rms", {tokens * heads}));
  TANDEM_RETURN_IF_ERROR(require(eps >= 0, op, "eps must not be negative, got " + number(eps)));
  for (auto [t, name] : {std::pair{&w, "w"}, {&cos, "cos"}, {&sin, "sin"}, {&y, "y"}, {&inv_rms, "inv_rms"}}) {
    if (t->empty()) continue;
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, t == &inv_rms ? statistics_type(x.type()) : x.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, x, op, name));
  }
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::rmsnorm_forward<T>(x.as<T>(), w.as<T>(), tokens * heads, d, static_cast<T>(eps), y.as<T>(),
                            inv_rms.empty() ? nullptr : inv_rms.as<T>());
    cpu::rope_rotate<T>(y.as<T>(), tokens, heads, d, cos.as<T>(), sin.as<T>(), y.as<T>(), false);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::rmsnorm_rope_forward(ctx, storage, x, w, eps, cos, sin, y, inv_rms)));
}

status residual_norm_forward(const exec_context& ctx, const residual_norm_io& io, double eps) {
  constexpr const char* op = "residual_norm_forward";
  const tensor& x = io.x;
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  const std::int64_t rows = x.dim(0), d = x.dim(1);
  TANDEM_RETURN_IF_ERROR(require(eps >= 0, op, "eps must not be negative, got " + number(eps)));
  TANDEM_RETURN_IF_ERROR(require(!io.scale.empty() == !io.pre_scale.empty(), op,
                                 "pre_scale is given exactly when scale is (the backward needs the sum before the scale)"));
  TANDEM_RETURN_IF_ERROR(require(!io.next_w.empty() == !io.next.empty(), op, "next is given exactly when next_w is"));
  TANDEM_RETURN_IF_ERROR(require(io.next_inv_rms.empty() || !io.next_w.empty(), op, "next_inv_rms is given without next_w"));
  enum class form { columns, matrix, per_row, scalar };  // [d], [rows, d], [rows], [1]
  struct want {
    const tensor* t;
    const char* name;
    form shape;
    bool required, statistic;
  };
  const want wants[] = {{&io.w, "w", form::columns, true, false},
                        {&io.residual, "residual", form::matrix, true, false},
                        {&io.out, "out", form::matrix, true, false},
                        {&io.inv_rms, "inv_rms", form::per_row, false, true},
                        {&io.branch, "branch", form::matrix, false, false},
                        {&io.scale, "scale", form::scalar, false, false},
                        {&io.pre_scale, "pre_scale", form::matrix, false, false},
                        {&io.next_w, "next_w", form::columns, false, false},
                        {&io.next, "next", form::matrix, false, false},
                        {&io.next_inv_rms, "next_inv_rms", form::per_row, false, true}};
  for (const want& w : wants) {
    if (w.t->empty()) {
      TANDEM_RETURN_IF_ERROR(require(!w.required, op, std::string(w.name) + " is required"));
      continue;
    }
    switch (w.shape) {
      case form::columns: TANDEM_RETURN_IF_ERROR(expect_shape(*w.t, op, w.name, {d})); break;
      case form::matrix: TANDEM_RETURN_IF_ERROR(expect_shape(*w.t, op, w.name, {rows, d})); break;
      case form::per_row: TANDEM_RETURN_IF_ERROR(expect_shape(*w.t, op, w.name, {rows})); break;
      case form::scalar: TANDEM_RETURN_IF_ERROR(expect_shape(*w.t, op, w.name, {1})); break;
    }
    TANDEM_RETURN_IF_ERROR(expect_type(*w.t, op, w.name, w.statistic ? statistics_type(x.type()) : x.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(*w.t, x, op, w.name));
  }
  // Outputs apart from the inputs and from each other, but out over residual (read before written).
  const std::pair<const tensor*, const char*> inputs[] = {{&io.x, "x"}, {&io.w, "w"}, {&io.residual, "residual"},
                                                          {&io.scale, "scale"}, {&io.next_w, "next_w"}};
  const std::pair<const tensor*, const char*> outputs[] = {{&io.out, "out"}, {&io.inv_rms, "inv_rms"},
                                                           {&io.branch, "branch"}, {&io.pre_scale, "pre_scale"},
                                                           {&io.next, "next"}, {&io.next_inv_rms, "next_inv_rms"}};
  for (std::size_t i = 0; i < std::size(outputs); ++i) {
    const auto [o, oname] = outputs[i];
    if (o->empty()) continue;
    for (const auto& [t, name] : inputs)
      if (!t->empty() && t->data() == o->data() && !(o == &io.out && t == &io.residual))
        return require(false, op, std::string(oname) + " shares memory with " + name + " (only out may be residual)");
    for (std::size_t j = 0; j < i; ++j)
      if (!outputs[j].first->empty() && outputs[j].first->data() == o->data())
        return require(false, op, std::string(oname) + " shares memory with " + outputs[j].second);
  }
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t n = rows * d;
    std::vector<T> own_branch(io.branch.empty() ? static_cast<std::size_t>(n) : 0);
    T* branch = io.branch.empty() ? own_branch.data() : io.branch.as<T>();
    cpu::rmsnorm_forward<T>(x.as<T>(), io.w.as<T>(), rows, d, static_cast<T>(eps), branch,
                            io.inv_rms.empty() ? nullptr : io.inv_rms.as<T>());
    T* sum = io.scale.empty() ? io.out.as<T>() : io.pre_scale.as<T>();
    cpu::add_forward<T>(io.residual.as<T>(), branch, n, sum);
    if (!io.scale.empty()) cpu::scale_forward<T>(sum, *io.scale.as<T>(), n, io.out.as<T>());
    if (!io.next_w.empty())
      cpu::rmsnorm_forward<T>(io.out.as<T>(), io.next_w.as<T>(), rows, d, static_cast<T>(eps), io.next.as<T>(),
                              io.next_inv_rms.empty() ? nullptr : io.next_inv_rms.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::residual_norm_forward(ctx, storage, io, eps)));
}

}  // namespace tandem::gpu::ops
