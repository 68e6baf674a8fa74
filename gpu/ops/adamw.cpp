// AdamW step: argument checks, then dispatch by the gradient's dtype (the CPU kernel, or the CUDA
// kernel for a float32 or bfloat16 gradient; the CPU widens a bfloat16 gradient first).
#include "gpu/ops/adamw.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "gpu/core/convert.h"
#include "gpu/core/host_buffer.h"
#include "gpu/ops/cpu/adamw.h"
#include "gpu/ops/cuda/adamw.h"
#include "gpu/ops/dispatch.h"
#include "gpu/ops/op_check.h"

namespace tandem::gpu::ops {
namespace {

constexpr const char* op = "adamw_step";

status check_hyper(const adamw_hyper& h) {
  TANDEM_RETURN_IF_ERROR(require(h.step >= 1, op, "step must be >= 1, got " + std::to_string(h.step)));
  TANDEM_RETURN_IF_ERROR(require(std::isfinite(h.lr), op, "lr must be finite, got " + number(h.lr)));
  TANDEM_RETURN_IF_ERROR(
      require(h.beta1 >= 0 && h.beta1 < 1, op, "beta1 must be in [0, 1), got " + number(h.beta1)));
  TANDEM_RETURN_IF_ERROR(
      require(h.beta2 >= 0 && h.beta2 < 1, op, "beta2 must be in [0, 1), got " + number(h.beta2)));
  TANDEM_RETURN_IF_ERROR(
      require(std::isfinite(h.eps) && h.eps >= 0, op, "eps must be finite and >= 0, got " + number(h.eps)));
  TANDEM_RETURN_IF_ERROR(
      require(std::isfinite(h.weight_decay), op, "weight_decay must be finite, got " + number(h.weight_decay)));
  return require(std::isfinite(h.grad_scale) && h.grad_scale > 0, op,
                 "grad_scale must be finite and > 0, got " + number(h.grad_scale));
}

/// `t` is a contiguous tensor of n elements on param's device.
status check_like_param(const tensor& t, const tensor& param, const char* name) {
  if (t.empty() || t.numel() != param.numel() || !t.is_contiguous())
    return require(false, op,
                   std::string(name) + ": expected " + std::to_string(param.numel()) +
                       " contiguous elements (like param), got " + (t.empty() ? "no tensor" : t.describe()));
  return expect_same_device(t, param, op, name);
}

status check_type(const tensor& t, const char* name, bool reference, bool copy) {
  const dtype d = t.type();
  if (reference) {
    if (d == dtype::float64 || (copy && (d == dtype::float32 || d == dtype::bfloat16))) return status::ok();
    return require(false, op,
                   std::string(name) + ": expected dtype " + (copy ? "float64, float32 or bfloat16" : "float64") +
                       " (grad is float64), got " + t.describe());
  }
  if (d == dtype::float32 || d == dtype::bfloat16) return status::ok();
  return require(false, op, std::string(name) + ": expected dtype float32 or bfloat16, got " + t.describe());
}

}  // namespace

status adamw_step(const exec_context& ctx, const tensor& param, const tensor& grad, const tensor& exp_avg, const tensor& exp_avg_sq,
                  const adamw_hyper& hyper, const tensor& model_copy) {
  TANDEM_RETURN_IF_ERROR(check_hyper(hyper));
  if (param.empty() || !param.is_contiguous())
    return require(false, op,
                   std::string("param: expected a contiguous tensor, got ") +
                       (param.empty() ? "no tensor" : param.describe() + " (not contiguous)"));
  TANDEM_RETURN_IF_ERROR(check_like_param(grad, param, "grad"));
  TANDEM_RETURN_IF_ERROR(check_like_param(exp_avg, param, "exp_avg"));
  TANDEM_RETURN_IF_ERROR(check_like_param(exp_avg_sq, param, "exp_avg_sq"));
  if (!model_copy.empty()) TANDEM_RETURN_IF_ERROR(check_like_param(model_copy, param, "model_copy"));

  if (grad.type() != dtype::float32 && grad.type() != dtype::float64 && grad.type() != dtype::bfloat16)
    return require(false, op, "grad: expected dtype float32, bfloat16 or float64, got " + grad.describe());
  const bool reference = grad.type() == dtype::float64;
  TANDEM_RETURN_IF_ERROR(check_type(param, "param", reference, false));
  TANDEM_RETURN_IF_ERROR(check_type(exp_avg, "exp_avg", reference, false));
  TANDEM_RETURN_IF_ERROR(check_type(exp_avg_sq, "exp_avg_sq", reference, false));
  if (!model_copy.empty()) TANDEM_RETURN_IF_ERROR(check_type(model_copy, "model_copy", reference, true));

  if (grad.type() == dtype::bfloat16 && ctx.dev.is_cpu()) {
    // The CPU computes in float32: the same step on the exactly widened gradient.
    TANDEM_RETURN_IF_ERROR(on_backend(ctx, op, grad));
    host_buffer wide(dtype::float32, {grad.numel()});
    convert_elements(grad.data(), dtype::bfloat16, wide.data<float>(), dtype::float32, grad.numel());
    cpu::adamw_step<float>(param, wide, exp_avg, exp_avg_sq, hyper, model_copy);
    return status::ok();
  }
  return dispatch_float(ctx, op, grad, [&](auto zero) {
    cpu::adamw_step<decltype(zero)>(param, grad, exp_avg, exp_avg_sq, hyper, model_copy);
    return status::ok();
  }, TANDEM_ON_CUDA(cuda::adamw_step(ctx, storage, param, grad, exp_avg, exp_avg_sq, hyper, model_copy)));
}

}  // namespace tandem::gpu::ops
