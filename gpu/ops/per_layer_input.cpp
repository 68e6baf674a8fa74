// The PLE combination and layer gate: checks and dispatch to the CPU and CUDA kernels.
#include "gpu/ops/per_layer_input.h"

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "gpu/ops/cpu/per_layer_input.h"
#include "gpu/ops/cuda/per_layer_input.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {

using named = std::pair<const tensor*, const char*>;

// Each non-empty operand has x's dtype and device.
status same_type_and_device(const tensor& x, std::initializer_list<named> operands, std::string_view op) {
  for (auto [t, name] : operands) {
    if (t->empty()) continue;
    TANDEM_RETURN_IF_ERROR(expect_type(*t, op, name, x.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(*t, x, op, name));
  }
  return status::ok();
}

// a [N, P], ple [N, L, P] and 0 <= layer < L; also checks the [N, P] tensors in `like_a`.
status check_gate(const tensor& a, const tensor& ple, std::int64_t layer, std::initializer_list<named> like_a,
                  std::string_view op) {
  TANDEM_RETURN_IF_ERROR(expect_shape(a, op, "a", {any, any}));
  const std::int64_t n = a.dim(0), p = a.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(ple, op, "ple", {n, any, p}));
  TANDEM_RETURN_IF_ERROR(require(layer >= 0 && layer < ple.dim(1), op,
                                 "layer " + std::to_string(layer) + " is outside [0, " + std::to_string(ple.dim(1)) +
                                     ") (ple " + ple.describe() + ")"));
  for (auto [t, name] : like_a) TANDEM_RETURN_IF_ERROR(expect_shape(*t, op, name, {n, p}));
  return status::ok();
}

}  // namespace

status ple_combine_forward(const exec_context& ctx, const tensor& c, const tensor& t, const tensor& ple) {
  constexpr const char* op = "ple_combine_forward";
  TANDEM_RETURN_IF_ERROR(expect_shape(c, op, "c", {any, any}));
  TANDEM_RETURN_IF_ERROR(expect_shape(t, op, "t", {c.dim(0), c.dim(1)}));
  TANDEM_RETURN_IF_ERROR(expect_shape(ple, op, "ple", {c.dim(0), c.dim(1)}));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(c, {{&t, "t"}, {&ple, "ple"}}, op));
  return dispatch_float(ctx, op, c, [&](auto zero) {
    using T = decltype(zero);
    cpu::ple_combine_forward<T>(c.as<T>(), t.as<T>(), c.numel(), ple.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::ple_combine_forward(ctx, storage, c, t, ple)));
}

status ple_combine_backward(const exec_context& ctx, const tensor& dple, const tensor& dc, const tensor& dt) {
  constexpr const char* op = "ple_combine_backward";
  TANDEM_RETURN_IF_ERROR(expect_shape(dple, op, "dple", {any, any}));
  if (!dc.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(dc, op, "dc", {dple.dim(0), dple.dim(1)}));
  if (!dt.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(dt, op, "dt", {dple.dim(0), dple.dim(1)}));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(dple, {{&dc, "dc"}, {&dt, "dt"}}, op));
  return dispatch_float(ctx, op, dple, [&](auto zero) {
    using T = decltype(zero);
    cpu::ple_combine_backward<T>(dple.as<T>(), dple.numel(), dc.empty() ? nullptr : dc.as<T>(),
                                 dt.empty() ? nullptr : dt.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::ple_combine_backward(ctx, storage, dple, dc, dt)));
}

status ple_gate_forward(const exec_context& ctx, const tensor& a, const tensor& ple, std::int64_t layer, const tensor& g) {
  constexpr const char* op = "ple_gate_forward";
  TANDEM_RETURN_IF_ERROR(check_gate(a, ple, layer, {{&g, "g"}}, op));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(a, {{&ple, "ple"}, {&g, "g"}}, op));
  return dispatch_float(ctx, op, a, [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t layers = ple.dim(1), p = a.dim(1);
    cpu::ple_gate_forward<T>(a.as<T>(), ple.as<T>() + layer * p, layers * p, a.dim(0), p, g.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::ple_gate_forward(ctx, storage, a, ple, layer, g)));
}

status ple_gate_backward(const exec_context& ctx, const tensor& a, const tensor& ple, std::int64_t layer, const tensor& dg, const tensor& da,
                         const tensor& d_ple) {
  constexpr const char* op = "ple_gate_backward";
  TANDEM_RETURN_IF_ERROR(check_gate(a, ple, layer, {{&dg, "dg"}, {&da, "da"}}, op));
  TANDEM_RETURN_IF_ERROR(expect_shape(d_ple, op, "d_ple", {ple.dim(0), ple.dim(1), ple.dim(2)}));
  TANDEM_RETURN_IF_ERROR(same_type_and_device(a, {{&ple, "ple"}, {&dg, "dg"}, {&da, "da"}, {&d_ple, "d_ple"}}, op));
  return dispatch_float(ctx, op, a, [&](auto zero) {
    using T = decltype(zero);
    const std::int64_t layers = ple.dim(1), p = a.dim(1);
    cpu::ple_gate_backward<T>(a.as<T>(), ple.as<T>() + layer * p, layers * p, dg.as<T>(), a.dim(0), p, da.as<T>(),
                              d_ple.as<T>() + layer * p);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::ple_gate_backward(ctx, storage, a, ple, layer, dg, da, d_ple)));
}

}  // namespace tandem::gpu::ops
