// MoE block: argument checks (shapes, dtypes, devices, top-k and expert index ranges), then dispatch
// to the CPU reference kernels in gpu/ops/cpu/moe.cpp or the CUDA kernels in gpu/ops/cuda/moe*.cu.
#include "gpu/ops/moe.h"

#include <string>

#include "gpu/ops/cpu/moe.h"
#include "gpu/ops/cuda/moe.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {

/// Every non-empty tensor in `floats` has x's dtype and every tensor x's device.
struct named {
  const char* name;
  const tensor& t;
};

status expect_operands(std::string_view op, const tensor& x, std::initializer_list<named> floats,
                       const tensor& indices) {
  for (const named& f : floats) {
    if (f.t.empty()) continue;
    TANDEM_RETURN_IF_ERROR(expect_type(f.t, op, f.name, x.type()));
    TANDEM_RETURN_IF_ERROR(expect_same_device(f.t, x, op, f.name));
  }
  TANDEM_RETURN_IF_ERROR(expect_type(indices, op, "indices", dtype::int32));
  return expect_same_device(indices, x, op, "indices");
}

/// inv_rms, a saved statistic: statistics_type(x's dtype) (float32 next to bfloat16), x's device.
status expect_statistic(std::string_view op, const tensor& x, const tensor& inv_rms) {
  if (inv_rms.empty()) return status::ok();
  TANDEM_RETURN_IF_ERROR(expect_type(inv_rms, op, "inv_rms", statistics_type(x.type())));
  return expect_same_device(inv_rms, x, op, "inv_rms");
}

/// 1 <= K <= E.
status expect_top_k(std::string_view op, std::int64_t k, std::int64_t e) {
  return require(k >= 1 && k <= e, op,
                 "top_k K = " + std::to_string(k) + " must lie in [1, E = " + std::to_string(e) + "]");
}

/// Every index in [0, E). Host tensors only: device indices are checked by the device kernels.
status expect_indices_in_range(std::string_view op, const tensor& indices, std::int64_t e) {
  if (!indices.dev().is_cpu()) return status::ok();
  const std::int32_t* v = indices.as<std::int32_t>();
  const std::int64_t k = indices.dim(1);
  for (std::int64_t i = 0; i < indices.numel(); ++i)
    if (v[i] < 0 || v[i] >= e)
      return require(false, op,
                     "indices: value " + std::to_string(v[i]) + " at [" + std::to_string(i / k) + ", " +
                         std::to_string(i % k) + "] is out of range [0, " + std::to_string(e) + ")");
  return status::ok();
}

/// Shapes shared by the experts' forward and backward; fills d.
status check_experts(std::string_view op, const tensor& y, const tensor& gate_up, const tensor& down,
                     const tensor& weights, const tensor& indices, cpu::moe_dims& d) {
  TANDEM_RETURN_IF_ERROR(expect_shape(y, op, "y", {any, any}));
  d.tokens = y.dim(0);
  d.hidden = y.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(gate_up, op, "gate_up", {any, any, d.hidden}));
  d.experts = gate_up.dim(0);
  TANDEM_RETURN_IF_ERROR(
      require(gate_up.dim(1) % 2 == 0, op, "gate_up: expected an even row count 2 * Im, got " + gate_up.describe()));
  d.intermediate = gate_up.dim(1) / 2;
  TANDEM_RETURN_IF_ERROR(expect_shape(down, op, "down", {d.experts, d.hidden, d.intermediate}));
  TANDEM_RETURN_IF_ERROR(expect_shape(weights, op, "weights", {d.tokens, any}));
  d.top_k = weights.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(indices, op, "indices", {d.tokens, d.top_k}));
  return expect_top_k(op, d.top_k, d.experts);
}

template <class T>
T* optional(const tensor& t) {
  return t.empty() ? nullptr : t.as<T>();
}

/// The router's input and parameter shapes, shared by forward and backward: tokens, hidden and
/// experts into `d`.
status router_parameter_dims(const char* op, const tensor& x, const tensor& router_scale, const tensor& proj,
                             const tensor& per_expert_scale, cpu::moe_dims& d) {
  TANDEM_RETURN_IF_ERROR(expect_shape(x, op, "x", {any, any}));
  d.tokens = x.dim(0);
  d.hidden = x.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(router_scale, op, "router_scale", {d.hidden}));
  TANDEM_RETURN_IF_ERROR(expect_shape(proj, op, "proj", {any, d.hidden}));
  d.experts = proj.dim(0);
  TANDEM_RETURN_IF_ERROR(expect_shape(per_expert_scale, op, "per_expert_scale", {d.experts}));
  return status::ok();
}

}  // namespace

