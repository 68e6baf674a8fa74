// Backend dispatch: an op's public function checks its arguments, then calls
// dispatch_float(ctx, op, x, [&](auto zero) { return cpu::thing<decltype(zero)>(...); }), which
// checks that x lives on the context's device, then runs the CPU implementation in float32 or
// float64 (the reference) according to x's dtype, and refuses devices and dtypes whose backend is
// not built, naming the op. Ops whose tensors are not all floating point call on_backend() for
// the same device checks.
#pragma once

#include <string>
#include <string_view>

#include "gpu/core/exec_context.h"
#include "gpu/core/status.h"
#include "gpu/core/tensor.h"

namespace tandem::gpu::ops {

/// ok when `x` is on the context's device and that device has a backend for `op`.
inline status on_backend(const exec_context& ctx, std::string_view op, const tensor& x) {
  if (status s = ctx.expect_device(op, "the input", x.dev()); !s) return s;
  if (!ctx.dev.is_cpu())
    return {status_code::unsupported, std::string(op) + ": no CUDA implementation yet (the call runs on " +
                                          ctx.dev.to_string() + ")"};
  return status::ok();
}

template <class F>
status dispatch_float(const exec_context& ctx, std::string_view op, const tensor& x, F&& cpu_impl) {
  if (status s = on_backend(ctx, op, x); !s) return s;
  switch (x.type()) {
    case dtype::float32: return cpu_impl(float{});
    case dtype::float64: return cpu_impl(double{});
    default:
      return {status_code::unsupported, std::string(op) + ": the CPU backend computes in float32 or float64, got " +
                                            x.describe()};
  }
}

}  // namespace tandem::gpu::ops