status moe_router_forward(const exec_context& ctx, const tensor& x, const tensor& router_scale, const tensor& proj,
                          const tensor& per_expert_scale, const tensor& weights, const tensor& indices,
                          const tensor& renormalized, const tensor& inv_rms, double eps) {
  constexpr const char* op = "moe_router_forward";
  cpu::moe_dims d;
  TANDEM_RETURN_IF_ERROR(router_parameter_dims(op, x, router_scale, proj, per_expert_scale, d));
  TANDEM_RETURN_IF_ERROR(expect_shape(weights, op, "weights", {d.tokens, any}));
  d.top_k = weights.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(indices, op, "indices", {d.tokens, d.top_k}));
  if (!renormalized.empty())
    TANDEM_RETURN_IF_ERROR(expect_shape(renormalized, op, "renormalized", {d.tokens, d.top_k}));
  if (!inv_rms.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(inv_rms, op, "inv_rms", {d.tokens}));
  TANDEM_RETURN_IF_ERROR(expect_operands(op, x,
                                         {{"router_scale", router_scale},
                                          {"proj", proj},
                                          {"per_expert_scale", per_expert_scale},
                                          {"weights", weights},
                                          {"renormalized", renormalized}},
                                         indices));
  TANDEM_RETURN_IF_ERROR(expect_statistic(op, x, inv_rms));
  TANDEM_RETURN_IF_ERROR(expect_top_k(op, d.top_k, d.experts));
  TANDEM_RETURN_IF_ERROR(require(eps >= 0, op, "eps must not be negative, got " + std::to_string(eps)));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::moe_router_forward<T>(d, x.as<T>(), router_scale.as<T>(), proj.as<T>(), per_expert_scale.as<T>(), T(eps),
                               weights.as<T>(), indices.as<std::int32_t>(), optional<T>(renormalized),
                               optional<T>(inv_rms));
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::moe_router_forward(ctx, storage, x, router_scale, proj, per_expert_scale, weights, indices,
                                             renormalized, inv_rms, eps)));
}

status moe_router_backward(const exec_context& ctx, const tensor& x, const tensor& router_scale, const tensor& proj,
                           const tensor& per_expert_scale, const tensor& indices, const tensor& renormalized,
                           const tensor& inv_rms, const tensor& dweights, const tensor& dx, const tensor& dproj,
                           const tensor& drouter_scale, const tensor& dper_expert_scale, bool accumulate_dx) {
  constexpr const char* op = "moe_router_backward";
  cpu::moe_dims d;
  TANDEM_RETURN_IF_ERROR(router_parameter_dims(op, x, router_scale, proj, per_expert_scale, d));
  TANDEM_RETURN_IF_ERROR(expect_shape(indices, op, "indices", {d.tokens, any}));
  d.top_k = indices.dim(1);
  TANDEM_RETURN_IF_ERROR(expect_shape(renormalized, op, "renormalized", {d.tokens, d.top_k}));
  TANDEM_RETURN_IF_ERROR(expect_shape(inv_rms, op, "inv_rms", {d.tokens}));
  TANDEM_RETURN_IF_ERROR(expect_shape(dweights, op, "dweights", {d.tokens, d.top_k}));
  if (!dx.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(dx, op, "dx", {d.tokens, d.hidden}));
  if (!dproj.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(dproj, op, "dproj", {d.experts, d.hidden}));
  if (!drouter_scale.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(drouter_scale, op, "drouter_scale", {d.hidden}));
  if (!dper_expert_scale.empty())
    TANDEM_RETURN_IF_ERROR(expect_shape(dper_expert_scale, op, "dper_expert_scale", {d.experts}));
  TANDEM_RETURN_IF_ERROR(expect_operands(op, x,
                                         {{"router_scale", router_scale},
                                          {"proj", proj},
                                          {"per_expert_scale", per_expert_scale},
                                          {"renormalized", renormalized},
                                          {"dweights", dweights},
                                          {"dx", dx},
                                          {"dproj", dproj},
                                          {"drouter_scale", drouter_scale},
                                          {"dper_expert_scale", dper_expert_scale}},
                                         indices));
  TANDEM_RETURN_IF_ERROR(expect_statistic(op, x, inv_rms));
  TANDEM_RETURN_IF_ERROR(expect_top_k(op, d.top_k, d.experts));
  TANDEM_RETURN_IF_ERROR(expect_indices_in_range(op, indices, d.experts));
  return dispatch_float(ctx, op, x, [&](auto zero) {
    using T = decltype(zero);
    cpu::moe_router_backward<T>(d, x.as<T>(), router_scale.as<T>(), proj.as<T>(), per_expert_scale.as<T>(),
                                indices.as<std::int32_t>(), renormalized.as<T>(), inv_rms.as<T>(), dweights.as<T>(),
                                optional<T>(dx), accumulate_dx, optional<T>(dproj), optional<T>(drouter_scale),
                                optional<T>(dper_expert_scale));
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::moe_router_backward(ctx, storage, x, router_scale, proj, per_expert_scale, indices,
                                              renormalized, inv_rms, dweights, dx, dproj, drouter_scale,
                                              dper_expert_scale, accumulate_dx)));
}

status moe_experts_forward(const exec_context& ctx, const tensor& y, const tensor& gate_up, const tensor& down, const tensor& weights,
                           const tensor& indices, const tensor& out) {
  constexpr const char* op = "moe_experts_forward";
  cpu::moe_dims d;
  TANDEM_RETURN_IF_ERROR(check_experts(op, y, gate_up, down, weights, indices, d));
  TANDEM_RETURN_IF_ERROR(expect_shape(out, op, "out", {d.tokens, d.hidden}));
  TANDEM_RETURN_IF_ERROR(
      expect_operands(op, y, {{"gate_up", gate_up}, {"down", down}, {"weights", weights}, {"out", out}}, indices));
  TANDEM_RETURN_IF_ERROR(expect_indices_in_range(op, indices, d.experts));
  return dispatch_float(ctx, op, y, [&](auto zero) {
    using T = decltype(zero);
    cpu::moe_experts_forward<T>(d, y.as<T>(), gate_up.as<T>(), down.as<T>(), weights.as<T>(),
                                indices.as<std::int32_t>(), out.as<T>());
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::moe_experts_forward(ctx, storage, y, gate_up, down, weights, indices, out)));
}

status moe_experts_backward(const exec_context& ctx, const tensor& y, const tensor& gate_up, const tensor& down, const tensor& weights,
                            const tensor& indices, const tensor& dout, const tensor& dy, const tensor& dgate_up,
                            const tensor& ddown, const tensor& dweights, bool accumulate_dy) {
  constexpr const char* op = "moe_experts_backward";
  cpu::moe_dims d;
  TANDEM_RETURN_IF_ERROR(check_experts(op, y, gate_up, down, weights, indices, d));
  TANDEM_RETURN_IF_ERROR(expect_shape(dout, op, "dout", {d.tokens, d.hidden}));
  if (!dy.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(dy, op, "dy", {d.tokens, d.hidden}));
  if (!dgate_up.empty())
    TANDEM_RETURN_IF_ERROR(expect_shape(dgate_up, op, "dgate_up", {d.experts, 2 * d.intermediate, d.hidden}));
  if (!ddown.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(ddown, op, "ddown", {d.experts, d.hidden, d.intermediate}));
  if (!dweights.empty()) TANDEM_RETURN_IF_ERROR(expect_shape(dweights, op, "dweights", {d.tokens, d.top_k}));
  TANDEM_RETURN_IF_ERROR(expect_operands(op, y,
                                         {{"gate_up", gate_up},
                                          {"down", down},
                                          {"weights", weights},
                                          {"dout", dout},
                                          {"dy", dy},
                                          {"dgate_up", dgate_up},
                                          {"ddown", ddown},
                                          {"dweights", dweights}},
                                         indices));
  TANDEM_RETURN_IF_ERROR(expect_indices_in_range(op, indices, d.experts));
  return dispatch_float(ctx, op, y, [&](auto zero) {
    using T = decltype(zero);
    cpu::moe_experts_backward<T>(d, y.as<T>(), gate_up.as<T>(), down.as<T>(), weights.as<T>(),
                                 indices.as<std::int32_t>(), dout.as<T>(), optional<T>(dy), accumulate_dy,
                                 optional<T>(dgate_up), optional<T>(ddown), optional<T>(dweights));
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::moe_experts_backward(ctx, storage, y, gate_up, down, weights, indices, dout, dy, dgate_up,
                                               ddown, dweights, accumulate_dy)));
}

}  // namespace tandem::gpu::ops
